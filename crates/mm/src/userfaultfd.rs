//! userfaultfd: missing-page faults handled by a user task (fs/userfaultfd.c; the fill
//! operations are `userfaultfd/mfill.rs`, mm/userfaultfd.c; registration is
//! `userfaultfd/register.rs`). Linux v4.3 to v6.19, with the eras below.
//!
//! Design. `userfaultfd(2)` makes a context (`struct userfaultfd_ctx`) for the caller's address
//! space and a descriptor for it: an anonymous inode (`FsType::AnonInode`) whose context sits in
//! `KState::uffd` by that inode. `UFFDIO_REGISTER` marks VMAs `VM_UFFD_MISSING` with the context
//! (`Vma::uffd`). A fault that finds no page in such a VMA (`do_anonymous_page`, the anonymous
//! THP fault, `do_fault` of a shmem page not in the page cache, `hugetlb_no_page`) calls
//! [`handle_userfault`]: it posts a message (the page-aligned address, huge-page aligned for
//! hugetlb, and `UFFD_PAGEFAULT_FLAG_WRITE`), wakes the readers and returns
//! `FaultOutcome::Retry`; the fault's locks drop as it returns, and `do_user_addr_fault` drops
//! `mmap_lock` (the kernel's `handle_userfault` releases it, or the per-VMA lock, before
//! sleeping) and sleeps on the context's wait queue ([`userfaultfd_wait`]) until `UFFDIO_COPY`,
//! `UFFDIO_ZEROPAGE`, `UFFDIO_UNREGISTER` or the descriptor's release wakes it
//! ([`wake_userfault`]); then it retries the fault from the start with `FAULT_FLAG_TRIED`, which
//! counts the completed fault major from v5.9 (`era::retried_fault_counts_major`). A `read(2)`
//! of the descriptor takes the oldest message not yet read, 32 bytes of `struct uffd_msg`
//! (`UFFD_EVENT_PAGEFAULT`), sleeping for one unless `O_NONBLOCK` (EAGAIN). A fault nobody
//! resolves sleeps for good: when every task sleeps the engine's watchdog stops the run and
//! names the sleeper's wait queue, `userfaultfd fault_wqh`.
//!
//! Eras: the syscall from v4.3 (ENOSYS before, `era::has_userfaultfd`); `UFFDIO_API` takes no
//! feature before v4.11, then the features of `era::uffd_missing_hugetlb_shmem`; a second
//! `UFFDIO_API`, or any other ioctl before the first, is EINVAL. The descriptor is closed by
//! `close` or `exit` (`userfaultfd_release`): its VMAs lose `VM_UFFD_MISSING` and its
//! sleeping faults are woken to retry as ordinary faults. `fork` without
//! `UFFD_FEATURE_EVENT_FORK` clears the child's copies (`dup_userfaultfd` →
//! `userfaultfd_reset_ctx`, every era), `mremap` without `EVENT_REMAP` the moved VMA's from
//! v5.0 (`era::mremap_drops_uffd`). `MADV_DONTNEED` needs nothing here: its zapped pages are
//! missing again, and the next access faults to the handler (no `EVENT_REMOVE` message).
//!
//! Approximations: only `UFFDIO_REGISTER_MODE_MISSING` and the features
//! `UFFD_FEATURE_MISSING_HUGETLBFS`/`MISSING_SHMEM` are modelled; write-protect (v5.7), minor
//! faults (v5.13 hugetlb, v5.14 shmem), events (`EVENT_FORK`/`REMAP`/`REMOVE`/`UNMAP`),
//! `SIGBUS`, `THREAD_ID`, `EXACT_ADDRESS`, `UFFDIO_WAKE`, `UFFDIO_CONTINUE`, `UFFDIO_MOVE`,
//! `UFFD_USER_MODE_ONLY` (v5.11), `/dev/userfaultfd` (v6.1) and the
//! `vm.unprivileged_userfaultfd` sysctl (v5.2; the scenario's tasks are privileged) are
//! refused by name in scenarios and EINVAL through this API. GUP's faults (pins, O_DIRECT,
//! `MADV_POPULATE_*`, `/proc/PID/mem`) never pass `FAULT_FLAG_ALLOW_RETRY` in the model, so a
//! userfault there is `VM_FAULT_SIGBUS` (EFAULT), as the kernel answers a fault that may not
//! retry; the kernel's GUP with a `locked` argument would sleep for the handler instead. The
//! message's address is the faulting page's in every era (`UFFD_FEATURE_EXACT_ADDRESS`, v5.18,
//! is not modelled). The descriptor is opened read-only, as v6.x opens it (`O_RDONLY`): a
//! `write(2)` is EBADF (not checked against older kernels). Release leaves the VMAs split where
//! registration split them (the kernel merges them back). A reader sleeping when another task
//! closes the last descriptor gets EBADF (the kernel's read keeps the file until it returns).
//! khugepaged's and `MADV_COLLAPSE`'s collapse of a registered shmem file range does not look
//! at the registration (their anonymous collapse does: `khugepaged.rs`).

