//! `mmsim calibrate`'s measurements: the basic operations a machine profile charges, timed
//! natively on this host's kernel (the Rust form of `tools/calibrate.c` and `tools/wakeup.c`,
//! with which `epyc-vm` was measured; `lab::calibrate` turns the figures into costs).
//!
//! Each figure is the median of several runs, each run the mean over many operations (the wake-up
//! latency: each run the median of its wake-ups). A loop of one thread is timed by its CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`; seed 001's loops by their processes' `getrusage` times, children
//! included), so that other work on the host does not inflate it (a VM's stolen time still
//! does); the wake-up and the cache-line transfer, which wait on another CPU, by the clock.
//! What each loop times:
//! - `getppid`: the syscall round trip;
//! - `zero_page_read_fault`, `anon_write_fault`, `zero_page_write_fault`: a load, a store, and a
//!   store after a load, one per 4 KiB page of a fresh private anonymous mapping with
//!   `MADV_NOHUGEPAGE` (the fault that maps the zero page, allocates and clears a page, and
//!   replaces the zero page);
//! - `clear_4k`, `copy_4k`: `memset` and `memcpy` of 4 KiB blocks over 64 MiB buffers (cold);
//! - `file_read_fault_around`: a file of 256 MiB in the given directory, written (so cached),
//!   mapped private and read once per 4 KiB: the time per fault, each fault mapping 16 pages
//!   (the default `fault_around_bytes`, 64 KiB);
//! - `mmap_munmap`: one anonymous page mapped and unmapped;
//! - `hugetlb_fault_page`, `hugetlb_fork_cycle`: seed 001's two loops at one instance
//!   ([`loops`]) on a 64 MiB `memfd_create(MFD_HUGETLB)` file;
//! - `wakeup`: a thread sleeping in a futex on an idle CPU, woken from another CPU, until it
//!   runs (`tools/wakeup.c`, the waker sleeping between wake-ups);
//! - `line_transfer`: two threads on two CPUs passing a counter back and forth through one
//!   cache line with compare-and-swap; half the round trip (each run the median of its batches
//!   of 1000 round trips);
//! - `pipe_round_trip`, `pipe_ping_pong_processes`, `pipe_ping_pong_threads`: lmbench's
//!   `lat_ctx` method on CPU 0, two processes or two threads passing a byte over two pipes, and
//!   the same writes and reads within one thread ([`switch`]).
//!
//! What cannot be measured is refused with what to do (a hugetlb pool too small: how to reserve
//! one; a single CPU: no wake-up or transfer between CPUs).

#![allow(unsafe_code)]

pub mod loops;
pub mod switch;

use crate::sys;
use lab::profile_file::Measurement;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// How much to measure.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Runs per figure (the median is kept).
    pub runs: usize,
    /// Operations per run, as a fraction of the full count (1 full, 16 quick).
    pub divisor: u64,
    /// Run seed 001's loops at real-time priority (`SCHED_FIFO` 1, root only), so that other
    /// work on the host does not take their CPUs during the window.
    pub realtime: bool,
}

impl Plan {
    pub const FULL: Plan = Plan { runs: 5, divisor: 1, realtime: false };
    pub const QUICK: Plan = Plan { runs: 3, divisor: 16, realtime: false };

    fn ops(&self, full: u64) -> u64 {
        (full / self.divisor).max(16)
    }
}

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs `once` `plan.runs` times and keeps the median.
fn figure(
    plan: &Plan,
    name: &str,
    what: &str,
    mut once: impl FnMut() -> Result<f64, String>,
) -> Result<Measurement, String> {
    let runs = (0..plan.runs).map(|_| once()).collect::<Result<Vec<f64>, String>>()?;
    let ns = median(&mut runs.clone());
    Ok(Measurement { name: name.into(), ns, runs, what: what.into() })
}

/// A fresh private anonymous mapping of `len` bytes without THPs.
fn anon(len: u64) -> Result<u64, String> {
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u32;
    let at = sys::mmap(0, len, (libc::PROT_READ | libc::PROT_WRITE) as u32, flags, -1, 0)
        .map_err(|e| format!("mmap of {len} bytes: {e:?}"))?;
    let _ = sys::raw(libc::SYS_madvise, [at, len, libc::MADV_NOHUGEPAGE as u64, 0, 0, 0]);
    Ok(at)
}

