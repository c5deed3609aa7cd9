/* The reference loop for `mmsim bench tlb`: the same TLB lookups as mmsim's model of the
 * epyc-vm profile (AMD Zen 5: a 96-entry fully associative L1 DTLB and a 4096-entry 16-way
 * L2 DTLB, true LRU in both) and a radix walk with lazily allocated tables (four levels to a
 * 4 KiB page, three to a 2 MiB one), over the same reference stream (splitmix64, as the
 * benchmark generates it) in a footprint of PAGES 4 KiB pages: a sequential pass touching every
 * page of size 1 << SHIFT once, then REFS random references. The addresses are generated before
 * the timer starts (mmsim reads them from a trace in memory); the timer and the counters start
 * at reference START of the whole stream (mmsim's first batch boundary after the pass).
 *
 * Written as a performance-minded C programmer would for this geometry: the L1 is a hash table
 * (open addressing, linear probing, backward-shift deletion) over its 96 entries and their LRU
 * order is a circular list with a sentinel, so a hit is one probe and a branch-free move to the
 * front, and a miss evicts the list's tail; each L2
 * set keeps its 16 tags together and its LRU order packed in one 64-bit word (a nibble per way,
 * most recent first).
 * Usage: tlbloop PAGES REFS SEED SHIFT START (SHIFT: 12 or 21); prints the timed rate, the L1
 * misses and the walks of the timed references. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define L1 96
#define HBITS 8
#define HSIZE (1u << HBITS)
#define L2_SETS 256
#define L2_WAYS 16

static uint64_t l1_tag[L1];
/* The LRU order: a circular list through the entries and a sentinel (index L1), most recent
 * first, so moving an entry to the front takes no branch. */
static uint8_t l1_prev[L1 + 1], l1_next[L1 + 1];
static unsigned l1_used;
static uint8_t hslot[HSIZE]; /* entry + 1, 0 empty */
static uint64_t l2_tag[L2_SETS][L2_WAYS], l2_order[L2_SETS];
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

static unsigned bucket(uint64_t tag)
{
	return (unsigned)((tag * 0x9e3779b97f4a7c15ull) >> (64 - HBITS));
}

static void to_front(unsigned e)
{
	l1_next[l1_prev[e]] = l1_next[e];
	l1_prev[l1_next[e]] = l1_prev[e];
	l1_next[e] = l1_next[L1];
	l1_prev[e] = L1;
	l1_prev[l1_next[L1]] = e;
	l1_next[L1] = e;
}

/* Deletes tag's bucket, shifting later members of its probe run back. */
static void hash_delete(uint64_t tag)
{
	unsigned i = bucket(tag);
	while (l1_tag[hslot[i] - 1] != tag)
		i = (i + 1) & (HSIZE - 1);
	for (unsigned j = (i + 1) & (HSIZE - 1); hslot[j]; j = (j + 1) & (HSIZE - 1)) {
		unsigned home = bucket(l1_tag[hslot[j] - 1]);
		if (((j - home) & (HSIZE - 1)) >= ((j - i) & (HSIZE - 1))) {
			hslot[i] = hslot[j];
			i = j;
		}
	}
	hslot[i] = 0;
}

static void l1_fill(uint64_t tag)
{
	unsigned e;
	if (l1_used < L1) {
		e = l1_used++;
		l1_prev[e] = l1_next[e] = e; /* a list of its own, which to_front leaves */
	} else {
		e = l1_prev[L1]; /* the least recent entry */
		hash_delete(l1_tag[e]);
	}
	to_front(e);
	l1_tag[e] = tag;
	unsigned i = bucket(tag);
	while (hslot[i])
		i = (i + 1) & (HSIZE - 1);
	hslot[i] = e + 1;
}

/* Moves way w to the front of the set's packed LRU order. */
static void l2_touch(uint64_t *order, unsigned w)
{
	uint64_t o = *order;
	unsigned p = 0;
	while (((o >> (4 * p)) & 15) != w)
		p++;
	uint64_t below = p ? o & ((1ull << (4 * p)) - 1) : 0;
	uint64_t above = p == 15 ? 0 : o & ~((1ull << (4 * (p + 1))) - 1);
	*order = above | (below << 4) | w;
}

static void lookup(uint64_t va)
{
	uint64_t tag = (va >> shift) + 1;
	for (unsigned i = bucket(tag); hslot[i]; i = (i + 1) & (HSIZE - 1)) {
		unsigned e = hslot[i] - 1;
		if (l1_tag[e] == tag) {
			to_front(e);
			return;
		}
	}
	misses++;
	unsigned set = (va >> shift) & (L2_SETS - 1);
	uint64_t *st = l2_tag[set];
	int hit = -1;
	for (int w = 0; w < L2_WAYS; w++)
		if (st[w] == tag)
			hit = w;
	if (hit < 0) {
		walks++;
		walk(va);
		hit = (int)(l2_order[set] >> 60); /* the least recent way */
		st[hit] = tag;
	}
	l2_touch(&l2_order[set], (unsigned)hit);
	l1_fill(tag);
}

int main(int argc, char **argv)
{
	if (argc != 6)
		return 2;
	shift = atoi(argv[4]);
	if (shift != 12 && shift != 21)
		return 2;
	uint64_t pages = strtoull(argv[1], 0, 10), refs = strtoull(argv[2], 0, 10);
	uint64_t s = strtoull(argv[3], 0, 10), start = strtoull(argv[5], 0, 10);
	uint64_t base = 0x100000000000ull, touched = pages >> (shift - 12), n = touched + refs;
	uint64_t *va = malloc(n * sizeof *va);
	if (!va || start > n)
		return 2;
	for (uint64_t p = 0; p < touched; p++)
		va[p] = base + (p << shift);
	for (uint64_t r = 0; r < refs; r++) {
		uint64_t x = splitmix(&s);
		va[touched + r] = base + ((x % pages) << 12) + (x >> 52 & 0xff8);
	}
	l1_prev[L1] = l1_next[L1] = L1;
	for (unsigned set = 0; set < L2_SETS; set++)
		l2_order[set] = 0xfedcba9876543210ull; /* way 0 most recent: way 15 is filled first */
	root = calloc(512, sizeof(void *));
	for (uint64_t i = 0; i < start; i++)
		lookup(va[i]);
	misses = walks = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (uint64_t i = start; i < n; i++)
		lookup(va[i]);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double secs = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("%.0f %llu %llu\n", (n - start) / secs, (unsigned long long)misses,
	       (unsigned long long)walks);
	return 0;
}
