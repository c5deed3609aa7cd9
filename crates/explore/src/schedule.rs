//! Schedules: the list of task choices that reproduces a run, and their file format.
//!
//! A schedule names, for every choice the engine asked for, the task that ran (by task id:
//! tasks are numbered in spawn order, which a deterministic scenario fixes). With the run seed it
//! reproduces the run exactly, digest included; the strategy that found it is metadata.
//!
//! Text format (line-oriented, versioned; `#` starts a comment, blank lines are ignored):
//!
//! ```text
//! mmsim-schedule 1
//! strategy pct:3:1000 seed=7
//! seed 12
//! choices 4
//! 0
//! 1
//! 1
//! 0
//! ```

use crate::strategy::Strategy;
use engine::TaskId;
use std::fmt;
use std::str::FromStr;

/// The version of the text format this build writes and reads.
pub const SCHEDULE_FORMAT_VERSION: u32 = 1;

const MAGIC: &str = "mmsim-schedule";

/// A reproducible run: the seed and every task choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The exploration that found it.
    pub strategy: Strategy,
    /// The run seed.
    pub seed: u64,
    /// The task chosen at each scheduling point, in order.
    pub choices: Vec<TaskId>,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{MAGIC} {SCHEDULE_FORMAT_VERSION}")?;
        writeln!(f, "strategy {}", self.strategy)?;
        writeln!(f, "seed {}", self.seed)?;
        writeln!(f, "choices {}", self.choices.len())?;
        for t in &self.choices {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}

/// A schedule text that does not parse: the line (1-based) and what was expected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "schedule line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ScheduleError {}

impl FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Schedule, ScheduleError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.split_once('#').map_or(l, |(code, _)| code).trim()))
            .filter(|(_, l)| !l.is_empty());
        let end = text.lines().count() + 1;
        let mut field = |name: &str| -> Result<(usize, String), ScheduleError> {
            let Some((n, line)) = lines.next() else {
                return Err(ScheduleError {
                    line: end,
                    message: format!("expected `{name} ...`, found the end"),
                });
            };
            match line.split_once(char::is_whitespace) {
                Some((key, value)) if key == name => Ok((n, value.trim().to_string())),
                _ => Err(ScheduleError {
                    line: n,
                    message: format!("expected `{name} ...`, found `{line}`"),
                }),
            }
        };
        let (n, version) = field(MAGIC)?;
        if version != SCHEDULE_FORMAT_VERSION.to_string() {
            return Err(ScheduleError {
                line: n,
                message: format!(
                    "unsupported schedule format version `{version}` (this build reads version {SCHEDULE_FORMAT_VERSION})"
                ),
            });
        }
        let (n, strategy) = field("strategy")?;
        let strategy = strategy.parse().map_err(|e: crate::strategy::StrategyError| {
            ScheduleError { line: n, message: e.to_string() }
        })?;
        let number = |n: usize, what: &str, value: &str| -> Result<u64, ScheduleError> {
            value.parse().map_err(|_| ScheduleError {
                line: n,
                message: format!("expected {what} (a non-negative integer), found `{value}`"),
            })
        };
        let (n, seed) = field("seed")?;
        let seed = number(n, "the run seed", &seed)?;
        let (n, count) = field("choices")?;
        let count = number(n, "the number of choices", &count)?;
        let mut choices = Vec::new();
        for (n, line) in lines.by_ref() {
            if choices.len() as u64 == count {
                return Err(ScheduleError {
                    line: n,
                    message: format!("expected the end after {count} choices, found `{line}`"),
                });
            }
            let task = u32::try_from(number(n, "a task id", line)?).map_err(|_| ScheduleError {
                line: n,
                message: format!("task id `{line}` is out of range"),
            })?;
            choices.push(TaskId(task));
        }
        if choices.len() as u64 != count {
            return Err(ScheduleError {
                line: end,
                message: format!("expected {count} choices, found {}", choices.len()),
            });
        }
        Ok(Schedule { strategy, seed, choices })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Schedule {
        Schedule {
            strategy: Strategy::Pct { seed: 7, depth: 3, steps: 1000 },
            seed: 12,
            choices: [0, 1, 1, 0].map(TaskId).to_vec(),
        }
    }

    #[test]
    fn text_round_trips() {
        let s = sample();
        let text = s.to_string();
        assert_eq!(
            text,
            "mmsim-schedule 1\nstrategy pct:3:1000 seed=7\nseed 12\nchoices 4\n0\n1\n1\n0\n"
        );
        assert_eq!(text.parse::<Schedule>(), Ok(s.clone()));
        let commented = "# found by mmsim explore\nmmsim-schedule 1\n\nstrategy pct:3:1000 seed=7\n\
                         seed 12\nchoices 4\n0 # inc0 charge\n1\n1\n0\n";
        assert_eq!(commented.parse::<Schedule>(), Ok(s));
    }

    #[test]
    fn errors_name_the_line_and_what_was_expected() {
        let err = |text: &str| text.parse::<Schedule>().unwrap_err().to_string();
        assert_eq!(err(""), "schedule line 1: expected `mmsim-schedule ...`, found the end");
        assert_eq!(
            err("mmsim-schedule 2\n"),
            "schedule line 1: unsupported schedule format version `2` (this build reads version 1)"
        );
        assert_eq!(
            err("mmsim-schedule 1\nseed 3\n"),
            "schedule line 2: expected `strategy ...`, found `seed 3`"
        );
        assert!(
            err("mmsim-schedule 1\nstrategy lottery seed=1\n")
                .starts_with("schedule line 2: unknown strategy")
        );
        let head = "mmsim-schedule 1\nstrategy random seed=1\nseed 1\n";
        assert_eq!(
            err(&format!("{head}choices many\n")),
            "schedule line 4: expected the number of choices (a non-negative integer), found `many`"
        );
        assert_eq!(
            err(&format!("{head}choices 2\n0\nx\n")),
            "schedule line 6: expected a task id (a non-negative integer), found `x`"
        );
        assert_eq!(
            err(&format!("{head}choices 2\n0\n")),
            "schedule line 6: expected 2 choices, found 1"
        );
        assert_eq!(
            err(&format!("{head}choices 1\n0\n1\n")),
            "schedule line 6: expected the end after 1 choices, found `1`"
        );
        assert_eq!(
            err(&format!("{head}choices 1\n4294967296\n")),
            "schedule line 5: task id `4294967296` is out of range"
        );
    }
}
