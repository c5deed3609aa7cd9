//! `mmsim replay` and `mmsim trace convert` as users run them: the recorded example trace's
//! counters, bad input with file and line (exit 2), `--skip-bad`, the binary format with zstd,
//! and truncation.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap().to_path_buf()
}

fn mmsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mmsim")).args(args).current_dir(root()).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn tmp(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mmsim-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_string_lossy().into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

const MAPS: &str = "traces/sum.maps";

/// The program recorded with valgrind (traces/record.sh): 26,663 instructions and 6,144 data
/// references; its 32 KiB .bss takes 8 first-touch faults, its text one major fault. Lookups
/// count retired references, and each fault costs two walks (the faulting one and the retry's).
#[test]
fn the_recorded_trace_replays_with_known_counters() {
    let r = json(&mmsim(&["replay", "traces/sum.lackey.gz", "--maps", MAPS, "--json"]));
    assert_eq!(r["references"], 32_807);
    assert_eq!(r["instructions"], 26_663);
    assert_eq!(r["counters"]["iTLB-loads"], 26_663, "one lookup per retired fetch");
    assert_eq!(r["counters"]["dTLB-loads"], 2_048);
    assert_eq!(r["counters"]["dTLB-stores"], 4_096, "one lookup per retired store");
    assert_eq!(r["counters"]["dtlb_walks"], 16, "two walks per first-touch store");
    assert_eq!(r["counters"]["itlb_walks"], 2, "two walks for the one text fault");
    assert_eq!(r["page_faults"], 9);
    assert_eq!(r["major_faults"], 1);
    assert_eq!(r["outside_mappings"], 0);
    let out = mmsim(&["replay", "traces/sum.lackey.gz", "--maps", MAPS]);
    assert!(text(&out).contains("iTLB-load-misses"), "{}", text(&out));
    assert!(text(&out).contains("seconds time elapsed (simulated)"));
}

