# unitvisor — build, test, run.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
SANDBOX := scripts/sandbox.sh

.PHONY: build test unit-test integration-test bench fuzz run stop-demo clean consul package

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/unitvisor ./cmd/unitvisor

# Unit tests on the host, then the integration tests against a real systemd:
# the host's when PID 1 is systemd, else a throwaway nspawn sandbox.
test: unit-test integration-test

unit-test:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) test -count=1 ./...
	cd packaging && $(GO) vet ./... && $(GO) test -count=1 ./...

# One package at a time (-p 1): some tests reload or re-exec systemd, or
# install the .deb (which reloads it), and must not pull that under
# another package's tests running in the same sandbox.
integration-test: consul
	$(SANDBOX) run $(GO) test -tags integration -count=1 -p 1 -timeout 30m ./...

# Benchmarks that need systemd (figures are printed, not asserted).
bench: consul
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

# dist/unitvisor_<version>_amd64.deb and dist/unitvisor-<version>-1.x86_64.rpm,
# built by the nfpm program in packaging/ (a module of its own, so nfpm's
# dependencies stay out of the agent's). Reproducible: every timestamp is
# SOURCE_DATE_EPOCH, by default the last commit's time. The package version
# comes from git describe (packaging/version.go); the binary reports it too.
DIST              ?= dist
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
package:
	@mkdir -p $(DIST)/build
	v=$$(cd packaging && $(GO) run . version -describe '$(VERSION)' -epoch $(SOURCE_DATE_EPOCH)) && \
	$(GO) build -buildmode=pie -trimpath -buildvcs=false -ldflags "-s -w -bindnow -X main.version=$$v" \
		-o $(abspath $(DIST))/build/unitvisor ./cmd/unitvisor && \
	cd packaging && $(GO) run . build -bin $(abspath $(DIST))/build/unitvisor -version "$$v" \
		-describe '$(VERSION)' -epoch $(SOURCE_DATE_EPOCH) -out $(abspath $(DIST)) \
		$(if $(wildcard LICENSE),-licence $(abspath LICENSE))

# The Consul agent the integration tests start (internal/consultest), built
# from the tools module tools/consul and cached in .cache/bin: the first
# build takes minutes, later ones nothing (Make sees it is up to date).
CONSUL := .cache/bin/consul
consul: $(CONSUL)
$(CONSUL): tools/consul/go.mod tools/consul/go.sum
	cd tools/consul && $(GO) build -o $(CURDIR)/$(CONSUL) github.com/hashicorp/consul