fn store(addr: u64) {
    // SAFETY: every caller passes an address inside a writable mapping it made.
    unsafe { std::ptr::write_volatile(addr as *mut u8, 1) }
}

fn load(addr: u64) -> u8 {
    // SAFETY: every caller passes an address inside a readable mapping it made.
    unsafe { std::ptr::read_volatile(addr as *const u8) }
}

/// This thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`): what a loop costs, not the time
/// other processes on the host take from it while it runs.
fn cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// ns of this thread's CPU time since `t0` (a [`cpu_ns`] reading), per `n` operations.
fn cpu_per(t0: u64, n: u64) -> f64 {
    cpu_ns().saturating_sub(t0) as f64 / n as f64
}

/// ns per page of `touch` over every 4 KiB page of `[at, at + pages * 4 KiB)`.
fn per_page(at: u64, pages: u64, touch: impl Fn(u64)) -> f64 {
    let t = cpu_ns();
    for i in 0..pages {
        touch(at + i * 4096);
    }
    cpu_per(t, pages)
}

/// One run of the three anonymous faults: (read, write, write after read), ns per page.
fn anon_faults(pages: u64) -> Result<[f64; 3], String> {
    let len = pages * 4096;
    let a = anon(len)?;
    let write = per_page(a, pages, store);
    let _ = sys::munmap(a, len);
    let b = anon(len)?;
    let read = per_page(b, pages, |p| {
        std::hint::black_box(load(p));
    });
    let replace = per_page(b, pages, store);
    let _ = sys::munmap(b, len);
    Ok([read, write, replace])
}

/// The three anonymous-fault figures.
fn anon_figures(plan: &Plan) -> Result<Vec<Measurement>, String> {
    let pages = plan.ops(1 << 16);
    let mut runs = Vec::new();
    for _ in 0..plan.runs {
        runs.push(anon_faults(pages)?);
    }
    let whats = [
        ("zero_page_read_fault", "a load per 4 KiB of a fresh private anonymous mapping"),
        ("anon_write_fault", "a store per 4 KiB of a fresh private anonymous mapping"),
        ("zero_page_write_fault", "a store per 4 KiB of pages that map the zero page"),
    ];
    Ok(whats
        .iter()
        .enumerate()
        .map(|(i, (name, what))| {
            let r: Vec<f64> = runs.iter().map(|x| x[i]).collect();
            let ns = median(&mut r.clone());
            Measurement { name: (*name).into(), ns, runs: r, what: (*what).into() }
        })
        .collect())
}

/// `memset` (or `memcpy` when `copy`) of 4 KiB blocks over 64 MiB, ns per block.
fn block_op(copy: bool) -> f64 {
    const LEN: usize = 64 << 20;
    let mut a = vec![1u8; LEN];
    let b = vec![2u8; LEN];
    let t = cpu_ns();
    for r in 0..4 {
        for (x, y) in a.chunks_exact_mut(4096).zip(b.chunks_exact(4096)) {
            if copy {
                x.copy_from_slice(y);
            } else {
                x.fill(r);
            }
        }
        std::hint::black_box(&mut a);
    }
    cpu_per(t, (4 * LEN / 4096) as u64)
}

/// A cached file read through a private mapping without THPs: (ns per 16 pages, faults per 16
/// pages). The host may map more than 16 pages a fault (a large folio's), so the figure is per
/// 16 pages, the model's fault-around window, and the faults are counted (`getrusage`).
fn file_fault(path: &std::path::Path, pages: u64) -> Result<(f64, f64), String> {
    use std::os::fd::AsRawFd;
    let len = pages * 4096;
    let fd = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let flags = libc::MAP_PRIVATE as u32;
    let at = sys::mmap(0, len, libc::PROT_READ as u32, flags, fd.as_raw_fd(), 0)
        .map_err(|e| format!("mmap of {}: {e:?}", path.display()))?;
    let _ = sys::raw(libc::SYS_madvise, [at, len, libc::MADV_NOHUGEPAGE as u64, 0, 0, 0]);
    let (minflt, _) = sys::faults();
    let ns = per_page(at, pages, |p| {
        std::hint::black_box(load(p));
    });
    let faults = sys::faults().0 - minflt;
    let _ = sys::munmap(at, len);
    Ok((ns * 16.0, faults as f64 * 16.0 / pages as f64))
}

