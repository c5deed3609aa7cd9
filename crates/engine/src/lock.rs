//! Kernel locks with kernel semantics: spinlock, mutex, rwsem, completion, wait queue.
//!
//! - Spinlock (`kernel/locking/qspinlock.c`): a waiter keeps its CPU busy until the lock is
//!   handed to it; waiters are served FIFO (the MCS queue); a holder is never preempted.
//! - Mutex (`kernel/locking/mutex.c`, v4.10 and later: "locking/mutex: Rework mutex::owner"
//!   3ca0ff571b09 and "locking/mutex: Add lock handoff to avoid starvation" 9d659ae14b54, ids
//!   not verified; behaviour read in v6.1's `__mutex_lock_common` and
//!   `__mutex_trylock_common`): a waiter sleeps and gives its CPU away, queued FIFO. An unlock
//!   leaves the lock free and wakes the first waiter without granting it; the waiter retries
//!   when it runs (after the wake-up latency), so a running task (fast path, trylock) may take
//!   the lock in between. A woken first waiter that finds the lock taken sets HANDOFF and
//!   sleeps again; the next unlock then hands the lock straight to it. Not modelled: the
//!   kernel's optimistic spinning (of new lockers and of the woken first waiter).
//! - Rwsem (`kernel/locking/rwsem.c`, v5.3 and later): readers share the lock; once any task
//!   waits, new readers queue behind it (`down_read` fails its fast path when the WAITERS flag is
//!   set), so a waiting writer blocks later readers. On release the head of the queue is served:
//!   when the head is a reader, every queued reader (up to 256, the kernel's
//!   `MAX_READERS_WAKEUP`) is granted the lock at once (`rwsem_mark_wake` counts them in)
//!   while writers keep their places; a writer at the head is only woken and retries
//!   (`rwsem_try_write_lock`) when it runs, staying at the head if it fails. Until a hand-off is
//!   due, a running writer or reader that finds the rwsem free takes it even though tasks wait:
//!   a writer through `rwsem_try_write_lock` after queueing, a reader by the reader lock
//!   stealing of `rwsem_down_read_slowpath` (v5.11 and later, "locking/rwsem: Enable reader
//!   optimistic lock stealing" 1a728dff855a, id not verified; read in v6.1), which does not
//!   steal while readers hold the lock. Once the head has waited `RWSEM_WAIT_TIMEOUT` since it
//!   first blocked, the release hands the lock to the head directly and nobody steals; in
//!   v6.1 the head sets HANDOFF at its next failed try and takes the lock itself when next
//!   woken, with no stealing in between, which orders the same. Trylocks fail whenever anybody
//!   waits.
//!   `downgrade_write` turns the writer into a reader and wakes the queued readers if a reader
//!   heads the queue.
//! - Rwsem writer optimistic spinning (`rwsem_optimistic_spin`, CONFIG_RWSEM_SPIN_ON_OWNER; read
//!   in torvalds/linux `kernel/locking/rwsem.c` of the v5.3 rework, 00f3c5a3df2c; writers only
//!   since v5.16, 617f3ef95177 "locking/rwsem: Remove reader optimistic spinning"): a writer that
//!   finds the rwsem owned by a writer that is on its CPU (`owner_on_cpu`) does not queue but
//!   spins, keeping its CPU; when the owner releases, the first spinner takes the lock at once
//!   (`rwsem_try_write_lock_unqueued` ignores the WAITERS flag), stealing it from the queue, and
//!   the queue keeps waiting. Stealing stops once the head of the queue has waited
//!   `RWSEM_WAIT_TIMEOUT` (4 ms): the head then sets HANDOFF and is served next. Spinners stop
//!   and queue behind the waiters when the owner leaves its CPU (sleeps or is preempted), when
//!   readers or a sleeping waiter get the lock, or when a hand-off is due. Departures: a
//!   writer does not spin on a reader-owned rwsem (the kernel spins there for a bounded time,
//!   `rwsem_rspin_threshold`), the kernel's HANDOFF bit, set when the head notices its
//!   timeout, is here decided at each release and attempt from the head's wait, and a head
//!   writer that set HANDOFF does not spin on the owner (v6.1 does) but sleeps.
//! - Lock statistics: a contention counts once per acquisition, and its wait runs from the
//!   first block to the grant, retries included.
//! - Completion (`kernel/sched/completion.c`) and wait queue (`kernel/sched/wait.c`).
//! - Every acquisition attempt, hand-off and release writes the lock word, and pays a cache-line
//!   transfer when another CPU wrote it last ([`crate::cacheline`]): a granted attempt before it
//!   returns, a waiter handed the lock before it runs, a release with the task's next charge.
//!
//! Each acquisition is a named blocking point (the caller's source line, via `#[track_caller]`)
//! and goes through the simulated lockdep ([`lockdep`]). Lock *classes* are named by the
//! `&'static str` given at creation (`"mmap_lock"`), as lockdep keys classes by their
//! initialisation site.

