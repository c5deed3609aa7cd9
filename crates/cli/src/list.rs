//! `mmsim list switches|costs|tunables|kernels`: what a run can be set to, with the kernel eras
//! each switch's default follows (`mm::era::Switches::for_kernel`; the commits behind each
//! boundary are cited in `crates/mm/src/era.rs`), the costs of each machine profile, and the
//! tunables with their defaults and bounds.

use clap::ValueEnum;
use mm::{KernelVersion, Profile, Switches, Tunables};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum What {
    /// The switches, their values and the kernel ranges each value is the default for.
    Switches,
    /// The basic operations' costs (ns) in each machine profile (`--set cost.NAME=ns`).
    Costs,
    /// The tunables `--set` takes, with their defaults and largest values.
    Tunables,
    /// The kernel versions the model takes, each with the switches whose default it changes.
    Kernels,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// What to list.
    what: What,
}

pub(crate) fn run(a: &ListArgs) -> u8 {
    match a.what {
        What::Switches => switches(),
        What::Costs => costs(),
        What::Tunables => tunables(),
        What::Kernels => kernels(),
    }
    0
}

/// The runs of kernels over which switch `key`'s default stays one value: `(value, first, last)`.
fn eras(key: &str) -> Vec<(&'static str, KernelVersion, KernelVersion)> {
    let mut out: Vec<(&'static str, KernelVersion, KernelVersion)> = Vec::new();
    for k in KernelVersion::all() {
        let sw = Switches::for_kernel(k);
        let value = sw.iter().into_iter().find(|(n, _)| *n == key).map_or("?", |(_, v)| v);
        match out.last_mut() {
            Some(last) if last.0 == value => last.2 = k,
            _ => out.push((value, k, k)),
        }
    }
    out
}

fn switches() {
    for key in Switches::NAMES {
        let values = Switches::values_of(key).unwrap_or_default();
        println!("{key}: {}", values.join(", "));
        for (value, first, last) in eras(key) {
            println!("  {first}..{last}  {value}");
        }
    }
    println!("(a value the model does not implement for a kernel is refused when the run starts)");
}

fn costs() {
    use simcore::CounterKey;
    let profiles: Vec<Profile> =
        Profile::NAMES.iter().filter_map(|n| Profile::named(n).ok()).collect();
    print!("{:<34}", "cost (ns)");
    for p in &profiles {
        print!(" {:>10}", p.name);
    }
    println!();
    for c in mm::sim::cost::Cost::ALL {
        print!("{:<34}", c.name());
        for p in &profiles {
            print!(" {:>10}", p.costs.get(*c).as_ns());
        }
        println!();
    }
}

fn tunables() {
    let d = Tunables::default();
    let defaults =
        [d.ra_pages * 4, d.fault_around_pages * 4096, d.swappiness, d.lru_gen_min_ttl_ms];
    for (key, default) in lab::scenario::run::SET_TUNABLES.iter().zip(defaults) {
        let max = lab::scenario::limits::tunable_max(key).map_or("-".into(), |m| m.to_string());
        println!("{key:<20} default {default:<10} at most {max}");
    }
    let knobs: Vec<&str> = mm::huge_memory::policy::all_knobs().collect();
    println!("transparent_hugepage/KNOB (sysfs, per era): {}", knobs.join(", "));
}

fn kernels() {
    let mut previous = Switches::for_kernel(KernelVersion::new(4, 0));
    for k in KernelVersion::all() {
        let now = Switches::for_kernel(k);
        let changed: Vec<String> = now
            .iter()
            .into_iter()
            .zip(previous.iter())
            .filter(|(a, b)| a.1 != b.1)
            .map(|((n, v), _)| format!("{n}={v}"))
            .collect();
        let default = if k == KernelVersion::DEFAULT { " (default)" } else { "" };
        if changed.is_empty() {
            println!("{k}{default}");
        } else {
            println!("{k}{default}  {}", changed.join(" "));
        }
        previous = now;
    }
}
