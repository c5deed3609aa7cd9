//! Where the encoder's worker threads spent the measured phase, and the multi-gen LRU's loss
//! against the classic LRU broken down the same way (issue 46, item 4): each class is measured
//! on its own, so their sum meeting the wall time is a check of the accounting, not a residual.
//!
//! Per worker, from the engine's per-task figures (`engine::TaskStats`): CPU time (the
//! encoder's computation, the same in every case, and the kernel work it caused: faults,
//! reclaim, TLB shootdowns), spinning on spinlocks, sleeping on locks, completions and wait
//! queues (`mmap_lock` among them), timed sleeps (reads from the RAM disk: swap-ins and the
//! input's page cache misses), the wake-up latency of an idle CPU after such sleeps, and waiting
//! on the CPU's run queue (`cpu_delay_total`: behind kswapd or the app's sends); then idle, from
//! the worker's end to the last worker's. The kernel's delay accounting (`mm::delayacct`)
//! says which part was direct reclaim (`freepages`, its CPU and its waits), swap-in reads
//! (`swapin`) and, of those, pages of the workingset (`thrashing`). Times are worker-seconds at
//! 4K: the scaled run's durations times the scale's divisor.

use super::super::Row;
use engine::TaskStats;
use mm::types::delayacct::TaskDelays;
use simcore::SimDuration;
use std::collections::BTreeMap;
use workload::encoder::Results;

/// The encoder's worker threads' name (`workload::encoder`).
const WORKER: &str = "svt-enc";

/// The workers' time over the measured phase, summed over the workers, in ns of the scaled run.
#[derive(Clone, Debug, Default)]
pub(super) struct WorkerTime {
    /// Workers times the span from the first start to the last end.
    span: u64,
    stats: TaskStats,
    delays: TaskDelays,
    idle: u64,
    /// Each lock class's contended wait over the phase, every task's (`/proc/lock_stat`'s
    /// `waittime-total`), in ns.
    lock_waits: BTreeMap<&'static str, u128>,
}

/// Each lock class's total contended wait so far, in ns.
pub(super) fn lock_waits(m: &mm::Machine) -> BTreeMap<&'static str, u128> {
    m.handle().lock_stats().iter().map(|c| (c.name, c.wait_ns.sum())).collect()
}

impl WorkerTime {
    /// Reads the figures of the encoder's workers once the measured phase has ended.
    pub(super) fn of(
        m: &mm::Machine,
        r: &Results,
        waits_before: &BTreeMap<&'static str, u128>,
    ) -> WorkerTime {
        let h = m.handle();
        let workers: Vec<_> = h.tasks().into_iter().filter(|&t| h.task_name(t) == WORKER).collect();
        let mut w = WorkerTime::default();
        let st = m.kernel().state();
        for &t in &workers {
            let s = h.task_stats(t);
            w.stats.cpu += s.cpu;
            w.stats.spin += s.spin;
            w.stats.sleep_wait += s.sleep_wait;
            w.stats.timed_sleep += s.timed_sleep;
            w.stats.wakeup_delay += s.wakeup_delay;
            w.stats.runqueue_wait += s.runqueue_wait;
            let d = st.delays.get(&t).copied().unwrap_or_default();
            w.delays.swapin.total += d.swapin.total;
            w.delays.thrashing.total += d.thrashing.total;
            w.delays.freepages.total += d.freepages.total;
        }
        for (name, ns) in lock_waits(m) {
            let before = waits_before.get(name).copied().unwrap_or(0);
            w.lock_waits.insert(name, ns.saturating_sub(before));
        }
        if let (Some(start), Some(&last)) = (r.start, r.ends.iter().max()) {
            let n = workers.len() as u64;
            w.span = n * last.since(start).as_ns();
            w.idle = r.ends.iter().map(|e| last.since(*e).as_ns()).sum();
        }
        w
    }

    /// The classes that add up to the span, each with its row name.
    fn classes(&self) -> [(&'static str, u64); 7] {
        let s = &self.stats;
        [
            ("CPU", s.cpu.as_ns()),
            ("spinning", s.spin.as_ns()),
            ("lock and completion sleeps", s.sleep_wait.as_ns()),
            ("timed sleeps (RAM disk reads)", s.timed_sleep.as_ns()),
            ("idle-CPU wake-up latency", s.wakeup_delay.as_ns()),
            ("run-queue wait", s.runqueue_wait.as_ns()),
            ("idle after the last job", self.idle),
        ]
    }

    /// The kernel's delay accounting, overlapping the classes.
    fn delays(&self) -> [(&'static str, SimDuration); 3] {
        let d = &self.delays;
        [
            ("of which direct reclaim (freepages delay)", d.freepages.total),
            ("of which swap-in reads (swapin delay)", d.swapin.total),
            ("of which workingset swap-ins (thrashing delay)", d.thrashing.total),
        ]
    }

    /// The classes' sum over the span, in percent.
    fn accounted_pct(&self) -> f64 {
        let sum: u64 = self.classes().iter().map(|(_, ns)| ns).sum();
        100.0 * sum as f64 / self.span.max(1) as f64
    }
}

/// Worker-seconds at 4K of `ns` in a run scaled down by `divisor`.
fn secs(ns: u64, divisor: u64) -> f64 {
    ns as f64 * divisor as f64 / 1e9
}

/// Each case's classes, then the multi-gen LRU's loss against the classic LRU class by class,
/// the loss in wall time times the workers, and the share of it the classes account for.
pub(super) fn rows(cases: &[(&str, WorkerTime)], divisor: u64) -> Vec<Row> {
    let mut rows = Vec::new();
    for (name, w) in cases {
        let at = |what: &str| format!("worker time {name}: {what}");
        for (what, ns) in w.classes() {
            rows.push(Row::level(&at(what), "worker-s", secs(ns, divisor)));
        }
        for (what, d) in w.delays() {
            rows.push(Row::level(&at(what), "worker-s", secs(d.as_ns(), divisor)));
        }
        rows.push(Row::level(&at("classes over the span"), "%", w.accounted_pct()));
    }
    let (Some((_, classic)), Some((_, mglru))) = (cases.first(), cases.get(1)) else {
        return rows;
    };
    let delta = |a: u64, b: u64| secs(b, divisor) - secs(a, divisor);
    let mut explained = 0.0;
    for ((what, a), (_, b)) in classic.classes().into_iter().zip(mglru.classes()) {
        explained += delta(a, b);
        rows.push(Row::level(&format!("mglru loss vs classic: {what}"), "worker-s", delta(a, b)));
    }
    for ((what, a), (_, b)) in classic.delays().into_iter().zip(mglru.delays()) {
        let name = format!("mglru loss vs classic: {what}");
        rows.push(Row::level(&name, "worker-s", delta(a.as_ns(), b.as_ns())));
    }
    for (name, &a) in &classic.lock_waits {
        let b = mglru.lock_waits.get(name).copied().unwrap_or(0);
        if a != b {
            let what = format!("mglru loss vs classic: of which {name} waits (every task's)");
            let ns = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
            rows.push(Row::level(&what, "worker-s", delta(ns(a), ns(b))));
        }
    }
    let loss = delta(classic.span, mglru.span);
    rows.push(Row::level("mglru loss vs classic: wall time x workers", "worker-s", loss));
    let share = if loss == 0.0 { 100.0 } else { 100.0 * explained / loss };
    rows.push(Row::level("mglru loss vs classic: accounted for by the classes", "%", share));
    rows
}
