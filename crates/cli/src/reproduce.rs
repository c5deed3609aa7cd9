//! `mmsim reproduce [EXPERIMENT...]`: runs the published experiments over several seeds on host
//! threads, prints a summary of every seed change and the table "published vs simulated" of
//! each experiment, and writes `report.html` (with the figures) and `report.json` to the output
//! directory. Progress goes to stderr: a bar per running seed on a terminal, a plain line per
//! phase otherwise (a log, CI).

use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use lab::reproduce::report::{Provenance, html_page, page_json, summary_table};
use lab::reproduce::{EXPERIMENTS, Experiment, Progress, SEED_CHANGES, Scale, find, run_seeds};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

/// The seeds every headline is measured over by default: six. The experiments whose workload
/// draws on the seed run all six, the others once; the whole run takes 135 s on two idle cores
/// (README, "Two commands").
const DEFAULT_SEEDS: &str = "1..7";

#[derive(Debug, Args)]
pub(crate) struct ReproduceArgs {
    /// Experiments to run (all when none is named): see `--list`.
    experiments: Vec<String>,
    /// The run seeds: `N`, a list `1,4`, or a range `1..7` (the end excluded: seeds 1 to 6).
    #[arg(long, default_value = DEFAULT_SEEDS, value_name = "SEEDS")]
    seeds: String,
    /// Host threads to run seeds on (default: the host's CPUs).
    #[arg(long)]
    jobs: Option<usize>,
    /// Replace a setting of every experiment's machines, as `mmsim run --set` does: a switch
    /// (`lru=classic`), a cost (`cost.NAME=ns`), a cache figure (`cache.l3_per_core_kib=1408`) or a
    /// tunable (`swappiness=100`); the report marks it as non-default. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Run every experiment with the costs of a profile file (`mmsim calibrate` writes one;
    /// docs/profiles.md): each cost that differs from the experiment's profile is set as
    /// `--set cost.NAME=ns` would set it (and marked so in the report; a `--set` still wins).
    /// The CPU count, memory and TLBs stay the experiment's, which model the seed's machine.
    #[arg(long, value_name = "PATH")]
    profile_file: Option<String>,
    /// Print report.json's content (provenance, summary, experiments) instead of the tables.
    #[arg(long)]
    json: bool,
    /// Where to write report.html and report.json (default: `mmsim-report` for the whole run;
    /// `mmsim-report/NAME+NAME` for a run of named experiments, which so never replaces the
    /// whole report).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Small sizes: the same mechanisms, coarser figures (used by the test suite).
    #[arg(long)]
    quick: bool,
    /// Also run each experiment's headline over its declared free parameters: each at each end
    /// of its plausible range, then 8 joint points (a Latin hypercube), at the first seed; prints
    /// each parameter's headline range and whether the verdict holds across them (the report
    /// gets a tornado figure). Costs 2 runs a parameter and 8 more per experiment.
    #[arg(long)]
    sensitivity: bool,
    /// List the seed changes and their experiments, and exit.
    #[arg(long)]
    list: bool,
}

/// Progress of one seed of one experiment: a bar on a terminal, plain lines otherwise.
enum SeedProgress {
    Bar(MultiProgress, Option<ProgressBar>, String),
    Lines(String, Instant),
}

impl Progress for SeedProgress {
    fn phase(&mut self, name: &str, total: u64) {
        match self {
            SeedProgress::Bar(multi, bar, label) => {
                if let Some(b) = bar.take() {
                    b.finish_and_clear();
                }
                let b = multi.add(ProgressBar::new(total));
                b.set_style(
                    ProgressStyle::with_template("{msg:60} {bar:24} {pos}/{len} [{elapsed}<{eta}]")
                        .expect("valid template"),
                );
                b.set_message(format!("{label}: {name}"));
                *bar = Some(b);
            }
            SeedProgress::Lines(label, start) => {
                eprintln!(
                    "mmsim reproduce: {label}: {name} ({:.0} s)",
                    start.elapsed().as_secs_f64()
                );
            }
        }
    }

    fn advance(&mut self, n: u64) {
        if let SeedProgress::Bar(_, Some(b), _) = self {
            b.inc(n);
        }
    }
}

impl Drop for SeedProgress {
    fn drop(&mut self) {
        match self {
            SeedProgress::Bar(_, bar, _) => {
                if let Some(b) = bar.take() {
                    b.finish_and_clear();
                }
            }
            SeedProgress::Lines(label, start) => {
                eprintln!(
                    "mmsim reproduce: {label}: done in {:.0} s",
                    start.elapsed().as_secs_f64()
                );
            }
        }
    }
}

