//! Project tooling (`cargo xtask <command>`), in Rust rather than shell (rust-analyzer's xtask).
//!
//! - `cargo xtask test`: the whole test suite, exactly what CI runs: formatting, clippy with
//!   warnings denied, every Rust test (the layering and tidy checks are tests of this crate),
//!   then the Python package: a virtualenv at `.venv` (created when missing or broken), the
//!   pinned tools of `python/requirements-dev.txt` (installed only when that file changed since
//!   the last install), `maturin develop --release`, and `pytest python/tests`. Tests that cannot
//!   run here (no Chromium, qemu-user or root) append why to `target/skipped.log`, and the last
//!   line then says so instead of "all checks passed". With `--guest`, the scenarios also run
//!   natively in Debian's 6.1 and 6.12 kernels under qemu (`crates/cli/tests/guest.rs`; about
//!   four minutes here, the kernels fetched once into `~/.cache/mmsim/guest`).
//! - `cargo xtask python`: only the Python set-up of `cargo xtask test`: `.venv` with the pinned
//!   tools and the package built into it (`maturin develop --release`), without running any test;
//!   then `.venv/bin/python` imports `mmsim`.
//! - `cargo xtask bless-digests`: rewrites `crates/lab/tests/digests.txt`, the behaviour
//!   fingerprints of every scenario and experiment, after a change meant to alter behaviour (the
//!   test suite compares against it; a refactor leaves it unchanged).
//! - `cargo xtask bless-figures`: rewrites `crates/lab/tests/figures.txt`, the simulated value of
//!   every published figure at test scale, after a change meant to move what the report claims.
//! - `cargo xtask fuzz --minutes N [TARGET...]`: builds the fuzz harness (`fuzz/`, its own
//!   workspace) with AFL++ through `cargo afl` (installed from crates.io when missing; it works on
//!   the stable toolchain), writes each target's seed corpus under `target/fuzz/corpus/`, and
//!   fuzzes the targets (all of `mmsim_cli::fuzz::TARGETS` unless named) one after another,
//!   niced, sharing the N minutes; then prints executions, coverage, crashes and hangs per target.
//!   Findings land in `target/fuzz/out/TARGET/default/{crashes,hangs}/`; each becomes a
//!   regression input under `crates/cli/tests/fuzz/TARGET/` (see `tests/fuzz_regressions.rs`).
//!   `cargo xtask test` never needs the fuzzer.

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

fn rust_tests(guest: bool) -> Result<(), String> {
    Step::new("format", "cargo", &["fmt", "--all", "--", "--check"]).run()?;
    let clippy = ["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"];
    Step::new("clippy", "cargo", &clippy).run()?;
    let mut tests = Step::new("tests", "cargo", &["test", "--workspace", "--quiet"]);
    tests.cmd.env("MMSIM_SKIP_LOG", skip_log());
    if guest {
        tests.cmd.env("MMSIM_GUEST", "6.1,6.12");
    }
    tests.run()
}

