//! The interleaving explorer: runs a scenario's concurrent tasks under controlled schedulers that
//! may switch tasks at every named blocking point (lock operation, charge, wait), evaluates the
//! whole-system checkers after every step and the expectations at the end, and reports, minimises
//! and replays the schedules that break them.
//!
//! How it is used (the CLI's `mmsim explore` and the scenario runner sit on top):
//! 1. The caller gives a trial factory: `FnMut(TrialSetup) -> Result<Trial, String>` builds a
//!    fresh simulation with `setup.sim(config)`, spawns the tasks, and returns a [`Trial`] with
//!    its per-step checker, end checker, model fingerprint and state dump. Simulations cannot be
//!    cloned, so every trial re-executes from scratch (stateless model checking, as in CHESS).
//! 2. [`explore`] runs trials under a [`Strategy`]: `random` and `pct` (the engine's own
//!    schedulers, recorded) or `dfs` (bounded exhaustive search with preemption bounding and a
//!    visited-state cache; `dfs.rs` explains why that reduction and when it is sound). The budget
//!    is a number of schedules plus a `should_stop` callback from the edge (no clock here).
//! 3. A violation (failed check, panic, deadlock) is minimised (fewer preemptions, fewer
//!    choices) and returned as a [`Violation`] with its [`Schedule`] (a versioned text format)
//!    and readable [`Step`]s; [`replay`] reproduces it exactly, digest included. A schedule that
//!    reaches its event bound is neither a violation nor a pass: it is counted as
//!    [`Inconclusive`] (the first kept for a replay) and the search goes on.
//!
//! Architecture invariant: a simulation crate. No IO, clock, threads or hash-map iteration; the
//! same factory, options and commit give the same [`Outcome`]. The only process-wide effect is
//! the panic hook, which stays quiet about panics inside trials while an exploration runs
//! (`quiet.rs`).

mod dfs;
mod error;
mod quiet;
mod replay;
mod schedule;
mod search;
mod shrink;
mod strategy;
mod toy;
mod trial;

pub use error::ExploreError;
pub use replay::{Replay, replay};
pub use schedule::{SCHEDULE_FORMAT_VERSION, Schedule, ScheduleError};
pub use search::{Inconclusive, Options, Outcome, Progress, Violation, explore};
pub use strategy::{Strategy, StrategyError};
pub use toy::{LostUpdate, bench};
pub use trial::{Factory, Finding, Step, Trial, TrialSetup, ViolationKind};
