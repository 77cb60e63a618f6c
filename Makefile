# nodeplane — build and test entry points. `make test` is the test command
# CI runs (.ci/run) and the README documents.
GO ?= go
TEST_TIMEOUT ?= 40m
GOLANGCI_LINT ?= golangci-lint

.PHONY: build test test-short bench vet lint release size-check

# Release builds: static (no cgo), stripped (-s -w), reproducible paths
# (-trimpath), the version and commit stamped in (nodeplane version).
VERSION ?= $(shell git describe --tags --dirty 2>/dev/null || echo 0.1.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
RELEASE_LDFLAGS = -s -w -X github.com/nodeplane/nodeplane/internal/version.Version=$(VERSION) -X github.com/nodeplane/nodeplane/internal/version.Commit=$(COMMIT)
DIST ?= dist
# grpcnotrace keeps golang.org/x/net/trace (and with it html/template) out of
# the binary: grpc's request tracing is off unless grpc.EnableTracing is set,
# which nodeplane never does. Release builds also swap in two stand-in files
# (scripts/release-build.sh, release/_overlay/README.md) so the linker can
# drop unused methods.
BUILD_TAGS ?= grpcnotrace

build:
	CGO_ENABLED=0 $(GO) build -tags "$(BUILD_TAGS)" -ldflags "-X github.com/nodeplane/nodeplane/internal/version.Version=$(VERSION) -X github.com/nodeplane/nodeplane/internal/version.Commit=$(COMMIT)" -o bin/nodeplane ./cmd/nodeplane

# release writes dist/nodeplane-<os>-<arch> for each platform and
# dist/SHA256SUMS (check with `cd dist && sha256sum -c SHA256SUMS`).
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "building $(DIST)/nodeplane-$$os-$$arch ($(VERSION), $(COMMIT))"; \
		GOOS=$$os GOARCH=$$arch scripts/release-build.sh $(DIST)/nodeplane-$$os-$$arch "$(RELEASE_LDFLAGS)"; \
	done
	cd $(DIST) && sha256sum nodeplane-* > SHA256SUMS
	ls -l $(DIST)

# size-check builds the release binaries and fails if one outgrows its size
# budget (test/e2e TestBinarySizeBudget; figures in docs/install.md). The
# full test tier runs the same test on a stripped build for this machine.
size-check: release
	set -e; for p in $(RELEASE_PLATFORMS); do \
		bin=$(abspath $(DIST))/nodeplane-$${p%/*}-$${p#*/}; \
		NODEPLANE_BIN=$$bin NODEPLANE_RELEASE_BIN=$$bin $(GO) test ./test/e2e -run '^TestBinarySizeBudget$$' -count=1 -v; \
	done

test:
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

# lint runs golangci-lint v2 with .golangci.yml (layering, no real-time
# sleeps outside tests, go vet); .ci/run installs v2.15.0.
lint:
	$(GOLANGCI_LINT) run ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./internal/storage/etcd/ ./internal/apiserver/...