/// The 4 MiB-text program (traces/src/bigtext.c) calls into 1024 code pages four times: with
/// 4 KiB text most of its calls miss the L1 iTLB and walk; with `--text-thp collapse` its two
/// aligned 2 MiB ranges are collapsed (`MADV_COLLAPSE`) into PMD-mapped file THPs before the
/// first reference and the misses almost vanish. A bad value is refused with exit 2.
#[test]
fn text_thp_backs_the_big_text_with_2m_pages() {
    let run = |thp: &str| {
        let args = ["replay", "traces/bigtext.lackey.gz", "--maps", "traces/bigtext.maps"];
        json(&mmsim(&[&args[..], &["--json", "--text-thp", thp]].concat()))
    };
    let (small, huge) = (run("off"), run("collapse"));
    assert_eq!(small["instructions"], 49_191);
    assert_eq!(
        (small["text_thps_mapped"].clone(), huge["text_thps_mapped"].clone()),
        (0.into(), 2.into())
    );
    assert_eq!(small["counters"]["iTLB-load-misses"], 4_213);
    assert_eq!(huge["counters"]["iTLB-load-misses"], 6);
    assert_eq!(huge["counters"]["itlb_walks"], 6);
    let out = mmsim(&["replay", "traces/sum.lackey.gz", "--maps", MAPS, "--text-thp", "on"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("--text-thp: expected off or collapse, found `on`"),
        "{}",
        text(&out)
    );
}

/// A malformed line stops the replay with its file and line and exit 2; `--skip-bad` counts it.
/// A reference outside every mapping is counted, not fatal.
#[test]
fn bad_lines_name_file_and_line() {
    let trace = tmp("bad.lackey");
    std::fs::write(&trace, "I  00401000,7\n L 00403000,8\n L 0040300g,8\n S 00000010,8\n").unwrap();
    let out = mmsim(&["replay", &trace, "--maps", MAPS]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains(&format!("{trace}:3: bad hex digit `g`")), "{}", text(&out));
    let r = json(&mmsim(&["replay", &trace, "--maps", MAPS, "--skip-bad", "--json"]));
    assert_eq!(r["skipped_lines"], 1);
    assert_eq!(r["outside_mappings"], 1);
    let maps = tmp("bad.maps");
    std::fs::write(&maps, "00400000-00401000 r-xp 0 08:01 1 /bin/x\nnonsense\n").unwrap();
    let out = mmsim(&["replay", &trace, "--maps", &maps]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains(&format!("{maps}:2: expected")), "{}", text(&out));
}

/// Converting to the binary format (zstd) replays to the same counters; a truncated file is
/// detected.
#[test]
fn binary_traces_replay_the_same_and_truncation_is_detected() {
    let bin = tmp("sum.mmt.zst");
    let out = mmsim(&["trace", "convert", "traces/sum.lackey.gz", &bin]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let a = json(&mmsim(&["replay", "traces/sum.lackey.gz", "--maps", MAPS, "--json"]));
    let b = json(&mmsim(&["replay", &bin, "--maps", MAPS, "--json"]));
    assert_eq!(a["counters"], b["counters"]);
    assert_eq!(b["format"], "mmsim binary");
    let raw = tmp("sum.mmt");
    assert_eq!(mmsim(&["trace", "convert", &bin, &raw]).status.code(), Some(0));
    let bytes = std::fs::read(&raw).unwrap();
    let cut = tmp("cut.mmt");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = mmsim(&["replay", &cut, "--maps", MAPS]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("truncated binary trace"), "{}", text(&out));
}

/// A page-cache replay of the P6 excerpt's first 20 000 requests through a 4 MiB cgroup.
fn page_cache(extra: &[&str]) -> Output {
    let base = ["replay", "traces/arc/P6.lis.zst", "--cache", "4MiB", "--max-requests", "20000"];
    mmsim(&[&base[..], extra].concat())
}

/// `--json` gives hits, misses, refaults, `pgactivate` and, per LRU type, evictions, refaults
/// and refault activations, consistent with the vmstat deltas it also lists.
#[test]
fn page_cache_json_has_counts_per_lru() {
    let r = json(&page_cache(&["--json"]));
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    assert_eq!(n(&r["requests"]), 20_000);
    assert_eq!(n(&r["hits"]) + n(&r["misses"]), 20_000);
    let file = &r["lru"]["file"];
    assert!(n(&file["evictions"]) > 0, "{r}");
    assert_eq!(n(&file["evictions"]), n(&r["vmstat"]["pgsteal_file"]));
    assert_eq!(n(&file["refaults"]), n(&r["refaults"]));
    assert_eq!(n(&file["refault_activations"]), n(&r["vmstat"]["workingset_activate_file"]));
    assert_eq!(n(&r["activations"]), n(&r["vmstat"]["pgactivate"]));
    assert_eq!(n(&r["lru"]["anon"]["evictions"]), 0, "a page-cache replay has no anon pages");
    assert!(r["fadvise"].is_null());
}

/// `--fadvise random` is POSIX_FADV_RANDOM on the file: FMODE_RANDOM turns read-ahead off, so
/// every miss reads one page (4 KiB of `pgpgin`), where the default window reads ahead.
#[test]
fn fadvise_random_turns_readahead_off() {
    let normal = json(&page_cache(&["--json"]));
    let random = json(&page_cache(&["--json", "--fadvise", "random"]));
    assert_eq!(random["fadvise"], "random");
    let n = |r: &serde_json::Value, k: &str| r["vmstat"][k].as_u64().unwrap();
    assert_eq!(n(&random, "pgpgin"), 4 * random["misses"].as_u64().unwrap(), "{random}");
    assert!(n(&normal, "pgpgin") > n(&random, "pgpgin"), "{normal}");
    let o = page_cache(&["--fadvise", "dontneed"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--fadvise: unknown advice `dontneed`"), "{}", text(&o));
}

/// The progress bar goes to a terminal only: not to a pipe, and never with `--quiet`.
#[test]
fn page_cache_progress_stays_off_pipes() {
    for extra in [&[][..], &["--quiet"]] {
        let o = page_cache(extra);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("hit ratio"));
    }
}
