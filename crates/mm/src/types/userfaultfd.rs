//! userfaultfd's state (`struct userfaultfd_ctx` and `struct userfaultfd_wait_queue` of
//! fs/userfaultfd.c, `include/linux/userfaultfd_k.h`, `include/uapi/linux/userfaultfd.h`). The
//! code is in `userfaultfd.rs` and `userfaultfd/`.

use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use engine::WaitQueue;
use simcore::VirtAddr;
use std::collections::BTreeMap;

/// `UFFD_API`, the only API version (`include/uapi/linux/userfaultfd.h`).
pub const UFFD_API: u64 = 0xaa;

/// `uffdio_api.features` bits (`include/uapi/linux/userfaultfd.h`).
pub mod feature {
    pub const PAGEFAULT_FLAG_WP: u64 = 1 << 0;
    pub const EVENT_FORK: u64 = 1 << 1;
    pub const EVENT_REMAP: u64 = 1 << 2;
    pub const EVENT_REMOVE: u64 = 1 << 3;
    pub const MISSING_HUGETLBFS: u64 = 1 << 4;
    pub const MISSING_SHMEM: u64 = 1 << 5;
    pub const EVENT_UNMAP: u64 = 1 << 6;
    pub const SIGBUS: u64 = 1 << 7;
    pub const THREAD_ID: u64 = 1 << 8;
    pub const MINOR_HUGETLBFS: u64 = 1 << 9;
    pub const MINOR_SHMEM: u64 = 1 << 10;
    pub const EXACT_ADDRESS: u64 = 1 << 11;
    pub const WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
    pub const WP_UNPOPULATED: u64 = 1 << 13;
    pub const POISON: u64 = 1 << 14;
    pub const WP_ASYNC: u64 = 1 << 15;
    pub const MOVE: u64 = 1 << 16;
}

/// `UFFDIO_REGISTER_MODE_*`.
pub mod register_mode {
    pub const MISSING: u64 = 1 << 0;
    pub const WP: u64 = 1 << 1;
    pub const MINOR: u64 = 1 << 2;
}

/// `uffd_msg.arg.pagefault.flags`: `UFFD_PAGEFAULT_FLAG_WRITE`.
pub const PAGEFAULT_FLAG_WRITE: u64 = 1 << 0;

/// `uffd_msg.arg.pagefault.flags`: `UFFD_PAGEFAULT_FLAG_WP` (v5.7), a write to a page the
/// handler write-protected.
pub const PAGEFAULT_FLAG_WP: u64 = 1 << 1;

/// `uffd_msg.arg.pagefault.flags`: `UFFD_PAGEFAULT_FLAG_MINOR` (v5.13), a minor fault.
pub const PAGEFAULT_FLAG_MINOR: u64 = 1 << 2;

/// Why a fault goes to the userfaultfd (`handle_userfault`'s `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UffdReason {
    /// `VM_UFFD_MISSING`: no page there.
    Missing,
    /// `VM_UFFD_MINOR`: the page is in the page cache, not mapped here.
    Minor,
    /// `VM_UFFD_WP`: a write to a page whose PTE carries the uffd-wp bit (v5.7).
    Wp,
}

/// `uffdio_copy.mode` and `uffdio_zeropage.mode` bits: `UFFDIO_COPY_MODE_DONTWAKE` (the same
/// bit as `UFFDIO_ZEROPAGE_MODE_DONTWAKE`) and `UFFDIO_COPY_MODE_WP` (v5.7).
pub mod copy_mode {
    pub const DONTWAKE: u64 = 1 << 0;
    pub const WP: u64 = 1 << 1;
}

/// `uffdio_writeprotect.mode` bits (v5.7): `UFFDIO_WRITEPROTECT_MODE_WP` sets the protection
/// (without it the call resolves it), `UFFDIO_WRITEPROTECT_MODE_DONTWAKE` resolves without
/// waking the faults there.
pub mod writeprotect_mode {
    pub const WP: u64 = 1 << 0;
    pub const DONTWAKE: u64 = 1 << 1;
}

