//! The `mmsim` command as users run it: exit codes, messages, JSON, and every worked example in
//! `scenarios/`.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mmsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("mmsim runs")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap().to_path_buf()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Writes a scenario to a temporary file and returns its path.
fn scenario(name: &str, body: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mmsim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.to_string_lossy().into_owned()
}

fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            scenario_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

/// Every worked example passes under `mmsim run` (the race scenarios are checked by exploring
/// them instead: `crates/lab/tests/races.rs`).
#[test]
fn every_worked_example_passes() {
    let mut files = Vec::new();
    scenario_files(&root().join("scenarios"), &mut files);
    files.retain(|f| !f.components().any(|c| c.as_os_str() == "races"));
    files.sort();
    assert!(files.len() >= 7, "the worked examples are missing: {files:?}");
    for f in files {
        let rel = f.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        let out = mmsim(&["run", &rel]);
        assert_eq!(out.status.code(), Some(0), "{rel}:\n{}", text(&out));
        assert!(text(&out).contains(": all hold"), "{rel}:\n{}", text(&out));
    }
}

/// Every scenario of `dir` (at least `min` of them) holds under each of `runs`' arguments.
fn examples_hold(dir: &str, min: usize, runs: &[&[&str]]) {
    let mut files = Vec::new();
    scenario_files(&root().join(dir), &mut files);
    files.sort();
    assert!(files.len() >= min, "the examples of {dir} are missing: {files:?}");
    for f in files {
        let rel = f.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        for args in runs {
            let mut full = vec!["run", rel.as_str()];
            full.extend_from_slice(args);
            let out = mmsim(&full);
            assert_eq!(out.status.code(), Some(0), "{rel} {args:?}:\n{}", text(&out));
        }
    }
}

/// The COW examples state each era's behaviour; they hold under every era's kernel (on both sides
/// of each boundary: GUP's forced COW break in v5.8 only, mprotect's write upgrade from v6.0 and
/// v6.2, writable long-term file pins refused from v6.5) and under the seed's rule on a current
/// kernel.
#[test]
fn cow_examples_hold_in_every_era() {
    examples_hold(
        "scenarios/cow",
        4,
        &[
            &["--kernel", "v5.7"],
            &["--kernel", "v5.8"],
            &["--kernel", "v5.9"],
            &["--kernel", "v5.10"],
            &["--kernel", "v5.12"],
            &["--kernel", "v6.0"],
            &["--kernel", "v6.1"],
            &["--kernel", "v6.2"],
            &["--kernel", "v6.4"],
            &["--kernel", "v6.5"],
            &["--kernel", "v6.8"],
            &["--set", "cow_reuse=mapcount"],
        ],
    );
}

/// The syscall examples (mincore, ...) hold on every kernel the model covers.
#[test]
fn syscall_examples_hold_in_every_era() {
    examples_hold(
        "scenarios/syscalls",
        1,
        &[
            &["--kernel", "v4.13"],
            &["--kernel", "v5.8"],
            &["--kernel", "v6.1"],
            &["--kernel", "v6.14"],
        ],
    );
}

/// The reclaim examples state each era's behaviour under both LRUs: before and after
/// POSIX_FADV_NOREUSE took effect (v6.3), and the multi-gen LRU before and after its v6.14 rework.
#[test]
fn reclaim_examples_hold_in_every_era() {
    examples_hold(
        "scenarios/reclaim",
        8,
        &[
            &["--kernel", "v5.15"],
            &["--kernel", "v6.2"],
            &["--kernel", "v6.8"],
            &["--kernel", "v6.2", "--set", "lru=mglru"],
            &["--kernel", "v6.3", "--set", "lru=mglru"],
            &["--kernel", "v6.8", "--set", "lru=mglru"],
            &["--kernel", "v6.14", "--set", "lru=mglru"],
        ],
    );
}

const SMALL: &str = r#"
[machine]
profile = "tiny"
[[process]]
name = "p"
[[step]]
process = "p"
ops = [
  { op = "mmap", len = "16KiB", prot = "rw", flags = "private|anonymous", as = "buf" },
  { op = "touch", addr = "buf", len = "8KiB", access = "write" },
]
[[expect]]
smaps = "Rss"
process = "p"
at = "buf"
kb = 12
"#;

#[test]
fn a_failed_expectation_exits_1_with_a_diff() {
    let path = scenario("fail.toml", SMALL);
    let out = mmsim(&["run", &path]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains(&format!("FAIL {path}:12")), "{t}");
    assert!(t.contains("expected: smaps Rss of p at buf = 12"), "{t}");
    assert!(t.contains("observed: smaps Rss of p at buf = 8"), "{t}");
}

