//! Every `mmsim` command the README gives a reader to paste runs and exits as the README says:
//! each `cargo run --release --bin mmsim -- ARGS` line of its shell blocks is run with this
//! build's `mmsim`, from the repository's root, made small where the README's full size would
//! take minutes (`reproduce` at `--quick` on one seed, `bench` with few references or events;
//! `explore` writes its schedule aside), and
//! must exit 0, or 1 where the README's comment on the line says "exit 1".
//!
//! Lines that need what a test machine may lack are named, not run, and each is covered
//! elsewhere: `record` (qemu-user; `tests/record.rs` in `crates/trace`) and what replays its
//! output, a file of the reader's own (`t.lackey`), and `sudo` (root; `tests/host.rs`).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap().to_path_buf()
}

/// A README command line: its arguments after `--` and the exit status its comment promises.
struct Line {
    args: Vec<String>,
    exit: i32,
    text: String,
}

/// The `mmsim` command lines of the README's `sh` blocks.
fn readme_lines() -> Vec<Line> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        let Some(rest) = line.strip_prefix("cargo run --release --bin mmsim -- ").filter(|_| in_sh)
        else {
            continue;
        };
        let (command, comment) = rest.split_once('#').unwrap_or((rest, ""));
        let args = shlex::split(command).unwrap_or_else(|| panic!("unquotable: {line}"));
        let exit = if comment.contains("exit 1") { 1 } else { 0 };
        out.push(Line { args, exit, text: line.to_string() });
    }
    out
}

/// Why a line is not run here, if it is not.
fn not_run(args: &[String]) -> Option<&'static str> {
    let has = |s: &str| args.iter().any(|a| a == s || a.ends_with(s));
    if args[0] == "record" || has("ls.mmprog") {
        Some("needs qemu-user (the recorder's test runs it)")
    } else if has("t.lackey") {
        Some("reads a trace of the reader's own")
    } else {
        None
    }
}

/// The line made small: the same command, at test sizes.
fn small(args: &[String], out: &Path) -> Vec<String> {
    let mut a = args.to_vec();
    let push = |a: &mut Vec<String>, more: &[&str]| a.extend(more.iter().map(|s| s.to_string()));
    match a[0].as_str() {
        "reproduce" if !a.iter().any(|x| x == "--list") => {
            if !a.iter().any(|x| x == "--seeds") {
                push(&mut a, &["--seeds", "1"]);
            }
            push(&mut a, &["--quick", "--out", &out.display().to_string()]);
        }
        "explore" => {
            let schedule = out.join("found.schedule").display().to_string();
            push(&mut a, &["--schedule-out", &schedule]);
        }
        "bench" if a.get(1).is_some_and(|x| x == "tlb") => {
            push(&mut a, &["--refs", "20000", "--big", "false"]);
        }
        "bench" => push(&mut a, &["--events", "200000"]),
        _ => {}
    }
    a
}

#[test]
fn every_readme_command_runs_as_documented() {
    let lines = readme_lines();
    assert!(lines.len() >= 15, "the README's commands were not found: {}", lines.len());
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme");
    let mut ran = 0;
    for (i, line) in lines.iter().enumerate() {
        if let Some(why) = not_run(&line.args) {
            eprintln!("not run here ({why}): {}", line.text);
            continue;
        }
        let out = tmp.join(i.to_string());
        std::fs::create_dir_all(&out).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_mmsim"))
            .args(small(&line.args, &out))
            .current_dir(root())
            .output()
            .expect("mmsim runs");
        let said =
            format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(line.exit), "{}\n{said}", line.text);
        ran += 1;
    }
    assert!(ran + 3 >= lines.len(), "only {ran} of {} lines ran", lines.len());
}

#[test]
fn the_readme_shows_the_lost_read() {
    // The README's lost O_DIRECT read prints what the read returned: zeros under v5.12's
    // page_count rule (the DMA landed in the page the write fault replaced), the file's bytes
    // (0x44) under v6.1.
    let run = |kernel: &str| {
        let args =
            ["run", "scenarios/cow/odirect-clear-refs.toml", "--kernel", kernel, "--readings"];
        let o = Command::new(env!("CARGO_BIN_EXE_mmsim")).args(args).current_dir(root()).output();
        String::from_utf8_lossy(&o.expect("mmsim runs").stdout).into_owned()
    };
    assert!(run("v5.12").contains("`pread_direct`: data 512 bytes: 0x00 x512"));
    assert!(run("v6.1").contains("`pread_direct`: data 512 bytes: 0x44 x512"));
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("odirect-clear-refs.toml --kernel v5.12 --readings"));
}
