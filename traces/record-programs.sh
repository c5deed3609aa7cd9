#!/bin/sh
# Records the programs `mmsim reproduce thp-exec` replays, with `mmsim record` (run once; the
# results are kept under version control): traces/rustc-tiny.mmprog and traces/javac-regex.mmprog.
# `record-programs.sh rustc` or `record-programs.sh javac` records one of them. Needs an x86-64
# Debian 12 host with qemu-user 7.2 (apt-get install qemu-user), cc and, per program:
#
# rustc: a Rust toolchain. The real compiler is recorded, not rustup's proxy (qemu-user does not
#   follow its execve). Window: 8 M instructions after the first 35 M of a 76 M-instruction
#   compile (rustc 1.95.0, --emit=obj, so no link step).
#
# javac: apt-get install openjdk-17-jdk-headless openjdk-17-source (17.0.21.1+2-1~deb12u1 when
#   recorded). javac compiles the 11 sources of java.util.regex from the JDK's src.zip as a patch
#   of java.base (68 classes out), with the heap and the JVM's processor count fixed. The run
#   is N instructions (12174495922 when recorded, counted over all threads by a first run of
#   the same command with `--count 1`, whose summary line prints it; set JAVAC_INSTRUCTIONS to
#   recount's value); the recording takes 12 windows of 1 M instructions, one every P = N / 12
#   from P / 2 on (the pre-registered windows, crates/lab/src/reproduce/thp_exec.rs).
#
# The instruction count of a window is taken over all threads as qemu runs them, so a new
# recording of the same program differs a little. Recording is CPU-heavy: run it under nice.
set -e
cd "$(dirname "$0")"
mmsim=${MMSIM:-../target/release/mmsim}
what=${1:-all}
tmp=$(mktemp -d)

if [ "$what" = all ] || [ "$what" = rustc ]; then
	"$mmsim" record -o rustc-tiny.mmprog --skip 35000000 --count 8000000 --zstd-level 19 -- \
		"$(rustc --print sysroot)/bin/rustc" --edition 2021 --crate-type bin --emit=obj \
		-o "$tmp/tiny.o" src/tiny.rs
fi

if [ "$what" = all ] || [ "$what" = javac ]; then
	jdk=/usr/lib/jvm/java-17-openjdk-amd64
	n=${JAVAC_INSTRUCTIONS:-12174495922}
	period=$((n / 12))
	mkdir -p "$tmp/src" "$tmp/out"
	(cd "$tmp/src" && unzip -q "$jdk/lib/src.zip" 'java.base/java/util/regex/*.java' &&
		mkdir -p java/util && mv java.base/java/util/regex java/util/ && rmdir -p java.base/java/util)
	"$mmsim" record -o javac-regex.mmprog --skip $((period / 2)) --count 1000000 \
		--period "$period" --zstd-level 19 -- \
		"$jdk/bin/javac" -J-Xmx512m -J-XX:ActiveProcessorCount=2 \
		--patch-module "java.base=$tmp/src" -d "$tmp/out" -proc:none -nowarn -Xlint:none \
		"$tmp"/src/java/util/regex/*.java
fi
rm -r "$tmp"
