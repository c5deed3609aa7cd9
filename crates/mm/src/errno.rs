//! Kernel-meaning errors: syscall errnos, the signals a memory access can raise, and the
//! `VM_FAULT_*` outcomes of a fault handler (`include/uapi/asm-generic/errno-base.h`,
//! `include/linux/mm_types.h` `enum vm_fault_reason`, Linux v6.8).
//!
//! A user mistake (a bad address, an unaligned length, a write to a read-only mapping) is one of
//! these values, never a panic.

use std::fmt;

/// A syscall error number, with Linux's x86-64 values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Errno {
    EPERM = 1,
    ENOENT = 2,
    EINTR = 4,
    EIO = 5,
    EBADF = 9,
    ECHILD = 10,
    EAGAIN = 11,
    ENOMEM = 12,
    EACCES = 13,
    EFAULT = 14,
    EBUSY = 16,
    EEXIST = 17,
    ENODEV = 19,
    EISDIR = 21,
    EINVAL = 22,
    ENFILE = 23,
    EMFILE = 24,
    ENOTTY = 25,
    ETXTBSY = 26,
    EFBIG = 27,
    ENOSPC = 28,
    ESPIPE = 29,
    EROFS = 30,
    ERANGE = 34,
    ENOSYS = 38,
    EOVERFLOW = 75,
    EOPNOTSUPP = 95,
}

impl Errno {
    pub const ALL: [Errno; 27] = [
        Errno::EPERM,
        Errno::ENOENT,
        Errno::EINTR,
        Errno::EIO,
        Errno::EBADF,
        Errno::ECHILD,
        Errno::EAGAIN,
        Errno::ENOMEM,
        Errno::EACCES,
        Errno::EFAULT,
        Errno::EBUSY,
        Errno::EEXIST,
        Errno::ENODEV,
        Errno::EISDIR,
        Errno::EINVAL,
        Errno::ENFILE,
        Errno::EMFILE,
        Errno::ENOTTY,
        Errno::ETXTBSY,
        Errno::EFBIG,
        Errno::ENOSPC,
        Errno::ESPIPE,
        Errno::EROFS,
        Errno::ERANGE,
        Errno::ENOSYS,
        Errno::EOVERFLOW,
        Errno::EOPNOTSUPP,
    ];

    pub fn code(self) -> i32 {
        self as i32
    }

    /// The errno called `name` (`"EINVAL"`).
    pub fn from_name(name: &str) -> Option<Errno> {
        Errno::ALL.into_iter().find(|e| e.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::EINTR => "EINTR",
            Errno::EIO => "EIO",
            Errno::EBADF => "EBADF",
            Errno::ECHILD => "ECHILD",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EFAULT => "EFAULT",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::ENODEV => "ENODEV",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::ENFILE => "ENFILE",
            Errno::EMFILE => "EMFILE",
            Errno::ENOTTY => "ENOTTY",
            Errno::ETXTBSY => "ETXTBSY",
            Errno::EFBIG => "EFBIG",
            Errno::ENOSPC => "ENOSPC",
            Errno::ESPIPE => "ESPIPE",
            Errno::EROFS => "EROFS",
            Errno::ERANGE => "ERANGE",
            Errno::ENOSYS => "ENOSYS",
            Errno::EOVERFLOW => "EOVERFLOW",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Errno {}

/// A signal delivered to a task by a memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// No mapping, or a mapping without the access right.
    SIGSEGV,
    /// A file mapping beyond end of file, or a page that cannot be provided.
    SIGBUS,
    /// Killed by the OOM killer: no memory could be found for a fault.
    SIGKILL,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::SIGSEGV => "SIGSEGV",
            Signal::SIGBUS => "SIGBUS",
            Signal::SIGKILL => "SIGKILL",
        }
    }

    pub fn from_name(name: &str) -> Option<Signal> {
        [Signal::SIGSEGV, Signal::SIGBUS, Signal::SIGKILL].into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Signal {}

/// Why a fault could not be resolved (`VM_FAULT_SIGSEGV`, `VM_FAULT_SIGBUS`, `VM_FAULT_OOM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmFault {
    SigSegv,
    SigBus,
    Oom,
}

impl VmFault {
    /// The signal the access raises (`mm_fault_error` on x86).
    pub fn signal(self) -> Signal {
        match self {
            VmFault::SigSegv => Signal::SIGSEGV,
            VmFault::SigBus => Signal::SIGBUS,
            VmFault::Oom => Signal::SIGKILL,
        }
    }
}

/// The error of a syscall that also touches user memory (`read` into a buffer): an errno, or
/// a signal raised by the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysError {
    Errno(Errno),
    Signal(Signal),
}

impl From<Errno> for SysError {
    fn from(e: Errno) -> SysError {
        SysError::Errno(e)
    }
}

impl From<Signal> for SysError {
    fn from(s: Signal) -> SysError {
        SysError::Signal(s)
    }
}

impl fmt::Display for SysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SysError::Errno(e) => write!(f, "{e}"),
            SysError::Signal(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for SysError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Errno::ALL {
            assert_eq!(Errno::from_name(e.name()), Some(e));
        }
        assert_eq!(Errno::EINVAL.code(), 22);
        assert_eq!(Signal::from_name("SIGBUS"), Some(Signal::SIGBUS));
        assert_eq!(VmFault::Oom.signal(), Signal::SIGKILL);
    }
}
