//! userfaultfd's non-cooperative events (fs/userfaultfd.c `dup_userfaultfd`,
//! `dup_userfaultfd_complete`, `mremap_userfaultfd_prep`/`_complete`, `userfaultfd_remove`,
//! `userfaultfd_unmap_prep`/`_complete`, `userfaultfd_event_wait_completion`,
//! `resolve_userfault_fork`; Linux v4.11 to v6.19, `era::uffd_noncooperative_events`).
//!
//! An event tells the handler that the registered address space changed under it. Each one is
//! queued on the context (`event_wqh`) and its sender sleeps until a `read(2)` takes it (or the
//! descriptor is released), so the handler learns of the change before the task that made it
//! goes on. A read returns pending fault messages first, then events in the order they were
//! posted. From the moment the sender decides to send an event until it is read, the context's
//! `mmap_changing` count makes `UFFDIO_COPY` and `UFFDIO_ZEROPAGE` EAGAIN from v4.18
//! (`era::uffd_mfill_waits_mmap_changing`).
//! - `UFFD_FEATURE_EVENT_FORK`: `fork` gives the child's copies of the VMAs a context of their
//!   own (one per parent context, with its features and flags), keeping `VM_UFFD_MISSING`;
//!   after `dup_mmap` drops both `mmap_lock`s, the parent sleeps in `fork` until the
//!   `UFFD_EVENT_FORK` message is read. The read installs a descriptor for the child's context
//!   in the reader's file table (`resolve_userfault_fork`) and reports it in `arg.fork.ufd`.
//!   If the parent's descriptor is released first, the child's context is released with it:
//!   its VMAs lose the registration.
//! - `EVENT_REMAP`: a VMA `mremap` moves keeps its registration, and once `mmap_lock` is
//!   dropped the caller sends `UFFD_EVENT_REMAP` (`from`, `to`, and the old length).
//! - `EVENT_REMOVE`: `MADV_DONTNEED` and `MADV_REMOVE` of a registered VMA drop `mmap_lock`
//!   and send `UFFD_EVENT_REMOVE` for the VMA's part of the range before zapping it; `madvise`
//!   then retakes the lock and looks the VMA up again (ENOMEM if it went).
//! - `EVENT_UNMAP`: `munmap`, the unmapping parts of `mremap` (the target of `MREMAP_FIXED`, a
//!   shrink, the old range of a move), an `mmap` with `MAP_FIXED` over a registered range and
//!   `brk` shrinking over one queue `UFFD_EVENT_UNMAP` with the whole range unmapped, once per
//!   context, and send it after dropping `mmap_lock`. The kernel's per-call lists (`uf`,
//!   `uf_unmap_early`, `uf_unmap`) are this task's list in `Cx`, sent in the order they were
//!   queued.
//!
//! Approximations: `MADV_FREE` sends no `UFFD_EVENT_REMOVE` (v6.8's `madvise_dontneed_free`,
//! which serves `MADV_FREE` with `MADV_DONTNEED`, sends one; the era it started is not
//! modelled); a fork whose page-table copy fails leaves its new contexts to the child instead
//! of releasing them (`dup_userfaultfd_fail`); a move that shrinks (`MREMAP_FIXED` with a
//! smaller `new_len`) reports the length moved where the kernel reports the `old_len` asked,
//! and a move that fails for want of memory still sends its `UFFD_EVENT_REMAP`.

use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::types::ids::{InodeId, MmId};
use crate::types::userfaultfd::{UffdEvent, feature};
use crate::userfaultfd::{UffdMsg, new_ctx, userfaultfd_reset, wake_released};
use crate::vma::Vma;
use simcore::VirtAddr;

/// The context of `v` if it asked for events of kind `wanted` (a `feature::EVENT_*` bit).
fn ctx_wanting(st: &KState, v: &Vma, wanted: u64) -> Option<InodeId> {
    v.uffd.filter(|c| st.uffd_ctx(*c).features & wanted != 0)
}

/// One more event on its way to context `ctx` (`atomic_inc(&ctx->mmap_changing)`).
fn changing(st: &mut KState, ctx: InodeId) {
    st.uffd.ctxs.get_mut(&ctx).expect("a registered VMA's context lives").mmap_changing += 1;
}

/// `dup_userfaultfd` for `copy`, the child's copy of a parent VMA: without `EVENT_FORK` it is
/// no longer registered; with it, it goes to the child context made for its parent context
/// (listed in `forks` as (parent's, child's)).
pub(crate) fn dup_userfaultfd(
    cx: &Cx,
    st: &mut KState,
    copy: &mut Vma,
    forks: &mut Vec<(InodeId, InodeId)>,
) {
    let Some(octx) = ctx_wanting(st, copy, feature::EVENT_FORK) else {
        userfaultfd_reset(copy);
        return;
    };
    let child = match forks.iter().find(|(o, _)| *o == octx) {
        Some(&(_, child)) => child,
        None => {
            let parent = st.uffd_ctx(octx);
            let inherited = (parent.flags, parent.features);
            let child = new_ctx(cx, st, copy.mm, inherited);
            changing(st, octx);
            forks.push((octx, child));
            child
        }
    };
    copy.uffd = Some(child);
}

/// `dup_userfaultfd_complete`: the parent's fork sends each `UFFD_EVENT_FORK` and waits for it.
pub(crate) async fn dup_userfaultfd_complete(cx: &Cx, forks: Vec<(InodeId, InodeId)>) {
    for (octx, child) in forks {
        event_wait_completion(cx, octx, UffdEvent::Fork { child }).await;
    }
}

