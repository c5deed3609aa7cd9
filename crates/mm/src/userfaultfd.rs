//! userfaultfd: faults handled by a user task (fs/userfaultfd.c; the fill operations are
//! `userfaultfd/mfill.rs`, mm/userfaultfd.c; registration is `userfaultfd/register.rs`; the
//! non-cooperative events are `userfaultfd/events.rs`). Linux v4.3 to v6.19, with the eras
//! below.
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
//! `UFFDIO_ZEROPAGE`, `UFFDIO_WAKE`, `UFFDIO_UNREGISTER` or the descriptor's release wakes it
//! ([`wake_userfault`]); then it retries the fault from the start with `FAULT_FLAG_TRIED`, which
//! counts the completed fault major from v5.9 (`era::retried_fault_counts_major`); a fault woken
//! with its page still missing (`UFFDIO_WAKE` alone) posts a new message. A `read(2)` of the
//! descriptor takes the oldest fault message not yet read, else the oldest event, 32 bytes of
//! `struct uffd_msg`, sleeping for one unless `O_NONBLOCK` (EAGAIN). A fault nobody resolves
//! sleeps for good: when every task sleeps the engine's watchdog stops the run and names the
//! sleeper's wait queue, `userfaultfd fault_wqh`.
//!
//! Minor mode (`UFFDIO_REGISTER_MODE_MINOR`, `VM_UFFD_MINOR`; hugetlb from v5.13,
//! `era::uffd_minor_hugetlbfs`, shmem from v5.14, `era::uffd_minor_shmem`): a fault on a page
//! the VMA's file caches (or, for shmem, has swapped out) but the VMA does not map goes to the
//! userfaultfd with `UFFD_PAGEFAULT_FLAG_MINOR` (`shmem_get_folio_gfp`, `hugetlb_no_page`), and
//! `UFFDIO_CONTINUE` maps the cached page (`userfaultfd/mfill.rs`); a minor-registered VMA maps
//! nothing around a read fault (`uffd_disable_fault_around`). A VMA may be registered in both
//! modes.
//!
//! Eras: the syscall from v4.3 (ENOSYS before, `era::has_userfaultfd`); `UFFDIO_API` takes no
//! feature before v4.11, then the features the model implements of those the kernel has (any
//! other bit is EINVAL, as the kernel answers a bit it lacks): `MISSING_HUGETLBFS`,
//! `MISSING_SHMEM` (`era::uffd_missing_hugetlb_shmem`) and the events `EVENT_FORK`,
//! `EVENT_REMAP`, `EVENT_REMOVE`, `EVENT_UNMAP` (`era::uffd_noncooperative_events`) from v4.11;
//! `SIGBUS` and `THREAD_ID` from v4.14 (`era::uffd_sigbus_thread_id`); `MINOR_HUGETLBFS` from
//! v5.13, `MINOR_SHMEM` from v5.14; `EXACT_ADDRESS` from v5.18 (`era::uffd_exact_address`);
//! `PAGEFAULT_FLAG_WP` from v5.7 (`era::uffd_wp_anon`). A second `UFFDIO_API`, or any other ioctl
//! before the
//! first, is EINVAL. With `SIGBUS` a fault in a registered range posts nothing and raises
//! SIGBUS (`handle_userfault` returns `VM_FAULT_SIGBUS` before anything else); with
//! `THREAD_ID` the message carries the faulting task's id (`feat.ptid`); with
//! `EXACT_ADDRESS` the address the access faulted at (`vmf->real_address`) rather than its
//! page's. `userfaultfd(2)` takes `O_CLOEXEC` and `O_NONBLOCK` in every era, and
//! `UFFD_USER_MODE_ONLY` from v5.11 (`era::uffd_user_mode_only`, EINVAL before): such a
//! context's faults from kernel mode (`copy_to_user` of a `read(2)`, `FAULT_FLAG_USER` clear)
//! are SIGBUS, which the system call reports as EFAULT. From v6.1 `/dev/userfaultfd`'s
//! `USERFAULTFD_IOC_NEW` makes the same context (`era::has_dev_userfaultfd`; ENOENT before, no
//! such device node). `UFFDIO_WAKE` (v4.3) wakes the faults of a range without filling it;
//! `UFFDIO_COPY_MODE_DONTWAKE` and `UFFDIO_ZEROPAGE_MODE_DONTWAKE` fill without waking. The
//! descriptor is closed by `close` or `exit` (`userfaultfd_release`): its VMAs lose
//! `VM_UFFD_MISSING` and its sleeping faults and event senders are woken (the faults retry as
//! ordinary faults). `fork` without `UFFD_FEATURE_EVENT_FORK` clears the child's copies
//! (`dup_userfaultfd` → `userfaultfd_reset_ctx`, every era), `mremap` without `EVENT_REMAP` the
//! moved VMA's from v5.0 (`era::mremap_drops_uffd`). Without `EVENT_REMOVE`, `MADV_DONTNEED`'s
//! zapped pages are simply missing again, and the next access faults to the handler.
//!
//! Write-protect mode (`UFFDIO_REGISTER_MODE_WP`, `VM_UFFD_WP`, `UFFD_FEATURE_PAGEFAULT_FLAG_WP`,
//! `UFFDIO_WRITEPROTECT`, `UFFDIO_COPY_MODE_WP`; anonymous memory from v5.7, `era::uffd_wp_anon`)
//! is `userfaultfd/wp.rs`: a write to a uffd-wp PTE posts a message with
//! `UFFD_PAGEFAULT_FLAG_WP` and sleeps until the protection is resolved.
//!
//! Approximations: refused by name in scenarios (and EINVAL through this API): shmem and hugetlb
//! write-protection (`WP_HUGETLBFS_SHMEM` v5.19), `WP_UNPOPULATED` v6.4, `WP_ASYNC` v6.7,
//! `UFFD_FEATURE_POISON`/`UFFDIO_POISON` (v6.6), `UFFD_FEATURE_MOVE`/`UFFDIO_MOVE` (v6.8), and
//! the `vm.unprivileged_userfaultfd` sysctl (v5.2; the scenario's tasks are privileged, so
//! `EVENT_FORK`'s `CAP_SYS_PTRACE` test of v5.3 passes too). A retried write-protect fault
//! counts minor from v6.7 (`era::uffd_wp_retry_counts_minor`: the kernel took it under the
//! per-VMA lock); a retried missing fault counts major from v5.9 in every later era, as when
//! the VMA has no `anon_vma` yet (the kernel's read fault of a VMA that has one is taken
//! under the per-VMA lock from v6.7 and counts minor: not modelled). From
//! v4.3 to v4.9 the kernel's message gave the unmasked address of an anonymous fault (the
//! masking came with "mm: use vmf->address instead of of vmf->virtual_address", 1a29d85eb0f1,
//! v4.10, which `EXACT_ADDRESS` undid on request); the model gives the page's there too. The
//! tasks of one scenario process share one thread id, the process's, so `THREAD_ID` names the
//! process (the kernel's differs per thread). GUP's faults (pins, O_DIRECT,
//! `MADV_POPULATE_*`, `/proc/PID/mem`) never pass `FAULT_FLAG_ALLOW_RETRY` in the model, so a
//! userfault there is `VM_FAULT_SIGBUS` (EFAULT), as the kernel answers a fault that may not
//! retry; the kernel's GUP with a `locked` argument would sleep for the handler instead. The
//! descriptor is opened read-only, as v6.x opens it (`O_RDONLY`): a `write(2)` is EBADF (not
//! checked against older kernels). Release leaves the VMAs split where registration split them
//! (the kernel merges them back). A reader sleeping when another task closes the last
//! descriptor gets EBADF (the kernel's read keeps the file until it returns). khugepaged's and
//! `MADV_COLLAPSE`'s collapse of a registered shmem file range does not look at the
//! registration (their anonymous collapse does: `khugepaged.rs`), nor at a minor one (the
//! kernel's `collapse_file` skips a minor-registered VMA's range).

