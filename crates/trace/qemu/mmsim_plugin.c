/*
 * mmsim's recorder: a TCG plugin for qemu-user (plugin API version 1, as qemu 7.2 exports it).
 *
 * Debian 12's qemu-user ships no qemu-plugin.h, so the few declarations this plugin needs are
 * written out below, in the shapes qemu 7.2's include/qemu/qemu-plugin.h gives them.
 *
 * Arguments: dir=DIR (output directory), skip=N (instructions to let pass before recording),
 * count=M (instructions to record; 0 = all), period=P (optional: record M instructions out of
 * every P from the skip on, windows spread over the whole run; 0 = one window).
 *
 * Output, in DIR:
 *   t<vcpu>.raw   one 8-byte little-endian record per reference of that thread (qemu-user gives
 *                 each guest thread its own vCPU): bits 0-47 address, 48-55 size in bytes,
 *                 56-57 kind (0 fetch, 1 load, 2 store);
 *   maps          /proc/self/maps at the first translated block (qemu-user on a 64-bit host of
 *                 the same architecture maps the guest 1:1, so these are the guest's mappings);
 *   syscalls      one line per mmap/munmap/mprotect/brk/openat: the global instruction count,
 *                 the vCPU, the call and its arguments, its result, and for an mmap of a file
 *                 the file's path (read from /proc/self/fd, which the host sees unchanged);
 *   summary       instructions executed, the window, and the first instruction's address (the
 *                 interpreter's entry point, or the executable's when it has none).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <unistd.h>
#include <pthread.h>

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
extern void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *,
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
#define BUF_RECORDS 8192

struct stream {
    FILE *out;
    uint64_t buf[BUF_RECORDS];
    unsigned n;
    int64_t pending_nr;
    uint64_t pending_args[6];
};

static struct stream *streams[MAX_VCPUS];
static char dir[4096];
static uint64_t skip, count, period;
static uint64_t seen; /* instructions executed, all threads (atomic) */
static int maps_done;
static uint64_t first_pc;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *syscalls;

static int in_window(uint64_t n)
{
    if (n < skip)
        return 0;
    if (count == 0)
        return 1;
    return period ? (n - skip) % period < count : n - skip < count;
}

static struct stream *stream_of(unsigned vcpu)
{
    if (vcpu >= MAX_VCPUS) {
        fprintf(stderr, "mmsim plugin: more than %d threads\n", MAX_VCPUS);
        abort();
    }
    if (!streams[vcpu]) {
        char path[4200];
        snprintf(path, sizeof path, "%s/t%u.raw", dir, vcpu);
        struct stream *s = calloc(1, sizeof *s);
        s->out = fopen(path, "wb");
        if (!s || !s->out) {
            perror(path);
            abort();
        }
        streams[vcpu] = s;
    }
    return streams[vcpu];
}

static void put(unsigned vcpu, uint64_t addr, uint64_t size, uint64_t kind)
{
    struct stream *s = stream_of(vcpu);
    s->buf[s->n++] = (addr & 0xffffffffffffULL) | (size & 0xff) << 48 | kind << 56;
    if (s->n == BUF_RECORDS) {
        fwrite(s->buf, 8, s->n, s->out);
        s->n = 0;
    }
}

/* The instruction's size rides in userdata; its address is the callback's own. */
struct insn { uint64_t vaddr; uint64_t size; };

static __thread int recording;

static void on_insn(unsigned vcpu, void *udata)
{
    struct insn *i = udata;
    uint64_t n = __atomic_fetch_add(&seen, 1, __ATOMIC_RELAXED);
    recording = in_window(n);
    if (recording)
        put(vcpu, i->vaddr, i->size, 0);
}

static void on_mem(unsigned vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)udata;
    if (recording)
        put(vcpu, vaddr, 1u << qemu_plugin_mem_size_shift(info),
            qemu_plugin_mem_is_store(info) ? 2 : 1);
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

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    if (!__atomic_exchange_n(&maps_done, 1, __ATOMIC_SEQ_CST)) {
        first_pc = qemu_plugin_tb_vaddr(tb);
        copy_maps();
    }
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t k = 0; k < n; k++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, k);
        struct insn *i = malloc(sizeof *i);
        i->vaddr = qemu_plugin_insn_vaddr(insn);
        i->size = qemu_plugin_insn_size(insn);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, QEMU_PLUGIN_CB_NO_REGS, i);
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         NULL);
    }
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
    if (s->pending_nr != nr || nr < 0)
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
    fprintf(syscalls, "%lu %u %ld %#lx %#lx %#lx %#lx %ld %#lx %#lx %s\n",
            (unsigned long)__atomic_load_n(&seen, __ATOMIC_RELAXED), vcpu, (long)nr,
            (unsigned long)a[0], (unsigned long)a[1], (unsigned long)a[2], (unsigned long)a[3],
            (long)(int)a[4], (unsigned long)a[5], (unsigned long)ret, target);
    pthread_mutex_unlock(&log_lock);
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    for (unsigned v = 0; v < MAX_VCPUS; v++) {
        struct stream *s = streams[v];
        if (!s)
            continue;
        fwrite(s->buf, 8, s->n, s->out);
        fclose(s->out);
    }
    fclose(syscalls);
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

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t *info, int argc,
                                                               char **argv)
{
    (void)info;
    for (int k = 0; k < argc; k++) {
        if (!strncmp(argv[k], "dir=", 4))
            snprintf(dir, sizeof dir, "%s", argv[k] + 4);
        else if (!strncmp(argv[k], "skip=", 5))
            skip = strtoull(argv[k] + 5, NULL, 10);
        else if (!strncmp(argv[k], "count=", 6))
            count = strtoull(argv[k] + 6, NULL, 10);
        else if (!strncmp(argv[k], "period=", 7))
            period = strtoull(argv[k] + 7, NULL, 10);
        else {
            fprintf(stderr, "mmsim plugin: unknown argument %s (expected dir=, skip=, count=, period=)\n",
                    argv[k]);
            return -1;
        }
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/syscalls", dir);
    syscalls = fopen(path, "w");
    if (!dir[0] || !syscalls) {
        fprintf(stderr, "mmsim plugin: cannot write to dir=%s\n", dir);
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
