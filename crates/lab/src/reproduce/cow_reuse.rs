//! `cow-reuse`: the LKP figures of "mm: COW: restore full accuracy in page reuse"
//! (`004_7f05495902ef2f1c.txt`): pmbench +24.9% throughput with average latency falling from
//! about 2100-2200 ns to about 1600-1700 ns, and vm-scalability `anon-cow-seq-hugetlb` +1.5%.
//!
//! Both compare the `page_count` rule (v5.11, the kernel the change was tested on, before v5.14
//! freed idle swap-cache pages after a copy) with the seed's `mapcount` rule on the same kernel.
//!
//! pmbench (LKP: 2 processes of 4 threads, a set twice the memory of the node it is bound to,
//! 90% reads, THP never, swap on an SSD) is scaled to a 128 MiB machine with a 256 MiB set. The
//! difference comes from one mechanism: a page swapped in by a read is mapped read-only and stays
//! in the swap cache, so its refcount is 2; when the thread later writes it, `page_count` copies
//! it (an allocation under memory pressure, a copy, and a stale swap-cache page for reclaim to
//! find) where `mapcount` reuses it. The report counts those copies, allocations and swap IO.
//!
//! vm-scalability (`usemem --prealloc --prefault -O -U`: a prefaulted region, forked tasks
//! writing it all, `workload::usemem`) runs on real anonymous hugetlb pages, as
//! `anon-cow-seq-hugetlb` does. Why the model's gain is 0% by construction, and why no modelled
//! mechanism can honestly make it otherwise:
//! - The change reverts 09854ba94c6a ("mm: do_wp_page() simplification", its `Fixes:` tag) and
//!   seven commits built on it (the seed's text lists their hashes): the `page_count` test by
//!   which `do_wp_page` decides whether a write fault on a 4 KiB anonymous page reuses it or
//!   copies it, with what the text says of its consequences for KSM, the swap cache, pinned
//!   pages, `clear_refs` and uffd-wp. The benchmark's copies are of hugetlb pages, whose
//!   copy-on-write is `hugetlb_wp` (`hugetlb_cow` in v5.11, `mm/hugetlb.c`): it reuses a page only
//!   when it is anonymous and mapped once, in every era, and the change does not touch it. Each
//!   task's first store to each huge page finds it mapped by the parent and the other tasks and
//!   copies it under both rules; the model runs the same events under both. (Since issue 46 the
//!   stores after each copy miss what a Skylake-SP core's caches cannot hold and read and write
//!   those lines through the memory bus, `mm::arch::caches`: every task is slower by the same
//!   amount under both rules, and the gain, the one row, stays 0.)
//! - What the change does reach in this program is its own 4 KiB anonymous pages (stack, heap,
//!   libc's data): a few dozen per task, each a copy of about a microsecond at most where the
//!   two rules differ (a page `page_count` finds referenced from a per-CPU LRU batch or the swap
//!   cache), against seconds of huge-page copies per task: parts per million, not 1.5%. Modelling
//!   those pages would not move the row.
//! - The benchmark's median is known to move by more than 1.5% for reasons outside mm: LKP
//!   reported "vm-scalability.median -18.8%" on this very test case from a DRM driver change
//!   (90f479ae51, "drm/mgag200: Replace struct mga_fbdev with generic framebuffer emulation",
//!   2019; Thomas Zimmermann traced it to the framebuffer console's cursor worker, and the
//!   figures moved again with the console's output redirected), so a difference of 1.5% between
//!   two kernel builds can come from the build or the machine's state, which the model does not
//!   have. The published +1.5% is therefore reported as missed, with that reason.
//!
//! Bands (a check on the model, never a target). LKP states no precision for its figures; its
//! plots show one sample per run. The pmbench latency plot's samples spread over about
//! 2000-2500 ns before the change and 1600-1700 ns after, so single runs give gains from about
//! 16% to 58% around the published 24.9%: the throughput gain's band is the stated rule "within
//! a factor of 2" (12.45-49.8%), and so are the latencies' (read from the plot as 2100-2200 and
//! 1600-1700 ns, measured on a 128 GiB Xeon with an NVMe SSD, here a scaled machine whose costs
//! come from its profile). The vm-scalability plot's samples spread about ±0.6% per kernel and
//! the two kernels' samples are separated by the gain, so the +1.5% is real for hugetlb; its
//! band is the same factor of 2, and its direction is the sign.

