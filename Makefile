# utcpd — see README.md. Every target works on a fresh checkout once
# `go mod download` has run (.ci/run does it).

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        ?= ./...
FUZZTIME    ?= 20s
BENCHTIME   ?= 1s

.PHONY: all build test quicktest lint fuzz bench bench-compare gen schema clean

all: build

## build: the utcpd binary in ./bin
build:
	$(GO) build -o bin/utcpd ./cmd/utcpd

## test: what CI gates on — every package, race detector on, random order
test:
	$(GO) test -race -shuffle=on -timeout 20m $(PKGS)

## quicktest: fast feedback, no race detector
quicktest:
	$(GO) test -short $(PKGS)

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

## fuzz: run every native fuzz target for FUZZTIME each
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## bench: the benchmarks recorded in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./registry/ ./gateway/ ./store/sqlite/
	$(GO) test -run '^$$' -bench FrontVsDirect -benchtime 1x ./api/front/
	$(GO) test -run '^$$' -bench 'Startup|IdleRSS' -benchtime 10x ./cmd/utcpd/
	$(GO) test -run '^$$' -bench Propagation -benchtime 200x ./store/postgres/
	$(GO) test -run '^$$' -bench ReplicaCalls -benchtime 3x ./cmd/utcpd/

## bench-compare: the gateway's own cost side by side, in one interleaved run
## (docs/benchmarks.md): the tool directly, a bare hop and utcpd's REST front
## (default configuration and --data-dir ""), then server-everything over
## stdio directly, a bare MCP hop (Streamable HTTP to stdio), supergateway's
## SSE mode and utcpd's /mcp and stdio fronts; CPU per call of every process.
## Needs node and npm for the MCP part; BENCHCOMPARE_FLAGS="-rounds 5
## -duration 5s -only rest" passes flags. Not run by CI: too noisy.
BENCHCOMPARE_FLAGS ?=
bench-compare:
	$(GO) run ./internal/benchcompare $(BENCHCOMPARE_FLAGS)

## gen: regenerate the Go code of proto/**/*.proto (internal/protogen:
## protocompile + protoc-gen-go and protoc-gen-go-grpc at pinned versions;
## no protoc needed). CI checks that the committed files are fresh.
gen:
	$(GO) run ./internal/protogen -root proto

## schema: regenerate the configuration's JSON Schema (docs/config.schema.json,
## docs/config.strict.schema.json) and the doc comments it is described with
## (daemon/schema_docs.go); tests in daemon and cmd/utcpd fail while they are
## stale.
schema:
	$(GO) generate ./daemon

clean:
	rm -rf bin
