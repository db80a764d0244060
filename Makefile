# The two quick-start commands: `make demo` and `make test`.
# Recording needs root (eBPF); everything else runs as you, and only the
# steps that need root go through sudo when you are not root already.

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
PROCTRACE := target/release/proctrace

.PHONY: deps test-deps build static dist demo test check check-lib kernel-matrix lint

deps:
	scripts/install-deps.sh

test-deps:
	scripts/install-deps.sh --test

build: deps
	cargo build --release --locked

# One fully static binary (static-pie, libbpf/libelf/zlib linked in) for
# every kernel from 5.10 on; prints its path. TARGET=aarch64 cross-builds
# the arm64 one in a Debian trixie root (scripts/cross-root.sh, as root).
TARGET ?= x86_64
static:
	scripts/install-deps.sh --static
	$(if $(filter x86_64,$(TARGET)),,$(SUDO)) scripts/build-static.sh $(TARGET)

# The release artifacts in dist/: proctrace-VERSION-{x86_64,aarch64}-linux.tar.gz
# (static binary, man pages, completions, README and docs/, licences) and
# SHA256SUMS.
dist:
	scripts/install-deps.sh --static
	$(SUDO) scripts/dist.sh

# Records the bundled demo and shows its process tree.
demo: build
	$(SUDO) $(PROCTRACE) record -o demo.ndjson -- demo/demo.sh
	$(PROCTRACE) render -i demo.ndjson -d tree

# The whole test suite: the Rust tests (`make check`), then the qemu kernel
# matrix (`make kernel-matrix`). Test binaries run through sudo when you are
# not root: they load eBPF programs against the real kernel.
test: check kernel-matrix

check: test-deps check-lib
	$(if $(SUDO),CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="sudo -E",) cargo test --locked --no-fail-fast

# The library without the recorder (`default-features = false`): reading,
# analysing and rendering recordings build and test with no clang, libbpf
# or BPF build. A CLANG that does not exist proves no clang is run, and
# the dependency tree must not hold libbpf.
NO_CLANG := CLANG=/nonexistent/clang
check-lib:
	! cargo tree --locked --no-default-features -e normal,build --prefix none | grep '^libbpf'
	$(NO_CLANG) cargo test --locked --no-default-features --lib
	$(NO_CLANG) cargo test --locked --no-default-features --doc

# One static binary per architecture booted under qemu on Debian's 5.10,
# 6.1, 6.12 and newest kernels of x86_64 and of arm64
# (scripts/kernel-matrix/); KERNELS="6.1" picks some, ARCHES="aarch64" one
# architecture.
ARCHES ?= x86_64 aarch64
kernel-matrix: test-deps
	PROCTRACE_MATRIX_ARCHES="$(ARCHES)" scripts/kernel-matrix/test.sh $(KERNELS)

# What CI checks before the tests: formatting, clippy on every target, rustdoc.
lint: deps
	cargo fmt --check
	cargo clippy --locked --all-targets -- -D warnings
	cargo clippy --locked --no-default-features --lib --tests -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps

# Benchmarks W0-W5 (release build; recording through sudo): prints a table
# and writes bench/results.json. See BENCHMARKS.md. Not part of `make test`.
.PHONY: bench
bench:
	scripts/install-deps.sh --bench
	bench/run.sh

# Installs the release binary, its man pages and shell completions under
# $(DESTDIR)$(PREFIX), as packagers expect. Recording needs root (or
# CAP_BPF and CAP_PERFMON): the binary is installed plain, never setuid.
# BIN= installs an already built binary instead of building one.
PREFIX ?= /usr/local
BIN ?= $(PROCTRACE)
BINDIR = $(DESTDIR)$(PREFIX)/bin
MANDIR = $(DESTDIR)$(PREFIX)/share/man/man1
BASHDIR = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR = $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR = $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d

.PHONY: install uninstall
install: $(if $(filter $(PROCTRACE),$(BIN)),build)
	install -d $(BINDIR) $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	install -m 755 $(BIN) $(BINDIR)/proctrace
	$(BIN) man --dir $(MANDIR)
	$(BIN) completions bash > $(BASHDIR)/proctrace
	$(BIN) completions zsh > $(ZSHDIR)/_proctrace
	$(BIN) completions fish > $(FISHDIR)/proctrace.fish

uninstall:
	rm -f $(BINDIR)/proctrace $(MANDIR)/proctrace.1 $(MANDIR)/proctrace-*.1
	rm -f $(BASHDIR)/proctrace $(ZSHDIR)/_proctrace $(FISHDIR)/proctrace.fish
