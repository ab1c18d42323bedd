# Hearth: set-up, build, run, test, bench.
#
# `make run` and `make test` each start by installing whatever is missing on a
# Debian 12 machine (apt-get, as root or through sudo), so a fresh clone needs
# nothing else. Every target after that is plain `go`.

GO        ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN       ?= hearth
FUZZTIME  ?= 5m
KERNEL_LOG ?= $(CURDIR)/.kernel-log

# cgo headers for Fyne (GL, X11), ALSA for audio out, lavapipe (Mesa's software
# Vulkan) so the WGSL kernels run without a GPU, Xvfb for headless GUI tests,
# espeak-ng for phonemes, curl for the API server's client tests.
APT_PACKAGES := gcc libc6-dev pkg-config git ca-certificates curl \
	libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev libxinerama-dev libxi-dev libxxf86vm-dev \
	libasound2-dev \
	mesa-vulkan-drivers libvulkan1 \
	xvfb xauth \
	espeak-ng libespeak-ng-dev

.PHONY: deps build run test vet fuzz bench clean

# deps installs only the packages that are missing, so it is quick and
# idempotent once everything is there.
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
		$$sudo apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing || exit 1; \
	fi
	@# The API server's tests drive it with the official openai npm package:
	@# Node.js and npm from Debian unless some Node.js is already installed
	@# (NodeSource's nodejs carries its own npm and conflicts with Debian's).
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "Installing: nodejs npm"; \
		if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
		$$sudo apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends nodejs npm || exit 1; \
	fi
	@v=$$($(GO) env GOVERSION 2>/dev/null | sed 's/^go//'); \
	if [ -z "$$v" ] || [ "$$(printf '%s\n' 1.26 "$$v" | sort -V | head -n1)" != 1.26 ]; then \
		echo "Go 1.26 or newer is needed (found: $${v:-none}); Debian 12's golang package is too old, see https://go.dev/doc/install"; exit 1; \
	fi

build: deps
	$(GO) build -o $(BIN) .

run: build
	./$(BIN)

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

# test runs every test on lavapipe (or the GPU, if the machine has one) under
# a virtual X server. The fuzzers' seed corpora (f.Add and testdata/fuzz) run
# there as ordinary tests; the timed fuzzing is `make fuzz`, because Go's fuzz
# coordinator can miss its own deadline on a loaded 2-core machine and fail
# with no failing input ("context deadline exceeded"), which says nothing
# about Hearth. The API server's real-client tests (node's openai package,
# curl) run only when HEARTH_CLIENT_TESTS is set, so a plain `go test` works
# without Node.js.
#
# The suite runs with HEARTH_KERNEL_LOG: each test binary logs the kernels it
# dispatched into KERNEL_LOG, and the last step fails if a compute entry point
# in shaders/ was dispatched by no test (see the shaders package doc). A
# cached package keeps its log from the run it replays; deleting KERNEL_LOG
# makes the GPU packages run again.
test: deps vet
	mkdir -p $(KERNEL_LOG)
	HEARTH_KERNEL_LOG=$(KERNEL_LOG) HEARTH_CLIENT_TESTS=1 xvfb-run -a $(GO) test -timeout 20m ./...
	HEARTH_KERNEL_CHECK=$(KERNEL_LOG) $(GO) test ./engine/gpu -run '^TestEveryEntryPointIsDispatched$$' -count=1
	@# The quantizers must match ggml bit for bit even where Go may fuse
	@# multiply-adds (GOAMD64=v3); run them so where the CPU can.
	@if [ "$$($(GO) env GOARCH)" = amd64 ] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then \
		echo "GOAMD64=v3 $(GO) test ./gguf -run 'Quant|Dequant'"; \
		GOAMD64=v3 $(GO) test ./gguf -run 'Quant|Dequant'; \
	fi

# fuzz runs each fuzzer for FUZZTIME: the GGUF reader, the hand-written
# pre-tokenizers against regexp2 and the PyTorch pickle reader. A new failing
# input is written under the package's testdata/fuzz, where `make test` then
# runs it as an ordinary test.
fuzz:
	$(GO) test ./gguf -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME)
	$(GO) test ./engine/tokenizer -run '^$$' -fuzz '^FuzzFastPreTokenizers$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pth -run '^$$' -fuzz '^FuzzReadPTH$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s

# bench runs the Go benchmarks (kernels, dequantize, GGUF open).
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s ./gguf ./engine/...

clean:
	rm -f $(BIN)
