/*
 * mmsim's recorder: a TCG plugin for qemu-user (plugin API version 1, as qemu 7.2 exports it).
 *
 * Debian 12's qemu-user ships no qemu-plugin.h, so the few declarations this plugin needs are
 * written out below, in the shapes qemu 7.2's include/qemu/qemu-plugin.h gives them.
 *
 * Arguments: dir=DIR (output directory), sock=NAME (the abstract Unix socket the recorder
 * listens on), skip=N (instructions to let pass before recording), count=M (instructions to
 * record; 0 = all), period=P (optional: record M instructions out of every P from the skip on,
 * windows spread over the whole run; 0 = one window).
 *
 * What it instruments: one callback per translation block executed (not per instruction: a
 * block's instructions, their addresses and lengths, are known when it is translated) and one
 * per data access, which carries the index of its instruction in the block. The recorder
 * (crates/trace/src/qemu/stream.rs) puts each instruction's fetch back just before the first
 * access of that instruction or of a later one in the block, or at the block's end: the order
 * of a per-instruction callback. Instructions are counted by block: a block left early (a guest
 * fault, a store into a page holding translated code, qemu's exit for an atomic operation it
 * must run alone) counts and records the instructions it did not run, where a callback per
 * instruction would not.
 *
 * The stream, on the socket, in little-endian 64-bit words: chunks, each a header word (bits
 * 0-31 the words that follow, 32-47 the vCPU, bit 63 set for block descriptors) then its words.
 *   descriptor    id (bits 0-31) | instructions n << 32, then n words: address (bits 0-47) |
 *                 length << 48; ids count up from 0, and a descriptor is sent before any chunk
 *                 that uses it;
 *   a thread's records (qemu-user gives each guest thread its own vCPU):
 *     block run   bit 63 | bit 62 if only some of its instructions are in the window | the
 *                 descriptor's id; with bit 62, (n + 63) / 64 words follow, bit i of them set
 *                 when instruction i is in the window;
 *     cut         bit 63 | bit 61: the last instruction of the block run before did not run (a
 *                 page-crossing instruction qemu cut off, see cut_before);
 *     data access address (bits 0-47) | log2 size << 48 | store << 51 | instruction index << 52,
 *                 for an instruction in the window.
 *
 * Output, in DIR:
 *   maps          /proc/self/maps at the first translated block (qemu-user on a 64-bit host of
 *                 the same architecture maps the guest 1:1, so these are the guest's mappings);
 *   syscalls      one line per mmap/munmap/mprotect/brk/mremap: the global instruction count,
 *                 the vCPU, the call and its arguments, its result, and for an mmap of a file
 *                 the file's path (read from /proc/self/fd, which the host sees unchanged);
 *   summary       instructions executed, the window, and the first instruction's address (the
 *                 interpreter's entry point, or the executable's when it has none).
 * A process the guest forks (qemu-user forks with it) records nothing.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int, void *);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int, qemu_plugin_meminfo_t, uint64_t, void *);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t, unsigned int, int64_t, uint64_t,
                                              uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                                              uint64_t, uint64_t);
typedef void (*qemu_plugin_vcpu_syscall_ret_cb_t)(qemu_plugin_id_t, unsigned int, int64_t,
                                                  int64_t);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t, void *);

extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, qemu_plugin_vcpu_tb_trans_cb_t);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
extern uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *);
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *,
                                                 qemu_plugin_vcpu_udata_cb_t,
                                                 enum qemu_plugin_cb_flags, void *);
extern void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *, qemu_plugin_vcpu_mem_cb_t,
                                             enum qemu_plugin_cb_flags, enum qemu_plugin_mem_rw,
                                             void *);
extern unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t);
extern bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t);
extern void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t, qemu_plugin_vcpu_syscall_cb_t);
extern void qemu_plugin_register_vcpu_syscall_ret_cb(qemu_plugin_id_t,
                                                     qemu_plugin_vcpu_syscall_ret_cb_t);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, qemu_plugin_udata_cb_t, void *);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_VCPUS 256
/* qemu 7.2's TCG_MAX_INSNS: the most instructions a translation block holds. */
#define MAX_INSNS 512
#define MASK_WORDS (MAX_INSNS / 64)
/* A thread's words between two sends (256 KiB). */
#define BUF_WORDS 32768
#define ADDR_BITS 0xffffffffffffULL
#define BLOCK_RUN (1ULL << 63)
#define SOME_IN_WINDOW (1ULL << 62)
#define LAST_NOT_RUN (1ULL << 61)
#define DESCRIPTORS (1ULL << 63)

