//! hugetlb at the seed's scale: the host memory a huge page costs, and a 250 GB pool on a
//! 320 GB machine (seed 001's benchmark machine) faulted through a 1 GiB page.

mod common;

use common::run_big;
use mm::types::hugetlb::{HugeSize, Hugetlb};
use mm::{KernelVersion, Machine, MachineConfig, MmapArgs, Profile, map, prot};
use simcore::Bytes;

fn seed_machine(pages_2m: u64, pages_1g: u64) -> Machine {
    let profile = Profile::named("tiny").unwrap().resized(Some(4), Some(Bytes::gib(320))).unwrap();
    let mut config = MachineConfig::new(profile, KernelVersion::new(6, 1));
    config.tunables.nr_hugepages = [pages_2m, pages_1g];
    Machine::new(config).unwrap()
}

/// Given a 320 GiB machine with 250 GiB of 2 MiB pages and one 1 GiB page, then the pools hold
/// them, `MemFree` lost them, no per-frame state was made for them (the frame table stays a few
/// kilobytes), and each huge page costs at most 64 host bytes of hugetlb state.
#[test]
fn a_250_gib_pool_costs_a_few_dozen_bytes_per_huge_page() {
    let m = seed_machine(128_000, 1);
    let st = m.kernel().state();
    assert_eq!(st.hugetlb.hstate(HugeSize::Size2M).nr, 128_000);
    assert_eq!(st.hugetlb.hstate(HugeSize::Size1G).nr, 1);
    let meminfo = m.meminfo();
    assert!(meminfo.contains("HugePages_Total:   128000"), "{meminfo}");
    assert!(meminfo.contains(&format!("Hugetlb:        {:>8} kB", (250 + 1) << 20)), "{meminfo}");
    let free_kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemFree:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(free_kb < (320 - 250) << 20, "MemFree {free_kb} kB");
    assert!(
        st.folios.host_bytes() < 1 << 20,
        "frames got per-frame state: {}",
        st.folios.host_bytes()
    );
    let per_page = Hugetlb::host_bytes_per_page();
    eprintln!("host bytes per huge page (2 MiB or 1 GiB): {per_page}");
    assert!(per_page <= 64, "{per_page} host bytes per huge page");
}

/// Given that machine, when a process maps the 1 GiB page (`MAP_HUGETLB | MAP_HUGE_1GB`) and
/// writes into it at two ends, then one fault maps it with a PUD leaf (KernelPageSize 1 GiB),
/// the data reads back, and only the two written frames store contents.
#[test]
fn a_gigantic_page_is_one_fault_and_stores_only_what_is_written() {
    let mut m = seed_machine(0, 1);
    let pid = m.new_process("p").unwrap();
    let (a, tail) = run_big(&mut m, pid, |t| async move {
        let flags = map::PRIVATE | map::ANONYMOUS | map::HUGETLB | map::HUGE_1GB;
        let args = MmapArgs {
            addr: None,
            len: Bytes::gib(1),
            prot: prot::READ | prot::WRITE,
            flags,
            fd: None,
            offset: 0,
        };
        let a = t.mmap(args).await.unwrap();
        t.write_bytes(a, b"head").await.unwrap();
        t.write_bytes(a + Bytes(Bytes::gib(1).as_u64() - 4), b"tail").await.unwrap();
        (a, t.read_bytes(a + Bytes(Bytes::gib(1).as_u64() - 4), 4).await.unwrap())
    });
    assert_eq!(tail, b"tail");
    assert!(a.is_aligned(Bytes::gib(1)), "{a}");
    let smaps = m.kernel().state().smaps(pid);
    assert!(smaps.contains("KernelPageSize:  1048576 kB"), "{smaps}");
    assert!(smaps.contains("Private_Hugetlb: 1048576 kB"), "{smaps}");
    let st = m.kernel().state();
    assert_eq!(st.vmstat_snapshot().get(mm::vmstat::VmStat::Pgfault), 1);
    assert!(st.mem.host_bytes() < 3 * 4200, "contents stored: {}", st.mem.host_bytes());
}

