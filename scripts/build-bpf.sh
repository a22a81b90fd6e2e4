#!/bin/sh
# Rebuilds every BPF object from its C source with the pinned clang, so that
# `cargo build` needs no clang. Reproducible: compiled from each source's own
# directory with the checkout's path mapped away, DWARF stripped, BTF
# (needed for CO-RE) kept.
# `--check` rebuilds into a temporary directory and fails if a committed
# object differs from what its source gives.
# Each directory's `bpf.sha256` lists its sources', headers' and objects'
# checksums as of the last build: a source edited without a rebuild fails
# `--check` even where the object would come out byte for byte the same (a
# comment), and the rebuild's commit then shows in the list.
set -eu
CLANG=${CLANG:-clang-19}
STRIP=${STRIP:-llvm-strip-19}
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
for dir in "$root"/kitty-probe-ebpf/src/bpf "$root"/tests/faultlab/src/bpf; do
    list=$(cd "$dir" && sha256sum $(LC_ALL=C ls *.h *.bpf.c *.bpf.o 2>/dev/null))
    if [ $check = 1 ]; then
        if [ "$list" != "$(cat "$dir/bpf.sha256" 2>/dev/null)" ]; then
            echo "BPF sources changed since the last build: ${dir#$root/} (run: just ebpf)" >&2
            status=1
        fi
    else
        echo "$list" > "$dir/bpf.sha256"
    fi
done
exit $status