/// Where the tests that could not run here write why (their `skipped` helpers).
fn skip_log() -> PathBuf {
    root().join("target/skipped.log")
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

/// The fuzz targets, as in `mmsim_cli::fuzz::TARGETS` (xtask depends on no crate of the
/// workspace; the harness refuses a name it does not have).
const FUZZ_TARGETS: [&str; 7] = ["scenario", "trace", "maps", "program", "replay", "block", "cli"];

/// Installs `cargo afl` and its AFL++ runtime when missing.
fn afl_installed() -> Result<(), String> {
    let works = Command::new("cargo").args(["afl", "--version"]).output();
    if works.is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    Step::new("install cargo-afl", "cargo", &["install", "--locked", "cargo-afl"]).run()?;
    // A runtime left by an earlier installation for this compiler is kept: cargo-afl refuses to
    // build it again (without `--force`) and says so.
    eprintln!("xtask: build AFL++: cargo afl config --build");
    let out = Command::new("cargo")
        .args(["afl", "config", "--build"])
        .output()
        .map_err(|e| format!("cannot run cargo afl: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || stderr.contains("already built") {
        return Ok(());
    }
    Err(format!("build AFL++ failed ({}):\n{stderr}", out.status))
}

/// `cargo xtask fuzz --minutes N [TARGET...]`.
fn fuzz(args: &[String]) -> Result<(), String> {
    let usage = || "usage: cargo xtask fuzz --minutes N [TARGET...]".to_string();
    let (minutes, named) = match args {
        [flag, n, rest @ ..] if flag == "--minutes" => {
            (n.parse::<u64>().map_err(|_| usage())?, rest)
        }
        _ => return Err(usage()),
    };
    let targets: Vec<&str> = if named.is_empty() {
        FUZZ_TARGETS.to_vec()
    } else {
        named.iter().map(String::as_str).collect()
    };
    afl_installed()?;
    let mut build = Step::new("fuzz build", "cargo", &["afl", "build", "--release"]);
    build.cmd.current_dir(root().join("fuzz"));
    build.run()?;
    let harness = root().join("fuzz/target/release/mmsim-fuzz");
    let work = root().join("target/fuzz");
    let seconds = (minutes * 60 / targets.len() as u64).max(1).to_string();
    std::fs::create_dir_all(work.join("out")).map_err(|e| format!("{}: {e}", work.display()))?;
    for t in &targets {
        let corpus = work.join("corpus").join(t);
        let out = work.join("out").join(t);
        let corpus_s = corpus.to_string_lossy();
        Step::new("fuzz seeds", &harness, &["seed", t, &corpus_s]).run()?;
        let (out_s, harness_s) = (out.to_string_lossy(), harness.to_string_lossy());
        let afl =
            ["-n", "19", "cargo", "afl", "fuzz", "-i", &corpus_s, "-o", &out_s, "-V", &seconds];
        let mut step = Step::new("fuzz", "nice", &afl);
        step.cmd.args(["-t", "5000", "-m", "4096", "--", &harness_s, t]);
        for (k, v) in [("AFL_AUTORESUME", "1"), ("AFL_NO_UI", "1"), ("AFL_SKIP_CPUFREQ", "1")] {
            step.cmd.env(k, v);
        }
        step.cmd.env("AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES", "1");
        step.run()?;
    }
    for t in &targets {
        let stats = work.join("out").join(t).join("default/fuzzer_stats");
        let text = std::fs::read_to_string(&stats).unwrap_or_default();
        let field = |k: &str| {
            let line = text.lines().find(|l| l.split(':').next().is_some_and(|n| n.trim() == k));
            line.and_then(|l| l.split_once(':')).map_or("?".into(), |(_, v)| v.trim().to_string())
        };
        eprintln!(
            "xtask: fuzz {t}: {} executions in {} s, {} edges ({} of the map), {} crashes, {} hangs",
            field("execs_done"),
            field("run_time"),
            field("edges_found"),
            field("bitmap_cvg"),
            field("saved_crashes"),
            field("saved_hangs")
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => {
            let _ = std::fs::remove_file(skip_log());
            let guest = match &args[1..] {
                [] => false,
                [flag] if flag == "--guest" => true,
                _ => {
                    eprintln!("usage: cargo xtask test [--guest]");
                    return ExitCode::from(2);
                }
            };
            rust_tests(guest).and_then(|()| python_tests())
        }
        Some("python") => python_env(),
        Some("bless-digests") => bless("digests", "digests.txt"),
        Some("bless-figures") => bless("figures", "figures.txt"),
        Some("fuzz") => fuzz(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask test [--guest] | cargo xtask bless-digests | cargo xtask bless-figures \
                 | cargo xtask fuzz --minutes N [TARGET...]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => {
            let skips = match args.first().map(String::as_str) {
                Some("test") => std::fs::read_to_string(skip_log()).unwrap_or_default(),
                _ => String::new(),
            };
            let skips: Vec<&str> = skips.lines().collect();
            if skips.is_empty() {
                eprintln!("xtask: all checks passed");
            } else {
                eprintln!(
                    "xtask: all checks that ran passed, but {} test(s) were SKIPPED: {}",
                    skips.len(),
                    skips.join("; ")
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
