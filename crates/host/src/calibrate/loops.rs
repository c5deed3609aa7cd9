//! Seed 001's two programs run natively on this host's hugetlb pool, the twins of
//! `workload::hugetlb_loops` (which the model runs): the fault program maps a shared hugetlb file,
//! writes one byte per 2 MiB page and unmaps it, in a loop; the fork program maps the file,
//! writes a few pages, then forks in a loop, the child exiting at once and the parent waiting.
//!
//! The file is a `memfd_create(MFD_HUGETLB)` file of [`LoopSizes::file`] bytes, shared by every
//! instance (each a process pinned to CPU `i mod CPUs`, as the model places instance `i`); the
//! calling process writes every page once first, so the pages are in the file before the loops
//! start (the model's warm-up pass). Each instance waits for a start flag, then counts what it
//! completes in its window; the figures are per instance, per second of the window and per
//! second of the instance's CPU time ([`Rates`]). The calibration's figures are by CPU time. A fork program's child
//! inherits its parent's CPU, as the model places it.
//!
//! The paths' loops (`lab::calibrate`'s `paths` runs their twins in the model) check the costs
//! the other experiments charge, on [`PATH_LEN`] bytes: usemem's 4 KiB anonymous write faults
//! (`MADV_NOHUGEPAGE`, then `munmap`), anonymous THP write faults (`MADV_HUGEPAGE` over a
//! 2 MiB-aligned range; a VM's host may back a huge page lazily, which the model does not
//! charge), and 4 KiB `pread`s of a file in the calibration's directory, cached by writing it.
//! Each counts the operations completed inside the window and stops a pass at its end.

use super::{Plan, cpus, figure, pin, store};
use crate::sys;
use lab::calibrate::{CALIBRATION, LoopSizes, PATH_LEN, Program};
use lab::profile_file::Measurement;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The 2 MiB pool's free and total pages.
fn pool() -> (u64, u64) {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/kernel/mm/hugepages/hugepages-2048kB/{f}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    };
    (read("free_hugepages"), read("nr_hugepages"))
}

/// Refuses unless the 2 MiB pool has `pages` free pages, saying how to reserve them.
pub fn check_pool(pages: u64) -> Result<(), String> {
    let (free, total) = pool();
    if free >= pages {
        return Ok(());
    }
    Err(format!(
        "seed 001's hugetlb loops need {pages} free 2 MiB huge pages and the pool has {free} free \
         (of {total}): reserve them as root with `echo {} > /proc/sys/vm/nr_hugepages` (and give \
         them back afterwards with `echo {total} > /proc/sys/vm/nr_hugepages`)",
        total + pages - free
    ))
}

/// The page shared with the instances: a start flag and a count per instance.
struct Shared {
    at: u64,
}

impl Shared {
    const MAX: usize = 255;

    fn new() -> Result<Shared, String> {
        let flags = (libc::MAP_SHARED | libc::MAP_ANONYMOUS) as u32;
        let prot = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        let at = sys::mmap(0, 4096, prot, flags, -1, 0).map_err(|e| format!("mmap: {e:?}"))?;
        Ok(Shared { at })
    }

    fn go(&self) -> &AtomicU32 {
        // SAFETY: the page is mapped, zeroed, aligned and lives as long as `self`.
        unsafe { &*(self.at as *const AtomicU32) }
    }

    /// Instance `i`'s count (`what` 0) or CPU time in ns (`what` 1).
    fn slot(&self, i: usize, what: u64) -> &AtomicU64 {
        assert!(i < Self::MAX, "at most {} instances", Self::MAX);
        // SAFETY: as `go`; slot `2i + what` lies inside the page, 8-byte aligned, after the flag.
        unsafe { &*((self.at + 8 + 8 * (2 * i as u64 + what)) as *const AtomicU64) }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = sys::munmap(self.at, 4096);
    }
}

/// Maps `len` bytes of `fd` shared and writes the first byte of each of its first `pages`
/// huge pages; returns the address.
fn map_and_write(fd: i32, len: u64, pages: u64) -> Option<u64> {
    let prot = (libc::PROT_READ | libc::PROT_WRITE) as u32;
    let at = sys::mmap(0, len, prot, libc::MAP_SHARED as u32, fd, 0).ok()?;
    for p in 0..pages {
        store(at + p * HUGE);
    }
    Some(at)
}

const HUGE: u64 = 2 << 20;

