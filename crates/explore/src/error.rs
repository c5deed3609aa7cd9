//! What an exploration reports when it cannot be carried out ([`ExploreError`]), and what a
//! strategy hands back when it finds a violating run ([`Found`]): shared by the search, the
//! exhaustive search, shrinking and replay, below all of them.

use crate::trial::Finding;
use engine::TaskId;
use std::fmt;

/// An exploration that could not be carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExploreError {
    /// The trial factory failed.
    Setup(String),
    /// Re-executing a schedule prefix went differently: the trial is not deterministic (it reads
    /// something outside the seed, or iterates a hash map).
    Nondeterministic { step: usize, detail: String },
    /// A replayed schedule does not fit the scenario.
    Diverged { step: usize, expected: Option<TaskId>, ready: Vec<TaskId> },
}

impl fmt::Display for ExploreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExploreError::Setup(m) => write!(f, "cannot build the trial: {m}"),
            ExploreError::Nondeterministic { step, detail } => write!(
                f,
                "the trial is not deterministic: re-executing choice {step} went differently \
                 ({detail})"
            ),
            ExploreError::Diverged { step, expected: Some(t), ready } if ready.is_empty() => {
                write!(
                    f,
                    "the schedule does not fit this scenario: choice {step} names task {t}, but \
                     the run has ended"
                )
            }
            ExploreError::Diverged { step, expected: Some(t), ready } => write!(
                f,
                "the schedule does not fit this scenario: choice {step} names task {t}, but the \
                 ready tasks are {}",
                task_list(ready)
            ),
            ExploreError::Diverged { step, expected: None, ready } => write!(
                f,
                "the schedule does not fit this scenario: it ends after {step} choices, but the \
                 run goes on (ready tasks {})",
                task_list(ready)
            ),
        }
    }
}

impl std::error::Error for ExploreError {}

pub(crate) fn task_list(tasks: &[TaskId]) -> String {
    let v: Vec<String> = tasks.iter().map(|t| t.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// A violating run as found by a strategy.
#[derive(Debug)]
pub(crate) struct Found {
    pub seed: u64,
    pub choices: Vec<TaskId>,
    pub preemptions: u32,
    pub finding: Finding,
}
