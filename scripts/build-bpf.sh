#!/bin/sh
# Rebuilds every BPF object from its C source with the pinned clang, so that
# `cargo build` needs no clang. Reproducible: compiled from each source's own
# directory with the checkout's path mapped away, DWARF stripped, BTF
# (needed for CO-RE) kept.
# Each object carries the SHA-256 of its source and of the headers beside
# it in a `.kitty.source` section (not loaded: the loader skips sections it
# does not know), so any edit of a source, a comment included, changes its
# object, and the rebuild shows in the object's history.
# `--check` rebuilds into a temporary directory and fails if a committed
# object differs from what its source gives.
set -eu
CLANG=${CLANG:-clang-19}
STRIP=${STRIP:-llvm-strip-19}
OBJCOPY=${OBJCOPY:-llvm-objcopy-19}
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
[ "${1:-}" = "--check" ] && check=1
arch=$(uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
status=0
for src in "$root"/kitty-probe-ebpf/src/bpf/*.bpf.c "$root"/tests/faultlab/src/bpf/*.bpf.c; do
    dir=$(dirname "$src")
    name=$(basename "$src" .c)
    out="$dir/$name.o"
    tmp=$(mktemp)
    # BTF line info records source paths: map the checkout's own away.
    (cd "$dir" && "$CLANG" -O2 -g -target bpf -D__TARGET_ARCH_$arch \
        -ffile-prefix-map="$dir"=. -fdebug-compilation-dir=. \
        -I/usr/include/$(uname -m)-linux-gnu -c "$name.c" -o "$tmp")
    "$STRIP" -g "$tmp"
    (cd "$dir" && cat "$name.c" $(LC_ALL=C ls *.h 2>/dev/null || true) | sha256sum | cut -d' ' -f1) > "$tmp.source"
    "$OBJCOPY" --add-section .kitty.source="$tmp.source" "$tmp"
    rm -f "$tmp.source"
    if [ $check = 1 ]; then
        if ! cmp -s "$tmp" "$out"; then
            echo "BPF object out of date: ${out#$root/} (run: just ebpf)" >&2
            status=1
        fi
        rm -f "$tmp"
    else
        mv "$tmp" "$out"
        chmod 644 "$out"
        echo "built ${out#$root/} ($(stat -c %s "$out") bytes)"
    fi
done
exit $status
