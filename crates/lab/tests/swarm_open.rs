//! Model bugs the swarm found that are not fixed yet: each file under `tests/swarm-open/`
//! still breaks the invariant its first line names (`# invariant: NAME`) when run with the
//! whole-system checkers after every event. Once a fix makes a case hold, this test fails:
//! move the file to `scenarios/regressions/`, where it must then hold in every era.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::scenario::run::{Overrides, load, run};
use std::path::Path;

#[test]
fn open_swarm_cases_still_break_their_invariant() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/swarm-open");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = text.lines().next().and_then(|l| l.strip_prefix("# invariant: ")).unwrap();
        let s = load(&f.to_string_lossy()).unwrap();
        let o = Overrides {
            check_every_step: true,
            keep_going: true,
            max_events: Some(5_000_000),
            ..Overrides::default()
        };
        let report = run(&s, &o, &mut |_| ()).unwrap();
        let stopped = report.stopped.unwrap_or_default();
        assert!(
            stopped.contains(name),
            "{} no longer breaks `{name}` ({stopped:?}): fixed? move it to scenarios/regressions/",
            f.display()
        );
    }
}