use super::{
    Direction, Experiment, Figure, FreeParam, Progress, Published, Report, Row, Scale, Series,
    Setup, gain,
};
use mm::vmstat::{MmEvent, VmStat, VmStats};
use mm::{KernelVersion, Machine, MachineConfig, Profile};
use simcore::{Bytes, Histogram, Ratio};
use workload::{pmbench, usemem};

pub(super) const EXPERIMENT: Experiment = Experiment {
    name: "cow-reuse",
    source: "mm: COW: restore full accuracy in page reuse",
    title: "COW reuse by mapcount (the change) against page_count",
    work: 10,
    seeded: true,
    headline: "pmbench throughput gain",
    params: &[SWAP_READ_LATENCY],
    measure,
};

/// The swap device's 4 KiB read latency: LKP's machine had "an NVMe SSD" of no stated model,
/// and the profile's 80 us is an approximation, not a measurement.
const SWAP_READ_LATENCY: FreeParam = FreeParam {
    key: "cost.block_io_latency",
    unit: "ns",
    low: 10_000,
    high: 120_000,
    source: "LKP's swap device is an unnamed NVMe SSD: from about 10 us (a low-latency NVMe such \
             as Intel's Optane SSD DC P4800X, datasheet) to about 120 us (a TLC NVMe's random \
             read under a queue of requests)",
};

/// The kernel the change was measured on.
const KERNEL: KernelVersion = KernelVersion::new(5, 11);
const RULES: [&str; 2] = ["page_count", "mapcount"];

/// A machine of `cpus` CPUs and `memory` under `rule`, with `swap` and a pool of `hugepages`
/// 2 MiB pages.
fn machine(
    setup: &Setup,
    rule: &str,
    cpus: u32,
    (memory, swap): (Bytes, Bytes),
    hugepages: u64,
) -> Result<Machine, String> {
    let profile = Profile::named("epyc-vm")?.resized(Some(cpus), Some(memory))?;
    let mut config = MachineConfig::new(profile, KERNEL);
    config.switches.set("cow_reuse", rule)?;
    config.swap = swap;
    config.tunables.nr_hugepages[0] = hugepages;
    setup.machine(config)
}

/// What one pmbench run measured.
struct PmbenchRun {
    throughput_aps: f64,
    latency_ns: Histogram,
    vmstat: VmStats,
    copies: u64,
    swapcache_copies: u64,
}

fn pmbench_config(scale: Scale) -> (pmbench::Config, Bytes) {
    let (memory, accesses) = match scale {
        Scale::Full => (Bytes::mib(128), 600_000),
        Scale::Quick => (Bytes::mib(16), 4_000),
    };
    let set = Bytes(memory.as_u64() * 2);
    let config = pmbench::Config {
        processes: 2,
        threads_per_process: 4,
        set_size: set,
        read_ratio: Ratio::percent(90).expect("90% is a ratio"),
        initialize: true,
        accesses_per_thread: accesses,
        first_cpu: 0,
    };
    (config, memory)
}