/// `uffd_msg.event` codes (`UFFD_EVENT_*`).
pub mod event {
    pub const PAGEFAULT: u8 = 0x12;
    pub const FORK: u8 = 0x13;
    pub const REMAP: u8 = 0x14;
    pub const REMOVE: u8 = 0x15;
    pub const UNMAP: u8 = 0x16;
}

/// One faulting task's entry (`struct userfaultfd_wait_queue`): the message it posted and
/// whether a reader has taken it (it moved from `fault_pending_wqh` to `fault_wqh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UffdFault {
    /// The fault's address: page-aligned (huge-page aligned in a hugetlb VMA), or the exact
    /// address the access faulted at with `UFFD_FEATURE_EXACT_ADDRESS`.
    pub address: VirtAddr,
    /// `UFFD_PAGEFAULT_FLAG_*`.
    pub flags: u64,
    /// `arg.pagefault.feat.ptid` with `UFFD_FEATURE_THREAD_ID`, else 0.
    pub ptid: u32,
    /// Read by `read(2)` on the descriptor.
    pub read: bool,
}

/// A non-cooperative event waiting to be read (`struct userfaultfd_wait_queue` on
/// `event_wqh`): its sender sleeps until a reader takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UffdEvent {
    /// `UFFD_EVENT_FORK`: the child's context, whose descriptor the read installs.
    Fork { child: InodeId },
    /// `UFFD_EVENT_REMAP`: `mremap` moved `len` bytes from `from` to `to`.
    Remap { from: VirtAddr, to: VirtAddr, len: u64 },
    /// `UFFD_EVENT_REMOVE`: `MADV_DONTNEED`/`MADV_REMOVE` of `[start, end)`.
    Remove { start: VirtAddr, end: VirtAddr },
    /// `UFFD_EVENT_UNMAP`: `[start, end)` was unmapped.
    Unmap { start: VirtAddr, end: VirtAddr },
}

/// A faulting task's wait: the context and its entry's number there (`FaultOutcome::Retry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UffdWaiter {
    pub ctx: InodeId,
    pub id: u64,
}

/// `struct userfaultfd_ctx`.
#[derive(Clone, Debug)]
pub struct UffdCtx {
    /// The address space whose faults it handles (`ctx->mm`).
    pub mm: MmId,
    /// `UFFDIO_API` has been called (`UFFD_STATE_RUNNING`, `UFFD_FEATURE_INITIALIZED` later).
    pub api: bool,
    /// The features `UFFDIO_API` enabled.
    pub features: u64,
    /// `userfaultfd(2)`'s flags (`O_CLOEXEC`, `O_NONBLOCK`, `UFFD_USER_MODE_ONLY`): with
    /// `O_NONBLOCK` a read with no message is EAGAIN.
    pub flags: u32,
    /// Faults waiting for a handler, by entry number (the order they were posted).
    pub faults: BTreeMap<u64, UffdFault>,
    /// The next entry number.
    pub next_id: u64,
    /// `fault_wqh` and `fault_pending_wqh`: where the faulting tasks sleep.
    pub fault_wq: WaitQueue,
    /// `fd_wqh`: where readers sleep until a fault is posted.
    pub fd_wq: WaitQueue,
    /// Events posted and not yet read, by entry number (`event_wqh`).
    pub events: BTreeMap<u64, UffdEvent>,
    /// `event_wqh`: where the senders of events sleep until they are read; made with the
    /// first event.
    pub event_wq: Option<WaitQueue>,
    /// `mmap_changing`: events being delivered (counted from when the operation that sends
    /// them decided to, until they are read), during which fills are EAGAIN (v4.18).
    pub mmap_changing: u32,
}

/// Every userfaultfd context, by the inode of its descriptor's anonymous file
/// (`anon_inode_getfd("[userfaultfd]")`).
#[derive(Clone, Debug, Default)]
pub struct Userfaultfds {
    pub ctxs: BTreeMap<InodeId, UffdCtx>,
    /// The wait queues of contexts released since the last wake-up: their sleepers, faulting
    /// tasks and readers, are woken by the closing task (`userfaultfd_release`).
    pub to_wake: Vec<WaitQueue>,
}
