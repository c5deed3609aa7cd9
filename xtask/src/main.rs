//! Project tooling (`cargo xtask <command>`), in Rust rather than shell (rust-analyzer's xtask).
//!
//! - `cargo xtask test`: the whole test suite, exactly what CI runs: formatting, clippy with
//!   warnings denied, every Rust test (the layering and tidy checks are tests of this crate),
//!   then the Python package: a virtualenv at `.venv` (created when missing or broken), the
//!   pinned tools of `python/requirements-dev.txt` (installed only when that file changed since
//!   the last install), `maturin develop --release`, and `pytest python/tests`.
//! - `cargo xtask python`: only the Python set-up of `cargo xtask test`: `.venv` with the pinned
//!   tools and the package built into it (`maturin develop --release`), without running any test;
//!   then `.venv/bin/python` imports `mmsim`.
//! - `cargo xtask bless-digests`: rewrites `crates/lab/tests/digests.txt`, the behaviour
//!   fingerprints of every scenario and experiment, after a change meant to alter behaviour (the
//!   test suite compares against it; a refactor leaves it unchanged).
//! - `cargo xtask bless-figures`: rewrites `crates/lab/tests/figures.txt`, the simulated value of
//!   every published figure at test scale, after a change meant to move what the report claims.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// A step: a name for messages and the command to run.
struct Step {
    name: &'static str,
    cmd: Command,
}

impl Step {
    fn new(name: &'static str, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Step {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(root());
        Step { name, cmd }
    }

    fn run(mut self) -> Result<(), String> {
        let shown: Vec<String> = std::iter::once(self.cmd.get_program())
            .chain(self.cmd.get_args())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        eprintln!("xtask: {}: {}", self.name, shown.join(" "));
        match self.cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("{} failed ({s})", self.name)),
            Err(e) => Err(format!("cannot run {}: {e}", shown[0])),
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").into()
}

fn rust_tests() -> Result<(), String> {
    Step::new("format", "cargo", &["fmt", "--all", "--", "--check"]).run()?;
    let clippy = ["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"];
    Step::new("clippy", "cargo", &clippy).run()?;
    Step::new("tests", "cargo", &["test", "--workspace", "--quiet"]).run()
}

/// Makes `.venv` (when missing or broken) with the pinned tools, and builds the package into it.
fn python_env() -> Result<(), String> {
    let root = root();
    let venv = root.join(".venv");
    let bin = venv.join("bin");
    let python = bin.join("python");
    let usable = Command::new(&python).args(["-c", "import sys"]).output();
    if !usable.is_ok_and(|o| o.status.success()) {
        let venv = venv.to_string_lossy();
        Step::new("venv", "python3", &["-m", "venv", "--clear", &venv]).run()?;
    }
    let requirements = root.join("python/requirements-dev.txt");
    let wanted = std::fs::read_to_string(&requirements)
        .map_err(|e| format!("{}: {e}", requirements.display()))?;
    let stamp = venv.join(".requirements-dev.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        let req = requirements.to_string_lossy();
        let pip = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", &req];
        Step::new("python deps", &python, &pip).run()?;
        std::fs::write(&stamp, &wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    let mut build = Step::new("python build", bin.join("maturin"), &["develop", "--release"]);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path)))
        .map_err(|e| format!("PATH: {e}"))?;
    build.cmd.env("VIRTUAL_ENV", &venv).env("PATH", path);
    build.run()
}

/// Builds the Python package into `.venv` and runs its tests.
fn python_tests() -> Result<(), String> {
    python_env()?;
    let python = root().join(".venv/bin/python");
    Step::new("python tests", &python, &["-m", "pytest", "-q", "python/tests"]).run()
}

/// Reruns the golden test `test` of crate `lab` with `MMSIM_BLESS`, which rewrites its file.
fn bless(test: &str, file: &str) -> Result<(), String> {
    let args = ["test", "--release", "-p", "lab", "--test", test, "--quiet"];
    let mut step = Step::new("bless", "cargo", &args);
    step.cmd.env("MMSIM_BLESS", "1");
    step.run()?;
    eprintln!("xtask: wrote crates/lab/tests/{file}");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => rust_tests().and_then(|()| python_tests()),
        Some("python") => python_env(),
        Some("bless-digests") => bless("digests", "digests.txt"),
        Some("bless-figures") => bless("figures", "figures.txt"),
        _ => {
            eprintln!(
                "usage: cargo xtask test | cargo xtask bless-digests | cargo xtask bless-figures"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => {
            eprintln!("xtask: all checks passed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