/* Which of the executing block's instructions are in the window. */
enum window { NONE, ALL, SOME };

struct stream {
    unsigned vcpu;
    unsigned n; /* words in buf after its header slot */
    enum window state;
    struct block *cut_candidate; /* the block run before, if its last instruction may be cut */
    uint64_t mask[MASK_WORDS];
    int64_t pending_nr;
    uint64_t pending_args[6];
    uint64_t buf[1 + BUF_WORDS];
};

/* A translated block: its descriptor's id, its instructions, the first's and the last's address
 * and length (address | length << 48), and whether the last may be one qemu cut (see cut_before). */
struct block {
    uint64_t id, n, first, last;
    bool last_maybe_cut;
};

static struct stream *streams[MAX_VCPUS];
static char dir[4096];
static uint64_t skip, count, period;
static uint64_t all_from = UINT64_MAX; /* from this instruction on, all are in the window */
static uint64_t seen; /* instructions executed, all threads (atomic) */
static int maps_done;
static uint64_t first_pc;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int syscalls = -1;
static int forked;

/* The socket and what goes out on it, under out_lock; descriptors wait in descs (header slot
 * first) until the next send. sock is -1 in a forked child and after the exit. */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static int sock = -1;
static uint64_t next_id;
static uint64_t *descs;
static size_t ndescs, descs_cap;

static int in_window(uint64_t n)
{
    if (n < skip)
        return 0;
    if (count == 0)
        return 1;
    return period ? (n - skip) % period < count : n - skip < count;
}

/* The window's share of the n instructions numbered from n0. */
static enum window window_of(uint64_t n0, uint64_t n)
{
    if (n0 >= skip) {
        if (count == 0)
            return ALL;
        uint64_t r = period ? (n0 - skip) % period : n0 - skip;
        if (r + n <= count)
            return ALL;
        if (r >= count && (period == 0 || r + n <= period))
            return NONE;
    } else if (n0 + n <= skip) {
        return NONE;
    }
    return SOME;
}

static void send_all(const uint64_t *words, size_t n)
{
    const char *p = (const char *)words;
    size_t left = n * 8;
    while (left) {
        ssize_t k = send(sock, p, left, MSG_NOSIGNAL);
        if (k <= 0) {
            perror("mmsim plugin: sending to the recorder");
            abort();
        }
        p += k;
        left -= (size_t)k;
    }
}

/* Sends the waiting descriptors (out_lock held). */
static void send_descs(void)
{
    if (ndescs <= 1 || sock < 0)
        return;
    descs[0] = DESCRIPTORS | (ndescs - 1);
    send_all(descs, ndescs);
    ndescs = 1;
}

/* Sends a thread's buffered records, after the descriptors they may use. */
static void flush(struct stream *s)
{
    pthread_mutex_lock(&out_lock);
    if (sock >= 0 && s->n) {
        send_descs();
        s->buf[0] = (uint64_t)s->vcpu << 32 | s->n;
        send_all(s->buf, 1 + s->n);
    }
    pthread_mutex_unlock(&out_lock);
    s->n = 0;
}

/* Appends a record to a thread's buffer, sending it when it is nearly full (room is left for
 * a block run's mask). */
static inline void put(struct stream *s, uint64_t record)
{
    s->buf[++s->n] = record;
    if (s->n > BUF_WORDS - 1 - MASK_WORDS)
        flush(s);
}

static struct stream *stream_of(unsigned vcpu)
{
    if (vcpu >= MAX_VCPUS) {
        fprintf(stderr, "mmsim plugin: more than %d threads\n", MAX_VCPUS);
        abort();
    }
    if (!streams[vcpu]) {
        struct stream *s = calloc(1, sizeof *s);
        if (!s) {
            perror("mmsim plugin");
            abort();
        }
        s->vcpu = vcpu;
        streams[vcpu] = s;
    }
    return streams[vcpu];
}

