//! Lock classes and their contention statistics, in the spirit of `/proc/lock_stat`
//! (`Documentation/locking/lockstat.rst`): per class, acquisitions, contentions, wait and hold
//! times.

use simcore::{Histogram, SimDuration, define_id};
use std::collections::BTreeMap;
use std::fmt::Write as _;

define_id!(
    /// A lock class: every lock created with the same name.
    pub(crate) struct ClassId;
);

/// Contention statistics of one lock class.
#[derive(Clone, Debug, Default)]
pub struct LockClassStats {
    pub name: &'static str,
    pub acquisitions: u64,
    /// Acquisitions that had to wait.
    pub contentions: u64,
    /// Wait times of contended acquisitions, in ns.
    pub wait_ns: Histogram,
    pub hold_total: SimDuration,
    pub hold_max: SimDuration,
}

#[derive(Debug, Default)]
pub(crate) struct LockClasses {
    pub stats: simcore::IdVec<ClassId, LockClassStats>,
    by_name: BTreeMap<&'static str, ClassId>,
}

impl LockClasses {
    pub(crate) fn intern(&mut self, name: &'static str) -> ClassId {
        if let Some(&c) = self.by_name.get(name) {
            return c;
        }
        let c = self.stats.push(LockClassStats { name, ..LockClassStats::default() });
        self.by_name.insert(name, c);
        c
    }

    pub(crate) fn name(&self, class: ClassId) -> &'static str {
        self.stats[class].name
    }

    /// A write of `0` to `/proc/lock_stat` (`clear_lock_stats`): every class's numbers start
    /// again; the classes stay.
    pub(crate) fn clear_stats(&mut self) {
        for (_, c) in self.stats.iter_mut() {
            *c = LockClassStats { name: c.name, ..LockClassStats::default() };
        }
    }
}

/// Renders statistics like `/proc/lock_stat` (times in microseconds, two decimals).
pub(crate) fn lock_stat_text(classes: &[LockClassStats]) -> String {
    let us = |ns: u64| format!("{}.{:02}", ns / 1000, ns % 1000 / 10);
    let mut out = String::from("lock_stat version 0.4\n");
    let _ = writeln!(
        out,
        "{:>40} {:>12} {:>12} {:>12} {:>12} {:>12} {:>14} {:>12} {:>14}",
        "class name",
        "contentions",
        "waittime-min",
        "waittime-max",
        "waittime-total",
        "waittime-avg",
        "acquisitions",
        "holdtime-max",
        "holdtime-total"
    );
    for c in classes.iter().filter(|c| c.acquisitions > 0) {
        let w = &c.wait_ns;
        let _ = writeln!(
            out,
            "{:>40}: {:>11} {:>12} {:>12} {:>14} {:>12} {:>14} {:>12} {:>14}",
            c.name,
            c.contentions,
            us(w.min()),
            us(w.max()),
            us(u64::try_from(w.sum()).unwrap_or(u64::MAX)),
            us(w.mean()),
            c.acquisitions,
            us(c.hold_max.as_ns()),
            us(c.hold_total.as_ns())
        );
    }
    out
}
