#!/bin/sh
# Records traces/sum.lackey.gz and traces/sum.maps with valgrind's lackey tool (run once; the
# results are kept under version control). Needs cc and valgrind.
set -e
cd "$(dirname "$0")"
tmp=$(mktemp -d)
cc -O1 -static -nostdlib -fno-stack-protector -fno-pie -no-pie -o "$tmp/sum" src/sum.c
valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/sum.lackey" "$tmp/sum" 2> sum.maps || true
gzip -9n < "$tmp/sum.lackey" > sum.lackey.gz
rm -r "$tmp"