pub mod events;
pub mod mfill;
pub mod register;
pub mod wp;
pub mod writeprotect;

use crate::errno::{Errno, VmFault};
use crate::kernel::{Cx, KState, UffdFlag};
use crate::mm_struct::MMAP_MIN;
use crate::pgtable::TASK_SIZE;
use crate::types::fs::FsType;
use crate::types::ids::{InodeId, MmId, Pid, VmaId};
use crate::types::userfaultfd::{
    PAGEFAULT_FLAG_MINOR, PAGEFAULT_FLAG_WP, PAGEFAULT_FLAG_WRITE, UFFD_API, UffdCtx, UffdEvent,
    UffdFault, UffdReason, UffdWaiter, Userfaultfds,
};
use crate::types::userfaultfd::{event, feature};
use crate::vma::{VmFlags, Vma};
use simcore::{Bytes, VirtAddr};

/// `userfaultfd(2)` flags: `O_CLOEXEC`, `O_NONBLOCK` (x86-64 values) and `UFFD_USER_MODE_ONLY`
/// (v5.11).
pub mod flags {
    pub const CLOEXEC: u32 = 0o2_000_000;
    pub const NONBLOCK: u32 = 0o4000;
    pub const USER_MODE_ONLY: u32 = 1;
}

/// `sizeof(struct uffd_msg)`.
pub const UFFD_MSG_SIZE: u64 = 32;

