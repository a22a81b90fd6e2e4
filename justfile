# Everyday commands. The README's two set-up commands do not need just.

# Live TUI on this node
run *ARGS:
    cargo run --release -p kitty-tui -- {{ARGS}}

# The demo job with a CPU straggler
demo *ARGS:
    cargo run --release -p kitty-tui -- demo {{ARGS}}

# Rebuild the BPF objects from their C sources (clang-19, llvm-19, libbpf-dev)
ebpf:
    scripts/build-bpf.sh

# Fail if a BPF object is not what its source gives
ebpf-check:
    scripts/build-bpf.sh --check

# All tests (as root for the cgroup test)
test:
    cargo test --workspace

# Benchmarks: sampler tick and TUI draw, then record's whole-process CPU
bench:
    cargo bench -p kitty-core --bench tick
    cargo bench -p kitty-core --bench seek
    cargo bench -p kitty-tui --bench draw
    scripts/record-cpu.sh 60

lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