pub mod mfill;
pub mod register;

use crate::errno::{Errno, VmFault};
use crate::kernel::{Cx, KState, UffdFlag};
use crate::mm_struct::MMAP_MIN;
use crate::pgtable::TASK_SIZE;
use crate::types::fs::FsType;
use crate::types::ids::{InodeId, Pid, VmaId};
use crate::types::userfaultfd::feature;
use crate::types::userfaultfd::{
    PAGEFAULT_FLAG_WRITE, UFFD_API, UffdCtx, UffdFault, UffdWaiter, Userfaultfds,
};
use crate::vma::{VmFlags, Vma};
use simcore::{Bytes, VirtAddr};

/// `userfaultfd(2)` flags: `O_CLOEXEC`, `O_NONBLOCK` (x86-64 values); `UFFD_USER_MODE_ONLY`
/// (v5.11) is not modelled, EINVAL here.
pub mod flags {
    pub const CLOEXEC: u32 = 0o2_000_000;
    pub const NONBLOCK: u32 = 0o4000;
}

/// `UFFD_EVENT_PAGEFAULT`, the event of a fault message.
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

/// `sizeof(struct uffd_msg)`.
pub const UFFD_MSG_SIZE: u64 = 32;

/// The features `UFFDIO_API` offers on kernel `k` that the model implements: the two
/// missing-mode capabilities of v4.11 (the others, refused by name in scenarios, are not
/// modelled).
fn modelled_features(k: crate::era::KernelVersion) -> u64 {
    if crate::era::uffd_missing_hugetlb_shmem(k) {
        feature::MISSING_HUGETLBFS | feature::MISSING_SHMEM
    } else {
        0
    }
}

/// `userfaultfd_reset_ctx`: `v` is no longer registered (a fork child's copy without
/// `EVENT_FORK`, a VMA `mremap` moved without `EVENT_REMAP`, a released context's VMAs).
pub(crate) fn userfaultfd_reset(v: &mut Vma) {
    v.flags.0 &= !VmFlags::UFFD_MISSING;
    v.uffd = None;
}

impl KState {
    /// `userfaultfd_missing`: faults on missing pages of `vma` go to its userfaultfd. The only
    /// registration mode modelled, so also `userfaultfd_armed`.
    pub(crate) fn userfaultfd_missing(&self, vma: VmaId) -> bool {
        self.vma(vma).flags.has(VmFlags::UFFD_MISSING)
    }

    /// `userfaultfd_release`, when the descriptor's last reference goes: every VMA registered
    /// with the context is reset and its sleepers are left for [`wake_released`].
    pub(crate) fn userfaultfd_release(&mut self, inode: InodeId) {
        let Some(ctx) = self.uffd.ctxs.remove(&inode) else { return };
        let vmas: Vec<VmaId> = self.mms[ctx.mm]
            .as_deref()
            .map_or(Vec::new(), |mm| mm.vmas.values().copied().collect());
        for v in vmas {
            if self.vma(v).uffd == Some(inode) {
                userfaultfd_reset(self.vma_mut(v));
            }
        }
        self.uffd.to_wake.extend([ctx.fault_wq, ctx.fd_wq]);
    }

    /// The context of descriptor `fd` of `pid` for an ioctl: EBADF for no descriptor, ENOTTY for
    /// another kind of file, EINVAL before `UFFDIO_API` unless `api` is the call.
    pub(crate) fn uffd_ctx_of(&self, pid: Pid, fd: i32, api: bool) -> Result<InodeId, Errno> {
        let f = self.procs[pid].fds.get(&fd).copied().ok_or(Errno::EBADF)?;
        let inode = self.file(f).inode;
        let ctx = self.uffd.ctxs.get(&inode).ok_or(Errno::ENOTTY)?;
        if !api && !ctx.api {
            return Err(Errno::EINVAL);
        }
        Ok(inode)
    }

