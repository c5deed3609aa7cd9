//! Golden figures: the simulated value of every published (headline) figure of every
//! experiment at test scale, seed 1, pinned in `tests/figures.txt`, one line per figure, so that
//! a change that moves what the report claims shows in review as the lines it moves. After a
//! change meant to move them, `cargo xtask bless-figures` rewrites the file (this test with
//! `MMSIM_BLESS=1`).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::reproduce::{EXPERIMENTS, NoProgress, Scale};

mod golden;

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
    let what = "headline figures moved";
    golden::compare_or_bless("figures.txt", &lines(), what, "cargo xtask bless-figures");
}
