//! Engine configuration and its validation.

use crate::cacheline::LineCosts;
use crate::cpu::SwitchCosts;
use crate::membus::BusCosts;
use simcore::SimDuration;
use std::fmt;
use std::str::FromStr;

/// Which scheduler decides the next task at each blocking point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    /// Earliest virtual time first, ties by sequence number: the performance-run default.
    TimeOrdered,
    /// A uniformly random runnable task at every step (a random walk of the interleavings).
    Random,
    /// Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010): random task priorities
    /// and `depth - 1` priority change points drawn from the first `steps` steps.
    Pct { depth: u32, steps: u64 },
}

impl SchedulerKind {
    pub const NAMES: &'static str = "time-ordered, random, pct, pct:DEPTH or pct:DEPTH:STEPS";
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedulerKind::TimeOrdered => f.write_str("time-ordered"),
            SchedulerKind::Random => f.write_str("random"),
            SchedulerKind::Pct { depth, steps } => write!(f, "pct:{depth}:{steps}"),
        }
    }
}

impl FromStr for SchedulerKind {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<SchedulerKind, ConfigError> {
        let unknown = || ConfigError::UnknownScheduler(s.to_string());
        let mut parts = s.split(':');
        match parts.next().unwrap_or_default() {
            "time-ordered" | "time" if parts.clone().next().is_none() => {
                Ok(SchedulerKind::TimeOrdered)
            }
            "random" if parts.clone().next().is_none() => Ok(SchedulerKind::Random),
            "pct" => {
                let mut num = |default: u64| -> Result<u64, ConfigError> {
                    parts.next().map_or(Ok(default), |p| p.parse().map_err(|_| unknown()))
                };
                let depth = u32::try_from(num(2)?).map_err(|_| unknown())?;
                let steps = num(1000)?;
                if parts.next().is_some() {
                    return Err(unknown());
                }
                if depth == 0 || steps == 0 {
                    return Err(ConfigError::BadPct { depth, steps });
                }
                Ok(SchedulerKind::Pct { depth, steps })
            }
            _ => Err(unknown()),
        }
    }
}

/// The host's events budget of a run unless the user changes it (`--max-events`): about three
/// minutes of host time (a fault-heavy run takes 6 to 7 million events a second on the
/// development machine), a thousand times the heaviest shipped scenario; see `lab::budget`.
pub const DEFAULT_EVENT_BUDGET: u64 = 1 << 30;

/// Everything the engine needs to start a run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of simulated CPUs.
    pub cpus: u32,
    /// The run seed: every random choice derives from it.
    pub seed: u64,
    pub scheduler: SchedulerKind,
    /// Stop with [`SimError::EventLimit`](crate::SimError) after this many scheduling events.
    pub max_events: u64,
    /// Delay between waking a sleeping task and its running again (a machine-profile cost).
    pub wakeup_latency: SimDuration,
    /// CPU time after which a task is preempted at the end of a charge if others wait for its CPU.
    pub timeslice: SimDuration,
    /// Keep the list of scheduling events (for the explorer's readable schedules).
    pub trace: bool,
    /// What a lock word's cache line costs to move between CPUs (machine-profile costs; zero
    /// charges nothing).
    pub line_costs: LineCosts,
    /// What a CPU's passing from one task to another costs (machine-profile costs; zero
    /// charges nothing; `cpu` module note).
    pub switch_costs: SwitchCosts,
    /// Each socket's memory bandwidth (a machine-profile figure; zero is no limit).
    pub bus_costs: BusCosts,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cpus: 1,
            seed: 0,
            scheduler: SchedulerKind::TimeOrdered,
            max_events: 1 << 40,
            wakeup_latency: SimDuration::ZERO,
            timeslice: SimDuration::from_ms(4),
            trace: false,
            line_costs: LineCosts::default(),
            switch_costs: SwitchCosts::default(),
            bus_costs: BusCosts::default(),
        }
    }
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cpus == 0 {
            return Err(ConfigError::NoCpus);
        }
        if self.cpus > 4096 {
            return Err(ConfigError::TooManyCpus(self.cpus));
        }
        if self.max_events == 0 {
            return Err(ConfigError::ZeroEventBound);
        }
        if self.timeslice.is_zero() {
            return Err(ConfigError::ZeroTimeslice);
        }
        if let SchedulerKind::Pct { depth, steps } = self.scheduler
            && (depth == 0 || steps == 0)
        {
            return Err(ConfigError::BadPct { depth, steps });
        }
        Ok(())
    }
}

/// An invalid engine configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    NoCpus,
    TooManyCpus(u32),
    ZeroEventBound,
    ZeroTimeslice,
    UnknownScheduler(String),
    BadPct { depth: u32, steps: u64 },
    NoSuchCpu { cpu: u32, cpus: u32 },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoCpus => f.write_str("a machine needs at least one CPU (cpus = 0)"),
            ConfigError::TooManyCpus(n) => write!(f, "{n} CPUs: at most 4096 are supported"),
            ConfigError::ZeroEventBound => f.write_str("max_events must be at least 1"),
            ConfigError::ZeroTimeslice => f.write_str("timeslice must be longer than 0 ns"),
            ConfigError::UnknownScheduler(s) => {
                write!(f, "unknown scheduler `{s}`: expected one of {}", SchedulerKind::NAMES)
            }
            ConfigError::BadPct { depth, steps } => {
                write!(f, "pct needs depth >= 1 and steps >= 1, got depth {depth}, steps {steps}")
            }
            ConfigError::NoSuchCpu { cpu, cpus } => {
                write!(f, "CPU {cpu} does not exist: the machine has CPUs 0..{}", cpus - 1)
            }
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scheduler_names() {
        assert_eq!("time-ordered".parse(), Ok(SchedulerKind::TimeOrdered));
        assert_eq!("random".parse(), Ok(SchedulerKind::Random));
        assert_eq!("pct".parse(), Ok(SchedulerKind::Pct { depth: 2, steps: 1000 }));
        assert_eq!("pct:3:50".parse(), Ok(SchedulerKind::Pct { depth: 3, steps: 50 }));
        let err = "fifo".parse::<SchedulerKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown scheduler `fifo`: expected one of time-ordered, random, pct, pct:DEPTH or \
             pct:DEPTH:STEPS"
        );
        assert!(matches!("pct:0".parse::<SchedulerKind>(), Err(ConfigError::BadPct { .. })));
        assert!("random:2".parse::<SchedulerKind>().is_err());
    }

    #[test]
    fn rejects_impossible_machines() {
        let cfg = SimConfig { cpus: 0, ..SimConfig::default() };
        assert_eq!(cfg.validate(), Err(ConfigError::NoCpus));
        let cfg = SimConfig { max_events: 0, ..SimConfig::default() };
        assert_eq!(cfg.validate(), Err(ConfigError::ZeroEventBound));
        assert_eq!(SimConfig::default().validate(), Ok(()));
    }
}
