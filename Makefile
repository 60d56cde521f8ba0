# LayerFS. `make test` is what CI runs (.ci/run); see README.md.
GO        ?= go
BIN       ?= bin
PREFIX    ?= /usr/local
# Stamp the commit into the binary (layerfs --version) where git can read
# the checkout; a GOFLAGS of -buildvcs=false, as some machines set, is
# overridden only then.
BUILDVCS  := $(shell git rev-parse --git-dir >/dev/null 2>&1 && echo auto || echo false)
# Unit packages run with the race detector; integration/ needs root, FUSE
# and overlayfs, and skips cleanly without them (fails with LAYERFS_REQUIRE_ROOT=1).
UNIT       = $(shell $(GO) list ./... | grep -v -e /integration -e /bench)

.PHONY: build test test-race test-unit test-integration lint bench install demo roundtrip clean

build:
	$(GO) build -buildvcs=$(BUILDVCS) -o $(BIN)/ ./cmd/...

test: lint test-race test-integration

test-unit:
	$(GO) test $(UNIT)

test-race:
	$(GO) test -race $(UNIT)

test-integration: build
	$(GO) test -count=1 -timeout 30m ./integration/...

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

bench: build
	./bench/run.sh

# mount.fuse.layerfs goes where mount(8) looks for helpers (SBINDIR, default
# /sbin), so that mount -t fuse.layerfs and fstab lines work.
install: build
	install -m 0755 $(BIN)/layerfs $(PREFIX)/bin/layerfs
	install -m 0755 $(BIN)/mount.fuse.layerfs $(or $(SBINDIR),/sbin)/mount.fuse.layerfs

# The main job on a fresh machine: capture a real tree, four agents work in
# Workspaces in parallel and commit through the gate; log, diff, blame, stats.
demo: build
	./scripts/demo.sh

# Capture a real tree, export it, and compare with diff -r.
roundtrip: build
	./bench/roundtrip.sh

clean:
	rm -rf $(BIN)
