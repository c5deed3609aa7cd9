//! Golden files shared by the integration tests that pin what the model produces
//! (`digests.rs`, `figures.rs`): compare the lines a run makes with the committed file, or
//! rewrite the file when `MMSIM_BLESS` is set (the `cargo xtask bless-*` commands set it).

use std::path::Path;

/// Compares `now` with `tests/FILE`, or rewrites it under `MMSIM_BLESS`; on a difference,
/// panics with the lines gone and come and the command that blesses them.
pub(crate) fn compare_or_bless(file: &str, now: &[String], what: &str, bless: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(file);
    let text = now.join("\n") + "\n";
    if std::env::var_os("MMSIM_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let before = std::fs::read_to_string(&path).unwrap_or_default();
    if before == text {
        return;
    }
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = text.lines().collect();
    let gone: Vec<&str> = old.iter().copied().filter(|l| !new.contains(l)).collect();
    let came: Vec<&str> = new.iter().copied().filter(|l| !old.contains(l)).collect();
    panic!(
        "{what} ({} lines differ); if intended, run `{bless}` and commit tests/{file}\n\
         --- before\n{}\n+++ now\n{}",
        gone.len().max(came.len()),
        gone.join("\n"),
        came.join("\n"),
    );
}