/*
 * qemu 7.2 ends a block before an instruction that would cross into the next page (x86's
 * advance_pc, when the block has an instruction already), but the plugin still sees the bytes
 * it read of it as the block's last instruction, which does not run: the next block starts
 * there, with the whole instruction. Whether block b, run after a, shows that a's last
 * instruction was such a cut one (a loop of an instruction to itself, as `rep movs` makes,
 * starts with the same instruction, of the same length).
 */
static bool cut_before(const struct block *a, const struct block *b)
{
    return a && a->last_maybe_cut && (b->first & ADDR_BITS) == (a->last & ADDR_BITS) &&
           b->first >> 48 > a->last >> 48;
}

/* A block run whose instructions are numbered from n0, not all in the window, or after one
 * whose last instruction was cut (cut = 1). */
static __attribute__((noinline)) void enter_window(struct stream *s, struct block *b, uint64_t n0,
                                                   uint64_t cut)
{
    if (cut && s->state != NONE)
        s->buf[++s->n] = BLOCK_RUN | LAST_NOT_RUN;
    s->state = window_of(n0, b->n);
    if (s->state == NONE)
        return;
    if (s->state == ALL) {
        s->buf[++s->n] = BLOCK_RUN | b->id;
    } else {
        memset(s->mask, 0, sizeof s->mask);
        for (uint64_t k = 0; k < b->n; k++)
            s->mask[k / 64] |= (uint64_t)in_window(n0 + k) << (k % 64);
        s->buf[++s->n] = BLOCK_RUN | SOME_IN_WINDOW | b->id;
        memcpy(&s->buf[s->n + 1], s->mask, (b->n + 63) / 64 * 8);
        s->n += (b->n + 63) / 64;
    }
    if (s->n > BUF_WORDS - 1 - MASK_WORDS)
        flush(s);
}

/* A block run after one whose last instruction may be cut, or that may be cut itself, or the
 * thread's first. */
static __attribute__((noinline)) void enter_block(unsigned vcpu, struct block *b)
{
    struct stream *s = stream_of(vcpu);
    uint64_t cut = cut_before(s->cut_candidate, b);
    s->cut_candidate = b->last_maybe_cut ? b : NULL;
    uint64_t n0 = __atomic_fetch_add(&seen, b->n - cut, __ATOMIC_RELAXED) - cut;
    enter_window(s, b, n0, cut);
}

/* The common case inline: a block after one that cannot have been cut, all in the window. */
static void on_block(unsigned vcpu, void *udata)
{
    struct block *b = udata;
    struct stream *s = vcpu < MAX_VCPUS ? streams[vcpu] : NULL;
    if (__builtin_expect(!s || s->cut_candidate || b->last_maybe_cut, 0)) {
        enter_block(vcpu, b);
        return;
    }
    uint64_t n0 = __atomic_fetch_add(&seen, b->n, __ATOMIC_RELAXED);
    if (__builtin_expect(n0 < all_from, 0)) {
        enter_window(s, b, n0, 0);
        return;
    }
    s->state = ALL;
    put(s, BLOCK_RUN | b->id);
}

/* A memory access's size (log2) and direction, as bits 48-51 of its record, by its meminfo:
 * learnt from the plugin API once per value (there are a few dozen) and kept with bit 4 set. */
static uint8_t access_bits[1 << 18];

static __attribute__((noinline)) uint64_t learn_access(qemu_plugin_meminfo_t info)
{
    uint8_t bits = 16 | qemu_plugin_mem_size_shift(info) | qemu_plugin_mem_is_store(info) << 3;
    if (info < sizeof access_bits)
        __atomic_store_n(&access_bits[info], bits, __ATOMIC_RELAXED);
    return bits & 15;
}

/* An access while the block is not all in the window, or of a meminfo not seen before. */
static __attribute__((noinline)) void access_slow(struct stream *s, qemu_plugin_meminfo_t info,
                                                  uint64_t vaddr, uint64_t k)
{
    if (s->state == NONE || (s->state == SOME && !(s->mask[k >> 58] >> (k >> 52 & 63) & 1)))
        return;
    uint64_t bits =
        info < sizeof access_bits ? __atomic_load_n(&access_bits[info], __ATOMIC_RELAXED) : 0;
    put(s, (vaddr & ADDR_BITS) | (bits ? bits & 15 : learn_access(info)) << 48 | k);
}