    /// The context registered on `vma`.
    pub(crate) fn uffd_ctx(&self, inode: InodeId) -> &UffdCtx {
        self.uffd.ctxs.get(&inode).expect("a registered VMA's context lives until release")
    }
}

impl Userfaultfds {
    /// The contexts and their pending faults, for the explorer's state fingerprint.
    pub(crate) fn fingerprint(&self, d: &mut simcore::Digest) {
        for (inode, ctx) in &self.ctxs {
            d.write_u64(u64::from(inode.0) ^ u64::from(ctx.api).rotate_left(40) ^ ctx.features);
            for (&id, f) in &ctx.faults {
                d.write_u64(id ^ f.address.0.rotate_left(20) ^ u64::from(f.read).rotate_left(60));
            }
        }
    }
}

/// Wakes the sleepers of the contexts released since the last call (the closing task's part of
/// `userfaultfd_release`).
pub(crate) fn wake_released(cx: &Cx) {
    let queues = std::mem::take(&mut cx.st().uffd.to_wake);
    for q in queues {
        q.wake_up_all(cx);
    }
}

/// `validate_range`: a page-aligned, non-empty range inside the user address space.
pub(crate) fn validate_range(start: VirtAddr, len: u64) -> Result<VirtAddr, Errno> {
    let page = Bytes::PAGE.as_u64();
    if !start.0.is_multiple_of(page) || !len.is_multiple_of(page) || len == 0 {
        return Err(Errno::EINVAL);
    }
    if start.0 < MMAP_MIN || start.0 >= TASK_SIZE || len > TASK_SIZE - start.0 {
        return Err(Errno::EINVAL);
    }
    Ok(VirtAddr(start.0 + len))
}

/// `userfaultfd(2)` for process `pid`: a context for its address space and a descriptor.
pub(crate) async fn new_userfaultfd(cx: &Cx, pid: Pid, flags: u32) -> Result<i32, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    if !crate::era::has_userfaultfd(cx.kernel().version) {
        return Err(Errno::ENOSYS);
    }
    if flags & !(flags::CLOEXEC | flags::NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    let mut st = cx.st();
    let mm = st.procs[pid].mm.ok_or(Errno::EINVAL)?;
    let fd = st.procs[pid].unused_fd()?;
    let inode = st.new_inode(cx, "anon_inode:[userfaultfd]".into(), FsType::AnonInode, 0, None);
    let file = st.open_file(inode, crate::fs::fmode::READ, false, false)?;
    st.procs[pid].fds.insert(fd, file);
    let ctx = UffdCtx {
        mm,
        api: false,
        features: 0,
        nonblock: flags & flags::NONBLOCK != 0,
        faults: Default::default(),
        next_id: 0,
        fault_wq: cx.wait_queue("userfaultfd fault_wqh (a fault waiting for its handler)"),
        fd_wq: cx.wait_queue("userfaultfd fd_wqh"),
    };
    st.uffd.ctxs.insert(inode, ctx);
    Ok(fd)
}

/// `UFFDIO_API`: enables `features`, returning those the kernel offers. EINVAL for another
/// API, a second call, or a feature the kernel lacks or the model does not implement.
pub(crate) async fn userfaultfd_api(
    cx: &Cx,
    pid: Pid,
    fd: i32,
    (api, features): (u64, u64),
) -> Result<u64, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let mut st = cx.st();
    let inode = st.uffd_ctx_of(pid, fd, true)?;
    let offered = modelled_features(cx.kernel().version);
    let ctx = st.uffd.ctxs.get_mut(&inode).expect("found above");
    if api != UFFD_API || ctx.api || features & !offered != 0 {
        return Err(Errno::EINVAL);
    }
    ctx.api = true;
    ctx.features = features;
    Ok(offered)
}

