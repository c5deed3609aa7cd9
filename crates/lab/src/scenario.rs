//! Scenario files: a machine, files, processes, and steps of concurrent tasks running
//! syscall-level operations, with expectations on observables — so a scenario is also a test.
//! The format is documented in `docs/scenarios.md`.
//!
//! Pipeline: [`node`] reads TOML into a tree that remembers source lines; [`parse`] turns it into
//! the typed [`model`], checking every name, value and reference (bad input is a
//! [`ScenarioError`] naming the file, the line and what was expected); [`run`] builds the machine
//! and executes the steps, [`interp`] running each task's operations on a simulated thread and
//! [`expect`] reading the observables.
//!
//! Adding an operation is local: a variant in `model::OpKind`, its parsing in `parse/ops.rs`, its
//! execution in `interp::execute`.

pub mod expect;
pub mod explore;
pub mod interp;
pub mod limits;
pub mod model;
pub mod node;
pub mod parse;
pub mod race;
pub mod run;

use std::fmt;

/// Bad input: a scenario that cannot be run as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based line, 0 when the problem is not tied to a line (an unreadable file).
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}
