/* A real program with 4 MiB of text for traces/: 1024 code pages, each a small function at the
 * start of its own 4 KiB page, called in a scattered order four times, then it prints its own
 * /proc/self/maps to stderr. Linked with 2 MiB segment alignment, its text mapping holds two
 * 2 MiB-aligned ranges at offsets of the same colour, so `mmsim replay --text-thp fault` can
 * back them with 2 MiB pages. No libc. Built and recorded by traces/record.sh. */
__asm__(".text\n"
	".balign 4096\n"
	"pages:\n"
	".rept 1024\n"
	"lea 1(%rdi), %rax\n"
	"ret\n"
	".balign 4096\n"
	".endr\n");

extern char pages[];

static long sys(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

/* In .text.startup, which the linker places before .text: the first fault is at the start of the
 * text, not in its last page, whose read-around would put 4 KiB pages into the second 2 MiB. */
__attribute__((section(".text.startup"))) void _start(void)
{
	char maps[8192];
	long s = 0, fd, n;

	for (int r = 0; r < 4; r++)
		for (long i = 0; i < 1024; i++)
			s = ((long (*)(long))(pages + ((i * 389) & 1023) * 4096))(s);
	fd = sys(2, (long)"/proc/self/maps", 0, 0);
	n = sys(0, fd, (long)maps, sizeof maps);
	sys(1, 2, (long)maps, n);
	sys(60, s & 1, 0, 0);
}
