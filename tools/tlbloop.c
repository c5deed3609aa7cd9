/* The reference loop for `mmsim bench tlb`: the same TLB lookups as mmsim's model of the
 * epyc-vm profile (AMD Zen 5: a 96-entry fully associative L1 DTLB and a 4096-entry 16-way
 * L2 DTLB, both holding 4 KiB and 2 MiB entries, true LRU by age stamps) and a radix walk with
 * lazily allocated tables (four levels to a 4 KiB page, three to a 2 MiB one), over the same
 * reference stream (splitmix64, as the benchmark generates it) in a footprint of PAGES 4 KiB
 * pages: a sequential pass touching every page of size 1 << SHIFT once (untimed), then REFS
 * timed random references.
 * Usage: tlbloop PAGES REFS SEED [SHIFT: 12 (default) or 21]; prints the timed rate, the L1
 * misses and the walks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define L1 96
#define L2_SETS 256
#define L2_WAYS 16

static uint64_t l1_tag[L1], l1_age[L1], l2_tag[L2_SETS * L2_WAYS], l2_age[L2_SETS * L2_WAYS], clk;
static uint64_t misses, walks;
static int shift = 12;

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void **root;

static uint64_t walk(uint64_t va)
{
	void **t = root;
	int leaf = (shift - 12) / 9; /* the level of the leaf entry: 0 for a PTE, 1 for a PMD */
	for (int level = 3; level > leaf; level--) {
		unsigned i = (va >> (12 + 9 * level)) & 511;
		if (!t[i])
			t[i] = calloc(512, sizeof(void *));
		t = t[i];
	}
	unsigned i = (va >> shift) & 511;
	if (!t[i])
		t[i] = (void *)((va >> shift) + 1);
	return (uint64_t)t[i];
}

static void lookup(uint64_t va)
{
	uint64_t tag = (va >> shift) + 1, v = 0;
	clk++;
	for (int i = 0; i < L1; i++)
		if (l1_tag[i] == tag) {
			l1_age[i] = clk;
			return;
		}
	misses++;
	uint64_t *st = &l2_tag[((va >> shift) & (L2_SETS - 1)) * L2_WAYS], *sa = st - l2_tag + l2_age;
	int hit = -1, victim = 0;
	for (int w = 0; w < L2_WAYS; w++) {
		if (st[w] == tag)
			hit = w;
		if (sa[w] < sa[victim])
			victim = w;
	}
	if (hit < 0) {
		walks++;
		v = walk(va);
		st[victim] = tag;
		sa[victim] = clk;
	} else {
		sa[hit] = clk;
	}
	int old = 0;
	for (int i = 1; i < L1; i++)
		if (l1_age[i] < l1_age[old])
			old = i;
	l1_tag[old] = tag;
	l1_age[old] = clk + (v & 0);
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		return 2;
	if (argc == 5)
		shift = atoi(argv[4]);
	if (shift != 12 && shift != 21)
		return 2;
	uint64_t pages = strtoull(argv[1], 0, 10), refs = strtoull(argv[2], 0, 10), s = strtoull(argv[3], 0, 10);
	uint64_t base = 0x100000000000ull;
	root = calloc(512, sizeof(void *));
	for (uint64_t p = 0; p < pages >> (shift - 12); p++)
		lookup(base + (p << shift));
	misses = walks = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (uint64_t r = 0; r < refs; r++) {
		uint64_t x = splitmix(&s);
		lookup(base + ((x % pages) << 12) + (x >> 52 & 0xff8));
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double secs = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("%.0f %llu %llu\n", refs / secs, (unsigned long long)misses, (unsigned long long)walks);
	return 0;
}
