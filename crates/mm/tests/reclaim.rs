//! Reclaim: memory cgroup limits, workingset refaults, the multi-gen LRU's generations and
//! POSIX_FADV_NOREUSE, each checked with the whole-system checkers after every step.

mod common;

use common::{run_in, vmstat};
use mm::fadvise::advice;
use mm::{
    Access, FileSpec, KernelVersion, Machine, MachineConfig, OpenFlags, Pid, Profile, map, prot,
};
use simcore::Bytes;

/// A 64 MiB machine running `kernel` with the `lru` algorithm, no readahead, and a cgroup
/// `/box` of `limit` holding one process.
fn boxed(kernel: &str, lru: &str, limit: Bytes) -> (Machine, Pid) {
    let profile = Profile::named("tiny").unwrap().resized(None, Some(Bytes::mib(64))).unwrap();
    let mut config = MachineConfig::new(profile, kernel.parse::<KernelVersion>().unwrap());
    config.switches.set("lru", lru).unwrap();
    config.tunables.ra_pages = 0;
    config.tunables.fault_around_pages = 1;
    let mut m = Machine::new(config).unwrap();
    let cg = m.create_cgroup("/box").unwrap();
    m.set_memory_max(cg, Some(limit)).unwrap();
    let pid = m.new_process("app").unwrap();
    m.attach_cgroup(pid, cg);
    (m, pid)
}

fn file(m: &mut Machine, path: &str, pages: u64) {
    m.create_file(path, &FileSpec { pattern: Some(1), ..FileSpec::zeros(Bytes(pages * 4096)) })
        .unwrap();
}

fn stat(m: &Machine, key: &str) -> u64 {
    let cg = m.cgroup("/box").unwrap();
    let text = m.memory_stat(cg);
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in\n{text}"))
}

async fn read_all(t: mm::Thread, path: &'static str, pages: u64, times: u32) {
    let fd = t.open(path, OpenFlags::RDONLY).await.unwrap();
    for _ in 0..times {
        for p in 0..pages {
            t.pread(fd, None, 4096, p * 4096).await.unwrap();
        }
    }
}

/// Given a 1 MiB cgroup, when a 2 MiB file is read through it, then its charge never exceeds
/// the limit, reclaim stole the difference, and reading the file again refaults pages whose
/// shadows remain.
#[test]
fn a_cgroup_limit_reclaims_and_leaves_shadows() {
    for lru in ["classic", "mglru"] {
        let (mut m, pid) = boxed("v6.8", lru, Bytes::mib(1));
        file(&mut m, "/big", 512);
        run_in(&mut m, pid, |t| read_all(t, "/big", 512, 1));
        let cg = m.cgroup("/box").unwrap();
        let usage = m.kernel().state().memcgs[cg].usage;
        assert!(usage <= 256, "{lru}: {usage} pages charged");
        assert!(stat(&m, "pgsteal") >= 256, "{lru}: {}", m.memory_stat(cg));
        assert_eq!(stat(&m, "workingset_refault_file"), 0, "{lru}");
        run_in(&mut m, pid, |t| read_all(t, "/big", 512, 1));
        assert!(stat(&m, "workingset_refault_file") > 0, "{lru}: {}", m.memory_stat(cg));
        assert_eq!(vmstat(&m, "nr_file_pages"), m.kernel().state().memcgs[cg].usage);
    }
}

/// Given a file read twice (so its pages are active) and a second file streamed after it, when
/// the second file's first pages are read again, then the classic LRU finds their refault
/// distance within the active list and activates them (`workingset_activate_file`).
#[test]
fn classic_refaults_within_the_workingset_are_activated() {
    let (mut m, pid) = boxed("v6.8", "classic", Bytes::kib(1024));
    file(&mut m, "/hot", 150);
    file(&mut m, "/stream", 150);
    run_in(&mut m, pid, |t| read_all(t, "/hot", 150, 2));
    assert_eq!(vmstat(&m, "nr_active_file"), 150);
    run_in(&mut m, pid, |t| read_all(t, "/stream", 150, 1));
    assert_eq!(stat(&m, "workingset_activate_file"), 0);
    run_in(&mut m, pid, |t| read_all(t, "/stream", 20, 1));
    assert!(stat(&m, "workingset_refault_file") > 0);
    assert!(
        stat(&m, "workingset_activate_file") > 0,
        "{}",
        m.memory_stat(m.cgroup("/box").unwrap())
    );
}

/// The multi-gen LRU places a page faulted through a mapping in the youngest generation, and a
/// page faulted through a mapping of a NOREUSE file (v6.3+) where it places a `read()`.
#[test]
fn mglru_places_noreuse_faults_in_an_old_generation() {
    // Where the 64 faulted pages land, counted from the oldest generation: the youngest (3)
    // with recency; without it, the oldest (v6.3-v6.6), or one above it from v6.7 ("mm/mglru:
    // fix underprotected page cache" places inactive folios there).
    for (kernel, noreuse, above_oldest) in
        [("v6.8", false, 3), ("v6.8", true, 1), ("v6.3", true, 0), ("v6.2", true, 3)]
    {
        let (mut m, pid) = boxed(kernel, "mglru", Bytes::mib(8));
        file(&mut m, "/video", 64);
        run_in(&mut m, pid, move |t| async move {
            let fd = t.open("/video", OpenFlags::RDONLY).await.unwrap();
            let a = t
                .mmap(mm::MmapArgs {
                    addr: None,
                    len: Bytes(64 * 4096),
                    prot: prot::READ,
                    flags: map::SHARED,
                    fd: Some(fd),
                    offset: 0,
                })
                .await
                .unwrap();
            if noreuse {
                // After the mmap: the flag is read live from the open file.
                t.fadvise(fd, 0, 0, advice::NOREUSE).await.unwrap();
            }
            t.touch(a, Bytes(64 * 4096), Access::Read).await.unwrap();
        });
        let st = m.kernel().state();
        let cg = m.cgroup("/box").unwrap();
        let g = &st.memcgs[cg].lruvec.lrugen;
        assert_eq!(g.max_seq, g.min_seq[1] + 3, "{kernel}: four generations");
        let pages: Vec<u64> = (0..4)
            .map(|i| {
                let list = mm::memcontrol::lruvec_gen_list(cg, g.gen_of(g.min_seq[1] + i), true);
                st.folios.list_pages(list)
            })
            .collect();
        let mut want = vec![0; 4];
        want[above_oldest] = 64;
        assert_eq!(pages, want, "{kernel} noreuse={noreuse}\n{}", m.lru_gen());
    }
}

