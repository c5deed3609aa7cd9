//! Context switches: what a CPU's passing from one task to another costs (`engine::cpu`).

use engine::{Sim, SimConfig, SwitchCosts, TaskContext};
use simcore::SimDuration;

fn costs(address_space: u64, same_space: u64) -> SwitchCosts {
    SwitchCosts {
        address_space: SimDuration::from_ns(address_space),
        same_space: SimDuration::from_ns(same_space),
    }
}

/// Two tasks in `contexts` share CPU 0, each charging 10 ms in 1 ms pieces; the run's end (ns),
/// its digest, and the CPU's switch count and switch time (ns).
fn two_on_one_cpu(switch: SwitchCosts, contexts: [TaskContext; 2]) -> (u64, u64, u64, u64) {
    let mut sim = Sim::new(SimConfig { switch_costs: switch, ..SimConfig::default() }).unwrap();
    let h = sim.handle().clone();
    let cpu = h.cpu(0).unwrap();
    for (i, context) in contexts.into_iter().enumerate() {
        let t = h.spawn(cpu, format!("t{i}"), |cx| async move {
            for _ in 0..10 {
                cx.charge(SimDuration::from_ms(1)).await;
            }
        });
        h.set_context(t, context);
    }
    let report = sim.run().unwrap();
    let stats = h.cpu_stats(cpu);
    let tasks: u64 = h.tasks().iter().map(|&t| h.task_stats(t).context_switches).sum();
    assert_eq!(tasks, stats.context_switches, "the CPU's and the tasks' counts agree");
    let busy: u64 = h.tasks().iter().map(|&t| h.task_stats(t).cpu.as_ns()).sum();
    assert_eq!(busy, stats.busy.as_ns(), "the switches are the tasks' CPU time");
    (report.now.as_ns(), report.digest.value(), stats.context_switches, stats.switching.as_ns())
}

/// Time-sliced every 4 ms, the two tasks switch 5 times (t0 runs 0-4, t1 4-8, t0 8-12, t1
/// 12-16, t0 16-18, t1 to the end); each switch makes the CPU busy for its cost, so the run
/// ends that much later: a process switch costs `address_space`, a thread switch `same_space`.
#[test]
fn a_switch_costs_the_cpu_its_time() {
    let (u1, u2) = (TaskContext::User(1), TaskContext::User(2));
    let (end, _, n, ns) = two_on_one_cpu(costs(3_000, 1_000), [u1, u2]);
    assert_eq!((n, ns), (5, 15_000));
    assert_eq!(end, 20_000_000 + 15_000);
    let (end, _, n, ns) = two_on_one_cpu(costs(3_000, 1_000), [u1, u1]);
    assert_eq!((n, ns), (5, 5_000));
    assert_eq!(end, 20_000_000 + 5_000);
}

/// At zero cost the switches are counted and nothing else changes: the digest is the one of
/// tasks the engine was told nothing about (`TaskContext::Free`, no switch at all).
#[test]
fn zero_cost_switches_leave_the_run_unchanged() {
    let free = two_on_one_cpu(costs(3_000, 1_000), [TaskContext::Free; 2]);
    assert_eq!((free.2, free.3), (0, 0));
    let zero = two_on_one_cpu(costs(0, 0), [TaskContext::User(1), TaskContext::User(2)]);
    assert_eq!(zero.2, 5);
    assert_eq!((zero.0, zero.1, zero.3), (free.0, free.1, 0));
}

/// `Cx::runs_alone_through`, asked at 1 ms while another task sleeps until 6 ms on another CPU:
/// true for charges that end before 6 ms, false for one that ends at 6 ms (the queued entry is
/// older and goes first) or after. With the other task waiting for the asker's CPU (it was
/// spawned there and found it taken), never; under an exploration scheduler, never.
#[test]
fn runs_alone_through_sees_what_is_due() {
    let ms = SimDuration::from_ms;
    let answers = |config: SimConfig, other_cpu: u32| {
        let mut sim = Sim::new(config).unwrap();
        let h = sim.handle().clone();
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let s = seen.clone();
        h.spawn(h.cpu(0).unwrap(), "probe", move |cx| async move {
            cx.charge(ms(1)).await;
            s.borrow_mut().extend([ms(100), ms(3), ms(4), ms(5)].map(|d| cx.runs_alone_through(d)));
        });
        h.spawn(h.cpu(other_cpu).unwrap(), "other", |cx| async move {
            cx.sleep(ms(6)).await;
        });
        sim.run().unwrap();
        seen.take()
    };
    let two_cpus = || SimConfig { cpus: 2, ..SimConfig::default() };
    assert_eq!(answers(two_cpus(), 1), [false, true, true, false]);
    assert_eq!(answers(two_cpus(), 0), [false; 4]);
    let random = SimConfig { scheduler: engine::SchedulerKind::Random, ..two_cpus() };
    assert_eq!(answers(random, 1), [false; 4]);
}
