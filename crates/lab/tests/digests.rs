//! Behaviour fingerprints: every scenario file under a spread of kernel eras, and every
//! reproduced experiment at test scale, reduced to one line each and compared with
//! `tests/digests.txt`. A refactor proves itself by leaving this file unchanged; a change of
//! behaviour shows here as the lines it moves, and is blessed (the file rewritten) by
//! `cargo xtask bless-digests` (which runs this test with `MMSIM_BLESS=1`), so the commit that
//! changes behaviour shows which runs it changed.
//!
//! A scenario line holds the run's event digest (every scheduling event, lock grant and charge
//! in order), its virtual time, event count, failed expectations and a digest of the final
//! `/proc/vmstat`'s non-zero counters; a scenario a kernel refuses records the error instead. An experiment line
//! holds a digest of its whole JSON report.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::reproduce::{EXPERIMENTS, NoProgress, Scale};
use lab::scenario::run::{Overrides, load, run};
use simcore::Digest;
use std::path::{Path, PathBuf};

mod golden;

/// The eras each scenario runs under besides its own: one per switch boundary of the five
/// mechanisms (DAX v4.13/v4.14, COW v5.8/v5.9/v5.19, file THP v5.12/v5.16, MGLRU v6.1/v6.3,
/// odirect pins v6.5, MGLRU tiers v6.14).
const KERNELS: [&str; 11] =
    ["v4.13", "v4.14", "v5.8", "v5.12", "v5.16", "v5.19", "v6.1", "v6.3", "v6.5", "v6.8", "v6.14"];

fn digest_of(s: &str) -> Digest {
    let mut d = Digest::default();
    d.write_str(s);
    d
}

fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            scenario_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "toml") {
            out.push(path);
        }
    }
}

fn scenario_line(root: &Path, file: &Path, kernel: Option<&str>, sets: &[(&str, &str)]) -> String {
    let name = file.strip_prefix(root).unwrap().to_string_lossy().into_owned();
    let label = format!("{name} {}", kernel.unwrap_or("own"));
    let s = match load(&file.to_string_lossy()) {
        Ok(s) => s,
        Err(e) => return format!("{label} error {}", digest_of(&e.message)),
    };
    let sets = sets.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect();
    let o = Overrides { kernel: kernel.map(|k| k.parse().unwrap()), sets, ..Overrides::default() };
    match run(&s, &o, &mut |_| ()) {
        Ok(r) if r.skipped.is_some() => {
            format!("{label} skipped {}", digest_of(r.skipped.as_deref().unwrap_or_default()))
        }
        Ok(r) => {
            let mut vmstat = Digest::default();
            // Only the counters that moved: a counter new to the model moves no line.
            for (k, v) in r.vmstat.iter().filter(|(_, v)| **v != 0) {
                vmstat.write_str(k);
                vmstat.write_u64(*v);
            }
            let failed = r.failures.len();
            let (vt, ev, d) = (r.virtual_time_ns, r.events, r.digest);
            let stopped = if r.stopped.is_some() { " stopped" } else { "" };
            format!("{label} {d} vt={vt} events={ev} failed={failed} vmstat={vmstat}{stopped}")
        }
        Err(e) => format!("{label} refused {}", digest_of(&e.message)),
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn lines() -> Vec<String> {
    let root = root();
    let mut files = Vec::new();
    scenario_files(&root.join("scenarios"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in &files {
        out.push(scenario_line(&root, file, None, &[]));
        for k in KERNELS {
            out.push(scenario_line(&root, file, Some(k), &[]));
        }
    }
    for e in EXPERIMENTS {
        let report = e.run(1, Scale::Quick, &mut NoProgress).unwrap();
        let json = serde_json::to_string(&report.json()).unwrap();
        out.push(format!("reproduce {} quick seed=1 {}", e.name, digest_of(&json)));
    }
    out
}

#[test]
fn behaviour_digests_are_unchanged() {
    let what = "behaviour changed";
    golden::compare_or_bless("digests.txt", &lines(), what, "cargo xtask bless-digests");
}

/// Context switches cost nothing at `cost.context_switch=0` and `cost.thread_switch=0`: these
/// scenarios, whose tasks share CPUs (a parent and its child, khugepaged beside kswapd, a race
/// whose interleaving the switches move), give exactly their lines of `tests/digests.txt` from
/// before the engine charged switches (commit 4d3d14d).
#[test]
fn zero_cost_switches_give_the_digests_from_before_switches_were_charged() {
    const BEFORE: [&str; 4] = [
        "scenarios/fork-cow.toml own 56d617179a9a4194 vt=64175 events=144 failed=0 \
         vmstat=5ca05140d842540c",
        "scenarios/races/dirty-cow.toml own 17a4a3b605dd4e83 vt=227207 events=71 failed=0 \
         vmstat=0216a33abc348242",
        "scenarios/races/collapse-truncate.toml own b32c68d7d77df918 vt=2272321 events=1675 \
         failed=0 vmstat=6f121205ebf70914",
        "scenarios/thp/file-collapse-selftest.toml own 48d84c570d8a0acb vt=31768134 \
         events=2124 failed=0 vmstat=9ae0391fc1fc0e97",
    ];
    let zero = [("cost.context_switch", "0"), ("cost.thread_switch", "0")];
    let root = root();
    for before in BEFORE {
        let file = root.join(before.split(' ').next().unwrap());
        assert_eq!(scenario_line(&root, &file, None, &zero), before);
    }
}
