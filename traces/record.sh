#!/bin/sh
# Records traces/sum.lackey.gz and traces/sum.maps, and traces/bigtext.lackey.gz and
# traces/bigtext.maps, with valgrind's lackey tool (run once; the results are kept under
# version control). Needs cc and valgrind.
set -e
cd "$(dirname "$0")"
tmp=$(mktemp -d)
cc -O1 -static -nostdlib -fno-stack-protector -fno-pie -no-pie -o "$tmp/sum" src/sum.c
valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/sum.lackey" "$tmp/sum" 2> sum.maps || true
gzip -9n < "$tmp/sum.lackey" > sum.lackey.gz
# 2 MiB segment alignment puts the text at 6 MiB, file offset 2 MiB.
cc -O1 -static -nostdlib -fno-stack-protector -fno-pie -no-pie \
	-Wl,-z,max-page-size=0x200000 -Wl,-z,separate-code -o "$tmp/bigtext" src/bigtext.c
valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/bigtext.lackey" "$tmp/bigtext" \
	2> bigtext.maps || true
gzip -9n < "$tmp/bigtext.lackey" > bigtext.lackey.gz
rm -r "$tmp"