/// One instance's loop until `window` has passed since the start flag: what it completed, or
/// `u64::MAX` when a system call failed. Runs in a forked child: no allocation.
fn instance(program: Program, fd: i32, sizes: &LoopSizes, window: Duration) -> u64 {
    let start = Instant::now();
    let mut done = 0;
    match program {
        Program::Usemem | Program::ThpFaults | Program::PageCache => {
            return path_instance(program, fd, start, window);
        }
        Program::Faults => {
            let pages = sizes.len / HUGE;
            while start.elapsed() < window {
                let Some(at) = map_and_write(fd, sizes.len, pages) else { return u64::MAX };
                let _ = sys::munmap(at, sizes.len);
                done += pages;
            }
        }
        Program::Forks => {
            if map_and_write(fd, sizes.fork_len, sizes.touched).is_none() {
                return u64::MAX;
            }
            while start.elapsed() < window {
                match sys::fork() {
                    Ok(0) => sys::exit_now(0),
                    Ok(child) => sys::wait_for(child),
                    Err(_) => return u64::MAX,
                }
                done += 1;
            }
        }
    }
    done
}

/// One instance of a path's loop (`lab::calibrate`'s `paths` is the model's twin): the
/// operations completed before `window` passed since `start`, or `u64::MAX` when a system call
/// failed. A pass stops at the window's end.
fn path_instance(program: Program, fd: i32, start: Instant, window: Duration) -> u64 {
    let open = || start.elapsed() < window;
    let mut done = 0;
    let mut buf = [0u8; 4096];
    let mut pos = 0;
    while open() {
        if program == Program::PageCache {
            let at = buf.as_mut_ptr() as u64;
            if sys::read_to(fd, at, 4096, Some(pos)).is_err() {
                return u64::MAX;
            }
            pos = (pos + 4096) % PATH_LEN;
            done += 1;
            continue;
        }
        let (len, step, advice) = match program {
            Program::ThpFaults => (PATH_LEN + HUGE, HUGE, libc::MADV_HUGEPAGE),
            _ => (PATH_LEN, 4096, libc::MADV_NOHUGEPAGE),
        };
        let prot = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u32;
        let Ok(at) = sys::mmap(0, len, prot, flags, -1, 0) else { return u64::MAX };
        let base = if step == HUGE { at.next_multiple_of(HUGE) } else { at };
        let _ = sys::raw(libc::SYS_madvise, [base, PATH_LEN, advice as u64, 0, 0, 0]);
        let mut off = 0;
        while off < PATH_LEN && open() {
            store(base + off);
            done += 1;
            off += step;
        }
        let _ = sys::munmap(at, len);
    }
    done
}

/// Starts `instances` processes running `program`, each pinned to its CPU and waiting for the
/// start flag; returns their pids.
fn spawn(
    shared: &Shared,
    program: Program,
    instances: u32,
    fd: i32,
    sizes: &LoopSizes,
    plan: &Plan,
) -> Result<Vec<i32>, String> {
    let window = window(plan);
    let mut pids = Vec::new();
    for i in 0..instances as usize {
        match sys::fork().map_err(|e| format!("fork: {e:?}"))? {
            0 => {
                let _ = pin(i % cpus());
                if plan.realtime {
                    realtime();
                }
                while shared.go().load(Ordering::Acquire) == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
                let done = instance(program, fd, sizes, window);
                shared.slot(i, 1).store(process_cpu_ns(), Ordering::Release);
                shared.slot(i, 0).store(done, Ordering::Release);
                sys::exit_now(0);
            }
            pid => pids.push(pid),
        }
    }
    Ok(pids)
}

/// This process's CPU time and its reaped children's, ns (`getrusage`).
fn process_cpu_ns() -> u64 {
    let ns = |who| {
        // SAFETY: an all-zero rusage is valid, and the kernel fills it.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `r` is a valid out-parameter.
        unsafe { libc::getrusage(who, &mut r) };
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        (us(r.ru_utime) + us(r.ru_stime)) * 1000
    };
    ns(libc::RUSAGE_SELF) + ns(libc::RUSAGE_CHILDREN)
}

/// A loop's figures per instance: by the clock (what the seed's programs report) and by the
/// instances' CPU time (what other work on the host does not inflate).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// Completions per second of the window.
    pub wall: f64,
    /// Completions per second of the instance's CPU time (children included).
    pub cpu: f64,
}

/// Makes this process `SCHED_FIFO` at priority 1 (its forks inherit it); a failure is seen
/// before any instance starts ([`check_realtime`]).
fn realtime() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}

/// Refuses a real-time plan where this process may not take `SCHED_FIFO` (not root).
pub fn check_realtime(plan: &Plan) -> Result<(), String> {
    if !plan.realtime || sys::geteuid() == 0 {
        return Ok(());
    }
    Err("--realtime runs seed 001's loops at SCHED_FIFO, which needs root".into())
}