/// `handle_userfault` for a missing page at `address` of `vma` (its first half: the message
/// posted and the readers woken; the caller returns `FaultOutcome::Retry` with the waiter,
/// and [`userfaultfd_wait`] is the sleep). A fault that may not retry (GUP's) is
/// `VM_FAULT_SIGBUS`.
pub(crate) fn handle_userfault(
    cx: &Cx,
    vma: VmaId,
    address: VirtAddr,
    write: bool,
) -> Result<UffdWaiter, VmFault> {
    if !cx.uffd_flag(UffdFlag::AllowRetry) {
        return Err(VmFault::SigBus);
    }
    let mut st = cx.st();
    let inode = st.vma(vma).uffd.expect("a VM_UFFD_MISSING VMA has a context");
    let ctx = st.uffd.ctxs.get_mut(&inode).expect("a registered VMA's context lives");
    let id = ctx.next_id;
    ctx.next_id += 1;
    let flags = if write { PAGEFAULT_FLAG_WRITE } else { 0 };
    ctx.faults.insert(id, UffdFault { address, flags, read: false });
    ctx.fd_wq.wake_up_all(cx);
    Ok(UffdWaiter { ctx: inode, id })
}

/// The second half of `handle_userfault`, after the fault dropped its locks: sleeps until the
/// message is resolved (woken by a fill, an unregister or the release).
pub(crate) async fn userfaultfd_wait(cx: &Cx, w: UffdWaiter) {
    loop {
        let queue = {
            let st = cx.st();
            match st.uffd.ctxs.get(&w.ctx) {
                Some(ctx) if ctx.faults.contains_key(&w.id) => ctx.fault_wq,
                _ => return,
            }
        };
        queue.wait(cx).await;
    }
}

/// `wake_userfault`: the faults of context `inode` in `[start, end)` are resolved; their tasks
/// wake to retry.
pub(crate) fn wake_userfault(cx: &Cx, inode: InodeId, start: VirtAddr, end: VirtAddr) {
    let mut st = cx.st();
    let Some(ctx) = st.uffd.ctxs.get_mut(&inode) else { return };
    let before = ctx.faults.len();
    ctx.faults.retain(|_, f| f.address < start || f.address >= end);
    if ctx.faults.len() != before {
        ctx.fault_wq.wake_up_all(cx);
    }
}

/// `userfaultfd_read`: the oldest fault message not yet read, as `struct uffd_msg`'s 32 bytes;
/// sleeps until one is posted, or EAGAIN with `O_NONBLOCK`. EINVAL for a buffer shorter than a
/// message or before `UFFDIO_API`.
pub(crate) async fn userfaultfd_read(cx: &Cx, inode: InodeId, len: u64) -> Result<Vec<u8>, Errno> {
    loop {
        let queue = {
            let mut st = cx.st();
            // Another task's `close` of the last descriptor released it while this read slept
            // (the kernel's read holds a reference to the file, so its release waits).
            let Some(ctx) = st.uffd.ctxs.get_mut(&inode) else { return Err(Errno::EBADF) };
            if !ctx.api || len < UFFD_MSG_SIZE {
                return Err(Errno::EINVAL);
            }
            if let Some(f) = ctx.faults.values_mut().find(|f| !f.read) {
                f.read = true;
                return Ok(uffd_msg(f));
            }
            if ctx.nonblock {
                return Err(Errno::EAGAIN);
            }
            ctx.fd_wq
        };
        queue.wait(cx).await;
    }
}

/// `struct uffd_msg` of a page fault: the event, then `arg.pagefault`'s flags and address
/// (little-endian), the thread id 0 (`UFFD_FEATURE_THREAD_ID` is not modelled).
fn uffd_msg(f: &UffdFault) -> Vec<u8> {
    let mut msg = vec![0u8; UFFD_MSG_SIZE as usize];
    msg[0] = UFFD_EVENT_PAGEFAULT;
    msg[8..16].copy_from_slice(&f.flags.to_le_bytes());
    msg[16..24].copy_from_slice(&f.address.0.to_le_bytes());
    msg
}

/// A fault message decoded: its address and whether the fault was a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UffdMsg {
    pub address: VirtAddr,
    pub write: bool,
}

impl UffdMsg {
    /// Decodes the 32 bytes `read(2)` returned.
    pub fn decode(msg: &[u8]) -> UffdMsg {
        let word = |at: usize| u64::from_le_bytes(msg[at..at + 8].try_into().expect("8 bytes"));
        UffdMsg { address: VirtAddr(word(16)), write: word(8) & PAGEFAULT_FLAG_WRITE != 0 }
    }
}