#[test]
fn bad_input_exits_2_naming_file_and_line() {
    let cases: [(&str, &str, &str); 4] = [
        ("syntax.toml", "[machine\nprofile = 1\n", ":1: malformed TOML"),
        (
            "op.toml",
            "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ { op = \"fly\" } ]\n",
            ":5: unknown operation `fly`",
        ),
        (
            "name.toml",
            "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ { op = \"close\", fd = \"nope\" } ]\n",
            ":5: `close`: `nope` is not bound",
        ),
        (
            "machine.toml",
            "[machine]\nmemory = \"1KiB\"\n",
            ":1: impossible machine: memory = 1 KiB",
        ),
    ];
    for (name, body, needle) in cases {
        let path = scenario(name, body);
        let out = mmsim(&["run", &path]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out));
        assert!(text(&out).contains(&format!("{path}{needle}")), "{name}: {}", text(&out));
    }
    let path = scenario("ok.toml", SMALL);
    for (args, needle) in [
        (vec!["--set", "cow_reuse=sometimes"], "switch `cow_reuse` has no value `sometimes`"),
        (vec!["--set", "nonsense"], "--set nonsense: expected KEY=VALUE"),
        (vec!["--set", "lru=mglru", "--kernel", "v5.15"], "lru = mglru is not modelled for v5.15"),
        (vec!["--scheduler", "lottery"], "unknown scheduler `lottery`"),
        (vec!["--set", "swapiness=100"], "did you mean `swappiness`?"),
        (vec!["--set", "cost.zero_page4k=9"], "did you mean `cost.zero_page_4k`?"),
        (vec!["--set", "cow_reus=mapcount"], "did you mean `cow_reuse`?"),
        (vec!["--kernel", "v5.99"], "kernel v5.99 was never released: v5.19 was followed by v6.0"),
        (vec!["--show", "smaps"], "expected smaps:PROCESS"),
    ] {
        let mut full = vec!["run", path.as_str()];
        full.extend(args.iter().copied());
        let out = mmsim(&full);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
    }
    let out = mmsim(&["run", "/no/such/scenario.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("/no/such/scenario.toml: cannot read"), "{}", text(&out));
}

#[test]
fn json_output_and_shows_and_determinism() {
    let path = scenario("json.toml", &SMALL.replace("kb = 12", "kb = 8"));
    let out =
        mmsim(&["run", &path, "--json", "--seed", "3", "--show", "smaps:p", "--show", "vmstat"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seed"], 3);
    assert_eq!(v["failures"].as_array().unwrap().len(), 0);
    assert_eq!(v["shown"][0][0], "/proc/p/smaps");
    assert!(v["shown"][1][1].as_str().unwrap().contains("nr_anon_pages 2\n"));
    let again = mmsim(&["run", &path, "--json", "--seed", "3"]);
    let w: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["digest"], w["digest"]);
    let plain = mmsim(&["run", &path, "--show", "meminfo"]);
    assert!(
        text(&plain).contains("==> /proc/meminfo <==\nMemTotal:         524288 kB"),
        "{}",
        text(&plain)
    );
}

/// `mmsim explore` finds the lost update, writes a schedule that `--replay` reproduces with the
/// same digest, and reports no violation (search exhausted) on the guard scenario.
#[test]
fn explore_finds_minimises_and_replays() {
    let out_file =
        std::env::temp_dir().join(format!("mmsim-cli-lost-{}.schedule", std::process::id()));
    let out_path = out_file.to_string_lossy().into_owned();
    let found = mmsim(&[
        "explore",
        "scenarios/races/lost-update.toml",
        "--strategy",
        "dfs:1",
        "--schedule-out",
        &out_path,
        "--json",
    ]);
    assert_eq!(found.status.code(), Some(1), "{}", text(&found));
    let v: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(v["violation"]["kind"], "expectation failed");
    assert_eq!(v["violation"]["preemptions"], 1);
    let digest = v["violation"]["digest"].as_str().unwrap().to_string();
    let replayed = mmsim(&["explore", "scenarios/races/lost-update.toml", "--replay", &out_path]);
    assert_eq!(replayed.status.code(), Some(1), "{}", text(&replayed));
    assert!(text(&replayed).contains(&format!("digest {digest}")), "{}", text(&replayed));
    let guard = mmsim(&[
        "explore",
        "scenarios/races/concurrent-anon-fault.toml",
        "--strategy",
        "dfs:1",
        "--json",
    ]);
    assert_eq!(guard.status.code(), Some(0), "{}", text(&guard));
    let g: serde_json::Value = serde_json::from_slice(&guard.stdout).unwrap();
    assert!(g["violation"].is_null());
    assert_eq!(g["exhausted"], true);
    let bad = mmsim(&["explore", "scenarios/races/lost-update.toml", "--strategy", "bfs"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("unknown strategy `bfs`"), "{}", text(&bad));
}

/// `mmsim explore` reports a race in kernel terms: the seed's lost O_DIRECT read on v5.12 drawn
/// with one column per task, its key events in the order that loses the data (GUP takes the
/// page, clear_refs write-protects it, the write fault copies it, the DMA completes into the old
/// page), and the data difference summarised rather than dumped.
#[test]
fn explore_reports_a_race_in_kernel_terms() {
    let out_file =
        std::env::temp_dir().join(format!("mmsim-cli-dio-{}.schedule", std::process::id()));
    let out_path = out_file.to_string_lossy().into_owned();
    let args = ["explore", "scenarios/races/odirect-clear-refs.toml", "--kernel", "v5.12"];
    let found = mmsim(&[&args[..], &["--strategy", "dfs:1", "--schedule-out", &out_path]].concat());
    assert_eq!(found.status.code(), Some(1), "{}", text(&found));
    let out = text(&found);
    assert!(out.contains("at 0..512 expected 0x44 x512, got 0x00 x512"), "{out}");
    let (diagram, steps) = out.split_once("\nsteps:\n").expect("a diagram, then the steps");
    let events = ["[GUP takes the page]", "[write-protect]", "[copy]", "[DMA completion]"];
    let at: Vec<usize> = events.iter().map(|e| diagram.find(e).expect(e)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{diagram}");
    let copy = diagram.lines().find(|l| l.contains("wp_page_copy [copy]")).unwrap();
    let pin = diagram.lines().find(|l| l.contains("[GUP takes the page]")).unwrap();
    assert!(copy.find('w') > pin.find('g'), "the copy is in another task's column:\n{diagram}");
    assert!(steps.contains("clear_refs_pte_range [write-protect]"), "{steps}");
    let json = mmsim(
        &[&args[..], &["--strategy", "dfs:1", "--schedule-out", &out_path, "--json"]].concat(),
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let steps = v["violation"]["steps"].as_array().unwrap();
    assert!(steps.iter().any(|s| s["kernel_function"] == "wp_page_copy" && s["event"] == "copy"));
}

/// `mmsim reproduce`: the JSON shape every experiment shares, the files it writes, and bad names.
#[test]
fn reproduce_prints_json_and_writes_the_report() {
    let out_dir = std::env::temp_dir().join(format!("mmsim-reproduce-{}", std::process::id()));
    let out_str = out_dir.to_string_lossy().into_owned();
    let args = ["reproduce", "cow-reuse", "--quick", "--json", "--seeds", "1..3", "--out"];
    let out = mmsim(&[&args[..], &[out_str.as_str()]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(page["summary"].as_array().unwrap().len(), 5);
    assert!(page["provenance"]["commit"].is_string());
    let json = &page["experiments"][0];
    assert_eq!(json["experiment"], "cow-reuse");
    assert_eq!(json["seeds"], serde_json::json!([1, 2]));
    let rows = json["rows"].as_array().unwrap();
    let gain = rows.iter().find(|r| r["name"] == "pmbench throughput gain").unwrap();
    assert_eq!(gain["unit"], "%");
    assert_eq!(gain["published"]["low"], 24.9);
    assert_eq!(gain["simulated"]["values"].as_array().unwrap().len(), 2);
    assert!(gain["simulated"]["mean"].as_f64().unwrap() > 0.0);
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("pmbench throughput gain"));
    assert!(out_dir.join("report.json").exists());
    let bad = mmsim(&["reproduce", "nonsense"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("unknown experiment `nonsense`"), "{}", text(&bad));
    // --set replaces a setting of every machine, and the report says so.
    let set =
        ["reproduce", "dax-zero-page", "--quick", "--seeds", "1", "--set", "dax_hole=zero_page"];
    let out = mmsim(&[&set[..], &["--out", out_str.as_str()]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("NON-DEFAULT settings: dax_hole=zero_page"), "{}", text(&out));
    let bad = mmsim(&["reproduce", "dax-zero-page", "--quick", "--set", "nonsense=1"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

#[test]
fn sweep_runs_a_row_per_point_and_names_impossible_points() {
    let file = "scenarios/cow/odirect-clear-refs.toml";
    let o = mmsim(&[
        "sweep",
        file,
        "--grid",
        "cow_reuse=page_count,mapcount",
        "--grid",
        "seed=0..2",
        "--counter",
        "pgreuse",
        "--csv",
        "--jobs",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "cow_reuse,seed,passed,virtual_ms,events,pgreuse,digest");
    let cells = |i: usize| lines[i].split(',').collect::<Vec<_>>();
    assert_eq!(lines.len(), 5);
    assert_eq!(cells(1)[..3], ["page_count", "0", "yes"]);
    assert_eq!(cells(4)[..3], ["mapcount", "1", "yes"]);
    // The page is reused in place under mapcount and copied under page_count.
    assert_eq!((cells(1)[5], cells(4)[5]), ("0", "1"));
    // A point runs as `mmsim run` with the same overrides: the same digest.
    let one = mmsim(&["run", file, "--seed", "1", "--set", "cow_reuse=mapcount", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(report["digest"], cells(4)[6]);
    assert!(report["vmstat"]["pgreuse"] == 1);
    // Every point is checked before anything runs.
    let o = mmsim(&["sweep", file, "--grid", "kernel=v6.8,v5.8", "--grid", "lru=mglru"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("sweep point kernel=v5.8 lru=mglru"), "{}", text(&o));
    assert!(o.stdout.is_empty(), "nothing ran");
    for bad in [&["--grid", "seed=4..2"][..], &["--grid", "seed=1", "--counter", "pgnothing"]] {
        let o = mmsim(&[&["sweep", file][..], bad].concat());
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", text(&o));
    }
}

#[test]
fn list_names_what_a_run_can_be_set_to_with_eras() {
    let out = mmsim(&["list", "switches"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("cow_reuse: ") && t.contains("v5.9..v5.18  page_count"), "{t}");
    let out = mmsim(&["list", "kernels"]);
    let t = text(&out);
    assert!(t.contains("v6.8 (default)") && t.contains("v5.19  cow_reuse=anon_exclusive"), "{t}");
    assert!(t.contains("v4.20") && !t.contains("v4.21"), "{t}");
    let t = text(&mmsim(&["list", "tunables"]));
    assert!(t.contains("swappiness") && t.contains("at most 200"), "{t}");
    let t = text(&mmsim(&["list", "costs"]));
    assert!(t.contains("zero_page_4k") && t.contains("epyc-vm"), "{t}");
}

/// The replay command `explore` prints for a violation, pasted as printed (kernel and settings
/// included), reproduces it.
#[test]
fn the_printed_replay_command_reproduces_the_violation() {
    let dir = std::env::temp_dir().join(format!("mmsim-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("v.schedule").display().to_string();
    let scenario = "scenarios/races/odirect-clear-refs.toml";
    let found = mmsim(&[
        "explore",
        scenario,
        "--kernel",
        "v5.12",
        "--strategy",
        "dfs:1",
        "--schedule-out",
        &out_file,
    ]);
    assert_eq!(found.status.code(), Some(1), "{}", text(&found));
    let t = text(&found);
    let command = t
        .lines()
        .find_map(|l| l.split_once("replay with: mmsim ").map(|(_, c)| c.to_string()))
        .unwrap_or_else(|| panic!("no replay command in\n{t}"));
    let words: Vec<&str> = command.split(' ').collect();
    assert!(words.contains(&"--kernel"), "{command}");
    let replayed = mmsim(&words);
    assert_eq!(replayed.status.code(), Some(1), "{command}: {}", text(&replayed));
    assert!(text(&replayed).contains("VIOLATION"), "{}", text(&replayed));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run of named experiments writes its own report beside the whole run's, never over it.
#[test]
fn a_partial_reproduce_writes_its_own_report() {
    let dir = std::env::temp_dir().join(format!("mmsim-partial-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("mmsim-report")).unwrap();
    std::fs::write(dir.join("mmsim-report/report.json"), "the whole run's\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(["reproduce", "dax-zero-page", "--quick", "--seeds", "1", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let whole = std::fs::read_to_string(dir.join("mmsim-report/report.json")).unwrap();
    assert_eq!(whole, "the whole run's\n");
    assert!(dir.join("mmsim-report/dax-zero-page/report.html").is_file(), "{}", text(&out));
    assert!(text(&out).contains("mmsim-report/dax-zero-page/report.html"), "{}", text(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dumps_speak_the_kernel_s_terms_and_era() {
    // `--inspect` names the PMD entry as a page-table dump would, and shows only the page flags
    // the kernel asked for has: no PG_anon_exclusive before v5.19.
    let inspect = |kernel: &str| {
        let scenario = "scenarios/cow/odirect-clear-refs.toml";
        text(&mmsim(&["run", scenario, "--kernel", kernel, "--inspect", "app:buf"]))
    };
    let (old, new) = (inspect("v5.12"), inspect("v6.1"));
    assert!(old.contains(": pmd table (page table ") && !old.contains("Some("), "{old}");
    assert!(!old.contains("anon_exclusive"), "{old}");
    assert!(new.contains("flags dirty|lru|swapbacked|anon_exclusive"), "{new}");
}
