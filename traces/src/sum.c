/* A tiny real program for traces/: fills a 32 KiB .bss array, sums a stride of it four times,
 * and prints its own /proc/self/maps to stderr. No libc: the trace holds only its own
 * references. Built and recorded by traces/record.sh. */
static long buf[4096];

static long sys(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

void _start(void)
{
	char maps[8192];
	long s = 0, fd, n;

	for (int i = 0; i < 4096; i++)
		buf[i] = i;
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < 4096; i += 8)
			s += buf[i];
	fd = sys(2, (long)"/proc/self/maps", 0, 0);
	n = sys(0, fd, (long)maps, sizeof maps);
	sys(1, 2, (long)maps, n);
	sys(60, s & 1, 0, 0);
}
