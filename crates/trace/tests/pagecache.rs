//! Page-cache replay: the pure LRU configuration gives exactly libCacheSim's LRU miss counts on
//! the ARC traces (golden numbers), and the kernel policies replay the same requests within
//! their cgroup.
//!
//! The golden numbers were produced once with libCacheSim's Python package (`libcachesim`
//! 0.3.5, `LRU(pages * 4096).process_trace(reader, 0, 500_000)` on the oracleGeneral files that
//! `mmsim trace convert --oracle-general traces/arc/P6.lis.zst P6.oracleGeneral` writes);
//! `python/tests/test_libcachesim.py` repeats the comparison live. The traces are P6 and P12 of
//! Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead Replacement Cache", FAST '03.

use mm::{KernelVersion, Profile};
use simcore::Bytes;
use trace::block::{BlockFormat, BlockReader};
use trace::pagecache::{AccessMode, PageCacheOptions, PageCacheReport, Policy, replay_page_cache};

/// `(trace, cache pages, libCacheSim LRU misses in the first 500 000 requests)`.
const GOLDEN: [(&str, u64, u64); 6] = [
    ("P6", 1024, 492_185),
    ("P6", 8192, 488_599),
    ("P6", 65_536, 406_674),
    ("P12", 1024, 478_410),
    ("P12", 8192, 468_933),
    ("P12", 65_536, 362_880),
];

fn arc(name: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/arc");
    let path = root.join(format!("{name}.lis.zst"));
    assert!(
        path.exists(),
        "{} is missing (the ARC excerpts are part of the repository)",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

fn replay(trace: &str, pages: u64, policy: Policy, access: AccessMode, n: u64) -> PageCacheReport {
    let path = arc(trace);
    let reader = BlockReader::open(&path, BlockFormat::Arc).unwrap();
    let options = PageCacheOptions {
        profile: Profile::named("tiny").unwrap(),
        kernel: KernelVersion::DEFAULT,
        policy,
        access,
        cache: Bytes(pages * 4096),
        readahead_kb: None,
        noreuse: false,
        fadvise: None,
        max_requests: Some(n),
        max_events: engine::DEFAULT_EVENT_BUDGET,
    };
    replay_page_cache(reader, &path, &options, &mut |_, _| ()).unwrap()
}

#[test]
fn pure_lru_matches_libcachesim_lru_exactly() {
    for (trace, pages, misses) in GOLDEN {
        let r = replay(trace, pages, Policy::Pure, AccessMode::Read, 500_000);
        assert_eq!(r.requests, 500_000);
        assert_eq!(r.misses, misses, "{trace} with {pages} pages: libCacheSim LRU misses {misses}");
    }
}

#[test]
fn kernel_policies_replay_within_the_cgroup() {
    for policy in [Policy::Classic, Policy::Mglru] {
        for access in [AccessMode::Read, AccessMode::Mmap] {
            let r = replay("P6", 4096, policy, access, 100_000);
            assert_eq!(r.hits + r.misses, r.requests);
            assert!(r.misses > 0 && r.hits > 0, "{policy:?} {access:?}: {r:?}");
            assert!(r.vmstat["pgsteal_file"] > 0, "{policy:?} {access:?}: reclaim ran");
            let current: u64 =
                r.memory_stat.lines().find_map(|l| l.strip_prefix("file ")?.parse().ok()).unwrap();
            assert!(current <= 4096 * 4096, "{policy:?} {access:?}: {current} bytes of file");
        }
    }
}

/// A fault in a memcg of one page: read-around reads a window whose later pages reclaim the
/// faulting one before the fault looks it up. The fault then reads that page alone, as the
/// kernel's `__filemap_get_folio(FGP_CREAT)` does, instead of reading the window again forever.
/// Each request misses; the run ends well inside its events budget.
#[test]
fn mmap_faults_progress_in_a_one_page_cgroup() {
    for policy in [Policy::Classic, Policy::Mglru] {
        let path = arc("P6");
        let reader = BlockReader::open(&path, BlockFormat::Arc).unwrap();
        let mut options = PageCacheOptions::new(
            Profile::named("tiny").unwrap(),
            policy,
            AccessMode::Mmap,
            Bytes(4096),
        );
        (options.max_requests, options.max_events) = (Some(200), 200_000);
        let r = replay_page_cache(reader, &path, &options, &mut |_, _| ()).unwrap();
        assert_eq!((r.requests, r.misses), (200, 200), "{policy:?}: {r:?}");
    }
}

/// The replays a machinery change must leave alone: each policy by `read`, the kernel policies
/// also by `mmap`, with `POSIX_FADV_NOREUSE` and with `POSIX_FADV_RANDOM`, in a cgroup small
/// enough that reclaim runs for most of the requests.
const PINNED: [(Policy, AccessMode, &str); 8] = [
    (Policy::Pure, AccessMode::Read, "-"),
    (Policy::Classic, AccessMode::Read, "-"),
    (Policy::Mglru, AccessMode::Read, "-"),
    (Policy::Classic, AccessMode::Mmap, "-"),
    (Policy::Mglru, AccessMode::Mmap, "-"),
    (Policy::Mglru, AccessMode::Mmap, "noreuse"),
    (Policy::Classic, AccessMode::Read, "noreuse"),
    (Policy::Classic, AccessMode::Read, "random"),
];

/// One pinned replay reduced to a line: its event digest (every scheduling event, lock grant and
/// charge in order), virtual time, events, misses and reclaim counters.
fn pinned_line(policy: Policy, access: AccessMode, advice: &str) -> String {
    let path = arc("P6");
    let reader = BlockReader::open(&path, BlockFormat::Arc).unwrap();
    let mut options =
        PageCacheOptions::new(Profile::named("tiny").unwrap(), policy, access, Bytes(2048 * 4096));
    options.max_requests = Some(40_000);
    options.noreuse = advice == "noreuse";
    options.fadvise = (advice == "random").then_some(trace::pagecache::FileAdvice::Random);
    let r = replay_page_cache(reader, &path, &options, &mut |_, _| ()).unwrap();
    format!(
        "{} {access:?} {advice} {} vt={} events={} misses={} pgsteal_file={} refaults={} activations={}",
        policy.name(),
        r.digest,
        r.virtual_time_ns,
        r.events,
        r.misses,
        r.vmstat["pgsteal_file"],
        r.refaults,
        r.activations
    )
}

/// Page-cache replays keep their event history (`tests/pagecache-digests.txt`): a change to the
/// replay's machinery (the engine, the allocator, the page cache's structures) proves it changed
/// nothing the kernel does by leaving this file unchanged; a change of behaviour rewrites it
/// with `MMSIM_BLESS=1`.
#[test]
fn replays_keep_their_event_history() {
    let lines: Vec<String> = PINNED.iter().map(|&(p, a, adv)| pinned_line(p, a, adv)).collect();
    let got = lines.join("\n") + "\n";
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pagecache-digests.txt");
    if std::env::var_os("MMSIM_BLESS").is_some() {
        std::fs::write(&file, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(got, want, "replay histories moved (bless with MMSIM_BLESS=1 if meant)");
}
