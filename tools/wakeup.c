// The wake-up latency of a task sleeping on an idle CPU: the profile cost `wakeup_latency`
// (crates/mm/src/sim/profile.rs). Two threads pinned to CPUs 0 and 1: the sleeper waits on a
// futex, so its CPU goes idle; the waker reads the clock and wakes it (FUTEX_WAKE: the kernel's
// try_to_wake_up, an IPI or the wake list to the idle CPU, its exit from idle, the schedule);
// the sleeper reads the clock as soon as it runs. Latency is the difference (CLOCK_MONOTONIC is
// one clock on every CPU). Between samples the waker pauses so that the sleeper's CPU is idle
// again. Build and run on an otherwise idle machine with at least 2 CPUs:
//   cc -O2 -pthread -o /tmp/wakeup tools/wakeup.c && /tmp/wakeup
// Prints the median and the 10th and 90th percentiles in ns over 2000 wake-ups, twice: with the
// waker sleeping between samples and with it spinning (its own CPU busy, as a lock's releaser
// is).
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SAMPLES 2000

static atomic_int word;
static atomic_int acked;
static double woke_at;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        fprintf(stderr, "cannot pin to CPU %d\n", cpu);
        exit(2);
    }
}

static void *sleeper(void *arg) {
    (void)arg;
    pin(1);
    for (int i = 0; i < 2 * SAMPLES; i++) {
        while (atomic_load(&word) == 0)
            syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        woke_at = now();
        atomic_store(&word, 0);
        atomic_store(&acked, 1);
    }
    return NULL;
}

static void pause_us(int us, int spin) {
    if (!spin) {
        struct timespec t = {0, us * 1000L};
        nanosleep(&t, NULL);
        return;
    }
    double end = now() + us * 1000.0;
    while (now() < end) {
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run(const char *what, int spin) {
    static double lat[SAMPLES];
    for (int i = 0; i < SAMPLES; i++) {
        pause_us(500, spin);
        atomic_store(&acked, 0);
        double t0 = now();
        atomic_store(&word, 1);
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        while (atomic_load(&acked) == 0) {
        }
        lat[i] = woke_at - t0;
    }
    qsort(lat, SAMPLES, sizeof lat[0], cmp);
    printf("%s: median %.0f ns, p10 %.0f, p90 %.0f (%d wake-ups)\n", what, lat[SAMPLES / 2],
           lat[SAMPLES / 10], lat[SAMPLES * 9 / 10], SAMPLES);
}

int main(void) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "needs 2 CPUs\n");
        return 2;
    }
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    pin(0);
    run("waker sleeping between wake-ups", 0);
    run("waker spinning between wake-ups", 1);
    pthread_join(t, NULL);
    return 0;
}
