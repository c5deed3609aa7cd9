//! `mmsim run SCENARIO`: runs a scenario file and prints what it asked to show, the expectations
//! that failed (expected against observed, with the scenario line), and the run's fingerprint.

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lab::scenario::model::Show;
use lab::scenario::parse::parse_show;
use lab::scenario::run::{Overrides, Report, load, run as run_scenario};
use std::time::{Duration, Instant};

/// The machine overrides `mmsim run` and `mmsim sweep` share.
#[derive(Debug, Args)]
pub(crate) struct OverrideArgs {
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the kernel version (sets every switch to that version's behaviour).
    #[arg(long)]
    kernel: Option<String>,
    /// Override a switch (`cow_reuse=page_count`), a cost (`cost.zero_page_4k=300`) or a tunable
    /// (`read_ahead_kb=0`, `fault_around_bytes=4096`). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Run on the machine of a profile file (`mmsim calibrate` writes one; docs/profiles.md)
    /// instead of the scenario's `profile`; its `cpus`, `memory` and `costs` still apply.
    #[arg(long, value_name = "PATH")]
    profile_file: Option<String>,
    /// Scheduler: time-ordered, random, pct, pct:DEPTH or pct:DEPTH:STEPS.
    #[arg(long)]
    scheduler: Option<String>,
    /// Run the whole-system checkers after every simulation step (slow).
    #[arg(long)]
    check_every_step: bool,
    /// Host memory the simulated machine's state may take (`8GiB`); default half the host's
    /// memory. A run over it is refused with exit 2 (docs/errors.md).
    #[arg(long, value_name = "SIZE")]
    host_budget: Option<String>,
    /// Go on with a task's next operation after one fails, as `mmsim swarm` runs its random
    /// scenarios (a failure still makes the exit status 1).
    #[arg(long)]
    keep_going: bool,
    /// Scheduling events a run may take (default 2^32). A run that reaches it is refused with
    /// exit 2 (docs/errors.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_events: Option<u64>,
}

impl OverrideArgs {
    /// Whether any override was given (a native run takes none).
    fn is_set(&self) -> bool {
        self.seed.is_some()
            || self.kernel.is_some()
            || !self.sets.is_empty()
            || self.profile_file.is_some()
            || self.scheduler.is_some()
            || self.check_every_step
            || self.host_budget.is_some()
            || self.keep_going
            || self.max_events.is_some()
    }

