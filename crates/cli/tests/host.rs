//! The real kernel as the oracle (`crates/host`, docs/host.md): every scenario the host can run
//! natively agrees with the model at the host's kernel version, except the rows the scenario
//! declares with `[[host_differs]]`; a wrong model value is caught; a native run stopped midway
//! leaves the host as it found it.
//!
//! These runs need root (they mount, write sysfs and read PFNs). Without root each test prints
//! `SKIPPED` and passes, unless `MMSIM_REQUIRE_HOST` is set (CI sets it), when it fails. The
//! tests take a lock each: two native runs at once would share the host's knobs.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

static HOST: Mutex<()> = Mutex::new(());

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

/// Whether native runs can happen here; `false` prints why the test is skipped.
fn host_available(test: &str) -> bool {
    let me = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root_user =
        me.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root_user {
        assert!(
            std::env::var_os("MMSIM_REQUIRE_HOST").is_none(),
            "MMSIM_REQUIRE_HOST is set but the tests do not run as root"
        );
        trace::skip::skipped(test, "native runs need root");
    }
    root_user
}

fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            scenario_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

#[test]
fn fork_cow_agrees_with_the_host_kernel() {
    if !host_available("fork_cow_agrees_with_the_host_kernel") {
        return;
    }
    let _g = HOST.lock().unwrap_or_else(|e| e.into_inner());
    let out = mmsim(&["diff", "scenarios/fork-cow.toml"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("smaps Pss of parent at buf") && t.contains(" 0 disagree"), "{t}");
    let native = mmsim(&["run", "scenarios/fork-cow.toml", "--on", "host", "--json"]);
    assert_eq!(native.status.code(), Some(0), "{}", text(&native));
    let json: serde_json::Value = serde_json::from_slice(&native.stdout).unwrap();
    assert!(json["readings"].as_array().is_some_and(|r| r.len() == 12), "{json}");
}

#[test]
fn a_wrong_model_value_is_a_disagreement_naming_the_observable() {
    if !host_available("a_wrong_model_value_is_a_disagreement_naming_the_observable") {
        return;
    }
    let _g = HOST.lock().unwrap_or_else(|e| e.into_inner());
    let s = lab::scenario::run::load(&root().join("scenarios/fork-cow.toml").to_string_lossy())
        .unwrap();
    let kernel = host::support::host_kernel().unwrap();
    let o = lab::scenario::run::Overrides { kernel: Some(kernel), ..Default::default() };
    let mut model = lab::scenario::run::run(&s, &o, &mut |_| {}).unwrap();
    let native = host::run_native(&s, &host::NativeOptions::default()).unwrap();
    let right = host::diff::compare(&native, &model, &[]);
    let pss = model.readings.iter_mut().find(|r| r.what.starts_with("smaps Pss")).unwrap();
    pss.value = Some(40);
    pss.observed = "40".into();
    let wrong = host::diff::compare(&native, &model, &[]);
    assert_eq!(wrong.disagreements(), right.disagreements() + 1, "{}", wrong.text());
    assert!(
        wrong.text().lines().any(|l| l.contains("smaps Pss of parent") && l.contains("DISAGREE"))
    );
    let declared = host::diff::compare(&native, &model, &[declared_at(44, false)]);
    assert_eq!(declared.disagreements(), right.disagreements(), "{}", declared.text());
    // A row declared to vary natively is not compared, whichever way it comes out.
    for m in [&model, &lab::scenario::run::run(&s, &o, &mut |_| {}).unwrap()] {
        let varies = host::diff::compare(&native, m, &[declared_at(44, true)]);
        assert_eq!(varies.disagreements(), right.disagreements(), "{}", varies.text());
        let row = varies.rows.iter().find(|r| r.line == 44).unwrap();
        assert_eq!(row.verdict, host::diff::Verdict::ModelOnly);
    }
}

fn declared_at(line: usize, varies: bool) -> host::diff::Declared {
    host::diff::Declared { line, reason: "a test".into(), varies }
}

/// The host's knobs and leftovers a native run may touch, as text.
fn host_state() -> String {
    let mut out = String::new();
    for p in [
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs",
        "/proc/sys/vm/nr_hugepages",
        "/proc/sys/vm/swappiness",
        "/proc/mounts",
    ] {
        out.push_str(&std::fs::read_to_string(p).unwrap_or_default());
    }
    for dir in ["/tmp", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("mmsim-host-") {
                out.push_str(&format!("{dir}/{name}\n"));
            }
        }
    }
    out.push_str(&format!("journal {}", Path::new("/run/mmsim-host.journal").exists()));
    out
}

#[test]
fn a_native_run_stopped_midway_restores_the_host() {
    if !host_available("a_native_run_stopped_midway_restores_the_host") {
        return;
    }
    let _g = HOST.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("mmsim-host-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("slow.toml");
    std::fs::write(
        &file,
        "[machine]\nprofile = \"tiny\"\n[machine.sysfs]\n\"transparent_hugepage/enabled\" = \"always\"\n\
         [machine.tunables]\nnr_hugepages = 2\nswappiness = 7\n\
         [[file]]\npath = \"/h\"\nsize = \"2MiB\"\nfs = \"hugetlbfs\"\n\
         [[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\n\
         ops = [ { op = \"sleep\", duration = \"30s\" } ]\n",
    )
    .unwrap();
    let before = host_state();
    for signal in ["TERM", "KILL"] {
        let child = Command::new(env!("CARGO_BIN_EXE_mmsim"))
            .args(["run", &file.to_string_lossy(), "--on", "host"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        assert_ne!(host_state(), before, "the run changed the host while it ran");
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        let out = child.wait_with_output().unwrap();
        if signal == "TERM" {
            assert_eq!(out.status.code(), Some(2), "{}", text(&out));
            assert!(text(&out).contains("interrupted"), "{}", text(&out));
            assert_eq!(host_state(), before, "SIGTERM: the host was not restored");
        }
    }
    // A killed run leaves its journal; the next native run restores it first.
    let out = mmsim(&["run", "scenarios/fork-cow.toml", "--on", "host"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The killed run's agents may outlive it for a moment; their cgroup goes with the next run.
    assert_eq!(host_state(), before, "SIGKILL: the next run did not restore the host");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_host_runnable_scenario_agrees_with_the_host_kernel_or_declares_why() {
    if !host_available("every_host_runnable_scenario_agrees_with_the_host_kernel_or_declares_why") {
        return;
    }
    let _g = HOST.lock().unwrap_or_else(|e| e.into_inner());
    let mut files = Vec::new();
    scenario_files(&root().join("scenarios"), &mut files);
    files.sort();
    let (mut agree, mut refused, mut failures) = (0, 0, Vec::new());
    for f in &files {
        let rel = f.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        let mut out = mmsim(&["diff", &rel]);
        for _ in 0..2 {
            if out.status.code() != Some(1) {
                break;
            }
            // A daemon's progress (ksmd's after a fixed sleep) is real time on the host: a
            // scenario that agrees on another try is reported, not failed.
            println!("{rel} disagreed (flaky daemon timing?); again:\n{}", text(&out));
            out = mmsim(&["diff", &rel]);
        }
        match out.status.code() {
            Some(0) => agree += 1,
            Some(2) if text(&out).contains("refused on the host") => refused += 1,
            _ => failures.push(format!("{rel}:\n{}", text(&out))),
        }
    }
    println!(
        "{agree} scenarios agree with the host kernel, {refused} refused, {} disagree",
        failures.len()
    );
    assert!(agree >= 45, "only {agree} scenarios ran and agreed natively");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
