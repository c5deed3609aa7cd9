//! A test that cannot run on this host says so: a `SKIPPED TEST: WHY` line on stderr, past the
//! test harness's capture, and the same line appended to `$MMSIM_SKIP_LOG` when it is set
//! (`cargo xtask test` sets it and repeats the skips in its last line).

use std::io::Write;

/// Reports that `test` was skipped because of `why`.
pub fn skipped(test: &str, why: &str) {
    let line = format!("SKIPPED {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os("MMSIM_SKIP_LOG") {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
        let _ = file.and_then(|mut f| f.write_all(line.as_bytes()));
    }
}