    pub(crate) fn overrides(&self) -> Result<Overrides, String> {
        let mut o = Overrides {
            seed: self.seed,
            check_every_step: self.check_every_step,
            max_events: self.max_events,
            keep_going: self.keep_going,
            ..Overrides::default()
        };
        if let Some(s) = &self.scheduler {
            o.scheduler =
                Some(s.parse().map_err(|e: engine::ConfigError| format!("--scheduler: {e}"))?);
        }
        kernel_and_sets(&mut o, self.kernel.as_deref(), &self.sets)?;
        if let Some(path) = &self.profile_file {
            o.profile = Some(crate::calibrate::load_profile(path)?);
        }
        if let Some(b) = &self.host_budget {
            let bytes = lab::scenario::parse::parse_size(b)
                .filter(|b| b.as_u64() > 0)
                .ok_or_else(|| format!("--host-budget {b}: expected a size like \"8GiB\""))?;
            o.host_budget = Some(lab::budget::HostBudget { bytes });
        }
        Ok(o)
    }
}

/// Applies `--kernel` and the `--set KEY=VALUE`s to `o`.
pub(crate) fn kernel_and_sets(
    o: &mut Overrides,
    kernel: Option<&str>,
    sets: &[String],
) -> Result<(), String> {
    if let Some(k) = kernel {
        o.kernel = Some(k.parse().map_err(|e: String| format!("--kernel: {e}"))?);
    }
    for kv in sets {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set {kv}: expected KEY=VALUE"))?;
        o.sets.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(())
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The scenario file (TOML; see docs/scenarios.md).
    scenario: String,
    #[command(flatten)]
    machine: OverrideArgs,
    /// Also print an observable: smaps:PROCESS, smaps_rollup:PROCESS, maps:PROCESS,
    /// status:PROCESS, stat:PROCESS, vmstat, meminfo, lock_stat, lockdep, memory.stat:CGROUP,
    /// lru_gen, inspect:PROCESS:ADDR. Repeatable.
    #[arg(long)]
    show: Vec<String>,
    /// Print the model's state at an address after the run, by kernel names (the entries
    /// that map it and the folio's fields, as drgn would): PROCESS:ADDR, where ADDR is a number
    /// or a bound name plus an offset (`buf+0x1000`). The same as `--show inspect:PROCESS:ADDR`.
    /// Repeatable.
    #[arg(long, value_name = "PROCESS:ADDR")]
    inspect: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also print every operation's result and every expectation's reading, by line (what a
    /// read returned, where a mapping landed, what an observable read)
    #[arg(long)]
    readings: bool,
    /// Where to run it: `model` (mmsim, the default) or `host` (natively on this machine's own
    /// kernel, as root; docs/host.md).
    #[arg(long, default_value = "model", value_parser = ["model", "host"])]
    on: String,
    #[command(flatten)]
    native: crate::host::NativeArgs,
}

fn overrides(a: &RunArgs) -> Result<Overrides, String> {
    let mut o = a.machine.overrides()?;
    o.show = a
        .show
        .iter()
        .map(|s| parse_show(s).map_err(|e| format!("--show: {e}")))
        .collect::<Result<Vec<Show>, _>>()?;
    for i in &a.inspect {
        o.show.push(parse_show(&format!("inspect:{i}")).map_err(|e| format!("--inspect: {e}"))?);
    }
    Ok(o)
}

pub(crate) fn run(a: &RunArgs) -> u8 {
    let bad = |e: String| {
        eprintln!("mmsim: {e}");
        2
    };
    if a.on == "host" {
        if a.machine.is_set() || !a.show.is_empty() || !a.inspect.is_empty() {
            return bad("--on host runs the host's own kernel: --kernel, --set, --seed, \
                        --profile-file, --scheduler, --show and --inspect apply to the model only"
                .into());
        }
        return crate::host::run_on_host(&a.scenario, &a.native, a.json);
    }
    let o = match overrides(a) {
        Ok(o) => o,
        Err(e) => return bad(e),
    };
    let scenario = match load(&a.scenario) {
        Ok(s) => s,
        Err(e) => return bad(e.to_string()),
    };
    let start = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut progress = |now: simcore::SimTime| {
        if start.elapsed() < Duration::from_secs(1) {
            return;
        }
        let b = bar.get_or_insert_with(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                    .expect("valid template"),
            );
            b
        });
        b.set_message(format!(
            "{}: virtual time {}",
            scenario.file,
            now.since(simcore::SimTime::ZERO)
        ));
        b.tick();
    };
    let report = run_scenario(&scenario, &o, &mut progress);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let report = match report {
        Ok(r) => r,
        Err(e) => return bad(e.to_string()),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("a report serialises"));
    } else {
        print_report(&report, a.readings);
    }
    if let Some(why) = &report.refused {
        return bad(format!("{}: refused: {why}", report.scenario));
    }
    if report.passed() { 0 } else { 1 }
}

fn print_report(r: &Report, readings: bool) {
    for (title, text) in &r.shown {
        println!("==> {title} <==");
        print!("{text}");
    }
    println!(
        "scenario {} (kernel {}, profile {}, seed {})",
        r.scenario, r.kernel, r.profile, r.seed
    );
    let switches: Vec<String> = r.switches.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("switches {}", switches.join(" "));
    for x in r.readings.iter().filter(|_| readings) {
        let unmet = if x.held { String::new() } else { format!(" (expected {})", x.expected) };
        println!("{}:{}: {}: {}{unmet}", r.scenario, x.line, x.what, x.observed);
    }
    for f in &r.failures {
        println!("FAIL {}:{}", r.scenario, f.line);
        println!("  expected: {}", f.expected);
        println!("  observed: {}", f.observed);
    }
    if let Some(s) = &r.stopped {
        println!("STOPPED {s}");
    }
    if let Some(why) = &r.skipped {
        println!("{why}");
        return;
    }
    let verdict =
        if r.passed() { "all hold".to_string() } else { format!("{} failed", r.failures.len()) };
    println!(
        "{} steps, {} operations, {} expectations on observables: {verdict}",
        r.steps, r.operations, r.expectations
    );
    println!("virtual time {} ns, {} events, digest {}", r.virtual_time_ns, r.events, r.digest);
}
