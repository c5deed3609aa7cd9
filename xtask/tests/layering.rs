//! Architecture invariants checked by machine (ARCHITECTURE.md lists them):
//! - a crate depends only on workspace crates listed before it in the root `Cargo.toml`;
//! - simulation crates do not depend on IO, CLI or binding crates.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Workspace members in order, as (package name, manifest).
fn members() -> Vec<(String, toml::Table)> {
    let ws = read_toml(&root().join("Cargo.toml"));
    let members = ws["workspace"]["members"].as_array().expect("workspace.members");
    members
        .iter()
        .map(|m| {
            let manifest = read_toml(&root().join(m.as_str().unwrap()).join("Cargo.toml"));
            let name = manifest["package"]["name"].as_str().unwrap().to_string();
            (name, manifest)
        })
        .collect()
}

fn dependencies(manifest: &toml::Table) -> Vec<String> {
    ["dependencies", "dev-dependencies", "build-dependencies"]
        .iter()
        .filter_map(|section| manifest.get(*section).and_then(toml::Value::as_table))
        .flat_map(|t| t.keys().cloned())
        .collect()
}

/// Crates that simulate: deterministic, no IO (DESIGN.md).
const SIMULATION_CRATES: &[&str] = &["simcore", "engine", "mm", "workload", "explore"];
/// Dependencies only edge crates may have.
const EDGE_ONLY: &[&str] =
    &["clap", "serde", "serde_json", "toml", "pyo3", "indicatif", "rand", "tokio"];

#[test]
fn crates_depend_only_on_crates_listed_before_them() {
    let members = members();
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.starts_with(&["simcore", "engine"]), "simcore and engine come first: {names:?}");
    for (i, (name, manifest)) in members.iter().enumerate() {
        for dep in dependencies(manifest) {
            if let Some(j) = names.iter().position(|n| *n == dep) {
                assert!(j < i, "{name} depends on {dep}, which is listed after it in Cargo.toml");
            }
        }
    }
}

#[test]
fn simulation_crates_have_no_io_dependencies() {
    for (name, manifest) in members() {
        if !SIMULATION_CRATES.contains(&name.as_str()) {
            continue;
        }
        for dep in dependencies(&manifest) {
            assert!(!EDGE_ONLY.contains(&dep.as_str()), "simulation crate {name} depends on {dep}");
        }
    }
}

#[test]
fn engine_knows_nothing_about_memory() {
    let (_, engine) = members().into_iter().find(|(n, _)| n == "engine").unwrap();
    assert_eq!(dependencies(&engine), ["simcore"], "engine may depend on simcore only");
}
