//! Tidy checks over the source tree (TigerBeetle's `tidy.zig`, rust-analyzer's `tidy.rs`):
//! every Rust file opens with a `//!` design note, simulation crates use no ambient IO, time or
//! threads, and no stubs are left behind.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn crate_sources(krate: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = if krate == "xtask" { root.join("xtask") } else { root.join("crates").join(krate) };
    let mut files = Vec::new();
    for sub in ["src", "tests", "benches"] {
        if dir.join(sub).is_dir() {
            rust_files(&dir.join(sub), &mut files);
        }
    }
    files.sort();
    files
}

fn all_crates() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.push("xtask".into());
    names.sort();
    names
}

#[test]
fn every_rust_file_opens_with_a_module_note() {
    for krate in all_crates() {
        for file in crate_sources(&krate) {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                text.starts_with("//!"),
                "{} must open with a `//!` design note",
                file.display()
            );
        }
    }
}

#[test]
fn simulation_crates_use_no_ambient_io_time_or_threads() {
    const BANNED: &[&str] = &[
        "std::fs",
        "std::time",
        "std::thread::spawn",
        "std::net",
        "std::env",
        "println!",
        "eprintln!",
    ];
    for krate in ["simcore", "engine", "mm", "workload", "explore"] {
        for file in crate_sources(krate)
            .into_iter()
            .filter(|f| f.components().any(|c| c.as_os_str() == "src"))
        {
            let text = std::fs::read_to_string(&file).unwrap();
            for banned in BANNED {
                assert!(
                    !text.contains(banned),
                    "{} uses `{banned}` (simulation crates do no IO)",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn no_stubs_left_behind() {
    for krate in all_crates() {
        for file in crate_sources(&krate) {
            if file.ends_with("tidy.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for stub in ["todo!(", "unimplemented!(", "dbg!("] {
                assert!(!text.contains(stub), "{} contains `{stub}`", file.display());
            }
        }
    }
}

/// Every text file of the repository that code, tests, benchmarks, scripts or docs are made of:
/// walked from the root, skipping build output, the virtualenv and version control.
fn repository_text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    const SKIP: &[&str] = &["target", ".git", ".venv", "mmsim-report", "node_modules"];
    const TEXT: &[&str] = &["rs", "py", "pyi", "md", "toml", "sh", "c", "txt", "json", "cfg"];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !SKIP.contains(&name.as_str()) && !name.starts_with("__pycache__") {
                repository_text_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| TEXT.iter().any(|t| e == *t)) || name == "run" {
            out.push(path);
        }
    }
}

/// A clone stands alone: nothing reads, and nothing tells a user to read, a path outside the
/// repository. Sources are cited by name (a kernel commit, a paper, a seed's title), and what is
/// read (traces, excerpts) lives under `traces/`.
#[test]
fn no_path_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // Spelled in pieces so that this file does not match itself.
    let banned = [
        format!("{}/{}", "..", "shared"),
        format!("{}/{}/", "", "work"),
        format!("{}/{}", "shared", "data"),
        format!("{}/{}", "shared", "seeds"),
        format!("{}/{}", "shared", "reference"),
        format!("{}/{}/{}/", "..", "..", ".."),
    ];
    let mut files = Vec::new();
    repository_text_files(root, &mut files);
    files.sort();
    assert!(files.len() > 50, "the walk found the repository's files");
    let mut found = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (n, line) in text.lines().enumerate() {
            if let Some(b) = banned.iter().find(|b| line.contains(b.as_str())) {
                found.push(format!("{}:{}: `{b}`: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "paths outside the repository:\n{}", found.join("\n"));
}
