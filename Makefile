# The two commands: `make run` starts the whole service on this machine,
# `make test` runs every test. See README.md.
GO        ?= go
BIN       := bin
GOFLAGS   ?=
export GOFLAGS

.PHONY: run test bench build vet fuzz clean chromium

# -buildvcs=auto stamps the commit into --version and ledger_build_info in
# a git checkout, whatever GOFLAGS says (some machines set
# -buildvcs=false); a tree without git builds as (devel).
build:
	$(GO) build -buildvcs=auto -o $(BIN)/ledger ./cmd/ledger
	$(GO) build -buildvcs=auto -o $(BIN)/projector ./cmd/projector

run: build
	$(BIN)/ledger dev

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (echo "not gofmt-formatted:"; gofmt -l .; exit 1)

test: vet chromium
	$(GO) test -count=1 -timeout 20m ./...

# The console's browser tests run in Debian's headless Chromium: installed
# here when missing (CI runs as root).
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update && apt-get install -y chromium)

# The engine's per-event benchmarks run 2000 events each, those of pools
# with ownership too (demand and release take the kept fold; 500 on a
# pool whose owners own group slots spread over every host); the events
# that recompute a whole pool (host and plan events with ownership, the
# worst-case plan) 20, beside the plain pools' figures of the same run.
# A what-if on a 1,500-leaf pool (about the largest plan the API takes)
# through the API, 10 times each way.
bench: build
	$(GO) test -run '^$$' -bench . -skip 'Owned|WorstCase' -benchmem -benchtime 2000x ./domain/
	$(GO) test -run '^$$' -bench 'Owned(Demand|Release)' -skip 'Rules4' -benchmem -benchtime 2000x ./domain/
	$(GO) test -run '^$$' -bench 'OwnedGroupDemand' -benchmem -benchtime 500x ./domain/
	$(GO) test -run '^$$' -bench 'OwnedGroupHost' -benchmem -benchtime 20x ./domain/
	$(GO) test -run '^$$' -bench 'OwnedDemandRules4' -benchmem -benchtime 20x ./domain/
	$(GO) test -run '^$$' -bench 'Owned(Host|Plan)|WorstCase' -benchmem -benchtime 20x ./domain/
	$(GO) test -run '^$$' -bench 'WhatIf' -benchtime 10x ./internal/api/
	$(BIN)/ledger bench

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzFold -fuzztime 60s ./domain/
	$(GO) test -run '^$$' -fuzz FuzzKeptFold -fuzztime 60s ./domain/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRequest -fuzztime 60s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzParseFast -fuzztime 60s ./events/

clean:
	rm -rf $(BIN)
