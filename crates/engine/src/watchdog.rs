//! The watchdog's dump when every remaining task is blocked: who holds and who waits for which
//! lock (ChampSim's `print_deadlock`, the kernel's hung-task report with lockdep's held locks).

use crate::core::State;
use crate::task::{PointKind, Status};
use simcore::SimTime;
use std::fmt;

/// A blocked task in a deadlock dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedTask {
    pub name: String,
    /// What it waits for (`write mmap_lock#3`, `spinning on ptl#7`, ...).
    pub waits_for: String,
    pub at: String,
    /// Locks it holds, with where they were taken.
    pub holds: Vec<String>,
}

/// Every task that can no longer run, and the locks involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlockReport {
    pub now: SimTime,
    pub tasks: Vec<BlockedTask>,
    /// `lock: held by ..., waited for by ...` for each lock involved.
    pub locks: Vec<String>,
}

impl DeadlockReport {
    pub(crate) fn new(st: &State) -> DeadlockReport {
        let mut tasks = Vec::new();
        let mut involved = Vec::new();
        for (_, t) in st.tasks.iter() {
            if !matches!(t.status, Status::Blocked | Status::OnRunqueue)
                || t.daemon && t.held.is_empty()
            {
                continue;
            }
            let waits_for = match (t.status, t.point.kind) {
                (Status::OnRunqueue, _) => format!("CPU {} (owned by a blocked task)", t.cpu),
                (_, PointKind::Lock(l, m)) => {
                    involved.push(l);
                    let verb =
                        if st.locks[l].state.is_spin() { "spinning on" } else { "sleeping on" };
                    format!("{verb} {m} {}", st.lock_label(l))
                }
                (_, PointKind::Wait(l)) => {
                    involved.push(l);
                    format!("{} {}", st.locks[l].state.kind_name(), st.lock_label(l))
                }
                (_, PointKind::Join(j)) => format!("task {} to end", st.tasks[j].name),
                (_, k) => k.to_string(),
            };
            let holds = t
                .held
                .iter()
                .map(|h| {
                    involved.push(h.lock);
                    format!("{} {} (taken at {})", h.mode, st.lock_label(h.lock), h.at)
                })
                .collect();
            tasks.push(BlockedTask {
                name: t.name.clone(),
                waits_for,
                at: t.point.at.to_string(),
                holds,
            });
        }
        involved.sort_unstable();
        involved.dedup();
        let locks = involved.into_iter().map(|l| st.describe_lock(l)).collect();
        DeadlockReport { now: st.now, tasks, locks }
    }
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "watchdog: every remaining task is blocked at {}", self.now)?;
        for t in &self.tasks {
            writeln!(f, "  task {} waits for {} at {}", t.name, t.waits_for, t.at)?;
            for h in &t.holds {
                writeln!(f, "    holds {h}")?;
            }
        }
        for l in &self.locks {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}