/// Given each scheme of `hugetlb_sync`, when a process maps a hugetlbfs file shared and a
/// private anonymous hugetlb region, faults both, forks (the child writing the private region),
/// punches a hole, truncates, MADV_DONTNEEDs and unmaps, then lockdep reports nothing: every
/// path takes the scheme's locks in its declared order (B-INV5).
#[test]
fn every_scheme_is_lockdep_clean() {
    use mm::fs::falloc;
    use mm::types::fs::FsType;
    use mm::{FileSpec, OpenFlags, madv};
    // v6.8 and v6.14 add the private mapping's vma lock (v6.6) and the reservation a private
    // unmap gives back (v6.9).
    let runs =
        [("i_mmap_rwsem", 1), ("revert", 1), ("vma_lock", 1), ("vma_lock", 8), ("vma_lock", 14)];
    for (sync, minor) in runs {
        let profile = Profile::named("tiny").unwrap();
        let mut config = MachineConfig::new(profile, KernelVersion::new(6, minor));
        config.tunables.nr_hugepages = [8, 0];
        config.switches.set("hugetlb_sync", sync).unwrap();
        let mut m = Machine::new(config).unwrap();
        let spec =
            FileSpec { fs: FsType::Hugetlbfs(HugeSize::Size2M), ..FileSpec::zeros(Bytes::mib(8)) };
        m.create_file("/huge/f", &spec).unwrap();
        let pid = m.new_process("p").unwrap();
        common::run_in(&mut m, pid, |t| async move {
            let rw = prot::READ | prot::WRITE;
            let fd = t.open("/huge/f", OpenFlags::RDWR).await.unwrap();
            let args = MmapArgs {
                addr: None,
                len: Bytes::mib(8),
                prot: rw,
                flags: map::SHARED,
                fd: Some(fd),
                offset: 0,
            };
            let s = t.mmap(args).await.unwrap();
            let flags = map::PRIVATE | map::ANONYMOUS | map::HUGETLB;
            let p = t.mmap(MmapArgs { fd: None, flags, len: Bytes::mib(2), ..args }).await.unwrap();
            t.write_bytes(s, b"s").await.unwrap();
            t.write_bytes(s + Bytes::mib(6), b"s").await.unwrap();
            t.write_bytes(p, b"p").await.unwrap();
            let child = t.fork().await.unwrap();
            t.fallocate(fd, falloc::PUNCH_HOLE | falloc::KEEP_SIZE, 0, Bytes::mib(2).as_u64())
                .await
                .unwrap();
            t.ftruncate(fd, Bytes::mib(4).as_u64()).await.unwrap();
            t.madvise(p, Bytes::mib(2), madv::DONTNEED).await.unwrap();
            t.munmap(s, Bytes::mib(8)).await.unwrap();
            child
        });
        let reports = m.handle().lockdep_reports();
        assert!(reports.is_empty(), "{sync} v6.{minor}: {reports:?}");
    }
}

/// The time `cpus` processes, one per CPU, take to map and prefault 16 MiB of anonymous 2 MiB
/// pages each at once (every page cleared inside `mmap`), on a machine whose memory bus carries
/// 64 KiB in `bus_ns` (0: no limit).
fn populate_at_once(cpus: u32, bus_ns: u64) -> simcore::SimDuration {
    let profile = Profile::named("tiny").unwrap().resized(Some(cpus), Some(Bytes::gib(4))).unwrap();
    let mut config = MachineConfig::new(profile, KernelVersion::new(6, 1));
    config.tunables.nr_hugepages = [u64::from(cpus) * 8, 0];
    config.profile.costs.set("mem_bus_64k", bus_ns).unwrap();
    let mut m = Machine::new(config).unwrap();
    for cpu in 0..cpus {
        let pid = m.new_process(&format!("p{cpu}")).unwrap();
        m.spawn_thread(pid, cpu, "populate", |t| async move {
            let args = MmapArgs {
                addr: None,
                len: Bytes::mib(16),
                prot: prot::READ | prot::WRITE,
                flags: map::PRIVATE | map::ANONYMOUS | map::HUGETLB | map::POPULATE,
                fd: None,
                offset: 0,
            };
            t.mmap(args).await.unwrap();
        })
        .unwrap();
    }
    m.run().unwrap();
    m.check().unwrap();
    m.handle().now().since(simcore::SimTime::ZERO)
}

/// Given a memory bus of 99.5 GB/s (64 KiB in 659 ns) and clears of 4 KiB in 530 ns on one
/// CPU (7.7 GB/s), when 4 CPUs clear huge pages at once (31 GB/s asked) each runs at its own
/// speed, as without a limit, and when 32 do (247 GB/s asked) they share the bus: the whole takes
/// as long as the bus needs to carry their 512 MiB, not what it takes without a limit.
#[test]
fn cpus_clearing_at_once_share_the_memory_bus() {
    assert_eq!(populate_at_once(4, 659), populate_at_once(4, 0));
    let alone = populate_at_once(32, 0).as_ns();
    let many = populate_at_once(32, 659).as_ns();
    let carried = (512u64 << 20) * 659 / (64 << 10);
    assert!(carried > alone, "the bus is the bottleneck: {carried} ns against {alone} ns");
    assert!(many >= carried && many < carried + alone, "{many} ns, bus {carried} ns");
}
