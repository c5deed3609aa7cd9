//! Shared helpers for the mm scenario tests: a small machine, and running one thread's code to
//! completion with its result.

#![allow(dead_code)]

use mm::{KernelVersion, Machine, MachineConfig, Pid, Profile, Thread};
use simcore::Bytes;
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

/// A 4-CPU machine with `memory`, running v6.8.
pub(crate) fn machine(memory: Bytes) -> Machine {
    let profile = Profile::named("tiny").unwrap().resized(None, Some(memory)).unwrap();
    Machine::new(MachineConfig::new(profile, KernelVersion::DEFAULT)).unwrap()
}

/// Runs `f` as a thread of `pid` on CPU 0 until it finishes, checking every invariant after each
/// step, and returns its result.
pub(crate) fn run_in<T, F, Fut>(m: &mut Machine, pid: Pid, f: F) -> T
where
    T: 'static,
    F: FnOnce(Thread) -> Fut + 'static,
    Fut: Future<Output = T> + 'static,
{
    run(m, pid, f, true)
}

/// Like [`run_in`], checking the invariants only at the end (for runs of millions of steps).
pub(crate) fn run_big<T, F, Fut>(m: &mut Machine, pid: Pid, f: F) -> T
where
    T: 'static,
    F: FnOnce(Thread) -> Fut + 'static,
    Fut: Future<Output = T> + 'static,
{
    run(m, pid, f, false)
}

fn run<T, F, Fut>(m: &mut Machine, pid: Pid, f: F, every_step: bool) -> T
where
    T: 'static,
    F: FnOnce(Thread) -> Fut + 'static,
    Fut: Future<Output = T> + 'static,
{
    let out = Rc::new(RefCell::new(None));
    let o = out.clone();
    m.spawn_thread(pid, 0, "test", move |t| async move {
        let v = f(t).await;
        *o.borrow_mut() = Some(v);
    })
    .unwrap();
    if every_step {
        m.run_checked().unwrap();
    } else {
        m.run().unwrap();
    }
    m.check().unwrap();
    out.borrow_mut().take().expect("the thread finished")
}

/// The value of an smaps field (kB) of the VMA that starts at `start`.
pub(crate) fn smaps_field(m: &Machine, pid: Pid, start: u64, field: &str) -> u64 {
    let smaps = m.smaps(pid);
    let header = format!("{start:08x}-");
    let mut in_vma = false;
    for line in smaps.lines() {
        let first = line.split(' ').next().unwrap_or_default();
        if !first.ends_with(':') {
            in_vma = line.starts_with(&header);
            continue;
        }
        if in_vma && let Some(rest) = line.strip_prefix(&format!("{field}:")) {
            return rest.trim().trim_end_matches(" kB").trim().parse().unwrap();
        }
    }
    panic!("no {field} for the VMA at {start:#x} in:\n{smaps}");
}

/// A vmstat counter by name.
pub(crate) fn vmstat(m: &Machine, name: &str) -> u64 {
    let key = mm::vmstat::vmstat_key(name).unwrap();
    m.vmstat().get(key)
}
