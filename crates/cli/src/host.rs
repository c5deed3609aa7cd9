//! `mmsim run FILE --on host` and `mmsim diff FILE`: a scenario run natively on the machine's own
//! kernel (`crates/host`), alone or beside the model at the host's kernel version. Exit codes:
//! 0 when every expectation holds (`diff`: when kernel and model agree on every row), 1
//! otherwise, 2 when the host cannot run the scenario (the reason printed).

use clap::Args;
use host::diff::{DiffReport, diff};
use host::{NativeOptions, NativeReport, run_native};
use lab::scenario::run::load;
use std::time::Duration;

/// The bounds of a native run, shared by `run --on host` and `diff`.
#[derive(Debug, Args)]
pub(crate) struct NativeArgs {
    /// Wall-clock seconds the native run may take.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
    /// Host memory the native run may use (its memory cgroup's limit), e.g. `2GiB`; default
    /// half the host's memory, at most the scenario machine's.
    #[arg(long = "native-budget", value_name = "SIZE")]
    native_budget: Option<String>,
}

impl NativeArgs {
    fn options(&self) -> Result<NativeOptions, String> {
        let host_budget = match &self.native_budget {
            None => None,
            Some(b) => Some(
                lab::scenario::parse::parse_size(b)
                    .filter(|b| b.as_u64() > 0)
                    .ok_or_else(|| format!("--native-budget {b}: expected a size like \"2GiB\""))?
                    .as_u64(),
            ),
        };
        Ok(NativeOptions {
            host_budget,
            timeout: Duration::from_secs(self.timeout),
            ..NativeOptions::default()
        })
    }
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The scenario files (several share one guest boot with `--guest`).
    #[arg(required = true, num_args = 1..)]
    scenarios: Vec<String>,
    #[command(flatten)]
    native: NativeArgs,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
    /// Run natively in a guest booted with Debian's kernel of this series (`6.1` or `6.12`)
    /// under qemu, instead of on the host; the kernel is fetched once into
    /// `~/.cache/mmsim/guest`.
    #[arg(long, value_name = "VERSION")]
    guest: Option<String>,
    /// The guest's memory, e.g. `4GiB`.
    #[arg(long = "guest-memory", value_name = "SIZE", default_value = "4GiB")]
    guest_memory: String,
    /// The guest's accelerator: `tcg` (software, works everywhere) or `kvm`.
    #[arg(long, default_value = "tcg", value_parser = ["tcg", "kvm"])]
    accel: String,
}

fn bad(e: &str) -> u8 {
    eprintln!("mmsim: {e}");
    2
}

/// `mmsim run FILE --on host`.
pub(crate) fn run_on_host(file: &str, native: &NativeArgs, json: bool) -> u8 {
    let report = match native.options().and_then(|o| {
        let s = load(file).map_err(|e| e.to_string())?;
        run_native(&s, &o).map_err(|e| format!("{file}: {e}"))
    }) {
        Ok(r) => r,
        Err(e) => return bad(&e),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report).expect("a report serialises"));
    } else {
        print_native(&report);
    }
    if report.passed() { 0 } else { 1 }
}

fn print_native(r: &NativeReport) {
    println!("scenario {} (natively, on the host kernel {}: {})", r.scenario, r.release, r.kernel);
    for f in &r.failures {
        println!("FAIL {}:{}", r.scenario, f.line);
        println!("  expected: {}", f.expected);
        println!("  observed: {}", f.observed);
    }
    let verdict =
        if r.passed() { "all hold".to_string() } else { format!("{} failed", r.failures.len()) };
    println!("{} readings: {verdict} ({} ms)", r.readings.len(), r.wall_ms);
}

/// `mmsim diff FILE...`.
pub(crate) fn run_diff(a: &DiffArgs) -> u8 {
    if let Some(version) = &a.guest {
        return run_guest(a, version);
    }
    let mut disagree = false;
    for file in &a.scenarios {
        let report: DiffReport = match a.native.options().and_then(|o| {
            let s = load(file).map_err(|e| e.to_string())?;
            diff(&s, &o).map_err(|e| format!("{file}: {e}"))
        }) {
            Ok(r) => r,
            Err(e) => return bad(&e),
        };
        if a.json {
            println!("{}", serde_json::to_string_pretty(&report).expect("a report serialises"));
        } else {
            print!("{}", report.text());
        }
        disagree |= report.disagreements() > 0;
    }
    u8::from(disagree)
}

/// `mmsim diff FILE... --guest VERSION`: every file in one boot; exit 1 when any row disagrees,
/// 2 when the guest cannot run or a file does not load (checked on the host first).
fn run_guest(a: &DiffArgs, version: &str) -> u8 {
    let options = match guest_options(a, version) {
        Ok(o) => o,
        Err(e) => return bad(&e),
    };
    for file in &a.scenarios {
        if let Err(e) = load(file) {
            return bad(&e.to_string());
        }
    }
    let mut tally = host::guest::Tally::default();
    let run = host::guest::diff_in_guest(&a.scenarios, &options, &mut |r| {
        tally.add(r);
        if !a.json {
            print!("{}", host::guest::result_text(r));
        }
    });
    let run = match run {
        Ok(r) => r,
        Err(e) => return bad(&format!("the {version} guest: {e}")),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&run).expect("a run serialises"));
    } else {
        print!("{}", tally.text(&run));
    }
    u8::from(tally.disagree > 0 || tally.lost > 0)
}

fn guest_options(a: &DiffArgs, version: &str) -> Result<host::guest::GuestOptions, String> {
    let kernel = host::guest::GuestKernel::parse(version).map_err(|r| r.reason)?;
    let memory = lab::scenario::parse::parse_size(&a.guest_memory)
        .map(|b| b.as_u64() >> 20)
        .filter(|m| (512..=16384).contains(m))
        .ok_or_else(|| {
            format!("--guest-memory {}: expected a size from 512MiB to 16GiB", a.guest_memory)
        })?;
    let timeout = a.native.options()?.timeout;
    Ok(host::guest::GuestOptions { kernel, timeout, memory_mib: memory, accel: a.accel.clone() })
}