/* udata: the instruction's index in its block, shifted to its place in the record. */
static void on_mem(unsigned vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    struct stream *s = streams[vcpu];
    uint64_t k = (uintptr_t)udata;
    uint64_t bits = info < sizeof access_bits ? __atomic_load_n(&access_bits[info], __ATOMIC_RELAXED) : 0;
    if (__builtin_expect(s->state != ALL || !bits, 0)) {
        access_slow(s, info, vaddr, k);
        return;
    }
    put(s, (vaddr & ADDR_BITS) | (bits & 15) << 48 | k);
}

static void copy_maps(void)
{
    char src[64], path[4200], line[8192];
    snprintf(src, sizeof src, "/proc/%d/maps", (int)getpid());
    snprintf(path, sizeof path, "%s/maps", dir);
    FILE *in = fopen(src, "r"), *out = fopen(path, "w");
    if (!in || !out) {
        perror("mmsim plugin: maps");
        abort();
    }
    while (fgets(line, sizeof line, in))
        fputs(line, out);
    fclose(in);
    fclose(out);
}

/* Room for w more descriptor words (out_lock held). */
static uint64_t *desc_room(size_t w)
{
    if (ndescs + w > descs_cap) {
        descs_cap = 2 * (ndescs + w);
        descs = realloc(descs, descs_cap * 8);
        if (!descs) {
            perror("mmsim plugin");
            abort();
        }
    }
    uint64_t *at = descs + ndescs;
    ndescs += w;
    return at;
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    if (!__atomic_exchange_n(&maps_done, 1, __ATOMIC_SEQ_CST)) {
        first_pc = qemu_plugin_tb_vaddr(tb);
        copy_maps();
    }
    size_t n = qemu_plugin_tb_n_insns(tb);
    struct block *b = malloc(sizeof *b);
    if (!b || n > MAX_INSNS || next_id >> 32) {
        fprintf(stderr, "mmsim plugin: a block of %zu instructions, or the %lu-th\n", n,
                (unsigned long)next_id);
        abort();
    }
    b->n = n;
    b->first = b->last = 0;
    pthread_mutex_lock(&out_lock);
    b->id = next_id++;
    uint64_t *w = desc_room(1 + n);
    w[0] = b->id | (uint64_t)n << 32;
    for (size_t k = 0; k < n; k++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, k);
        w[1 + k] = (qemu_plugin_insn_vaddr(insn) & ADDR_BITS) |
                   (uint64_t)qemu_plugin_insn_size(insn) << 48;
        b->first = k ? b->first : w[1 + k];
        b->last = w[1 + k];
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         (void *)(uintptr_t)(k << 52));
    }
    if (ndescs > BUF_WORDS)
        send_descs();
    /* A cut instruction's bytes stop where the next read, of at most 8 bytes, would cross. */
    uint64_t end = (b->last & ADDR_BITS) + (b->last >> 48), page_end = ((b->last & ADDR_BITS) | 0xfff) + 1;
    b->last_maybe_cut = n >= 2 && end + 8 > page_end;
    pthread_mutex_unlock(&out_lock);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
}

/* x86-64 system call numbers of the calls logged. */
enum { NR_MMAP = 9, NR_MPROTECT = 10, NR_MUNMAP = 11, NR_BRK = 12, NR_MREMAP = 25 };

static int logged(int64_t nr)
{
    return nr == NR_MMAP || nr == NR_MPROTECT || nr == NR_MUNMAP || nr == NR_BRK || nr == NR_MREMAP;
}

static void on_syscall(qemu_plugin_id_t id, unsigned vcpu, int64_t nr, uint64_t a1, uint64_t a2,
                       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7,
                       uint64_t a8)
{
    (void)id, (void)a7, (void)a8;
    struct stream *s = stream_of(vcpu);
    s->pending_nr = logged(nr) ? nr : -1;
    uint64_t args[6] = {a1, a2, a3, a4, a5, a6};
    memcpy(s->pending_args, args, sizeof args);
}

