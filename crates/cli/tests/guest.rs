//! Other eras in a guest (`mmsim diff --guest`, `crates/host/src/guest.rs`): every scenario the
//! guest can run natively agrees with the model at the guest kernel's version, except the rows
//! the scenario declares with `[[host_differs]]`.
//!
//! Opt-in, since a boot fetches Debian's kernel once and takes minutes under TCG: `MMSIM_GUEST`
//! names the series (`6.1,6.12`; `cargo xtask test --guest` sets it), and the runs need root,
//! `qemu-system-x86_64`, `mkfs.ext4` and Debian's package index. Without it the test says so
//! and passes.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap().to_path_buf()
}

fn scenario_files(dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            scenario_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p.strip_prefix(root()).unwrap().to_string_lossy().into_owned());
        }
    }
}

#[test]
fn an_unknown_guest_series_is_refused_before_anything_boots() {
    let out = Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(["diff", "--guest", "5.4", "scenarios/fork-cow.toml"])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("6.1 or 6.12"), "{err}");
}

#[test]
fn every_guest_runnable_scenario_agrees_with_debians_kernels_or_declares_why() {
    let Some(series) = std::env::var("MMSIM_GUEST").ok().filter(|s| !s.is_empty()) else {
        eprintln!("guest runs are opt-in: MMSIM_GUEST=6.1,6.12 (cargo xtask test --guest)");
        return;
    };
    let mut files = Vec::new();
    scenario_files(&root().join("scenarios"), &mut files);
    files.sort();
    for version in series.split(',') {
        let out = Command::new(env!("CARGO_BIN_EXE_mmsim"))
            .args(["diff", "--guest", version, "--json", "--timeout", "60"])
            .args(&files)
            .current_dir(root())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{version}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run: serde_json::Value = serde_json::from_str(&text).expect("a JSON run");
        let results = run["results"].as_array().expect("results");
        let compared: Vec<&serde_json::Value> =
            results.iter().filter_map(|r| r["outcome"].get("compared")).collect();
        let bad: Vec<String> = compared
            .iter()
            .flat_map(|c| {
                let scenario = c["scenario"].as_str().unwrap_or("?").to_string();
                c["rows"].as_array().into_iter().flatten().filter_map(move |row| {
                    let v = row["verdict"].as_str()?;
                    (v == "disagree" || v == "stale")
                        .then(|| format!("{scenario}:{} {v}: {}", row["line"], row["what"]))
                })
            })
            .collect();
        let lost: Vec<&str> = results
            .iter()
            .filter(|r| r["outcome"].get("lost").is_some())
            .filter_map(|r| r["scenario"].as_str())
            .collect();
        println!(
            "{version}: {} of {} scenarios compared in {} ms",
            compared.len(),
            files.len(),
            run["wall_ms"]
        );
        assert!(compared.len() >= 30, "{version}: only {} scenarios ran", compared.len());
        assert!(lost.is_empty(), "{version}: the guest never reported {lost:?}");
        assert!(bad.is_empty(), "{version}:\n{}", bad.join("\n"));
    }
}