/// The features `UFFDIO_API` offers on kernel `k` that the model implements (the others,
/// refused by name in scenarios, are not modelled).
fn modelled_features(k: crate::era::KernelVersion) -> u64 {
    let mut f = 0;
    if crate::era::uffd_missing_hugetlb_shmem(k) {
        f |= feature::MISSING_HUGETLBFS | feature::MISSING_SHMEM;
    }
    if crate::era::uffd_noncooperative_events(k) {
        f |= feature::EVENT_FORK | feature::EVENT_REMAP | feature::EVENT_REMOVE;
        f |= feature::EVENT_UNMAP;
    }
    if crate::era::uffd_sigbus_thread_id(k) {
        f |= feature::SIGBUS | feature::THREAD_ID;
    }
    if crate::era::uffd_minor_hugetlbfs(k) {
        f |= feature::MINOR_HUGETLBFS;
    }
    if crate::era::uffd_minor_shmem(k) {
        f |= feature::MINOR_SHMEM;
    }
    if crate::era::uffd_exact_address(k) {
        f |= feature::EXACT_ADDRESS;
    }
    if crate::era::uffd_wp_anon(k) {
        f |= feature::PAGEFAULT_FLAG_WP;
    }
    f
}

/// `__VM_UFFD_FLAGS`: the registration modes modelled, as VMA flags.
pub(crate) const VM_UFFD_FLAGS: u64 =
    VmFlags::UFFD_MISSING | VmFlags::UFFD_MINOR | VmFlags::UFFD_WP;

/// `userfaultfd_reset_ctx`: `v` is no longer registered (a fork child's copy without
/// `EVENT_FORK`, a VMA `mremap` moved without `EVENT_REMAP`, a released context's VMAs).
pub(crate) fn userfaultfd_reset(v: &mut Vma) {
    v.flags.0 &= !VM_UFFD_FLAGS;
    v.uffd = None;
}

impl KState {
    /// `userfaultfd_missing`: faults on missing pages of `vma` go to its userfaultfd
    /// (`userfaultfd_armed` is [`Vma::uffd`] being set).
    pub(crate) fn userfaultfd_missing(&self, vma: VmaId) -> bool {
        self.vma(vma).flags.has(VmFlags::UFFD_MISSING)
    }

    /// `userfaultfd_minor`: faults on pages the file caches but `vma` does not map go to its
    /// userfaultfd (v5.13).
    pub(crate) fn userfaultfd_minor(&self, vma: VmaId) -> bool {
        self.vma(vma).flags.has(VmFlags::UFFD_MINOR)
    }