fn list() {
    for s in &SEED_CHANGES {
        match s.experiment.map(find) {
            Some(Ok(e)) => println!("{:16} {} (\"{}\"; {})", e.name, e.title, e.source, s.citation),
            _ => println!("{:16} {}: not yet modelled ({})", "-", s.change, s.citation),
        }
    }
}

fn seeds(text: &str) -> Result<Vec<u64>, String> {
    let axis =
        lab::sweep::Axis::parse(&format!("seed={text}")).map_err(|e| format!("--seeds {e}"))?;
    axis.values
        .iter()
        .map(|v| v.parse().map_err(|_| format!("--seeds {text}: `{v}` is not a seed")))
        .collect()
}

fn sets(args: &[String]) -> Result<Vec<(String, String)>, String> {
    args.iter()
        .map(|kv| {
            let (k, v) =
                kv.split_once('=').ok_or_else(|| format!("--set {kv}: expected KEY=VALUE"))?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// `git describe` of the source tree this binary was built from, or the crate version.
fn commit() -> String {
    let described = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "describe", "--always", "--dirty", "--tags"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string());
    described.unwrap_or_else(|| format!("mmsim {} (no git)", env!("CARGO_PKG_VERSION")))
}

/// The host's name, CPU model and CPU count.
pub(crate) fn host() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let name = read("/proc/sys/kernel/hostname").trim().to_string();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim())
        })
        .unwrap_or("unknown CPU");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{} ({model}, {cpus} CPUs)", if name.is_empty() { "unknown host" } else { &name })
}

/// The UTC time now, `YYYY-MM-DD HH:MM` (days to civil date: H. Hinnant's algorithm).
pub(crate) fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}", rem / 3600, rem % 3600 / 60)
}

/// Where the report goes: `--out`, else `mmsim-report` for every experiment and a folder of its
/// own inside it for a run of named ones.
fn out_dir(args: &ReproduceArgs, chosen: &[&Experiment]) -> PathBuf {
    let base = PathBuf::from("mmsim-report");
    match &args.out {
        Some(dir) => dir.clone(),
        None if args.experiments.is_empty() => base,
        None => base.join(chosen.iter().map(|e| e.name).collect::<Vec<_>>().join("+")),
    }
}

pub(crate) fn run(args: &ReproduceArgs) -> Result<(), String> {
    if args.list {
        list();
        return Ok(());
    }
    let start = Instant::now();
    let chosen: Vec<&Experiment> = if args.experiments.is_empty() {
        EXPERIMENTS.iter().collect()
    } else {
        args.experiments.iter().map(|n| find(n)).collect::<Result<_, _>>()?
    };
    let seeds = seeds(&args.seeds)?;
    let mut overrides = match &args.profile_file {
        Some(path) => crate::calibrate::cost_sets(&crate::calibrate::load_profile(path)?),
        None => Vec::new(),
    };
    overrides.extend(sets(&args.sets)?);
    let scale = if args.quick { Scale::Quick } else { Scale::Full };
    let threads =
        args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let multi = std::io::stderr().is_terminal().then(MultiProgress::new);
    let progress = |e: &Experiment, what: &str| -> Box<dyn Progress> {
        let label = format!("{} {what}", e.name);
        match &multi {
            Some(m) => Box::new(SeedProgress::Bar(m.clone(), None, label)),
            None => Box::new(SeedProgress::Lines(label, Instant::now())),
        }
    };
    let reports =
        run_seeds(&chosen, &seeds, scale, &overrides, args.sensitivity, threads, &progress)?;
    let provenance = Provenance {
        commit: commit(),
        date: now_utc(),
        host: host(),
        runtime_s: start.elapsed().as_secs_f64(),
        threads,
        scale: if args.quick { "quick (test)" } else { "full" }.into(),
    };
    let json = page_json(&provenance, &reports);
    let text = serde_json::to_string_pretty(&json).expect("JSON values print");
    if args.json {
        println!("{text}");
    } else {
        println!("{}", summary_table(&reports));
        for r in &reports {
            println!("{}", r.table());
        }
    }
    let out = out_dir(args, &chosen);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let html = html_page(&provenance, &reports)?;
    for (name, body) in [("report.html", html), ("report.json", text + "\n")] {
        let path = out.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let line = format!(
        "report: {} ({} seeds on {threads} threads, {:.0} s)",
        out.join("report.html").display(),
        seeds.len(),
        provenance.runtime_s
    );
    if args.json {
        eprintln!("mmsim reproduce: {line}")
    } else {
        println!("{line}")
    }
    Ok(())
}
