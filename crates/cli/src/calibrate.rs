//! `mmsim calibrate`: measures this host's basic costs natively (`host::calibrate`), derives a
//! machine profile from them (`lab::calibrate`), runs seed 001's hugetlb fault and fork loops and
//! the loops of the other paths the experiments charge (anonymous 4 KiB and THP write faults,
//! cached page-cache reads) natively and in the model on that profile at 1 and 2 instances,
//! prints both side by side and
//! writes the profile, named after the host, to `profiles/HOST.toml` (or `-o PATH`). Every
//! command that runs a machine takes it with `--profile-file PATH` (docs/profiles.md).

use clap::Args;
use host::calibrate::{self as measure, Plan, loops};
use lab::calibrate::{CALIBRATION, CHECK, LoopSizes, Program};
use lab::profile_file::{LoopCheck, ProfileFile};
use mm::{KernelVersion, Profile};
use simcore::{Bytes, CounterKey};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Args)]
pub(crate) struct CalibrateArgs {
    /// Where to write the profile (default `profiles/HOST.toml` under the current directory).
    #[arg(short = 'o', long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// Fewer and shorter runs (seconds, not minutes; coarser figures): for tests.
    #[arg(long)]
    quick: bool,
    /// Run the native loops at real-time priority (SCHED_FIFO, root only), so that other
    /// work on a busy host does not take their CPUs: their clock figures then measure the
    /// kernel, not the host's load (the other figures are timed by CPU time anyway).
    #[arg(long)]
    realtime: bool,
    /// Skip the native-against-model check of the loops.
    #[arg(long)]
    no_check: bool,
    /// The built-in profile whose TLB geometry the machine takes (default: by the CPU's vendor,
    /// epyc-vm for AMD, xeon-spr for Intel, arm-a76 for Arm).
    #[arg(long, value_name = "PROFILE")]
    tlb: Option<String>,
    /// A directory to time cached file faults in (default: /dev/shm, a tmpfs, whose order-0
    /// folios fault in 16-page fault-around windows as the model's page cache does).
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    file_dir: PathBuf,
}

/// The machine profile in the file at `path` (errors name the file and line).
pub(crate) fn load_profile(path: &str) -> Result<Profile, String> {
    lab::profile_file::load(path).map(|f| f.profile).map_err(|e| e.to_string())
}

/// `--set cost.NAME=ns` for every cost of `p` that differs from `epyc-vm`'s, the profile whose
/// costs every experiment's machines take.
pub(crate) fn cost_sets(p: &Profile) -> Vec<(String, String)> {
    let own = Profile::named("epyc-vm").expect("a built-in profile");
    p.costs
        .iter()
        .zip(own.costs.iter())
        .filter(|(mine, theirs)| mine != theirs)
        .map(|((name, ns), _)| (format!("cost.{name}"), ns.to_string()))
        .collect()
}

/// This host's name as a profile name (letters, digits, `.`, `_`, `-`).
fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String = raw
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' })
        .collect();
    if name.is_empty() { "host".into() } else { name }
}

/// The built-in profile whose TLBs this CPU's are taken to be.
fn tlb_by_vendor() -> &'static str {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if cpuinfo.contains("GenuineIntel") {
        "xeon-spr"
    } else if cfg!(target_arch = "aarch64") {
        "arm-a76"
    } else {
        "epyc-vm"
    }
}

/// The host's memory, rounded down to whole 2 MiB (the model places huge pages in whole
/// 2 MiB frames).
fn host_memory() -> Bytes {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Bytes::mib(kib / 1024 / 2 * 2)
}

/// Whether this host's THP `enabled` lets an `MADV_HUGEPAGE` mapping fault huge pages.
fn host_thp() -> bool {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
    mode.is_ok_and(|m| !m.contains("[never]"))
}

/// Runs each program natively at 1 and (with 2 CPUs) 2 instances: (program, instances, rate);
/// `dir` holds the page-cache loop's file.
fn native_runs(
    plan: &Plan,
    sizes: &LoopSizes,
    dir: &std::path::Path,
) -> Result<Vec<(Program, u32, f64, f64)>, String> {
    let mut out = Vec::new();
    let most = measure::cpus().min(2) as u32;
    for program in Program::ALL {
        if program == Program::ThpFaults && !host_thp() {
            eprintln!("mmsim calibrate: THP is `never` on this host: no THP fault loop");
            continue;
        }
        for instances in 1..=most {
            eprintln!("mmsim calibrate: native {} loop, {instances} instance(s)", program.name());
            let runs = (0..plan.runs)
                .map(|_| loops::rate(program, instances, sizes, plan, dir))
                .collect::<Result<Vec<loops::Rates>, String>>()?;
            let median = |f: fn(&loops::Rates) -> f64| {
                measure::median(&mut runs.iter().map(f).collect::<Vec<f64>>())
            };
            out.push((program, instances, median(|r| r.wall), median(|r| r.cpu)));
        }
    }
    Ok(out)
}