    /// `userfaultfd_release`, when the descriptor's last reference goes: every VMA registered
    /// with the context is reset and its sleepers are left for [`wake_released`].
    pub(crate) fn userfaultfd_release(&mut self, inode: InodeId) {
        let Some(ctx) = self.uffd.ctxs.remove(&inode) else { return };
        let vmas: Vec<VmaId> = self.mms[ctx.mm]
            .as_deref()
            .map_or(Vec::new(), |mm| mm.vmas.values().copied().collect());
        let clear_wp = crate::era::uffd_release_clears_wp(self.thp.kernel);
        for v in vmas {
            if self.vma(v).uffd == Some(inode) {
                if clear_wp && self.userfaultfd_wp(v) {
                    let (start, end) = (self.vma(v).start, self.vma(v).end);
                    wp::uffd_wp_range(self, v, (start, end), false);
                }
                userfaultfd_reset(self.vma_mut(v));
            }
        }
        self.uffd.to_wake.extend([ctx.fault_wq, ctx.fd_wq]);
        self.uffd.to_wake.extend(ctx.event_wq);
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

    /// `userfaultfd_wp`: writes to the PTEs of `vma` that carry the uffd-wp bit go to its
    /// userfaultfd (v5.7).
    pub(crate) fn userfaultfd_wp(&self, vma: VmaId) -> bool {
        self.vma(vma).flags.has(VmFlags::UFFD_WP)
    }

    /// The context registered on `vma`.
    pub(crate) fn uffd_ctx(&self, inode: InodeId) -> &UffdCtx {
        self.uffd.ctxs.get(&inode).expect("a registered VMA's context lives until release")
    }
}

impl Userfaultfds {
    /// The contexts, their pending faults and events, for the explorer's state fingerprint.
    pub(crate) fn fingerprint(&self, d: &mut simcore::Digest) {
        for (inode, ctx) in &self.ctxs {
            d.write_u64(u64::from(inode.0) ^ u64::from(ctx.api).rotate_left(40) ^ ctx.features);
            d.write_u64(u64::from(ctx.flags) ^ u64::from(ctx.mmap_changing).rotate_left(32));
            for (&id, f) in &ctx.faults {
                d.write_u64(id ^ f.address.0.rotate_left(20) ^ u64::from(f.read).rotate_left(60));
            }
            for (&id, e) in &ctx.events {
                d.write_u64(id ^ u64::from(UffdMsg::of_event(e, -1).event()).rotate_left(56));
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
fn validate_range(start: VirtAddr, len: u64) -> Result<VirtAddr, Errno> {
    let page = Bytes::PAGE.as_u64();
    if !start.0.is_multiple_of(page) || !len.is_multiple_of(page) || len == 0 {
        return Err(Errno::EINVAL);
    }
    if start.0 < MMAP_MIN || start.0 >= TASK_SIZE || len > TASK_SIZE - start.0 {
        return Err(Errno::EINVAL);
    }
    Ok(VirtAddr(start.0 + len))
}

/// A new context for address space `mm` and its inode (`userfaultfd_ctx_cachep`'s object):
/// `api` set for a fork child's, which inherits its parent's features.
pub(crate) fn new_ctx(
    cx: &Cx,
    st: &mut KState,
    mm: MmId,
    (flags, features): (u32, u64),
) -> InodeId {
    let inode = st.new_inode(cx, "anon_inode:[userfaultfd]".into(), FsType::AnonInode, 0, None);
    let ctx = UffdCtx {
        mm,
        api: features != 0,
        features,
        flags,
        faults: Default::default(),
        next_id: 0,
        fault_wq: cx.wait_queue("userfaultfd fault_wqh (a fault waiting for its handler)"),
        fd_wq: cx.wait_queue("userfaultfd fd_wqh"),
        events: Default::default(),
        event_wq: None,
        mmap_changing: 0,
    };
    st.uffd.ctxs.insert(inode, ctx);
    inode
}

/// `userfaultfd(2)` for process `pid` (or `/dev/userfaultfd`'s `USERFAULTFD_IOC_NEW` with
/// `dev`): a context for its address space and a descriptor.
pub(crate) async fn new_userfaultfd(
    cx: &Cx,
    pid: Pid,
    flags: u32,
    dev: bool,
) -> Result<i32, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let k = cx.kernel().version;
    if !crate::era::has_userfaultfd(k) {
        return Err(Errno::ENOSYS);
    }
    if dev && !crate::era::has_dev_userfaultfd(k) {
        return Err(Errno::ENOENT);
    }
    let mut known = flags::CLOEXEC | flags::NONBLOCK;
    if crate::era::uffd_user_mode_only(k) {
        known |= flags::USER_MODE_ONLY;
    }
    if flags & !known != 0 {
        return Err(Errno::EINVAL);
    }
    let mut st = cx.st();
    let mm = st.procs[pid].mm.ok_or(Errno::EINVAL)?;
    let fd = st.procs[pid].unused_fd()?;
    let inode = new_ctx(cx, &mut st, mm, (flags, 0));
    let file = st.open_file(inode, crate::fs::fmode::READ, false, false)?;
    st.procs[pid].fds.insert(fd, file);
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

/// `handle_userfault` for a missing page (or, with `UffdReason::Minor`, one the file caches) at
/// `address` of `vma` (its first half: the message posted and the readers woken; the caller
/// returns `FaultOutcome::Retry` with the waiter, and [`userfaultfd_wait`] is the sleep).
/// `VM_FAULT_SIGBUS` with `UFFD_FEATURE_SIGBUS`, for a kernel-mode fault with
/// `UFFD_USER_MODE_ONLY`, and for a fault that may not retry (GUP's).
pub(crate) fn handle_userfault(
    cx: &Cx,
    vma: VmaId,
    address: VirtAddr,
    (write, reason): (bool, UffdReason),
) -> Result<UffdWaiter, VmFault> {
    let mut st = cx.st();
    let inode = st.vma(vma).uffd.expect("a registered VMA has a context");
    let ctx = st.uffd.ctxs.get_mut(&inode).expect("a registered VMA's context lives");
    let user_only = ctx.flags & flags::USER_MODE_ONLY != 0;
    if ctx.features & feature::SIGBUS != 0 || (user_only && !cx.uffd_flag(UffdFlag::User)) {
        return Err(VmFault::SigBus);
    }
    if !cx.uffd_flag(UffdFlag::AllowRetry) {
        return Err(VmFault::SigBus);
    }
    let id = ctx.next_id;
    ctx.next_id += 1;
    let exact = ctx.features & feature::EXACT_ADDRESS != 0;
    let fault = UffdFault {
        address: if exact { cx.fault_address() } else { address },
        flags: if write { PAGEFAULT_FLAG_WRITE } else { 0 }
            | match reason {
                UffdReason::Missing => 0,
                UffdReason::Minor => PAGEFAULT_FLAG_MINOR,
                UffdReason::Wp => PAGEFAULT_FLAG_WP,
            },
        ptid: if ctx.features & feature::THREAD_ID != 0 { cx.current().0 } else { 0 },
        read: false,
    };
    ctx.faults.insert(id, fault);
    ctx.fd_wq.wake_up_all(cx);
    Ok(UffdWaiter { ctx: inode, id })
}

/// The second half of `handle_userfault`, after the fault dropped its locks: sleeps until the
/// message is resolved (woken by a fill, `UFFDIO_WAKE`, an unregister or the release).
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

/// `UFFDIO_WAKE` of `[start, start + len)` on descriptor `fd` of `pid` (`userfaultfd_wake`):
/// the faults waiting there retry, whether or not their pages were filled.
pub(crate) async fn userfaultfd_wake(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    (start, len): (VirtAddr, u64),
) -> Result<(), Errno> {
    let (ctx, end) = range_ioctl(cx, (pid, fd), (start, len), RangeIoctl::Other).await?;
    wake_userfault(cx, ctx, start, end);
    Ok(())
}

/// Which ioctl on a range [`range_ioctl`] starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeIoctl {
    /// `UFFDIO_COPY`, `UFFDIO_ZEROPAGE` or (`known`: whether this kernel has it)
    /// `UFFDIO_CONTINUE`: refused while an event is delivered.
    Fill { known: bool },
    /// `UFFDIO_REGISTER`, `UFFDIO_UNREGISTER`, `UFFDIO_WAKE`.
    Other,
}

/// The common start of the ioctls on `[start, start + len)` of descriptor `fd` of `pid`, each
/// error where `userfaultfd_ioctl` and the ioctl return it: the syscall's charge, the
/// descriptor's context (EBADF, ENOTTY, EINVAL before `UFFDIO_API`), an ioctl this kernel does
/// not have (EINVAL), a fill while `mmap_changing` (EAGAIN from v4.18), the range (EINVAL).
/// Returns the context and the range's end.
pub(crate) async fn range_ioctl(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    (start, len): (VirtAddr, u64),
    kind: RangeIoctl,
) -> Result<(InodeId, VirtAddr), Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let ctx = cx.st().uffd_ctx_of(pid, fd, false)?;
    if let RangeIoctl::Fill { known } = kind {
        if !known {
            return Err(Errno::EINVAL);
        }
        let changing = cx.st().uffd_ctx(ctx).mmap_changing != 0;
        if changing && crate::era::uffd_mfill_waits_mmap_changing(cx.kernel().version) {
            return Err(Errno::EAGAIN);
        }
    }
    Ok((ctx, validate_range(start, len)?))
}

/// `userfaultfd_read`: the oldest fault message not yet read, else the oldest event, as
/// `struct uffd_msg`'s 32 bytes; sleeps until one is posted, or EAGAIN with `O_NONBLOCK`.
/// EINVAL for a buffer shorter than a message or before `UFFDIO_API`.
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
                return Ok(UffdMsg::of_fault(f).encode());
            }
            if let Some((&id, &e)) = ctx.events.iter().next() {
                return events::read_event(cx, &mut st, inode, id, e);
            }
            if ctx.flags & flags::NONBLOCK != 0 {
                return Err(Errno::EAGAIN);
            }
            ctx.fd_wq
        };
        queue.wait(cx).await;
    }
}

