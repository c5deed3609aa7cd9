//! A simulated lockdep (`kernel/locking/lockdep.c`, `Documentation/locking/lockdep-design.rst`).
//!
//! Lockdep reasons about lock *classes*, not instances. Each time a task acquires class B while
//! holding class A, the dependency A -> B is recorded with where it was first seen. When a new
//! dependency would close a cycle, the acquisition is reported with both chains — the one this
//! task is building and the recorded one it inverts — even though this run may never deadlock:
//! a different interleaving would. A declared order (the `mm/rmap.c` lock-ordering list, given by
//! the `mm` crate) is preloaded as dependencies, so the first inversion of it is caught.
//!
//! Also reported: taking a lock of a class already held without a nesting subclass ("possible
//! recursive locking"), and sleeping with a spinlock held ("sleeping function called from invalid
//! context", the kernel's `might_sleep` check).
//!
//! Approximations: read and write acquisitions make the same dependencies (lockdep's
//! recursive-read rules are not modelled; `down_read` is a normal acquisition there too);
//! trylocks add no dependency for the lock they take, as in the kernel; there are no IRQ contexts.
//! A report is made once per class pair; the offending dependency is not recorded, so one bug
//! does not cascade into many reports.

use super::stats::{ClassId, LockClasses};
use simcore::Digest;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::panic::Location;

/// A lock class with its lockdep subclass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ClassKey {
    pub class: ClassId,
    pub subclass: u8,
}

/// Where a dependency was first seen.
#[derive(Clone, Copy, Debug)]
struct Origin {
    task: u32,
    held_at: &'static Location<'static>,
    acquired_at: &'static Location<'static>,
    declared: bool,
}

/// What lockdep found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockdepKind {
    CircularDependency,
    RecursiveLocking,
    SleepInAtomic,
}

/// One dependency `held -> acquired` and where it was established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainLink {
    pub held: String,
    pub acquired: String,
    /// The task that established it, or `declared lock order`.
    pub by: String,
    pub held_at: String,
    pub acquired_at: String,
}

/// A lockdep splat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockdepReport {
    pub kind: LockdepKind,
    pub task: String,
    /// The class being acquired (or, for sleep-in-atomic, the sleeping lock or wait).
    pub acquiring: String,
    /// The class held that conflicts.
    pub holding: String,
    pub at: String,
    /// The dependency this acquisition would add.
    pub this_chain: Vec<ChainLink>,
    /// The recorded chain it inverts.
    pub other_chain: Vec<ChainLink>,
}

impl fmt::Display for ChainLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} -> {}  ({}: {} taken at {}, then {} at {})",
            self.held,
            self.acquired,
            self.by,
            self.held,
            self.held_at,
            self.acquired,
            self.acquired_at
        )
    }
}

impl fmt::Display for LockdepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            LockdepKind::CircularDependency => {
                writeln!(f, "WARNING: possible circular locking dependency detected")?;
                writeln!(
                    f,
                    "task {} is trying to acquire {} at {}",
                    self.task, self.acquiring, self.at
                )?;
                writeln!(f, "but task is already holding {}", self.holding)?;
                writeln!(f, "which lock already depends on the new lock.")?;
                writeln!(f, "this chain:")?;
                for l in &self.this_chain {
                    writeln!(f, "  {l}")?;
                }
                writeln!(f, "existing dependency chain:")?;
                for l in &self.other_chain {
                    writeln!(f, "  {l}")?;
                }
                Ok(())
            }
            LockdepKind::RecursiveLocking => writeln!(
                f,
                "WARNING: possible recursive locking detected\ntask {} is trying to acquire {} at \
                 {}\nbut task is already holding a lock of the same class",
                self.task, self.acquiring, self.at
            ),
            LockdepKind::SleepInAtomic => writeln!(
                f,
                "BUG: sleeping function called from invalid context\ntask {} sleeps on {} at {} \
                 while holding spinlock {}",
                self.task, self.acquiring, self.at, self.holding
            ),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Lockdep {
    /// Dependencies: held -> acquired -> where first seen.
    graph: BTreeMap<ClassKey, BTreeMap<ClassKey, Origin>>,
    reported: BTreeSet<(LockdepKind, ClassKey, ClassKey)>,
    pub reports: Vec<LockdepReport>,
}

/// Naming context for reports.
pub(crate) struct Names<'a> {
    pub classes: &'a LockClasses,
    pub task_name: &'a dyn Fn(u32) -> String,
}

impl Names<'_> {
    fn class(&self, key: ClassKey) -> String {
        let name = self.classes.name(key.class);
        if key.subclass == 0 { name.to_string() } else { format!("{name}/{}", key.subclass) }
    }

    fn link(&self, held: ClassKey, acquired: ClassKey, o: &Origin) -> ChainLink {
        ChainLink {
            held: self.class(held),
            acquired: self.class(acquired),
            by: if o.declared { "declared lock order".into() } else { (self.task_name)(o.task) },
            held_at: o.held_at.to_string(),
            acquired_at: o.acquired_at.to_string(),
        }
    }
}

