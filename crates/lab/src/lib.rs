//! The edge between mmsim's models and its users: scenario files (parsing with line-accurate
//! errors, validation, running, expectations, reports), and later the reproduced experiments.
//!
//! Architecture invariant: `lab` configures, runs and reports; it never re-implements a mechanism.
//! File IO and serialisation live here (and in `cli`, `py`), never in the simulation crates.

pub mod budget;
pub mod calibrate;
pub mod profile_file;
pub mod reproduce;
pub mod scenario;
pub mod session;
pub mod swarm;
pub mod sweep;
