//! `mmsim calibrate` and profile files (docs/profiles.md): a bad profile file exits 2 naming its
//! line in every command that takes one; a good one runs a scenario, a trace and an experiment;
//! `calibrate --quick` measures this host and writes a file those commands take.
//!
//! The calibration needs a hugetlb pool of 32 free 2 MiB pages. As root the test reserves them
//! and gives them back (and runs the loops at `--realtime`); otherwise it checks the refusal that
//! says how to reserve them, and fails instead when `MMSIM_REQUIRE_HOST` is set (CI runs as
//! root).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap().to_path_buf()
}

fn mmsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("mmsim runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A scratch directory of this test's own.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mmsim-calibrate-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A profile file with `epyc-vm`'s costs but a faster wake-up.
fn good_profile(dir: &Path) -> PathBuf {
    let p = mm::Profile::named("epyc-vm").unwrap();
    let costs: Vec<String> = p
        .costs
        .iter()
        .map(|(n, ns)| format!("{n} = {}", if n == "wakeup_latency" { 2000 } else { ns }))
        .collect();
    let path = dir.join("box.toml");
    let text = format!(
        "name = \"box\"\ncpus = 2\nmemory = \"1GiB\"\ntlb = \"epyc-vm\"\n[costs]\n{}\n",
        costs.join("\n")
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_bad_profile_file_exits_2_naming_its_line_in_every_command() {
    let dir = scratch("bad");
    let good = good_profile(&dir);
    let bad = dir.join("bad.toml");
    let body = std::fs::read_to_string(&good).unwrap().replace("syscall = 140", "syscall = -3");
    std::fs::write(&bad, body).unwrap();
    let b = bad.to_str().unwrap();
    for args in [
        vec!["run", "scenarios/fork-cow.toml", "--profile-file", b],
        vec!["replay", "traces/sum.lackey.gz", "--maps", "traces/sum.maps", "--profile-file", b],
        vec!["reproduce", "dax-zero-page", "--quick", "--profile-file", b],
    ] {
        let out = mmsim(&args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(&format!("{b}:6: cost `syscall`: expected ns")), "{args:?}: {t}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_good_profile_file_runs_a_scenario_a_trace_and_an_experiment() {
    let dir = scratch("good");
    let p = good_profile(&dir);
    let p = p.to_str().unwrap();
    let run = mmsim(&["run", "scenarios/fork-cow.toml", "--profile-file", p]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(text(&run).contains("profile box"), "{}", text(&run));
    let replay = mmsim(&[
        "replay",
        "traces/sum.lackey.gz",
        "--maps",
        "traces/sum.maps",
        "--profile-file",
        p,
    ]);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay));
    assert!(text(&replay).contains("profile box"), "{}", text(&replay));
    let out = dir.join("report");
    let o = out.to_str().unwrap();
    let args = ["reproduce", "dax-zero-page", "--quick", "--seeds", "1", "--json", "--out", o];
    let reproduce = mmsim(&[&args[..], &["--profile-file", p]].concat());
    assert_eq!(reproduce.status.code(), Some(0), "{}", text(&reproduce));
    let json: serde_json::Value = serde_json::from_slice(&reproduce.stdout).unwrap();
    let overrides = json["experiments"][0]["overrides"].to_string();
    assert!(overrides.contains("cost.wakeup_latency") && overrides.contains("2000"), "{json}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether this process runs as root.
fn is_root() -> bool {
    let me = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    me.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

const POOL: &str = "/proc/sys/vm/nr_hugepages";
const FREE: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";

fn read_u64(path: &str) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

#[test]
fn calibrate_quick_writes_a_profile_every_command_takes() {
    let dir = scratch("quick");
    let out = dir.join("host.toml");
    let o = out.to_str().unwrap();
    let (pool, free) = (read_u64(POOL), read_u64(FREE));
    if !is_root() {
        assert!(std::env::var_os("MMSIM_REQUIRE_HOST").is_none(), "MMSIM_REQUIRE_HOST: not root");
        if free < 32 {
            let refused = mmsim(&["calibrate", "--quick", "-o", o]);
            assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
            assert!(text(&refused).contains("> /proc/sys/vm/nr_hugepages"), "{}", text(&refused));
        }
        trace::skip::skipped("calibrate_quick_writes_a_profile_every_command_takes", "not root");
        return;
    }
    if free < 32 {
        std::fs::write(POOL, (pool + 32 - free).to_string()).unwrap();
    }
    let calibrated = mmsim(&["calibrate", "--quick", "--realtime", "-o", o]);
    std::fs::write(POOL, pool.to_string()).unwrap();
    let t = text(&calibrated);
    assert_eq!(calibrated.status.code(), Some(0), "{t}");
    for what in ["wakeup_latency", "mmsim/host", "forks", "usemem", "page-cache", "profile: "] {
        assert!(t.contains(what), "{what}: {t}");
    }
    let file = std::fs::read_to_string(&out).unwrap();
    assert!(file.contains("[[check]]") && file.contains("[measured]"), "{file}");
    let run = mmsim(&["run", "scenarios/fork-cow.toml", "--profile-file", o]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let _ = std::fs::remove_dir_all(&dir);
}
