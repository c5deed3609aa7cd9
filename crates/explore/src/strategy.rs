//! Exploration strategies and their text form.
//!
//! - `random`: a uniformly random ready task at every choice (a random walk of the interleaving
//!   tree); trial `i` runs the engine's random-walk scheduler with seed `seed + i`.
//! - `pct:DEPTH[:STEPS]`: probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi,
//!   Nagarakatte, "A Randomized Scheduler with Probabilistic Guarantees of Finding Bugs",
//!   ASPLOS 2010), the engine's PCT scheduler with seed `seed + i` for trial `i`. A bug of depth
//!   `d` among `n` tasks in `k` steps shows with probability at least `1 / (n k^(d-1))` per trial.
//! - `dfs[:BOUND]`: bounded exhaustive search (see `dfs.rs`); every trial uses `seed`.
//!
//! Random and PCT trials run exactly what `Sim::new` runs with `SchedulerKind::Random` or
//! `SchedulerKind::Pct` and the same seed: the explorer only records their choices. Their text
//! (`pct:3:1000`) is the engine's `SchedulerKind` syntax, parsed by the engine.
//!
//! Text form: `SPEC seed=N`, for instance `pct:3:1000 seed=7` or `dfs:2 seed=0`.

use engine::SchedulerKind;
use std::fmt;
use std::str::FromStr;

/// How the explorer picks schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Random {
        seed: u64,
    },
    Pct {
        seed: u64,
        depth: u32,
        steps: u64,
    },
    /// Exhaustive search; with a bound, iteratively deepened from 0 preemptions up to it.
    Dfs {
        seed: u64,
        preemption_bound: Option<u32>,
    },
}

/// A strategy text that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrategyError(String);

impl fmt::Display for StrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StrategyError {}

impl Strategy {
    pub const SPECS: &'static str = "random, pct, pct:DEPTH, pct:DEPTH:STEPS, dfs or dfs:BOUND";

    /// Parses `random`, `pct[:DEPTH[:STEPS]]` or `dfs[:PREEMPTION_BOUND]` with the given seed.
    pub fn from_spec(spec: &str, seed: u64) -> Result<Strategy, StrategyError> {
        let unknown =
            || StrategyError(format!("unknown strategy `{spec}`: expected {}", Self::SPECS));
        if let Some(rest) = spec.strip_prefix("dfs") {
            let preemption_bound = match rest.strip_prefix(':') {
                None if rest.is_empty() => None,
                Some(bound) => Some(bound.parse().map_err(|_| {
                    StrategyError(format!(
                        "bad preemption bound `{bound}` in `{spec}`: expected a number of preemptions"
                    ))
                })?),
                None => return Err(unknown()),
            };
            return Ok(Strategy::Dfs { seed, preemption_bound });
        }
        match SchedulerKind::from_str(spec) {
            Ok(SchedulerKind::Random) => Ok(Strategy::Random { seed }),
            Ok(SchedulerKind::Pct { depth, steps }) => Ok(Strategy::Pct { seed, depth, steps }),
            Ok(SchedulerKind::TimeOrdered) => Err(unknown()),
            Err(e @ engine::ConfigError::BadPct { .. }) => Err(StrategyError(e.to_string())),
            Err(_) => Err(unknown()),
        }
    }

    pub fn seed(self) -> u64 {
        match self {
            Strategy::Random { seed } | Strategy::Pct { seed, .. } | Strategy::Dfs { seed, .. } => {
                seed
            }
        }
    }

    /// The engine scheduler of a randomised strategy; `None` for the exhaustive search.
    pub(crate) fn scheduler_kind(self) -> Option<SchedulerKind> {
        match self {
            Strategy::Random { .. } => Some(SchedulerKind::Random),
            Strategy::Pct { depth, steps, .. } => Some(SchedulerKind::Pct { depth, steps }),
            Strategy::Dfs { .. } => None,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Random { seed } => write!(f, "random seed={seed}"),
            Strategy::Pct { seed, depth, steps } => write!(f, "pct:{depth}:{steps} seed={seed}"),
            Strategy::Dfs { seed, preemption_bound: None } => write!(f, "dfs seed={seed}"),
            Strategy::Dfs { seed, preemption_bound: Some(b) } => write!(f, "dfs:{b} seed={seed}"),
        }
    }
}

impl FromStr for Strategy {
    type Err = StrategyError;

    /// Parses the `Display` form, `SPEC seed=N`.
    fn from_str(s: &str) -> Result<Strategy, StrategyError> {
        let mut words = s.split_whitespace();
        let (Some(spec), Some(seed), None) = (words.next(), words.next(), words.next()) else {
            return Err(StrategyError(format!("expected `SPEC seed=N`, found `{s}`")));
        };
        let seed = seed.strip_prefix("seed=").and_then(|n| n.parse().ok()).ok_or_else(|| {
            StrategyError(format!("expected `seed=N` after `{spec}`, found `{seed}`"))
        })?;
        Strategy::from_spec(spec, seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_errors_say_what_was_expected() {
        for s in [
            Strategy::Random { seed: 7 },
            Strategy::Pct { seed: 1, depth: 3, steps: 50 },
            Strategy::Dfs { seed: 0, preemption_bound: None },
            Strategy::Dfs { seed: 9, preemption_bound: Some(2) },
        ] {
            assert_eq!(s.to_string().parse::<Strategy>(), Ok(s), "{s}");
        }
        assert_eq!(
            Strategy::from_spec("pct:4", 5),
            Ok(Strategy::Pct { seed: 5, depth: 4, steps: 1000 })
        );
        let err = Strategy::from_spec("bfs", 0).unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown strategy `bfs`: expected random, pct, pct:DEPTH, pct:DEPTH:STEPS, dfs or dfs:BOUND"
        );
        assert!(Strategy::from_spec("dfs:x", 0).unwrap_err().to_string().contains("`x`"));
        assert!(Strategy::from_spec("dfsx", 0).is_err());
        assert!(Strategy::from_spec("time-ordered", 0).is_err());
        assert!(Strategy::from_spec("pct:0", 0).unwrap_err().to_string().contains("depth >= 1"));
        assert!("random".parse::<Strategy>().unwrap_err().to_string().contains("seed=N"));
        assert!("random seed=x".parse::<Strategy>().is_err());
    }
}