/// `program` at `instances` instances for `plan`'s window, per instance; `dir` holds the
/// page-cache loop's file.
pub fn rate(
    program: Program,
    instances: u32,
    sizes: &LoopSizes,
    plan: &Plan,
    dir: &Path,
) -> Result<Rates, String> {
    if instances == 0 || instances as usize > Shared::MAX {
        return Err(format!("{instances} instances: expected 1 to {}", Shared::MAX));
    }
    let file = dir.join(format!(".mmsim-calibrate-reads-{}", std::process::id()));
    let fd = match program {
        Program::Faults | Program::Forks => hugetlb_file(sizes)?,
        Program::Usemem | Program::ThpFaults => -1,
        Program::PageCache => cached_file(&file)?,
    };
    let result = run_instances(program, instances, fd, sizes, plan);
    if fd >= 0 {
        let _ = sys::close(fd);
    }
    if program == Program::PageCache {
        let _ = std::fs::remove_file(&file);
    }
    result
}

/// The hugetlb file of seed 001's loops, every page written once (the model's warm-up pass).
fn hugetlb_file(sizes: &LoopSizes) -> Result<i32, String> {
    check_pool(sizes.pool_pages())?;
    let fd = sys::memfd_create("mmsim-calibrate", libc::MFD_HUGETLB)
        .map_err(|e| format!("memfd_create(MFD_HUGETLB): {e:?}"))?;
    let filled = sys::raw(libc::SYS_ftruncate, [fd as u64, sizes.file, 0, 0, 0, 0])
        .map_err(|e| format!("ftruncate of the hugetlb file: {e:?}"))
        .and_then(|_| {
            map_and_write(fd, sizes.file, sizes.file / HUGE)
                .ok_or_else(|| "the warm-up pass over the hugetlb file failed".to_string())
        });
    match filled {
        Ok(at) => {
            let _ = sys::munmap(at, sizes.file);
            Ok(fd)
        }
        Err(e) => {
            let _ = sys::close(fd);
            Err(e)
        }
    }
}

/// The page-cache loop's file at `path`: [`PATH_LEN`] bytes written (so cached), open to read.
fn cached_file(path: &Path) -> Result<i32, String> {
    std::fs::write(path, vec![1u8; PATH_LEN as usize])
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let name = path.to_string_lossy();
    sys::open(&name, libc::O_RDONLY, 0).map_err(|e| format!("{name}: {e:?}"))
}

/// Starts the instances on `fd`, lets them run the window and gathers their figures.
fn run_instances(
    program: Program,
    instances: u32,
    fd: i32,
    sizes: &LoopSizes,
    plan: &Plan,
) -> Result<Rates, String> {
    let window = window(plan);
    let shared = Shared::new()?;
    let pids = spawn(&shared, program, instances, fd, sizes, plan)?;
    std::thread::sleep(Duration::from_millis(20));
    shared.go().store(1, Ordering::Release);
    for pid in &pids {
        sys::wait_for(*pid);
    }
    let slots = |what| -> Vec<u64> {
        (0..pids.len()).map(|i| shared.slot(i, what).load(Ordering::Acquire)).collect()
    };
    let (counts, cpu) = (slots(0), slots(1));
    if counts.contains(&u64::MAX) {
        return Err(format!("an instance of the {program:?} loop failed a system call"));
    }
    let total = counts.iter().sum::<u64>() as f64;
    Ok(Rates {
        wall: total / counts.len().max(1) as f64 / window.as_secs_f64(),
        cpu: total / (cpu.iter().sum::<u64>().max(1) as f64 / 1e9),
    })
}

/// The window of one native loop run.
pub fn window(plan: &Plan) -> Duration {
    Duration::from_millis(1000 / plan.divisor.min(10))
}

/// The two loops at one instance on [`CALIBRATION`]: ns per page written, ns per fork cycle.
pub fn calibration_figures(plan: &Plan) -> Result<Vec<Measurement>, String> {
    let sizes = &CALIBRATION;
    let what = "seed 001's fault loop, one instance: map a 64 MiB shared hugetlb file, write its \
                32 pages, unmap; per page";
    let faults = figure(plan, "hugetlb_fault_page", what, || {
        Ok(1e9 / rate(Program::Faults, 1, sizes, plan, Path::new("."))?.cpu.max(1e-9))
    })?;
    let what = "seed 001's fork loop, one instance: fork, child _exit, waitpid, with a 64 MiB \
                shared hugetlb mapping (4 pages written); per cycle";
    let forks = figure(plan, "hugetlb_fork_cycle", what, || {
        Ok(1e9 / rate(Program::Forks, 1, sizes, plan, Path::new("."))?.cpu.max(1e-9))
    })?;
    Ok(vec![faults, forks])
}