/// `mremap_userfaultfd_prep` for `new`, the moved copy of a VMA, and the event it owes once
/// the move from `from` to `to` of `len` bytes is done: with `EVENT_REMAP` it stays registered
/// and `UFFD_EVENT_REMAP` is queued; without, it loses the registration from v5.0.
pub(crate) fn mremap_userfaultfd_prep(
    cx: &Cx,
    st: &mut KState,
    new: crate::types::ids::VmaId,
    (from, to, len): (VirtAddr, VirtAddr, u64),
) {
    if let Some(ctx) = ctx_wanting(st, st.vma(new), feature::EVENT_REMAP) {
        changing(st, ctx);
        cx.uffd_events().push((ctx, UffdEvent::Remap { from, to, len }));
    } else if crate::era::mremap_drops_uffd(cx.kernel().version) {
        userfaultfd_reset(st.vma_mut(new));
    }
}

/// `userfaultfd_unmap_prep` for `[start, end)` of `mm`, about to be unmapped: one
/// `UFFD_EVENT_UNMAP` of the whole range queued for each context with `EVENT_UNMAP` registered
/// on a VMA there.
pub(crate) fn userfaultfd_unmap_prep(
    cx: &Cx,
    st: &mut KState,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) {
    let vmas = st.mm(mm).vmas_in(start, end, |id| st.vma(id).end);
    for v in vmas {
        let Some(ctx) = ctx_wanting(st, st.vma(v), feature::EVENT_UNMAP) else { continue };
        let ev = UffdEvent::Unmap { start, end };
        if !cx.uffd_events().contains(&(ctx, ev)) {
            changing(st, ctx);
            cx.uffd_events().push((ctx, ev));
        }
    }
}

/// `userfaultfd_unmap_complete` and `mremap_userfaultfd_complete`: sends the events this
/// task's system call queued, each waiting for its read; called once `mmap_lock` is dropped.
pub(crate) async fn userfaultfd_complete(cx: &Cx) {
    let owed = std::mem::take(&mut *cx.uffd_events());
    for (ctx, ev) in owed {
        event_wait_completion(cx, ctx, ev).await;
    }
}

/// `userfaultfd_remove`'s test for VMA `v`: the context to send `UFFD_EVENT_REMOVE` to, if it
/// asked for it. The caller drops `mmap_lock` and sends it with [`userfaultfd_remove`].
pub(crate) fn userfaultfd_remove_ctx(st: &KState, v: crate::types::ids::VmaId) -> Option<InodeId> {
    ctx_wanting(st, st.vma(v), feature::EVENT_REMOVE)
}

/// `userfaultfd_remove`'s send: `UFFD_EVENT_REMOVE` of `[start, end)`, waiting for its read.
pub(crate) async fn userfaultfd_remove(cx: &Cx, ctx: InodeId, start: VirtAddr, end: VirtAddr) {
    match cx.st().uffd.ctxs.get_mut(&ctx) {
        Some(c) => c.mmap_changing += 1,
        None => return,
    }
    event_wait_completion(cx, ctx, UffdEvent::Remove { start, end }).await;
}

/// `userfaultfd_event_wait_completion`: posts `ev` on `ctx`, wakes the readers and sleeps until
/// a read takes it or the descriptor is released; a fork event never read releases the child's
/// context.
async fn event_wait_completion(cx: &Cx, ctx: InodeId, ev: UffdEvent) {
    let id = {
        let mut st = cx.st();
        let Some(c) = st.uffd.ctxs.get_mut(&ctx) else { return release_unread(cx, ev) };
        let id = c.next_id;
        c.next_id += 1;
        c.events.insert(id, ev);
        c.fd_wq.wake_up_all(cx);
        if c.event_wq.is_none() {
            c.event_wq = Some(cx.wait_queue("userfaultfd event_wqh (an event waiting to be read)"));
        }
        id
    };
    loop {
        let queue = {
            let mut st = cx.st();
            match st.uffd.ctxs.get_mut(&ctx) {
                Some(c) if c.events.contains_key(&id) => c.event_wq.expect("made with the event"),
                Some(c) => {
                    c.mmap_changing -= 1;
                    return;
                }
                None => break,
            }
        };
        queue.wait(cx).await;
    }
    release_unread(cx, ev);
}

/// A fork event whose parent context was released before anyone read it: the child's context
/// goes too, its VMAs unregistered.
fn release_unread(cx: &Cx, ev: UffdEvent) {
    if let UffdEvent::Fork { child } = ev {
        cx.st().userfaultfd_release(child);
        wake_released(cx);
    }
}

/// The read of event `id` of context `inode`: its message, the event completed and its sender
/// woken. A fork's installs a descriptor for the child's context in the reader's file table
/// (`resolve_userfault_fork`); when that fails the event stays queued.
pub(crate) fn read_event(
    cx: &Cx,
    st: &mut KState,
    inode: InodeId,
    id: u64,
    ev: UffdEvent,
) -> Result<Vec<u8>, Errno> {
    let ufd = match ev {
        UffdEvent::Fork { child } => {
            let reader = cx.current();
            let fd = st.procs[reader].unused_fd()?;
            let file = st.open_file(child, crate::fs::fmode::READ, false, false)?;
            st.procs[reader].fds.insert(fd, file);
            fd
        }
        _ => -1,
    };
    let ctx = st.uffd.ctxs.get_mut(&inode).expect("the caller found it");
    ctx.events.remove(&id);
    ctx.event_wq.expect("made with the event").wake_up_all(cx);
    Ok(UffdMsg::of_event(&ev, ufd).encode())
}