/// A `struct uffd_msg` decoded: a page fault or one of the non-cooperative events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UffdMsg {
    /// `UFFD_EVENT_PAGEFAULT`: the address, `UFFD_PAGEFAULT_FLAG_*` and the thread id (0
    /// without `UFFD_FEATURE_THREAD_ID`).
    Pagefault { address: VirtAddr, flags: u64, ptid: u32 },
    /// `UFFD_EVENT_FORK`: the child's userfaultfd, a descriptor of the reader's.
    Fork { ufd: i32 },
    /// `UFFD_EVENT_REMAP`.
    Remap { from: VirtAddr, to: VirtAddr, len: u64 },
    /// `UFFD_EVENT_REMOVE`.
    Remove { start: VirtAddr, end: VirtAddr },
    /// `UFFD_EVENT_UNMAP`.
    Unmap { start: VirtAddr, end: VirtAddr },
}

impl UffdMsg {
    fn of_fault(f: &UffdFault) -> UffdMsg {
        UffdMsg::Pagefault { address: f.address, flags: f.flags, ptid: f.ptid }
    }

    /// The message of event `e`; a fork's carries descriptor `ufd`.
    fn of_event(e: &UffdEvent, ufd: i32) -> UffdMsg {
        match *e {
            UffdEvent::Fork { .. } => UffdMsg::Fork { ufd },
            UffdEvent::Remap { from, to, len } => UffdMsg::Remap { from, to, len },
            UffdEvent::Remove { start, end } => UffdMsg::Remove { start, end },
            UffdEvent::Unmap { start, end } => UffdMsg::Unmap { start, end },
        }
    }

