//! Linux memory management as executable models.
//!
//! State (folios, page tables, VMAs, the page cache, LRU lists) is kept apart from mechanisms
//! (faults, fork, truncate, mmap): one module per kernel concern, each naming the kernel file and
//! version it models and what it leaves out. Mechanisms are `async` functions that take the
//! kernel's locks in the kernel's order (engine locks, checked by the simulated lockdep against
//! the `mm/rmap.c` order) and charge the machine profile's costs. Observables print in the
//! kernel's own formats; whole-system checkers verify the state.
//!
//! Architecture invariant: `mm` names no workload, experiment or scheduler; it does no IO.
//!
//! Entry point: [`Machine`] (create files and processes, start threads, run, observe);
//! threads act through [`Thread`], whose methods mirror the syscalls.

pub mod arch;
mod brk;
mod cow;
mod delayacct;
pub mod era;
pub mod errno;
pub mod fadvise;
pub mod fault;
pub mod filemap;
pub mod folio;
mod fork;
pub mod fs;
pub mod gup;
pub mod huge_memory;
pub mod hugetlb;
pub mod inspect;
pub mod io_uring;
pub mod kernel;
pub mod khugepaged;
pub mod ksm;
pub mod lru;
mod lru_pure;
mod madvise;
pub mod memcontrol;
pub mod memfd;
pub mod memory;
pub mod mglru;
pub mod mincore;
pub mod mlock;
pub mod mm_struct;
pub mod mmap;
pub mod mremap;
mod mseal;
pub mod msync;
pub mod page_alloc;
mod page_io;
pub mod pgtable;
pub mod process;
mod remap_file_pages;
pub mod rmap;
pub mod shm;
pub mod shmem;
pub mod sim;
pub mod swap;
pub mod syscall;
mod truncate;
pub mod types;
pub mod userfaultfd;
pub mod vm_ops;
pub mod vma;
pub mod vmscan;
pub mod vmstat;
pub mod workingset;
pub mod xarray;
mod zap;

pub use era::{KernelVersion, Switches};
pub use errno::{Errno, Signal, SysError};
pub use fs::binfmt_elf::{ElfExec, ElfObject, LoadSegment, pf};
pub use fs::exec::{ExecImage, ExecLayout};
pub use kernel::Tunables;
pub use mmap::{MmapArgs, madv, map, prot};
pub use mremap::{MremapArgs, mremap_flags};
pub use pgtable::Access;
pub use sim::machine::{FileSpec, Machine, MachineConfig, spawn_user_thread};
pub use sim::profile::Profile;
pub use syscall::{OpenFlags, Thread};
pub use types::ids::Pid;
