/* The reference loop for `mmsim bench tlb`: the same TLB lookups as mmsim's model of the
 * epyc-vm profile (AMD Zen 5: a 96-entry fully associative L1 DTLB and a 4096-entry 16-way
 * L2 DTLB, true LRU by age stamps) and a four-level radix walk with lazily allocated tables,
 * over the same reference stream (splitmix64, as the benchmark generates it): a sequential
 * pass touching every page once (untimed), then REFS timed random references.
 * Usage: tlbloop PAGES REFS SEED; prints the timed rate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define L1 96
#define L2_SETS 256
#define L2_WAYS 16

static uint64_t l1_tag[L1], l1_age[L1], l2_tag[L2_SETS * L2_WAYS], l2_age[L2_SETS * L2_WAYS], clk;
static uint64_t misses, walks;

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void **root;

static uint64_t walk(uint64_t vpn)
{
	void **t = root;
	for (int level = 3; level > 0; level--) {
		unsigned i = (vpn >> (9 * level)) & 511;
		if (!t[i])
			t[i] = calloc(512, sizeof(void *));
		t = t[i];
	}
	unsigned i = vpn & 511;
	if (!t[i])
		t[i] = (void *)(vpn + 1);
	return (uint64_t)t[i];
}

static void lookup(uint64_t va)
{
	uint64_t tag = (va >> 12) + 1, v = 0;
	clk++;
	for (int i = 0; i < L1; i++)
		if (l1_tag[i] == tag) {
			l1_age[i] = clk;
			return;
		}
	misses++;
	uint64_t *st = &l2_tag[((va >> 12) & (L2_SETS - 1)) * L2_WAYS], *sa = st - l2_tag + l2_age;
	int hit = -1, victim = 0;
	for (int w = 0; w < L2_WAYS; w++) {
		if (st[w] == tag)
			hit = w;
		if (sa[w] < sa[victim])
			victim = w;
	}
	if (hit < 0) {
		walks++;
		v = walk(va >> 12);
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
	if (argc != 4)
		return 2;
	uint64_t pages = strtoull(argv[1], 0, 10), refs = strtoull(argv[2], 0, 10), s = strtoull(argv[3], 0, 10);
	uint64_t base = 0x100000000000ull;
	root = calloc(512, sizeof(void *));
	for (uint64_t p = 0; p < pages; p++)
		lookup(base + (p << 12));
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