/// The file-fault figure: a file in `dir` written (so cached) first, removed after.
fn file_figure(plan: &Plan, dir: &std::path::Path) -> Result<Measurement, String> {
    let pages = plan.ops(1 << 16);
    let path = dir.join(format!(".mmsim-calibrate-{}", std::process::id()));
    std::fs::write(&path, vec![1u8; (pages * 4096) as usize])
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut faults = Vec::new();
    let m = figure(plan, "file_read_fault_around", "", || {
        let (ns, f) = file_fault(&path, pages)?;
        faults.push(f);
        Ok(ns)
    });
    let _ = std::fs::remove_file(&path);
    let what = format!(
        "a load per 4 KiB of a cached file mapped private with MADV_NOHUGEPAGE: per 16 pages \
         (the host took {:.2} faults per 16 pages)",
        median(&mut faults)
    );
    Ok(Measurement { what, ..m? })
}

/// `getppid` and one page's `mmap`+`munmap`, ns each.
fn syscalls(plan: &Plan) -> Result<Vec<Measurement>, String> {
    let n = plan.ops(1_000_000);
    let getppid = figure(plan, "getppid", "the getppid syscall round trip", || {
        let t = cpu_ns();
        for _ in 0..n {
            std::hint::black_box(sys::raw(libc::SYS_getppid, [0; 6]).ok());
        }
        Ok(cpu_per(t, n))
    })?;
    let m = plan.ops(100_000);
    let what = "mmap of one anonymous page and its munmap";
    let mmap = figure(plan, "mmap_munmap", what, || {
        let t = cpu_ns();
        for _ in 0..m {
            let at = anon(4096)?;
            let _ = sys::munmap(at, 4096);
        }
        Ok(cpu_per(t, m))
    })?;
    Ok(vec![getppid, mmap])
}

/// Keeps the calling thread on `cpu`.
pub(crate) fn pin(cpu: usize) -> Result<(), String> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t and `cpu` is below CPU_SETSIZE (checked by the caller).
    let r = unsafe {
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 { Ok(()) } else { Err(format!("cannot run on CPU {cpu}: {:?}", sys::last_err())) }
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    sys::kernel_release()
}

