//! The model's side of `mmsim calibrate`'s checks of the paths the other experiments charge
//! besides hugetlb's: anonymous 4 KiB write faults (usemem's and pmbench's first touch, without
//! swap), anonymous THP faults, and reads from the page cache of a disk file (the DAX-less
//! path). Each loop is the twin of `host::calibrate::loops`'s native one, on [`PATH_LEN`] bytes:
//!
//! - [`Program::Usemem`]: map `PATH_LEN` anonymous private (`MADV_NOHUGEPAGE`), store to each
//!   4 KiB page, unmap; one operation per page;
//! - [`Program::ThpFaults`]: map `PATH_LEN` + 2 MiB, advise `MADV_HUGEPAGE` over the 2 MiB-aligned
//!   `PATH_LEN` inside, store to each 2 MiB page, unmap; one operation per huge page (the model's
//!   THP `enabled` is `madvise`, which an advised VMA takes as `always` does);
//! - [`Program::PageCache`]: `pread` 4 KiB at a time through a file of `PATH_LEN` that a first
//!   pass brought into the page cache (natively, writing it did), wrapping at its end; one
//!   operation per read.
//!
//! An operation counts when it completes inside the window, after 5 ms of the loop (the host's
//! instances likewise count inside theirs). Instance `i` is a process on CPU `i mod cpus`.

use super::Program;
use mm::types::huge_mm::ThpEnabled;
use mm::{Access, FileSpec, KernelVersion, MachineConfig, OpenFlags, Profile, madv, prot};
use simcore::{Bytes, SimDuration, SimTime, VirtAddr};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Bytes each loop maps or reads through per pass (a pass lasts milliseconds natively, so the
/// window's end cuts few of them).
pub const PATH_LEN: u64 = 64 << 20;
const FILE: &str = "/calibrate/pages";
const HUGE: u64 = 2 << 20;

/// The model's figure of `program` (one of the paths) at `instances` instances on `profile`
/// under `kernel`: operations per instance per second of `window`.
pub(super) fn model_rate(
    profile: &Profile,
    kernel: KernelVersion,
    program: Program,
    instances: u32,
    window: SimDuration,
) -> Result<f64, String> {
    let mut config = MachineConfig::new(profile.clone(), kernel);
    config.tunables.thp.enabled = ThpEnabled::Madvise;
    let mut m = mm::Machine::new(config)?;
    let file = FileSpec { pattern: Some(1), ..FileSpec::zeros(Bytes(PATH_LEN)) };
    m.create_file(FILE, &file).map_err(|e| format!("{FILE}: {e:?}"))?;
    let failure: Rc<RefCell<Option<String>>> = Rc::default();
    if program == Program::PageCache {
        // The native file was just written, so it is cached: read it once before the loop.
        let pid = m.new_process("warm").map_err(err)?;
        let f = failure.clone();
        m.spawn_thread(pid, 0, "warm", move |t| async move {
            if let Err(e) = read_through(&t).await {
                *f.borrow_mut() = Some(e);
            }
        })?;
        m.run().map_err(|e| e.to_string())?;
    }
    let start = m.handle().now() + SimDuration::from_ms(5);
    let span = (start, start + window);
    let done = Rc::new(Cell::new(0u64));
    for i in 0..instances {
        let pid = m.new_process(program.name()).map_err(err)?;
        let (done, f) = (done.clone(), failure.clone());
        m.spawn_thread(pid, i % profile.cpus, program.name(), move |t| async move {
            let counted = match program {
                Program::Usemem => usemem(&t, span).await,
                Program::ThpFaults => thp_faults(&t, span).await,
                Program::PageCache => page_cache(&t, span).await,
                Program::Faults | Program::Forks => Err("seed 001's loops run elsewhere".into()),
            };
            match counted {
                Ok(n) => done.set(done.get() + n),
                Err(e) => *f.borrow_mut() = Some(e),
            }
        })?;
    }
    m.run().map_err(|e| e.to_string())?;
    if let Some(e) = failure.take() {
        return Err(format!("the model's {} loop: {e}", program.name()));
    }
    let per_second = done.get() as f64 / f64::from(instances) / window.as_ns() as f64 * 1e9;
    if per_second == 0.0 {
        return Err(format!("the model's {} loop completed nothing in its window", program.name()));
    }
    Ok(per_second)
}

/// The window `(start, end)`: whether `t` lies in it.
fn inside((start, end): (SimTime, SimTime), t: SimTime) -> bool {
    start <= t && t < end
}

/// Stores to every `step`-th byte of `len` bytes at `at`, one access at a time: the stores that
/// completed inside `span`.
async fn store_each(
    t: &mm::Thread,
    at: VirtAddr,
    len: u64,
    step: u64,
    span: (SimTime, SimTime),
) -> Result<u64, String> {
    let mut counted = 0;
    for off in (0..len).step_by(step as usize) {
        t.access_all(&[(at + Bytes(off), Access::Write)])
            .await
            .map_err(|s| format!("store: {s:?}"))?;
        counted += u64::from(inside(span, t.now()));
    }
    Ok(counted)
}

async fn usemem(t: &mm::Thread, span: (SimTime, SimTime)) -> Result<u64, String> {
    let mut counted = 0;
    while t.now() < span.1 {
        let at = t.mmap_anon(Bytes(PATH_LEN), prot::READ | prot::WRITE).await.map_err(err)?;
        t.madvise(at, Bytes(PATH_LEN), madv::NOHUGEPAGE).await.map_err(err)?;
        counted += store_each(t, at, PATH_LEN, 4096, span).await?;
        t.munmap(at, Bytes(PATH_LEN)).await.map_err(err)?;
    }
    Ok(counted)
}

async fn thp_faults(t: &mm::Thread, span: (SimTime, SimTime)) -> Result<u64, String> {
    let mut counted = 0;
    let len = PATH_LEN + HUGE;
    while t.now() < span.1 {
        let at = t.mmap_anon(Bytes(len), prot::READ | prot::WRITE).await.map_err(err)?;
        let aligned = VirtAddr(at.0.next_multiple_of(HUGE));
        t.madvise(aligned, Bytes(PATH_LEN), madv::HUGEPAGE).await.map_err(err)?;
        counted += store_each(t, aligned, PATH_LEN, HUGE, span).await?;
        t.munmap(at, Bytes(len)).await.map_err(err)?;
    }
    Ok(counted)
}

/// Reads the file 4 KiB at a time until `span` ends, wrapping at its end.
async fn page_cache(t: &mm::Thread, span: (SimTime, SimTime)) -> Result<u64, String> {
    let fd = t.open(FILE, OpenFlags::RDONLY).await.map_err(err)?;
    let (mut counted, mut pos) = (0, 0);
    while t.now() < span.1 {
        t.pread(fd, None, 4096, pos).await.map_err(|e| format!("{e:?}"))?;
        counted += u64::from(inside(span, t.now()));
        pos = (pos + 4096) % PATH_LEN;
    }
    Ok(counted)
}

/// Reads the whole file once, 4 KiB at a time.
async fn read_through(t: &mm::Thread) -> Result<(), String> {
    let fd = t.open(FILE, OpenFlags::RDONLY).await.map_err(err)?;
    for pos in (0..PATH_LEN).step_by(4096) {
        t.pread(fd, None, 4096, pos).await.map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

fn err(e: mm::Errno) -> String {
    format!("{e:?}")
}
