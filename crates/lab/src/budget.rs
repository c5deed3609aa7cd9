//! The host's budget for a run: how much host memory the simulated machine's state may take
//! (per-frame state, page tables, page contents), so that a scenario touching more memory than
//! the host has is refused with the numbers instead of growing until the host dies; and how many
//! scheduling events it may take, so that a run that would go on for hours of host time (a
//! trace from a pipe that never ends, a scenario touching terabytes page by page) is refused
//! with the numbers instead.
//!
//! The default is half the host's memory (`MemTotal` in `/proc/meminfo`; [`FALLBACK`] where that
//! cannot be read); `--host-budget SIZE` changes it. A run checks its use every
//! [`CHECK_EVERY`] scheduling events and stops, refused (exit 2), when it is over. The state's
//! cost grows with what a run touches, never with the configured sizes (memory, swap and pmem
//! are lazy), so nothing can be refused before the run starts.
//!
//! The events budget is the engine's event bound (`SimConfig::max_events`): [`DEFAULT_EVENTS`]
//! (2^30) unless `--max-events N` changes it. Every charge counts, carried on or not, so the
//! host time a run takes grows with its events: a fault-heavy run takes 6 to 7 million a second
//! here (`touch` of 4 GiB: 7.3 million events in 1.1 s), so the budget is about three minutes,
//! and a run that could not finish in minutes (a `touch` of 60 TiB, page by page) is refused
//! with the numbers. It is not taken from the host's speed, so that a run is refused or not
//! the same way on every host (determinism: same input, same outcome). Costs that grow with
//! live objects rather than events are bounded by the kernel's own limits (`SHMMNI` segments,
//! `RLIMIT_NOFILE` descriptors). A run that reaches it is refused (exit 2) at that event, with
//! the numbers (`SimError::over_event_budget`).

use mm::kernel::KState;
use simcore::Bytes;

/// The budget where the host's memory cannot be read.
pub const FALLBACK: Bytes = Bytes::gib(4);

/// Scheduling events between two checks of a run's host memory.
pub const CHECK_EVERY: u64 = 1 << 16;

pub use engine::DEFAULT_EVENT_BUDGET as DEFAULT_EVENTS;

/// Host memory a run may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostBudget {
    pub bytes: Bytes,
}

impl HostBudget {
    /// Half the host's memory.
    pub fn from_host() -> HostBudget {
        let total_kb = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        let bytes = total_kb.map_or(FALLBACK, |kb| Bytes(kb.saturating_mul(1024) / 2));
        HostBudget { bytes }
    }

    /// Host bytes the kernel state takes now: per-frame state, page tables and page contents.
    pub fn in_use(st: &KState) -> Bytes {
        Bytes((st.folios.host_bytes() + st.pt.host_bytes() + st.mem.host_bytes()) as u64)
    }

    /// `Err` with the numbers when `st` takes more than the budget.
    pub fn check(&self, st: &KState) -> Result<(), String> {
        let used = HostBudget::in_use(st);
        if used > self.bytes {
            return Err(format!(
                "the simulated machine's state takes {} MiB of host memory, over the host budget \
                 of {} MiB (--host-budget; default half the host's memory)",
                used.as_u64().div_ceil(1 << 20),
                self.bytes.as_u64() >> 20
            ));
        }
        Ok(())
    }

    /// A share of the budget, for one of `n` runs at once.
    pub fn share(self, n: usize) -> HostBudget {
        HostBudget { bytes: Bytes(self.bytes.as_u64() / n.max(1) as u64) }
    }
}