fn run_pmbench(
    rule: &str,
    setup: &Setup,
    progress: &mut dyn Progress,
) -> Result<PmbenchRun, String> {
    let (config, memory) = pmbench_config(setup.scale);
    let total = config.accesses_per_thread * 8;
    let mut m = machine(setup, rule, 16, (memory, Bytes(memory.as_u64() * 4)), 0)?;
    let bench = pmbench::Pmbench::new(&mut m, config, setup.seed)?;
    bench.spawn_setup(&mut m)?;
    m.run().map_err(|e| e.to_string())?;
    let (vm0, ev0) = counters(&m);
    bench.spawn_measured(&mut m)?;
    progress.phase(&format!("pmbench, {rule}"), total);
    let mut steps = 0u64;
    let mut reported = 0u64;
    m.run_observed(&mut |_| {
        steps += 1;
        if steps.is_multiple_of(4096) {
            let done = bench.stats().latency_ns.count();
            progress.advance(done - reported);
            reported = done;
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    progress.advance(total.saturating_sub(reported));
    let (vm1, ev1) = counters(&m);
    let stats = bench.stats();
    if stats.failed > 0 {
        return Err(format!("pmbench under {rule}: {} accesses failed", stats.failed));
    }
    let vmstat = super::vmstat_delta(&vm0, &vm1);
    Ok(PmbenchRun {
        throughput_aps: stats.throughput_aps(),
        latency_ns: stats.latency_ns.clone(),
        vmstat,
        copies: ev1.get(MmEvent::WpPageCopy) - ev0.get(MmEvent::WpPageCopy),
        swapcache_copies: ev1.get(MmEvent::WpCopySwapcache) - ev0.get(MmEvent::WpCopySwapcache),
    })
}

fn counters(m: &Machine) -> (VmStats, mm::vmstat::MmEvents) {
    (m.vmstat(), m.kernel().state().events.clone())
}

fn run_usemem(rule: &str, setup: &Setup, progress: &mut dyn Progress) -> Result<f64, String> {
    let (region, tasks) = match setup.scale {
        Scale::Full => (Bytes::mib(16), 8),
        Scale::Quick => (Bytes::mib(2), 4),
    };
    progress.phase(&format!("vm-scalability anon-cow-seq, {rule}"), 1);
    // The parent's pages and a copy for each task.
    let hugepages = u64::from(tasks + 1) * (region.as_u64() >> 21);
    let mut m = machine(setup, rule, tasks + 2, (Bytes::mib(512), Bytes::ZERO), hugepages)?;
    let config = usemem::Config { region, tasks, first_cpu: 0, hugetlb: true };
    let bench = usemem::CowSeq::new(&mut m, config)?;
    bench.spawn_setup(&mut m)?;
    m.run().map_err(|e| e.to_string())?;
    bench.spawn_measured(&mut m)?;
    m.run().map_err(|e| e.to_string())?;
    progress.advance(1);
    if bench.results().len() != tasks as usize {
        return Err(format!(
            "usemem under {rule}: only {} of {tasks} tasks finished",
            bench.results().len()
        ));
    }
    Ok(bench.median_bps())
}

/// The fraction of accesses slower than each power of two from 64 ns to about a second (the
/// same points in every run, so that seeds merge): the tail the mean hides.
fn tail(name: &str, h: &Histogram) -> Series {
    let n = h.count();
    let slower_than = |x: u64| {
        // The largest rank whose value is at most `x`.
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if h.quantile(mid, n) <= x { lo = mid } else { hi = mid - 1 }
        }
        1.0 - lo as f64 / n.max(1) as f64
    };
    let points = (6..=30).map(|i| (f64::from(1u32 << i), slower_than(1 << i))).collect();
    Series::new(name, points)
}

/// The published figures, their bands and sources (the module's note says why these bands).
fn headline(pc: &PmbenchRun, mc: &PmbenchRun, usemem: &[f64]) -> Vec<Row> {
    const LKP: &str = "LKP's report in the change text";
    let factor2 = "within a factor of 2 (the stated rule: LKP gives no precision, and its plot's single runs spread widely)";
    vec![
        Row::change("pmbench throughput gain", gain(pc.throughput_aps, mc.throughput_aps)).published(
            Published::point(24.9)
                .within_factor(2.0)
                .direction(Direction::Sign)
                .cite(&format!("{LKP} (pmbench.throughput.aps +24.9%); {factor2}")),
        ),
        Row::level("pmbench average latency page_count", "ns", pc.latency_ns.mean() as f64).published(
            Published::range(2100.0, 2200.0)
                .within_factor(2.0)
                .direction(Direction::Above("pmbench average latency mapcount".into()))
                .cite(&format!("{LKP}, read from its latency plot (samples 2000-2500 ns); {factor2}")),
        ),
        Row::level("pmbench average latency mapcount", "ns", mc.latency_ns.mean() as f64).published(
            Published::range(1600.0, 1700.0)
                .within_factor(2.0)
                .direction(Direction::Below("pmbench average latency page_count".into()))
                .cite(&format!("{LKP}, read from its latency plot (samples 1600-1700 ns); {factor2}")),
        ),
        Row::change("vm-scalability anon-cow-seq-hugetlb gain", gain(usemem[0], usemem[1])).published(
            Published::point(1.5)
                .within_factor(2.0)
                .direction(Direction::Sign)
                .cite(&format!("{LKP} (vm-scalability.median +1.5%; the plot's samples of the two kernels are apart by the gain); {factor2}"))
                .caveat("the benchmark copies hugetlb pages, whose copy-on-write (hugetlb_wp) decides reuse by mapcount in every era, outside the cow_reuse rule: every task's first write to a page shared with the parent and the other tasks copies it under both rules, so the model has no gain to show; the change reaches only the program's few dozen 4 KiB anonymous pages per task (parts per million of its time), and this benchmark's median moved 18.8% in 2019 from a DRM console driver change (LKP), so a 1.5% difference between two builds is not a mechanism the model has"),
        ),
    ]
}

fn measure(setup: &Setup, progress: &mut dyn Progress) -> Result<Report, String> {
    let pm: Vec<PmbenchRun> =
        RULES.iter().map(|r| run_pmbench(r, setup, progress)).collect::<Result<_, _>>()?;
    let um: Vec<f64> =
        RULES.iter().map(|r| run_usemem(r, setup, progress)).collect::<Result<_, _>>()?;
    let mut rows = headline(&pm[0], &pm[1], &um);
    for (rule, r) in RULES.iter().zip(&pm) {
        rows.push(Row::level(&format!("pmbench throughput {rule}"), "acc/s", r.throughput_aps));
        rows.push(Row::level(
            &format!("pmbench p99 latency {rule}"),
            "ns",
            r.latency_ns.p99() as f64,
        ));
        rows.push(Row::level(&format!("pmbench COW copies {rule}"), "pages", r.copies as f64));
        rows.push(Row::level(
            &format!("pmbench copies of swap-cache pages {rule}"),
            "pages",
            r.swapcache_copies as f64,
        ));
        for (key, label) in [
            (VmStat::PgallocNormal, "page allocations"),
            (VmStat::Pgreuse, "pgreuse"),
            (VmStat::Pswpin, "pswpin"),
            (VmStat::Pswpout, "pswpout"),
            (VmStat::Pgmajfault, "pgmajfault"),
            (VmStat::AllocstallNormal, "allocstall"),
        ] {
            rows.push(Row::level(
                &format!("pmbench {label} {rule}"),
                "pages",
                r.vmstat.get(key) as f64,
            ));
        }
    }
    let figures = vec![
        Figure::new(
            "pmbench access latency: the tail (fraction of accesses slower than x)",
            "latency (ns)",
            "fraction of accesses slower",
        )
        .log_axes(true, true)
        .with_series(RULES.iter().zip(&pm).map(|(rule, r)| tail(rule, &r.latency_ns)).collect())
        .with_x_shades(
            &rows,
            &["pmbench average latency page_count", "pmbench average latency mapcount"],
        )?,
    ];
    let (config, memory) = pmbench_config(setup.scale);
    let notes = vec![
        format!(
            "pmbench: kernel {KERNEL}, {memory} of memory, a {} set in 2 processes of 4 threads, 90% reads, {} accesses per thread after writing every page, swap of 4x memory, profile epyc-vm.",
            config.set_size, config.accesses_per_thread
        ),
        "Published latencies are read from the change's plot (about 2100-2200 ns and 1600-1700 ns).".into(),
        "The gain comes from the copies counted above: under page_count a page swapped in by a read is copied when it is written; under mapcount it is reused.".into(),
        "vm-scalability: usemem --prealloc --prefault -O -U on anonymous hugetlb pages, as anon-cow-seq-hugetlb; each task reports 9/8 of the region over the time since the parent started (as usemem.c counts); hugetlb_wp copies a page shared by the parent and the other tasks under both rules (its reuse test is mapcount == 1 in every era), so no gain is expected, and the published +1.5% is missed for that reason (see the module note).".into(),
        "The figure plots the fraction of accesses slower than each latency on log axes: the swap-ins and copies page_count adds sit in the tail, which a cumulative plot on a linear axis hides.".into(),
    ];
    Ok(EXPERIMENT.report(setup, rows, figures, notes))
}