impl Lockdep {
    /// Mixes the dependency graph and the already-reported set into `d`: both decide what later
    /// acquisitions report, so they belong to the state the explorer compares.
    pub(crate) fn fingerprint(&self, d: &mut Digest) {
        let key = |k: ClassKey| u64::from(k.class.0) << 8 | u64::from(k.subclass);
        for (&held, acquired) in &self.graph {
            d.write_u64(key(held));
            for &a in acquired.keys() {
                d.write_u64(key(a));
            }
            d.write_u64(u64::MAX);
        }
        d.write_u64(u64::MAX);
        for &(kind, a, b) in &self.reported {
            d.write_u64(kind as u64);
            d.write_u64(key(a));
            d.write_u64(key(b));
        }
    }

    /// Preloads `order` (outermost first) as dependencies.
    pub(crate) fn declare(&mut self, order: &[ClassKey], at: &'static Location<'static>) {
        for pair in order.windows(2) {
            let origin = Origin { task: u32::MAX, held_at: at, acquired_at: at, declared: true };
            self.graph.entry(pair[0]).or_default().entry(pair[1]).or_insert(origin);
        }
    }

    /// Checks an acquisition of `new` by task `task` holding `held` (key, where taken).
    pub(crate) fn acquire(
        &mut self,
        names: &Names<'_>,
        task: u32,
        held: &[(ClassKey, &'static Location<'static>)],
        new: ClassKey,
        at: &'static Location<'static>,
    ) {
        for &(h, held_at) in held {
            if h == new {
                self.report_once(LockdepKind::RecursiveLocking, h, new, || LockdepReport {
                    kind: LockdepKind::RecursiveLocking,
                    task: (names.task_name)(task),
                    acquiring: names.class(new),
                    holding: names.class(h),
                    at: at.to_string(),
                    this_chain: Vec::new(),
                    other_chain: Vec::new(),
                });
                continue;
            }
            if self.graph.get(&h).is_some_and(|m| m.contains_key(&new)) {
                continue;
            }
            let origin = Origin { task, held_at, acquired_at: at, declared: false };
            if let Some(path) = self.path(new, h) {
                let other_chain =
                    path.iter().map(|&(a, b)| names.link(a, b, &self.graph[&a][&b])).collect();
                self.report_once(LockdepKind::CircularDependency, h, new, || LockdepReport {
                    kind: LockdepKind::CircularDependency,
                    task: (names.task_name)(task),
                    acquiring: names.class(new),
                    holding: names.class(h),
                    at: at.to_string(),
                    this_chain: vec![names.link(h, new, &origin)],
                    other_chain,
                });
                continue;
            }
            self.graph.entry(h).or_default().insert(new, origin);
        }
    }

    /// Reports a sleep while holding spinlock class `spin`.
    pub(crate) fn sleep_in_atomic(
        &mut self,
        names: &Names<'_>,
        task: u32,
        spin: ClassKey,
        sleeping_on: String,
        at: &'static Location<'static>,
    ) {
        self.report_once(LockdepKind::SleepInAtomic, spin, spin, || LockdepReport {
            kind: LockdepKind::SleepInAtomic,
            task: (names.task_name)(task),
            acquiring: sleeping_on,
            holding: names.class(spin),
            at: at.to_string(),
            this_chain: Vec::new(),
            other_chain: Vec::new(),
        });
    }

    fn report_once(
        &mut self,
        kind: LockdepKind,
        a: ClassKey,
        b: ClassKey,
        make: impl FnOnce() -> LockdepReport,
    ) {
        if self.reported.insert((kind, a, b)) {
            self.reports.push(make());
        }
    }

    /// A dependency path `from ->* to` (breadth first, so the shortest), as edges.
    fn path(&self, from: ClassKey, to: ClassKey) -> Option<Vec<(ClassKey, ClassKey)>> {
        let mut parent: BTreeMap<ClassKey, ClassKey> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        while let Some(n) = queue.pop_front() {
            for &next in self.graph.get(&n).into_iter().flat_map(BTreeMap::keys) {
                if next == from || parent.contains_key(&next) {
                    continue;
                }
                parent.insert(next, n);
                if next == to {
                    let mut edges = vec![(n, next)];
                    let mut cur = n;
                    while cur != from {
                        let p = parent[&cur];
                        edges.push((p, cur));
                        cur = p;
                    }
                    edges.reverse();
                    return Some(edges);
                }
                queue.push_back(next);
            }
        }
        None
    }
}
