//! `mmsim`: the command-line front end, as a library so that the `mmsim` binary and the Python
//! package's `mmsim` command (through `mmsim._core.cli_main`) are one program.
//!
//! Subcommands are defined once here with clap; each lives in its own module. Exit codes: 0 on
//! success, 1 when a run finds what it was asked to look for (a failed expectation, a violation),
//! 2 on bad input.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod bench;
mod calibrate;
mod demo;
mod explore;
pub mod fuzz;
mod host;
mod list;
mod record;
mod replay;
mod reproduce;
mod run;
mod swarm;
mod sweep;

use clap::{Parser, Subcommand};
use std::ffi::OsString;

#[derive(Debug, Parser)]
#[command(name = "mmsim", version, about = "A deterministic simulator of Linux memory management")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario file; exit 0 when every expectation holds (or the scenario's `[requires]`
    /// excludes the kernel: printed as `skipped: REASON`), 1 when one fails, 2 on bad input.
    Run(run::RunArgs),
    /// Run a scenario natively on the host kernel and in the model at the host's kernel version,
    /// and print every operation and expectation side by side: exit 0 when they agree, 1 when
    /// one disagrees, 2 when the host cannot run it (docs/host.md).
    Diff(host::DiffArgs),
    /// Search a scenario's interleavings for violations; exit 1 with a minimised schedule when
    /// one is found, 0 when none is, 2 on bad input.
    Explore(explore::ExploreArgs),
    /// Reproduce the published measurements of the seed changes: a table "published vs
    /// simulated" per experiment, report.html and report.json.
    Reproduce(reproduce::ReproduceArgs),
    /// Run a scenario at every point of a grid of kernels, seeds, switches, costs and tunables:
    /// a row per point; exit 1 when a point's expectations fail, 2 on bad input.
    Sweep(sweep::SweepArgs),
    /// Replay a memory-reference trace (valgrind lackey or mmsim binary) through the simulated
    /// TLBs and page walk; exit 2 on bad input.
    Replay(replay::ReplayArgs),
    /// Record a real program's memory references and address space under qemu-user into a
    /// recorded program (`mmsim replay FILE` replays it); exit 2 when the host cannot record.
    Record(record::RecordArgs),
    /// Measure this machine's basic costs natively and write a profile named after the host
    /// (`profiles/HOST.toml`), with seed 001's hugetlb loops run natively and in the model on it
    /// side by side; exit 2 when something cannot be measured (docs/profiles.md).
    Calibrate(calibrate::CalibrateArgs),
    /// Swarm testing of the model: random valid scenarios with every checker on; exit 1 with
    /// each bug's seed and minimised scenario when one is found.
    Swarm(swarm::SwarmArgs),
    /// List the switches (with the kernel ranges of their defaults), costs, tunables or kernels
    /// a run can be set to.
    List(list::ListArgs),
    /// Trace tools.
    #[command(subcommand)]
    Trace(replay::TraceCommand),
    /// Small demonstrations of the engine.
    #[command(subcommand)]
    Demo(demo::Demo),
    /// Benchmarks that print throughput figures.
    #[command(subcommand)]
    Bench(bench::Bench),
}

/// Runs the command line `args` (the program name first) and returns the exit status.
pub fn main_with_args(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> u8 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; usage errors to stderr with 2.
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    let result = match cli.command {
        Command::Run(a) => return run::run(&a),
        Command::Diff(a) => return host::run_diff(&a),
        Command::Explore(a) => return explore::run(&a),
        Command::Sweep(a) => return sweep::run(&a),
        Command::Swarm(a) => return swarm::run(&a),
        Command::Replay(a) => return replay::run(&a),
        Command::Record(a) => return record::run(&a),
        Command::List(a) => return list::run(&a),
        Command::Trace(c) => return replay::trace_command(&c),
        Command::Reproduce(a) => reproduce::run(&a),
        Command::Calibrate(a) => calibrate::run(&a),
        Command::Demo(d) => demo::run(&d),
        Command::Bench(b) => bench::run(&b),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mmsim: {e}");
            2
        }
    }
}
