#!/bin/sh
# Records traces/rustc-tiny.mmprog and traces/cc1plus-tiny.mmprog with `mmsim record` (run once;
# the results are kept under version control; `mmsim reproduce thp-exec` replays them). Needs an
# x86-64 Debian 12 host with qemu-user 7.2 (apt-get install qemu-user), cc, g++-12's cc1plus and
# a Rust toolchain. The real compiler is recorded, not rustup's proxy (qemu-user does not follow
# its execve). Windows: rustc's 8 M instructions after the first 35 M of a 76 M-instruction
# compile (rustc 1.95.0, --emit=obj, so no link step); cc1plus's 5 M after 30 M of 858 M.
# The instruction count of a window is taken over all threads as qemu runs them, so a new
# recording of the same program differs a little.
set -e
cd "$(dirname "$0")"
mmsim=${MMSIM:-../target/release/mmsim}
tmp=$(mktemp -d)
"$mmsim" record -o rustc-tiny.mmprog --skip 35000000 --count 8000000 --zstd-level 19 -- \
	"$(rustc --print sysroot)/bin/rustc" --edition 2021 --crate-type bin --emit=obj \
	-o "$tmp/tiny.o" src/tiny.rs
"$mmsim" record -o cc1plus-tiny.mmprog --skip 30000000 --count 5000000 --zstd-level 19 -- \
	/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -quiet -I/usr/include/c++/12 \
	-I/usr/include/x86_64-linux-gnu/c++/12 -I/usr/include/x86_64-linux-gnu src/tiny.cpp \
	-o "$tmp/tiny.s"
rm -r "$tmp"