pub(crate) mod lockdep;
pub(crate) mod op;
pub(crate) mod state;
pub(crate) mod stats;

use crate::core::Handle;
use crate::cx::Cx;
use op::{LockOp, Op};
use simcore::define_id;
use std::fmt;
use std::future::Future;
use std::panic::Location;

define_id!(
    /// A lock, completion or wait queue instance.
    pub struct LockId;
);

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Spinlock or mutex.
    Exclusive,
    Read,
    Write,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Exclusive => "exclusive",
            Mode::Read => "read",
            Mode::Write => "write",
        })
    }
}

/// A held lock; released on drop or by [`unlock`](LockGuard::unlock).
#[must_use = "the lock is released when the guard drops"]
pub struct LockGuard<'a> {
    cx: &'a Cx,
    lock: LockId,
    mode: Mode,
}

impl<'a> LockGuard<'a> {
    #[inline]
    fn new(cx: &'a Cx, lock: LockId, mode: Mode) -> LockGuard<'a> {
        LockGuard { cx, lock, mode }
    }

    pub fn lock(&self) -> LockId {
        self.lock
    }

    /// Releases the lock now (`spin_unlock`, `mutex_unlock`, `up_read`, `up_write`).
    pub fn unlock(self) {
        drop(self);
    }

    /// `downgrade_write`: turns a write hold of an rwsem into a read hold without letting a
    /// writer in between.
    pub fn downgrade(mut self) -> LockGuard<'a> {
        assert_eq!(self.mode, Mode::Write, "downgrade of a lock not held for write");
        self.cx.core().state.borrow_mut().downgrade(self.cx.task(), self.lock);
        self.mode = Mode::Read;
        self
    }
}

impl Drop for LockGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let mut st = self.cx.core().state.borrow_mut();
        if !st.tearing_down {
            st.release(self.cx.task(), self.lock, self.mode);
        }
    }
}

impl fmt::Debug for LockGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockGuard(#{} {})", self.lock, self.mode)
    }
}

/// The guard a lock future resolves to once the acquisition has succeeded.
async fn acquired<'a>(cx: &'a Cx, op: LockOp<'a>, lock: LockId, mode: Mode) -> LockGuard<'a> {
    let granted = op.await;
    debug_assert!(granted);
    LockGuard::new(cx, lock, mode)
}

/// The guard of a trylock, if it succeeded.
async fn tried<'a>(cx: &'a Cx, op: LockOp<'a>, lock: LockId, mode: Mode) -> Option<LockGuard<'a>> {
    op.await.then(|| LockGuard::new(cx, lock, mode))
}

macro_rules! lock_handle {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub struct $name(pub(crate) LockId);

        impl $name {
            pub fn id(self) -> LockId {
                self.0
            }
        }
    };
}

lock_handle!(
    /// A spinlock: waiters burn CPU time.
    SpinLock
);
lock_handle!(
    /// A sleeping mutex.
    Mutex
);
lock_handle!(
    /// A reader-writer semaphore with the kernel's writer-waiting rule.
    RwSem
);
lock_handle!(
    /// A completion (`wait_for_completion` / `complete`).
    Completion
);
lock_handle!(
    /// A wait queue: waiters sleep until woken; they re-check their condition themselves.
    WaitQueue
);

