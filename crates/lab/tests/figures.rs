//! Golden figures: the simulated value of every published (headline) figure of every
//! experiment at test scale, seed 1, pinned in `tests/figures.txt`, one line per figure, so that
//! a change that moves what the report claims shows in review as the lines it moves. After a
//! change meant to move them, `cargo xtask bless-figures` rewrites the file (this test with
//! `MMSIM_BLESS=1`).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::reproduce::{EXPERIMENTS, NoProgress, Scale};
use std::path::Path;

fn lines() -> Vec<String> {
    let mut out = Vec::new();
    for e in EXPERIMENTS {
        let report = e.run(1, Scale::Quick, &mut NoProgress).unwrap();
        for row in report.ordered_rows().filter(|r| r.published.is_some()) {
            out.push(format!("{} | {} | {:.4} {}", e.name, row.name, row.mean(), row.unit));
        }
    }
    out
}

#[test]
fn headline_figures_are_unchanged() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/figures.txt");
    let now = lines().join("\n") + "\n";
    if std::env::var_os("MMSIM_BLESS").is_some() {
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let before = std::fs::read_to_string(&path).unwrap_or_default();
    if before == now {
        return;
    }
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = now.lines().collect();
    let gone: Vec<&str> = old.iter().copied().filter(|l| !new.contains(l)).collect();
    let came: Vec<&str> = new.iter().copied().filter(|l| !old.contains(l)).collect();
    panic!(
        "headline figures moved; if intended, run `cargo xtask bless-figures` and commit \
         tests/figures.txt\n--- before\n{}\n+++ now\n{}",
        gone.join("\n"),
        came.join("\n"),
    );
}
