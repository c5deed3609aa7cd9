//! A deterministic, single-threaded executor of `async` tasks over virtual time.
//!
//! Mechanisms are written the way kernel code reads: an `async fn` that takes locks and charges
//! costs. Every `charge`, lock acquisition, sleep and wait is a *named blocking point* where the
//! [`Scheduler`] may switch tasks. In performance runs the time-ordered scheduler picks the
//! earliest virtual time (ties by sequence number); in exploration runs a random or PCT scheduler
//! picks among runnable tasks and also stops before every uncontended acquisition.
//!
//! The model of a CPU: a task owns its CPU from the moment it resumes until it sleeps (waits on a
//! mutex, rwsem, completion, wait queue, timer or join) or ends. `charge(d)` keeps the CPU busy
//! for `d`; spinning on a spinlock keeps it busy until the lock is handed over. Other tasks placed
//! on a busy CPU wait on its run queue; a task that has used a time slice is preempted at the end
//! of a charge unless it holds a spinlock (`preempt_count > 0`, as in a kernel with preemption
//! disabled under spinlocks). A CPU that starts a task other than the one that ran on it last
//! charges it a context switch (`cpu`: by the tasks' address spaces, opaque tags).
//!
//! Architecture invariant: the engine knows nothing about memory. It does no IO, reads no wall
//! clock, spawns no thread; every random choice comes from the run seed through a named stream.

mod cacheline;
mod config;
mod core;
mod cpu;
mod cx;
mod fairness;
mod lock;
mod membus;
mod sched;
mod task;
mod watchdog;

pub use cacheline::{CacheLine, LineCosts};
pub use config::{ConfigError, DEFAULT_EVENT_BUDGET, SchedulerKind, SimConfig};
pub use core::{Handle, RunReport, Sim, SimError};
pub use cpu::{CpuId, CpuStats, SwitchCosts, TaskContext};
pub use cx::{Cx, PointFuture};
pub use lock::lockdep::{LockdepKind, LockdepReport};
pub use lock::stats::LockClassStats;
pub use lock::{Completion, LockGuard, LockId, Mutex, RwSem, SpinLock, WaitQueue};
pub use membus::BusCosts;
pub use sched::{ReadyEntry, Scheduler, build as build_scheduler};
pub use task::{TaskId, TaskStats};
pub use watchdog::DeadlockReport;