/// Given the multi-gen LRU under pressure from a file streamed through a mapping (its faults
/// land in a young generation), eviction runs out of old generations and the aging walks the
/// page tables to make new ones; the anonymous working set, touched between frames, is promoted
/// each time and stays resident (there is no swap).
#[test]
fn mglru_ages_and_evicts_within_the_limit() {
    let (mut m, pid) = boxed("v6.8", "mglru", Bytes::mib(2));
    file(&mut m, "/stream", 1024);
    run_in(&mut m, pid, |t| async move {
        let anon = t.mmap_anon(Bytes::kib(256), prot::READ | prot::WRITE).await.unwrap();
        t.touch(anon, Bytes::kib(256), Access::Write).await.unwrap();
        let fd = t.open("/stream", OpenFlags::RDONLY).await.unwrap();
        let args = mm::MmapArgs {
            addr: None,
            len: Bytes(1024 * 4096),
            prot: prot::READ,
            flags: map::SHARED,
            fd: Some(fd),
            offset: 0,
        };
        let video = t.mmap(args).await.unwrap();
        for frame in 0..16u64 {
            t.touch(video + Bytes(frame * 64 * 4096), Bytes(64 * 4096), Access::Read)
                .await
                .unwrap();
            t.touch(anon, Bytes::kib(256), Access::Read).await.unwrap();
        }
    });
    let cg = m.cgroup("/box").unwrap();
    assert!(m.kernel().state().memcgs[cg].usage <= 512);
    let g = m.kernel().state().memcgs[cg].lruvec.lrugen.clone();
    assert!(g.max_seq > 3, "aging made generations:\n{}", m.lru_gen());
    assert_eq!(vmstat(&m, "pswpout"), 0, "no swap device: anon is not evicted");
    assert_eq!(
        m.kernel().state().lruvec_lru_pages(cg, mm::folio::LruList::ActiveAnon)
            + m.kernel().state().lruvec_lru_pages(cg, mm::folio::LruList::InactiveAnon),
        64
    );
    assert!(m.lru_gen().contains("memcg     2 /box"), "{}", m.lru_gen());
}

/// `posix_fadvise` errors and the page-cache advice: WILLNEED reads the range in, DONTNEED drops
/// the clean unmapped pages wholly inside it.
#[test]
fn fadvise_errors_willneed_and_dontneed() {
    let (mut m, pid) = boxed("v6.8", "classic", Bytes::mib(8));
    file(&mut m, "/f", 32);
    run_in(&mut m, pid, |t| async move {
        let fd = t.open("/f", OpenFlags::RDONLY).await.unwrap();
        assert_eq!(t.fadvise(fd, 0, 0, 9).await, Err(mm::Errno::EINVAL));
        assert_eq!(t.fadvise(fd, 0, -1, advice::NORMAL).await, Err(mm::Errno::EINVAL));
        assert_eq!(t.fadvise(77, 0, 0, advice::NORMAL).await, Err(mm::Errno::EBADF));
        let (r, _) = t.pipe().await.unwrap();
        assert_eq!(t.fadvise(r, 0, 0, advice::NORMAL).await, Err(mm::Errno::ESPIPE));
        t.fadvise(fd, 0, 16 * 4096, advice::WILLNEED).await.unwrap();
    });
    assert_eq!(vmstat(&m, "nr_file_pages"), 16);
    run_in(&mut m, pid, |t| async move {
        let fd = t.open("/f", OpenFlags::RDONLY).await.unwrap();
        // Bytes 100..(8 pages + 100): only pages 1..=7 are wholly inside.
        t.fadvise(fd, 100, 8 * 4096, advice::DONTNEED).await.unwrap();
    });
    assert_eq!(vmstat(&m, "nr_file_pages"), 16 - 7);
}

/// Given a 32 MiB machine, when a 48 MiB file is read through it (global reclaim, kswapd
/// woken many times), then the node has exactly one kswapd, started at boot, and it did the
/// stealing (a wake-up used to start a second one beside it).
#[test]
fn global_reclaim_runs_one_kswapd() {
    for lru in ["classic", "mglru"] {
        let profile = Profile::named("tiny").unwrap().resized(None, Some(Bytes::mib(32))).unwrap();
        let mut config = MachineConfig::new(profile, KernelVersion::new(6, 3));
        config.switches.set("lru", lru).unwrap();
        let mut m = Machine::new(config).unwrap();
        let pid = m.new_process("app").unwrap();
        file(&mut m, "/big", 12_288);
        common::run_big(&mut m, pid, |t| read_all(t, "/big", 12_288, 1));
        let h = m.handle();
        let kswapds = h.tasks().into_iter().filter(|&t| h.task_name(t) == "kswapd0").count();
        assert_eq!(kswapds, 1, "{lru}");
        assert!(vmstat(&m, "pgsteal_kswapd") > 0, "{lru}");
    }
}
