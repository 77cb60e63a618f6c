# nodeplane — build and test entry points. `make test` is the test command
# CI runs (.ci/run) and the README documents.
GO ?= go
TEST_TIMEOUT ?= 40m

.PHONY: build test test-short bench vet

build:
	CGO_ENABLED=0 $(GO) build -o bin/nodeplane ./cmd/nodeplane

test:
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./internal/storage/etcd/ ./internal/apiserver/...
