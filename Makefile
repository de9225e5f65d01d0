# unitvisor — build, test, run.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
SANDBOX := scripts/sandbox.sh

.PHONY: build test unit-test integration-test bench fuzz run stop-demo clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/unitvisor ./cmd/unitvisor

# Unit tests on the host, then the integration tests against a real systemd:
# the host's when PID 1 is systemd, else a throwaway nspawn sandbox.
test: unit-test integration-test

unit-test:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) test -count=1 ./...

integration-test:
	$(SANDBOX) run $(GO) test -tags integration -count=1 -timeout 20m ./...

# Benchmarks that need systemd (figures are printed, not asserted).
bench:
	$(SANDBOX) run $(GO) test -tags integration -run '^$$' -bench . -benchtime 1x -timeout 20m ./test/bench/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./jobspec/

# The agent plus the example job (examples/web.hcl), inside the sandbox when
# PID 1 is not systemd; `make stop-demo` ends it.
run: build
	scripts/demo.sh

stop-demo:
	scripts/demo.sh stop

clean:
	rm -rf bin dist
