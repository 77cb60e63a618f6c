# nodeplane — build and test entry points. `make test` is the test command
# CI runs (.ci/run) and the README documents.
GO ?= go
TEST_TIMEOUT ?= 40m
GOLANGCI_LINT ?= golangci-lint

.PHONY: build test test-short bench vet lint

build:
	CGO_ENABLED=0 $(GO) build -o bin/nodeplane ./cmd/nodeplane

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
