//! Issue 22's hostile inputs, one per class: each exits 0, 1 or 2 with a message that names the
//! file and line (or flag, or byte offset), never panics (exit 101) or aborts, and never
//! allocates what the input merely names. See docs/errors.md.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mmsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(args)
        .current_dir(root())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("mmsim runs")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap().to_path_buf()
}

/// Writes `bytes` to a temporary file and returns its path.
fn file(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("mmsim-robust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

/// A scenario of one process `p` running `ops` in one step.
fn scenario(name: &str, machine: &str, ops: &str) -> String {
    let body = format!(
        "[machine]\nprofile = \"tiny\"\n{machine}\n\n[[process]]\nname = \"p\"\n\n\
         [[step]]\nprocess = \"p\"\nops = [\n{ops}\n]\n"
    );
    file(name, body.as_bytes())
}

/// Asserts the exit code and that the output holds `needle`.
#[track_caller]
fn assert_exit(o: &Output, code: i32, needle: &str) {
    let text =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(code), "exit code; output:\n{text}");
    assert!(text.contains(needle), "expected `{needle}` in:\n{text}");
    assert!(!text.contains("panicked"), "a panic:\n{text}");
}

const BUF: &str =
    r#"{ op = "mmap", len = "64KiB", prot = "rw", flags = "private|anonymous", as = "buf" },"#;

#[test]
fn a_name_bound_by_a_failed_operation_fails_the_task_that_uses_it() {
    let cases = [
        (
            "mmap.toml",
            r#"{ op = "mmap", len = 0, prot = "rw", flags = "private|anonymous", as = "buf", expect = { errno = "EINVAL" } },
               { op = "read_bytes", addr = "buf", len = 8 },"#,
            "mmap.toml:12",
            "`buf` is not an address",
        ),
        (
            "open.toml",
            r#"{ op = "open", path = "/none", flags = "rdonly", as = "f", expect = { errno = "ENOENT" } },
               { op = "close", fd = "f" },"#,
            "open.toml:12",
            "`f` is not a file descriptor",
        ),
        (
            "pin.toml",
            r#"{ op = "pin", addr = 4096, len = 4096, as = "h", expect = { errno = "EFAULT" } },
               { op = "unpin", pin = "h" },"#,
            "pin.toml:12",
            "`h` is not a pin",
        ),
    ];
    for (name, ops, at, why) in cases {
        let o = mmsim(&["run", &scenario(name, "", ops)]);
        assert_exit(&o, 1, at);
        assert_exit(&o, 1, why);
    }
    // The step that would fork fails first, so the next step's process was never bound.
    let body = "[machine]\nprofile = \"tiny\"\n[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\n\
        ops = [ { op = \"read_bytes\", addr = 4096, len = 1 }, { op = \"fork\", as = \"child\" } ]\n\
        [[step]]\nprocess = \"child\"\nops = [ { op = \"exit\" } ]\n";
    let o = mmsim(&["run", &file("fork.toml", body.as_bytes())]);
    assert_exit(&o, 1, "fork.toml:8");
    assert_exit(&o, 1, "`child` is not a process");
}

#[test]
fn an_expectation_that_fails_under_another_kernel_exits_1() {
    let ops = r#"{ op = "mmap", len = 0, prot = "rw", flags = "private|anonymous", as = "buf", expect = [ { errno = "EINVAL", when = { kernel = "v5.8" } } ] },
                 { op = "read_bytes", addr = "buf", len = 1 },"#;
    let o = mmsim(&["run", &scenario("kernel.toml", "", ops), "--kernel", "v6.8"]);
    assert_exit(&o, 1, "kernel.toml:11");
}

#[test]
fn user_input_cannot_overflow_virtual_time() {
    let o = mmsim(&[
        "run",
        "scenarios/fork-cow.toml",
        "--set",
        "cost.zero_page_4k=9223372036854775807",
    ]);
    assert_exit(&o, 2, "--set cost.zero_page_4k=9223372036854775807");
    assert_exit(&o, 2, "at most 10000000 ns");
    let ops = r#"{ op = "sleep", duration = "18446744073709551615ns" }, { op = "sleep", duration = "1ns" },"#;
    assert_exit(&mmsim(&["run", &scenario("sleep.toml", "", ops)]), 2, "sleep.toml:11");
    let ops = r#"{ op = "sleep", duration = "18446744073709551615s" },"#;
    assert_exit(&mmsim(&["run", &scenario("sleep-s.toml", "", ops)]), 2, "sleep-s.toml:11");
    let o = mmsim(&[
        "run",
        "scenarios/fork-cow.toml",
        "--set",
        "lru_gen_min_ttl_ms=18446744073709551615",
    ]);
    assert_exit(&o, 2, "expected at most 3600000");
}

#[test]
fn replay_sizes_are_bounded_before_anything_is_allocated() {
    // Once grew to 7.26 GB and aborted: the window was never range-checked.
    let huge = ["--cache", "51TiB", "--readahead-kb", "18446744073709551615"];
    let o = mmsim(&[&["replay", "traces/arc/P6.lis.zst"][..], &huge].concat());
    assert_exit(&o, 2, "--readahead-kb 18446744073709551615: expected at most 1048576");
}

#[test]
fn record_looks_a_bare_name_up_on_path() {
    let o = mmsim(&["record", "--", "mmsim-no-such-program"]);
    assert_exit(&o, 2, "no `mmsim-no-such-program` is on PATH");
}

#[test]
fn sweep_grids_are_bounded_before_anything_is_built() {
    for grid in ["seed=0..18446744073709551615", "seed=0..100000000"] {
        let o = mmsim(&["sweep", "scenarios/fork-cow.toml", "--grid", grid]);
        assert_exit(&o, 2, "a grid has at most 65536 points");
    }
    let o = mmsim(&[
        "sweep",
        "scenarios/fork-cow.toml",
        "--grid",
        "seed=0..1000",
        "--grid",
        "swappiness=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69",
    ]);
    assert_exit(&o, 2, "70000 points (1000 x 70)");
}

#[test]
fn sizes_are_validated_before_anything_is_allocated() {
    let ops =
        format!("{BUF}\n{}", r#"{ op = "write_bytes", addr = "buf", fill = 1, len = "1TiB" },"#);
    assert_exit(&mmsim(&["run", &scenario("write.toml", "", &ops)]), 2, "write.toml:12");
    let ops = format!(
        "{BUF}\n{}",
        r#"{ op = "read_bytes", addr = "buf", len = 1, expect = { fill = 0, len = "1TiB" } },"#
    );
    assert_exit(&mmsim(&["run", &scenario("expect.toml", "", &ops)]), 2, "at most 256 MiB");
    // The copy faults on the first page and has allocated only what it copied.
    let ops = r#"{ op = "read_bytes", addr = "0x10000000000", len = "1TiB", expect = { signal = "SIGSEGV" } },"#;
    assert_exit(&mmsim(&["run", &scenario("read.toml", "", ops)]), 0, "all hold");
    // Swap costs the host what a run uses, not its size; past 64 TiB it is refused.
    assert_exit(&mmsim(&["run", &scenario("swap.toml", "swap = \"64TiB\"", BUF)]), 0, "all hold");
    let o = mmsim(&["run", &scenario("swap65.toml", "swap = \"65TiB\"", BUF)]);
    assert_exit(&o, 2, "swap65.toml:3");
}

#[test]
fn the_host_budget_refuses_a_run_that_outgrows_it() {
    let ops = r#"{ op = "mmap", len = "64TiB", prot = "rw", flags = "private|anonymous|noreserve", as = "big" },
                 { op = "touch", addr = "big", len = "64TiB", access = "write" },"#;
    let path = scenario("touch.toml", "memory = \"64TiB\"", ops);
    let o = mmsim(&["run", &path, "--host-budget", "32MiB"]);
    assert_exit(&o, 2, "over the host budget of 32 MiB");
    assert_exit(&mmsim(&["run", &path, "--host-budget", "lots"]), 2, "--host-budget lots");
    assert_exit(&mmsim(&["run", "/dev/zero"]), 2, "/dev/zero: cannot read: not a regular file");
    let big = file("big.toml", &vec![b'#'; (16 << 20) + 1]);
    assert_exit(&mmsim(&["run", &big]), 2, "an input file holds at most 16777216 bytes");
}

#[test]
fn undecodable_input_names_the_position() {
    let text = file("bad-utf8.toml", b"[machine]\nprofile = \"tiny\"\n# \xff\xfe\n");
    let o = mmsim(&["run", &text]);
    assert_exit(&o, 2, "bad-utf8.toml:3: not UTF-8 text (byte 3 of the line, offset 29)");
    let maps = file("bad.maps", b"00400000-00401000 r-xp 00000000 08:01 1 /bin/x\n\xff\n");
    let o = mmsim(&["replay", "traces/sum.lackey.gz", "--maps", &maps]);
    assert_exit(&o, 2, "bad.maps:2: not UTF-8 text (byte 1 of the line");
    let schedule = file("bad.schedule", b"\xfe\n");
    let o = mmsim(&["explore", "scenarios/races/collapse-fork.toml", "--replay", &schedule]);
    assert_exit(&o, 2, "bad.schedule:1: not UTF-8 text");
    let o = mmsim(&["run", "scenarios/fork-cow.toml", "--show", "smaps:nobody"]);
    assert_exit(&o, 2, "--show/--inspect: `nobody` is not a process");
    let o = mmsim(&["explore", "scenarios/races/collapse-fork.toml", "--max-events", "0"]);
    assert_exit(&o, 2, "--max-events");
    let arc = file("bad.lis", b"1 2 0 0\n\xff\xfe 3 0 0\n");
    assert_exit(&mmsim(&["replay", &arc, "--cache", "1MiB"]), 2, "bad.lis:2: not UTF-8 text");
    let gz = std::fs::read(root().join("traces/sum.lackey.gz")).unwrap();
    let cut = file("cut.lackey.gz", &gz[..2000]);
    let o = mmsim(&["replay", &cut, "--maps", "traces/sum.maps"]);
    assert_exit(&o, 2, "corrupt gzip data after compressed byte 2000");
    let zst = std::fs::read(root().join("traces/arc/P6.lis.zst")).unwrap();
    let mut bad = zst[..200].to_vec();
    bad.extend((0..300u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    let o = mmsim(&["replay", &file("bad.lis.zst", &bad), "--cache", "1MiB"]);
    assert_exit(&o, 2, "corrupt zstd data after compressed byte");
}

#[test]
fn impossible_replay_options_are_bad_input() {
    let arc = "traces/arc/P6.lis.zst";
    assert_exit(&mmsim(&["replay", arc, "--cache", "0"]), 2, "--cache: expected at least one page");
    assert_exit(&mmsim(&["replay", arc, "--cache", "64TiB"]), 2, "--cache 64 TiB");
    let o = mmsim(&["replay", arc, "--cache", "1MiB", "--policy", "mglru", "--kernel", "v5.8"]);
    assert_exit(&o, 2, "--policy: switch lru = mglru is not modelled for v5.8");
}

#[test]
fn the_events_budget_refuses_a_run_at_the_event_that_exceeds_it() {
    let ops = r#"{ op = "mmap", len = "1GiB", prot = "rw", flags = "private|anonymous", as = "big" },
                 { op = "touch", addr = "big", len = "1GiB", access = "write" },"#;
    let path = scenario("events.toml", "memory = \"2GiB\"", ops);
    let o = mmsim(&["run", &path, "--max-events", "1000"]);
    assert_exit(&o, 2, "events.toml: refused: the run took more than 1000 scheduling events");
    assert_exit(&o, 2, "over the events budget of 1000 (--max-events; default 1073741824)");
    assert_exit(&mmsim(&["run", &path, "--max-events", "0"]), 2, "--max-events");
    let o = mmsim(&["sweep", &path, "--grid", "seed=0..1", "--max-events", "1000"]);
    assert_exit(&o, 2, "over the events budget of 1000");
    let o = mmsim(&["run", "scenarios/fork-cow.toml", "--max-events", "100000"]);
    assert_exit(&o, 0, "all hold");
}

#[test]
fn a_trace_that_never_ends_is_stopped_by_the_events_budget() {
    // A trace read from a pipe whose writer never stops.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(["replay", "/dev/stdin", "--maps", "traces/sum.maps", "--max-events", "2000"])
        .current_dir(root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let line = b" L 7fffe0c80000,8\n".repeat(1024);
        while stdin.write_all(&line).is_ok() {}
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_exit(&o, 2, "/dev/stdin: refused: the run took more than 2000 scheduling events");
    let maps = mmsim(&["replay", "traces/sum.lackey.gz", "--maps", "/dev/zero"]);
    assert_exit(&maps, 2, "/dev/zero: cannot read: not a regular file");
}
