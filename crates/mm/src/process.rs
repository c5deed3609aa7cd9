//! Processes: a pid, an address space, a file-descriptor table (`kernel/fork.c`, `fs/file.c`).
//!
//! Threads of a process are engine tasks that share its mm; the scenario or API decides what each
//! runs. Approximations: no signals beyond reporting them, no credentials, one thread group per
//! process.

use crate::fs::FileId;
use crate::mm_struct::MmId;
use std::collections::BTreeMap;

simcore::define_id!(
    /// A process id (the simulated kernel's pids start at 1 for the first process created).
    pub struct Pid;
);

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

    /// The lowest free descriptor (`get_unused_fd_flags`).
    pub fn next_fd(&self) -> i32 {
        (0..).find(|fd| !self.fds.contains_key(fd)).expect("a free descriptor")
    }
}