/// The check's table: the host by the clock (the figure) and by CPU time.
fn print_checks(checks: &[LoopCheck], sizes: &LoopSizes, kernel: KernelVersion) {
    println!(
        "\nloops per instance (seed 001's on a {} hugetlb file, the paths on {}): this host's \
         kernel against mmsim ({kernel}) on this profile (host: per second of the window; host \
         CPU: per second of the instance's CPU time)",
        Bytes(sizes.file),
        Bytes(lab::calibrate::PATH_LEN)
    );
    println!(
        "{:10} {:>9} {:>12} {:>12} {:>12} {:>11} {:>15}  within 1.5x",
        "loop", "instances", "host", "host CPU", "mmsim", "mmsim/host", "mmsim/host CPU"
    );
    for c in checks {
        let by_cpu = c.model / c.host_cpu.max(f64::MIN_POSITIVE);
        let within = (1.0 / 1.5..=1.5).contains(&c.ratio());
        println!(
            "{:10} {:>9} {:>12.0} {:>12.0} {:>12.0} {:>11.3} {:>15.3}  {} ({})",
            c.program.name(),
            c.instances,
            c.host,
            c.host_cpu,
            c.model,
            c.ratio(),
            by_cpu,
            if within { "yes" } else { "NO" },
            c.program.unit()
        );
    }
}

/// The measured figures and the costs with their sources.
fn print_profile(f: &ProfileFile) {
    println!("measured on {} ({}), median of each figure's runs, ns:", f.profile.name, f.kernel);
    for m in &f.measured {
        let runs: Vec<String> = m.runs.iter().map(|r| format!("{r:.0}")).collect();
        println!("  {:24} {:>10.1}  runs {}", m.name, m.ns, runs.join(" "));
    }
    println!("costs, ns:");
    for (c, from) in mm::sim::cost::Cost::ALL.iter().zip(&f.sources) {
        println!("  {:32} {:>9}  {from}", c.name(), f.profile.costs.get(*c).as_ns());
    }
}

/// The profile's description: the host, the date and the load the figures were taken under.
fn describe(name: &str, date: &str, plan: &Plan) -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "{name}: measured by mmsim calibrate on {date} UTC, {}, load average {} at the end{}",
        crate::reproduce::host(),
        load.split(' ').next().unwrap_or("unknown"),
        if plan.realtime { ", seed 001's loops at SCHED_FIFO" } else { "" }
    )
}

/// Writes `file` to `out`, its folder made first.
fn write(file: &ProfileFile, out: &std::path::Path) -> Result<(), String> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(out, file.to_toml()).map_err(|e| format!("{}: {e}", out.display()))
}

pub(crate) fn run(a: &CalibrateArgs) -> Result<(), String> {
    let start = Instant::now();
    let plan = Plan { realtime: a.realtime, ..if a.quick { Plan::QUICK } else { Plan::FULL } };
    loops::check_realtime(&plan)?;
    let sizes = if a.quick { CALIBRATION } else { CHECK };
    let kernel = host::support::host_kernel().map_err(|r| r.to_string())?;
    let tlb_of = a.tlb.clone().unwrap_or_else(|| tlb_by_vendor().into());
    Profile::named(&tlb_of).map_err(|e| format!("--tlb: {e}"))?;
    loops::check_pool(sizes.pool_pages().max(CALIBRATION.pool_pages()))?;
    let mut step = 0;
    let measured = measure::measure(&plan, &a.file_dir, &mut |what| {
        step += 1;
        eprintln!("mmsim calibrate: [{step}/7] {what} ({:.0} s)", start.elapsed().as_secs_f64());
    })?;
    // Every native loop runs before the model does: an instance is a fork of this process,
    // which the model's runs would leave large.
    let native = if a.no_check { Vec::new() } else { native_runs(&plan, &sizes, &a.file_dir)? };
    let (name, date) = (host_name(), crate::reproduce::now_utc());
    eprintln!("mmsim calibrate: deriving the costs (model runs of the loops)");
    let machine = (measure::cpus() as u32, host_memory());
    let mut file = lab::calibrate::derive(
        &name,
        &describe(&name, &date, &plan),
        &tlb_of,
        machine,
        kernel,
        &measured,
    )?;
    file.kernel = measure::kernel_release();
    file.date = date;
    print_profile(&file);
    if !a.no_check {
        eprintln!("mmsim calibrate: the same loops in mmsim");
        file.checks = lab::calibrate::check(&file.profile, kernel, &sizes, &native)?;
        print_checks(&file.checks, &sizes, kernel);
    }
    let out =
        a.out.clone().unwrap_or_else(|| PathBuf::from("profiles").join(format!("{name}.toml")));
    write(&file, &out)?;
    let took = start.elapsed().as_secs_f64();
    println!(
        "\nprofile: {} ({took:.0} s); run on it with --profile-file {}",
        out.display(),
        out.display()
    );
    Ok(())
}