/// The host's online CPUs (not this thread's affinity, which pinning narrows).
pub fn cpus() -> usize {
    // SAFETY: sysconf reads a system value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// The wake-up latency (`tools/wakeup.c`): one run's median over `samples` wake-ups, ns.
fn wakeup_once(samples: usize) -> Result<f64, String> {
    let word = Arc::new(AtomicU32::new(0));
    let woke_at = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let (w, at) = (word.clone(), woke_at.clone());
    let sleeper = std::thread::spawn(move || -> Result<(), String> {
        let _ = pin(1); // unpinned, it still runs (the figure is then not between two CPUs)
        for _ in 0..samples {
            while w.load(Ordering::Acquire) == 0 {
                sys::futex_wait(&w, 0);
            }
            at.store(start.elapsed().as_nanos() as u64, Ordering::Release);
            w.store(0, Ordering::Release);
        }
        Ok(())
    });
    pin(0)?;
    let mut lat = Vec::with_capacity(samples);
    for _ in 0..samples {
        std::thread::sleep(std::time::Duration::from_micros(500));
        woke_at.store(0, Ordering::Release);
        let t0 = start.elapsed().as_nanos() as u64;
        word.store(1, Ordering::Release);
        sys::futex_wake_all(&word);
        let woke = loop {
            match woke_at.load(Ordering::Acquire) {
                0 => std::hint::spin_loop(),
                t => break t,
            }
        };
        lat.push(woke.saturating_sub(t0) as f64);
    }
    sleeper.join().map_err(|_| "the sleeper thread panicked".to_string())??;
    Ok(median(&mut lat))
}

/// Half the round trip of a counter passed between CPUs 0 and 1 through one cache line, ns: the
/// median over batches of 1000 round trips (a batch in which the host ran something else on
/// either CPU is an outlier the median drops).
fn line_once(rounds: u64) -> Result<f64, String> {
    const BATCH: u64 = 1000;
    let line = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (l, s) = (line.clone(), stop.clone());
    let echo = std::thread::spawn(move || -> Result<(), String> {
        let _ = pin(1); // unpinned, it still runs (the figure is then not between two CPUs)
        let mut expect = 1;
        while !s.load(Ordering::Relaxed) {
            if l.compare_exchange(expect, expect + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                expect += 2;
            }
        }
        Ok(())
    });
    pin(0)?;
    let mut batches = Vec::new();
    for b in 0..rounds.div_ceil(BATCH) {
        let t = Instant::now();
        for r in b * BATCH..(b + 1) * BATCH {
            while line
                .compare_exchange(2 * r, 2 * r + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                std::hint::spin_loop();
            }
        }
        while line.load(Ordering::Acquire) != 2 * (b + 1) * BATCH {
            std::hint::spin_loop();
        }
        batches.push(t.elapsed().as_nanos() as f64 / (2 * BATCH) as f64);
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().map_err(|_| "the echo thread panicked".to_string())??;
    Ok(median(&mut batches))
}

/// The two figures between CPUs; refused on a single CPU. The calling thread is left free to
/// run anywhere afterwards.
fn between_cpus(plan: &Plan) -> Result<Vec<Measurement>, String> {
    if cpus() < 2 {
        return Err(
            "the wake-up latency and the cache-line transfer need 2 CPUs; this host has 1".into()
        );
    }
    let samples = plan.ops(2000) as usize;
    let what = "a futex sleeper on an idle CPU woken from another CPU, until it runs (median)";
    let wakeup = figure(plan, "wakeup", what, || wakeup_once(samples))?;
    let rounds = plan.ops(200_000);
    let what = "a compare-and-swap ping-pong between CPUs 0 and 1: half the round trip";
    let line = figure(plan, "line_transfer", what, || line_once(rounds))?;
    unpin()?;
    Ok(vec![wakeup, line])
}

/// Lets the calling thread run on every CPU again.
fn unpin() -> Result<(), String> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in 0..cpus().min(libc::CPU_SETSIZE as usize) {
        // SAFETY: `c` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 { Ok(()) } else { Err(format!("sched_setaffinity: {:?}", sys::last_err())) }
}

/// Every figure `lab::calibrate` needs, with `progress` told of each group as it starts;
/// `dir` holds the file of the file-fault figure.
pub fn measure(
    plan: &Plan,
    dir: &std::path::Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Measurement>, String> {
    loops::check_pool(lab::calibrate::CALIBRATION.pool_pages())?;
    let mut out = Vec::new();
    progress("syscalls: getppid, mmap+munmap");
    out.extend(syscalls(plan)?);
    progress("anonymous faults: zero-page read, write, write over the zero page");
    out.extend(anon_figures(plan)?);
    progress("clear and copy 4 KiB");
    let what = "memset of 4 KiB blocks over a 64 MiB buffer";
    out.push(figure(plan, "clear_4k", what, || Ok(block_op(false)))?);
    let what = "memcpy of 4 KiB blocks between 64 MiB buffers";
    out.push(figure(plan, "copy_4k", what, || Ok(block_op(true)))?);
    progress("cached file read faults with fault-around");
    out.push(file_figure(plan, dir)?);
    progress("wake-up latency of an idle CPU, cache-line transfer");
    out.extend(between_cpus(plan)?);
    progress("context switches on one CPU: processes and threads over pipes");
    out.extend(switch::figures(plan)?);
    unpin()?;
    progress("seed 001's hugetlb fault and fork loops, one instance, 64 MiB");
    out.extend(loops::calibration_figures(plan)?);
    Ok(out)
}