/// Exclusive locks: `lock`, `lock_nested`, `try_lock`.
macro_rules! exclusive_methods {
    ($name:ident) => {
        impl $name {
            #[track_caller]
            pub fn lock<'a>(self, cx: &'a Cx) -> impl Future<Output = LockGuard<'a>> + 'a {
                self.lock_nested(cx, 0)
            }

            /// Acquires with a lockdep subclass, for two locks of one class taken in a fixed
            /// order (`spin_lock_nested(ptl, SINGLE_DEPTH_NESTING)`).
            #[track_caller]
            pub fn lock_nested<'a>(
                self,
                cx: &'a Cx,
                subclass: u8,
            ) -> impl Future<Output = LockGuard<'a>> + 'a {
                let op = LockOp::new(
                    cx,
                    self.0,
                    Op::Acquire(Mode::Exclusive, subclass),
                    Location::caller(),
                );
                acquired(cx, op, self.0, Mode::Exclusive)
            }

            #[track_caller]
            pub fn try_lock<'a>(
                self,
                cx: &'a Cx,
            ) -> impl Future<Output = Option<LockGuard<'a>>> + 'a {
                let op =
                    LockOp::new(cx, self.0, Op::TryAcquire(Mode::Exclusive), Location::caller());
                tried(cx, op, self.0, Mode::Exclusive)
            }
        }
    };
}

exclusive_methods!(SpinLock);
exclusive_methods!(Mutex);

impl RwSem {
    /// `down_read`.
    #[track_caller]
    #[inline]
    pub fn read<'a>(self, cx: &'a Cx) -> impl Future<Output = LockGuard<'a>> + 'a {
        let op = LockOp::new(cx, self.0, Op::Acquire(Mode::Read, 0), Location::caller());
        acquired(cx, op, self.0, Mode::Read)
    }

    /// `down_write`.
    #[track_caller]
    pub fn write<'a>(self, cx: &'a Cx) -> impl Future<Output = LockGuard<'a>> + 'a {
        self.write_nested(cx, 0)
    }

    /// `down_write_nested` (e.g. the child's `mmap_lock` in `dup_mmap`).
    #[track_caller]
    pub fn write_nested<'a>(
        self,
        cx: &'a Cx,
        subclass: u8,
    ) -> impl Future<Output = LockGuard<'a>> + 'a {
        let op = LockOp::new(cx, self.0, Op::Acquire(Mode::Write, subclass), Location::caller());
        acquired(cx, op, self.0, Mode::Write)
    }

    /// `down_read_trylock`: fails if a writer holds the lock or anybody waits.
    #[track_caller]
    pub fn try_read<'a>(self, cx: &'a Cx) -> impl Future<Output = Option<LockGuard<'a>>> + 'a {
        let op = LockOp::new(cx, self.0, Op::TryAcquire(Mode::Read), Location::caller());
        tried(cx, op, self.0, Mode::Read)
    }

    /// `down_write_trylock`: fails if anybody holds the lock or waits.
    #[track_caller]
    pub fn try_write<'a>(self, cx: &'a Cx) -> impl Future<Output = Option<LockGuard<'a>>> + 'a {
        let op = LockOp::new(cx, self.0, Op::TryAcquire(Mode::Write), Location::caller());
        tried(cx, op, self.0, Mode::Write)
    }

    /// Whether any task holds the lock (for `lockdep_assert_held`-style checks).
    pub fn is_locked(self, handle: &Handle) -> bool {
        handle.core().state.borrow().locks[self.0].state.is_held()
    }
}

impl Completion {
    /// `wait_for_completion`: returns at once if `complete` was called more often than waited.
    #[track_caller]
    pub fn wait<'a>(self, cx: &'a Cx) -> impl Future<Output = ()> + 'a {
        let op = LockOp::new(cx, self.0, Op::Wait, Location::caller());
        async move {
            op.await;
        }
    }

    /// `complete`: wakes one waiter, or lets the next `wait` pass.
    pub fn complete(self, handle: &Handle) {
        handle.core().state.borrow_mut().complete(self.0, false);
    }

    /// `complete_all`: wakes every waiter and lets every later `wait` pass.
    pub fn complete_all(self, handle: &Handle) {
        handle.core().state.borrow_mut().complete(self.0, true);
    }
}

impl WaitQueue {
    /// Sleeps until `wake_up_one` or `wake_up_all`.
    #[track_caller]
    pub fn wait<'a>(self, cx: &'a Cx) -> impl Future<Output = ()> + 'a {
        let op = LockOp::new(cx, self.0, Op::Wait, Location::caller());
        async move {
            op.await;
        }
    }

    #[inline]
    pub fn wake_up_one(self, handle: &Handle) {
        handle.core().state.borrow_mut().wake_queue(self.0, false);
    }

    #[inline]
    pub fn wake_up_all(self, handle: &Handle) {
        handle.core().state.borrow_mut().wake_queue(self.0, true);
    }
}
