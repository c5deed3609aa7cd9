//! Processes: a pid, an address space, a file-descriptor table (`kernel/fork.c`, `fs/file.c`).
//!
//! Threads of a process are engine tasks that share its mm; the scenario or API decides what each
//! runs. A descriptor is the lowest free one (`fs/file.c` `alloc_fd`), under the soft
//! `RLIMIT_NOFILE` every process starts with: 1024 (`INR_OPEN_CUR`, include/uapi/linux/fs.h, as
//! `INIT_RLIMITS` in include/asm-generic/resource.h sets it, in every era mmsim models); past it
//! `open`, `dup`, `pipe` and `memfd_create` fail with EMFILE. Approximations: no signals beyond
//! reporting them, no credentials, one thread group per process, no `setrlimit`.

use crate::errno::Errno;
use crate::types::ids::FileId;
use crate::types::ids::MmId;
use crate::types::ids::Pid;
use std::collections::BTreeMap;

/// `RLIMIT_NOFILE`'s soft limit at boot (`INR_OPEN_CUR`): descriptors are below it.
pub const RLIMIT_NOFILE: i32 = 1024;

/// What became of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcState {
    Running,
    /// Exited: its mm is gone, its files closed.
    Exited,
}

#[derive(Debug)]
pub struct Process {
    pub name: String,
    pub parent: Option<Pid>,
    pub mm: Option<MmId>,
    pub fds: BTreeMap<i32, FileId>,
    pub state: ProcState,
    /// `min_flt` and `maj_flt`, summed over the process's threads as `/proc/PID/stat` shows
    /// them (`fault.rs` `mm_account_fault`).
    pub min_flt: u64,
    pub maj_flt: u64,
    /// The signals its threads' user accesses raised (SIGSEGV, SIGBUS, SIGKILL for OOM), by
    /// signal: what a test's handler counts (`syscall.rs` `Thread::deliver`).
    pub signals: BTreeMap<crate::errno::Signal, u64>,
}

impl Process {
    /// A running process named `name` with no parent, address space or files yet.
    pub fn new(name: String, parent: Option<Pid>) -> Process {
        Process {
            name,
            parent,
            mm: None,
            fds: BTreeMap::new(),
            state: ProcState::Running,
            min_flt: 0,
            maj_flt: 0,
            signals: BTreeMap::new(),
        }
    }

    /// The `N` lowest free descriptors (`get_unused_fd_flags`, called `N` times before any is
    /// installed), or EMFILE when they do not all fit under `RLIMIT_NOFILE`.
    pub fn unused_fds<const N: usize>(&self) -> Result<[i32; N], Errno> {
        let mut found = [0; N];
        let mut used = self.fds.keys().copied().peekable();
        let mut fd = 0;
        for slot in &mut found {
            while used.next_if_eq(&fd).is_some() {
                fd += 1;
            }
            if fd >= RLIMIT_NOFILE {
                return Err(Errno::EMFILE);
            }
            *slot = fd;
            fd += 1;
        }
        Ok(found)
    }

    /// The lowest free descriptor, or EMFILE.
    pub fn unused_fd(&self) -> Result<i32, Errno> {
        self.unused_fds::<1>().map(|[fd]| fd)
    }
}
