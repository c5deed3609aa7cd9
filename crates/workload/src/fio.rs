//! fio's `mmap` I/O engine running a sequential read job (fio, `engines/mmap.c`): the job of the
//! DAX zero-page change (`002_4690f8d13344d2c2.txt`: `size=1G`, `rw=read`, `ioengine=mmap`,
//! `fallocate=none`, fio's default `bs=4k`).
//!
//! The job opens the file, maps all of it shared (`fio_mmapio_prep`), advises sequential access
//! (fio's default `fadvise_hint`: `MADV_SEQUENTIAL` for a sequential job) and reads it one block
//! after the other, each I/O a copy out of the mapping, so the first touch of every page faults.
//! The latency of every I/O is recorded.
//!
//! Approximations: fio maps a read-only job `PROT_READ`; the mapping is made `PROT_READ |
//! PROT_WRITE` here because the smaps the change quotes show `rw-s` (it makes no difference to a
//! read); the copy is one load per page, with no cost per byte; one job of one thread.

use mm::{Access, Machine, MmapArgs, OpenFlags, Pid, madv, map, prot};
use simcore::{Bytes, Histogram, VirtAddr};
use std::cell::{Ref, RefCell};
use std::rc::Rc;

/// The job.
#[derive(Clone, Debug)]
pub struct Config {
    pub path: String,
    pub size: Bytes,
    /// Bytes per I/O (`bs`).
    pub block: Bytes,
    /// Where to ask for the mapping (an `mmap` hint); the kernel chooses when `None`.
    pub map_at: Option<VirtAddr>,
    pub cpu: u32,
}

/// What the job measured.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Latency of each I/O, in ns.
    pub latency_ns: Histogram,
    /// Bytes read so far.
    pub bytes: u64,
    /// Where the file is mapped.
    pub mapped_at: Option<VirtAddr>,
    /// Why the job stopped early, if it did.
    pub error: Option<String>,
}

/// A fio job on a machine, in its own process.
#[derive(Debug)]
pub struct MmapRead {
    config: Config,
    pid: Pid,
    stats: Rc<RefCell<Stats>>,
}

impl MmapRead {
    /// Creates the job's process.
    pub fn new(machine: &mut Machine, config: Config) -> Result<MmapRead, String> {
        if config.block < Bytes::PAGE || !config.block.is_page_aligned() {
            return Err(format!("fio: bs={} is not a multiple of 4 KiB", config.block));
        }
        let pid = machine.new_process("fio").map_err(|e| e.to_string())?;
        Ok(MmapRead { config, pid, stats: Rc::default() })
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Starts the job's thread.
    pub fn spawn(&self, machine: &mut Machine) -> Result<(), String> {
        let (c, stats) = (self.config.clone(), self.stats.clone());
        machine.spawn_thread(self.pid, c.cpu, "fio", move |t| async move {
            let fail = |e: String| stats.borrow_mut().error = Some(e);
            let fd = match t.open(&c.path, OpenFlags::RDWR).await {
                Ok(fd) => fd,
                Err(e) => return fail(format!("open {}: {e}", c.path)),
            };
            let args = MmapArgs {
                addr: c.map_at,
                len: c.size,
                prot: prot::READ | prot::WRITE,
                flags: map::SHARED,
                fd: Some(fd),
                offset: 0,
            };
            let at = match t.mmap(args).await {
                Ok(a) => a,
                Err(e) => return fail(format!("mmap: {e}")),
            };
            stats.borrow_mut().mapped_at = Some(at);
            if let Err(e) = t.madvise(at, c.size, madv::SEQUENTIAL).await {
                return fail(format!("madvise: {e}"));
            }
            let mut off = 0;
            while off < c.size.as_u64() {
                let start = t.now();
                if let Err(s) = t.touch(at + Bytes(off), c.block, Access::Read).await {
                    return fail(format!("read at offset {off}: {s}"));
                }
                let mut st = stats.borrow_mut();
                st.latency_ns.record(t.now().since(start).as_ns());
                st.bytes += c.block.as_u64();
                off += c.block.as_u64();
            }
        })?;
        Ok(())
    }

    pub fn stats(&self) -> Ref<'_, Stats> {
        self.stats.borrow()
    }
}