static void on_syscall_ret(qemu_plugin_id_t id, unsigned vcpu, int64_t nr, int64_t ret)
{
    (void)id;
    struct stream *s = stream_of(vcpu);
    if (s->pending_nr != nr || nr < 0 || forked)
        return;
    uint64_t *a = s->pending_args;
    char target[4096] = "";
    if (nr == NR_MMAP && (int64_t)a[4] >= 0 && !(a[3] & 0x20 /* MAP_ANONYMOUS */)) {
        char fd[64];
        snprintf(fd, sizeof fd, "/proc/self/fd/%d", (int)a[4]);
        ssize_t len = readlink(fd, target, sizeof target - 1);
        target[len > 0 ? len : 0] = 0;
    }
    pthread_mutex_lock(&log_lock);
    dprintf(syscalls, "%lu %u %ld %#lx %#lx %#lx %#lx %ld %#lx %#lx %s\n",
            (unsigned long)__atomic_load_n(&seen, __ATOMIC_RELAXED), vcpu, (long)nr,
            (unsigned long)a[0], (unsigned long)a[1], (unsigned long)a[2], (unsigned long)a[3],
            (long)(int)a[4], (unsigned long)a[5], (unsigned long)ret, target);
    pthread_mutex_unlock(&log_lock);
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    if (forked)
        return;
    for (unsigned v = 0; v < MAX_VCPUS; v++)
        if (streams[v])
            flush(streams[v]);
    pthread_mutex_lock(&out_lock);
    send_descs();
    if (sock >= 0)
        close(sock);
    sock = -1;
    pthread_mutex_unlock(&out_lock);
    close(syscalls);
    char path[4200];
    snprintf(path, sizeof path, "%s/summary", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "instructions %lu\nskip %lu\ncount %lu\nperiod %lu\nfirst_pc %lu\n",
                (unsigned long)seen, (unsigned long)skip, (unsigned long)count,
                (unsigned long)period, (unsigned long)first_pc);
        fclose(f);
    }
}

/* Around a fork, the locks are taken so that the child does not inherit them held; a forked
 * child leaves the socket and the log to the parent and records nothing. */
static void before_fork(void)
{
    pthread_mutex_lock(&out_lock);
    pthread_mutex_lock(&log_lock);
}

static void after_fork_in_parent(void)
{
    pthread_mutex_unlock(&log_lock);
    pthread_mutex_unlock(&out_lock);
}

static void after_fork_in_child(void)
{
    forked = 1;
    skip = all_from = UINT64_MAX;
    if (sock >= 0)
        close(sock);
    sock = -1;
    after_fork_in_parent();
}

static int connect_to(const char *name)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    if (len + 1 > sizeof a.sun_path)
        return -1;
    memcpy(a.sun_path + 1, name, len); /* an abstract name: sun_path[0] is 0 */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, offsetof(struct sockaddr_un, sun_path) + 1 + len))
        return -1;
    int size = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    return fd;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t *info, int argc,
                                                               char **argv)
{
    (void)info;
    const char *name = "";
    for (int k = 0; k < argc; k++) {
        if (!strncmp(argv[k], "dir=", 4))
            snprintf(dir, sizeof dir, "%s", argv[k] + 4);
        else if (!strncmp(argv[k], "sock=", 5))
            name = argv[k] + 5;
        else if (!strncmp(argv[k], "skip=", 5))
            skip = strtoull(argv[k] + 5, NULL, 10);
        else if (!strncmp(argv[k], "count=", 6))
            count = strtoull(argv[k] + 6, NULL, 10);
        else if (!strncmp(argv[k], "period=", 7))
            period = strtoull(argv[k] + 7, NULL, 10);
        else {
            fprintf(stderr,
                    "mmsim plugin: unknown argument %s (expected dir=, sock=, skip=, count=, period=)\n",
                    argv[k]);
            return -1;
        }
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/syscalls", dir);
    syscalls = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!dir[0] || syscalls < 0) {
        fprintf(stderr, "mmsim plugin: cannot write to dir=%s\n", dir);
        return -1;
    }
    sock = connect_to(name);
    if (sock < 0) {
        fprintf(stderr, "mmsim plugin: cannot connect to the recorder's socket sock=%s\n", name);
        return -1;
    }
    all_from = count == 0 ? skip : UINT64_MAX;
    desc_room(1); /* the header slot */
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