    /// `msg.event`.
    pub fn event(&self) -> u8 {
        match self {
            UffdMsg::Pagefault { .. } => event::PAGEFAULT,
            UffdMsg::Fork { .. } => event::FORK,
            UffdMsg::Remap { .. } => event::REMAP,
            UffdMsg::Remove { .. } => event::REMOVE,
            UffdMsg::Unmap { .. } => event::UNMAP,
        }
    }

    /// The 32 bytes: the event, then `arg`'s words (little-endian).
    fn encode(&self) -> Vec<u8> {
        let words: [u64; 3] = match *self {
            UffdMsg::Pagefault { address, flags, ptid } => [flags, address.0, u64::from(ptid)],
            UffdMsg::Fork { ufd } => [u64::from(ufd as u32), 0, 0],
            UffdMsg::Remap { from, to, len } => [from.0, to.0, len],
            UffdMsg::Remove { start, end } | UffdMsg::Unmap { start, end } => [start.0, end.0, 0],
        };
        let mut msg = vec![0u8; UFFD_MSG_SIZE as usize];
        msg[0] = self.event();
        for (i, w) in words.iter().enumerate() {
            msg[8 + 8 * i..16 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        msg
    }

    /// Decodes the 32 bytes `read(2)` returned; `None` for an event the model does not know.
    pub fn decode(msg: &[u8]) -> Option<UffdMsg> {
        let word = |at: usize| u64::from_le_bytes(msg[at..at + 8].try_into().expect("8 bytes"));
        let (a, b, c) = (word(8), word(16), word(24));
        Some(match msg[0] {
            event::PAGEFAULT => {
                UffdMsg::Pagefault { address: VirtAddr(b), flags: a, ptid: c as u32 }
            }
            event::FORK => UffdMsg::Fork { ufd: a as u32 as i32 },
            event::REMAP => UffdMsg::Remap { from: VirtAddr(a), to: VirtAddr(b), len: c },
            event::REMOVE => UffdMsg::Remove { start: VirtAddr(a), end: VirtAddr(b) },
            event::UNMAP => UffdMsg::Unmap { start: VirtAddr(a), end: VirtAddr(b) },
            _ => return None,
        })
    }
}
