//! Lock semantics on the executor: who gets a lock when, and what waiting costs.

use engine::{Sim, SimConfig};
use simcore::{SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

fn us(n: u64) -> SimDuration {
    SimDuration::from_us(n)
}

fn sim(cpus: u32) -> Sim {
    Sim::new(SimConfig { cpus, ..SimConfig::default() }).unwrap()
}

type Log = Rc<RefCell<Vec<(u64, String)>>>;

fn note(log: &Log, cx: &engine::Cx, what: &str) {
    log.borrow_mut().push((cx.now().as_ns() / 1000, what.to_string()));
}

/// Given one reader holding an rwsem, a second reader shares it; a writer that arrives next waits,
/// and a reader arriving after the writer queues behind it; the writer gets the lock before it.
#[test]
fn rwsem_readers_share_and_waiting_writer_blocks_later_readers() {
    let mut sim = sim(4);
    let h = sim.handle().clone();
    let sem = h.rwsem("test_rwsem");
    let log: Log = Rc::default();
    let plan = [("r1", 0, false), ("r2", 1, false), ("w", 2, true), ("r3", 3, false)];
    for (i, (name, start, write)) in plan.into_iter().enumerate() {
        let log = log.clone();
        h.spawn(h.cpu(i as u32).unwrap(), name, move |cx| async move {
            cx.sleep(us(start)).await;
            let g = if write { sem.write(&cx).await } else { sem.read(&cx).await };
            note(&log, &cx, &format!("{name} in"));
            cx.charge(us(10)).await;
            note(&log, &cx, &format!("{name} out"));
            drop(g);
        });
    }
    sim.run().unwrap();
    let got: Vec<(u64, String)> = log.borrow().clone();
    let want = [
        (0, "r1 in"),
        (1, "r2 in"),
        (10, "r1 out"),
        (11, "r2 out"),
        (11, "w in"),
        (21, "w out"),
        (21, "r3 in"),
        (31, "r3 out"),
    ];
    assert_eq!(got, want.map(|(t, s)| (t, s.to_string())));
}

/// Writers are served in arrival order, and a reader at the head of the queue brings every queued
/// reader with it (the kernel's rwsem_mark_wake), while writers keep their places. The holders
/// sleep inside, so no writer spins on them.
#[test]
fn rwsem_hand_off_is_fifo() {
    let mut sim = sim(6);
    let h = sim.handle().clone();
    let sem = h.rwsem("test_rwsem");
    let log: Log = Rc::default();
    let plan =
        [("w0", true), ("w1", true), ("r1", false), ("w2", true), ("r2", false), ("w3", true)];
    for (i, (name, write)) in plan.into_iter().enumerate() {
        let log = log.clone();
        h.spawn(h.cpu(i as u32).unwrap(), name, move |cx| async move {
            cx.sleep(us(i as u64)).await;
            let g = if write { sem.write(&cx).await } else { sem.read(&cx).await };
            note(&log, &cx, name);
            cx.sleep(us(100)).await;
            drop(g);
        });
    }
    sim.run().unwrap();
    let order: Vec<String> = log.borrow().iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(order, ["w0", "w1", "r1", "r2", "w2", "w3"]);
}

/// A writer arriving while a writer runs holding the rwsem spins on it (kernel/locking/rwsem.c,
/// `rwsem_optimistic_spin`) and takes the lock on release ahead of a queued reader; once that
/// reader has waited `RWSEM_WAIT_TIMEOUT` (4 ms) the lock is handed to it, and the spinners
/// that were stealing queue behind it.
#[test]
fn rwsem_spinning_writers_steal_until_handoff() {
    let mut sim = sim(4);
    let h = sim.handle().clone();
    let sem = h.rwsem("test_rwsem");
    let log: Log = Rc::default();
    let plan = [("w0", 0, true), ("r1", 1, false), ("w1", 2, true), ("w2", 3001, true)];
    for (i, (name, start, write)) in plan.into_iter().enumerate() {
        let log = log.clone();
        h.spawn(h.cpu(i as u32).unwrap(), name, move |cx| async move {
            cx.sleep(us(start)).await;
            let g = if write { sem.write(&cx).await } else { sem.read(&cx).await };
            note(&log, &cx, name);
            cx.charge(us(3000)).await;
            drop(g);
        });
    }
    sim.run().unwrap();
    let got: Vec<(u64, String)> = log.borrow().clone();
    let want = [(0, "w0"), (3000, "w1"), (6000, "r1"), (9000, "w2")];
    assert_eq!(got, want.map(|(t, s)| (t, s.to_string())));
}

/// A mutex admits one task at a time, FIFO; its waiters sleep (their CPU is not busy), while
/// spinlock waiters burn CPU time for as long as they wait.
#[test]
fn mutex_and_spinlock_exclusion_with_time_accounting() {
    for spin in [false, true] {
        let mut sim = sim(3);
        let h = sim.handle().clone();
        let (mutex, spinlock) = (h.mutex("test_mutex"), h.spin_lock("test_spin"));
        let inside = Rc::new(RefCell::new(0u32));
        let log: Log = Rc::default();
        let mut tasks = Vec::new();
        for i in 0..3u32 {
            let (inside, log) = (inside.clone(), log.clone());
            tasks.push(h.spawn(h.cpu(i).unwrap(), format!("t{i}"), move |cx| async move {
                cx.sleep(us(u64::from(i))).await;
                let g = if spin { spinlock.lock(&cx).await } else { mutex.lock(&cx).await };
                *inside.borrow_mut() += 1;
                assert_eq!(*inside.borrow(), 1, "two tasks inside the critical section");
                note(&log, &cx, &format!("t{i}"));
                cx.charge(us(10)).await;
                *inside.borrow_mut() -= 1;
                drop(g);
            }));
        }
        sim.run().unwrap();
        let got: Vec<(u64, String)> = log.borrow().clone();
        assert_eq!(got, [(0, "t0"), (10, "t1"), (20, "t2")].map(|(t, s)| (t, s.to_string())));
        let t2 = h.task_stats(tasks[2]);
        let cpu2 = h.cpu_stats(h.cpu(2).unwrap());
        assert_eq!(t2.cpu, us(10));
        // t2 arrived at 2 us and got the lock at 20 us: 18 us of waiting.
        if spin {
            assert_eq!((t2.spin, t2.sleep_wait), (us(18), SimDuration::ZERO));
            assert_eq!(cpu2.spin, us(18));
        } else {
            assert_eq!((t2.spin, t2.sleep_wait), (SimDuration::ZERO, us(18)));
            assert_eq!(cpu2.spin, SimDuration::ZERO);
        }
        let name = if spin { "test_spin" } else { "test_mutex" };
        let stats = h.lock_stats().into_iter().find(|c| c.name == name).unwrap();
        assert_eq!((stats.acquisitions, stats.contentions, stats.wait_ns.max()), (3, 2, 18_000));
    }
}

/// Two tasks on one CPU: while one sleeps on a mutex the other runs; while one spins, the CPU is
/// taken and the other must wait on the run queue.
#[test]
fn sleeping_waiter_frees_its_cpu_spinning_one_does_not() {
    for spin in [false, true] {
        let mut sim = sim(2);
        let h = sim.handle().clone();
        let (mutex, spinlock) = (h.mutex("m"), h.spin_lock("s"));
        let log: Log = Rc::default();
        let l = log.clone();
        h.spawn(h.cpu(1).unwrap(), "holder", move |cx| async move {
            let g = if spin { spinlock.lock(&cx).await } else { mutex.lock(&cx).await };
            cx.charge(us(50)).await;
            drop(g);
            note(&l, &cx, "holder released");
        });
        let l = log.clone();
        h.spawn(h.cpu(0).unwrap(), "waiter", move |cx| async move {
            cx.charge(us(1)).await;
            let g = if spin { spinlock.lock(&cx).await } else { mutex.lock(&cx).await };
            note(&l, &cx, "waiter got it");
            drop(g);
        });
        let l = log.clone();
        h.spawn(h.cpu(0).unwrap(), "bystander", move |cx| async move {
            cx.sleep(us(5)).await;
            cx.charge(us(1)).await;
            note(&l, &cx, "bystander ran");
        });
        sim.run().unwrap();
        let got: Vec<(u64, String)> = log.borrow().clone();
        let want: &[(u64, &str)] = if spin {
            // The bystander only starts (and begins its 5 us sleep) once the spinner is done.
            &[(50, "holder released"), (50, "waiter got it"), (56, "bystander ran")]
        } else {
            // The bystander gets the CPU at 1 us when the waiter goes to sleep.
            &[(7, "bystander ran"), (50, "holder released"), (50, "waiter got it")]
        };
        assert_eq!(got, want.iter().map(|&(t, s)| (t, s.to_string())).collect::<Vec<_>>());
    }
}

/// A task that has used its time slice is preempted at the end of a charge when another task
/// waits for its CPU; a task holding a spinlock is not.
#[test]
fn timeslice_preemption_spares_spinlock_holders() {
    for hold_spinlock in [false, true] {
        let mut sim =
            Sim::new(SimConfig { cpus: 1, timeslice: us(100), ..SimConfig::default() }).unwrap();
        let h = sim.handle().clone();
        let lock = h.spin_lock("s");
        let log: Log = Rc::default();
        let l = log.clone();
        h.spawn(h.cpu(0).unwrap(), "hog", move |cx| async move {
            let g = if hold_spinlock { Some(lock.lock(&cx).await) } else { None };
            for _ in 0..10 {
                cx.charge(us(50)).await;
            }
            drop(g);
            note(&l, &cx, "hog done");
        });
        let l = log.clone();
        h.spawn(h.cpu(0).unwrap(), "other", move |cx| async move {
            cx.charge(us(1)).await;
            note(&l, &cx, "other done");
        });
        sim.run().unwrap();
        let first = log.borrow()[0].1.clone();
        assert_eq!(first, if hold_spinlock { "hog done" } else { "other done" });
    }
}

#[test]
fn completion_and_wait_queue_wake_waiters() {
    let mut sim = sim(3);
    let h = sim.handle().clone();
    let done = h.completion("io_done");
    let wq = h.wait_queue("wq");
    let flag = Rc::new(RefCell::new(false));
    let log: Log = Rc::default();
    let (l, f) = (log.clone(), flag.clone());
    h.spawn(h.cpu(0).unwrap(), "waiter", move |cx| async move {
        done.wait(&cx).await;
        note(&l, &cx, "completed");
        while !*f.borrow() {
            wq.wait(&cx).await;
        }
        note(&l, &cx, "flag seen");
    });
    let f = flag;
    h.spawn_daemon(h.cpu(1).unwrap(), "device", move |cx| async move {
        cx.sleep(us(7)).await;
        done.complete(&cx);
        cx.sleep(us(3)).await;
        wq.wake_up_all(&cx);
        cx.sleep(us(3)).await;
        *f.borrow_mut() = true;
        wq.wake_up_one(&cx);
    });
    sim.run().unwrap();
    let got: Vec<(u64, String)> = log.borrow().clone();
    assert_eq!(got, [(7, "completed"), (13, "flag seen")].map(|(t, s)| (t, s.to_string())));
}

#[test]
fn downgrade_keeps_writers_out_and_lets_readers_in() {
    let mut sim = sim(3);
    let h = sim.handle().clone();
    let sem = h.rwsem("mmap_lock");
    let log: Log = Rc::default();
    let l = log.clone();
    h.spawn(h.cpu(0).unwrap(), "munmap", move |cx| async move {
        let g = sem.write(&cx).await;
        cx.charge(us(10)).await;
        let g = g.downgrade();
        note(&l, &cx, "downgraded");
        cx.charge(us(10)).await;
        drop(g);
    });
    for (i, (name, write)) in [("reader", false), ("writer", true)].into_iter().enumerate() {
        let l = log.clone();
        h.spawn(h.cpu(i as u32 + 1).unwrap(), name, move |cx| async move {
            cx.sleep(us(1 + i as u64)).await;
            let _g = if write { sem.write(&cx).await } else { sem.read(&cx).await };
            note(&l, &cx, name);
        });
    }
    sim.run().unwrap();
    let got: Vec<(u64, String)> = log.borrow().clone();
    // The reader queued before the writer, so the downgrade lets it in; the writer waits for both.
    assert_eq!(
        got,
        [(10, "downgraded"), (10, "reader"), (20, "writer")].map(|(t, s)| (t, s.to_string()))
    );
}

#[test]
fn trylocks_fail_when_anybody_waits() {
    let mut sim = sim(3);
    let h = sim.handle().clone();
    let sem = h.rwsem("sem");
    let results = Rc::new(RefCell::new(Vec::new()));
    h.spawn(h.cpu(0).unwrap(), "reader", move |cx| async move {
        let _g = sem.read(&cx).await;
        cx.charge(us(10)).await;
    });
    h.spawn(h.cpu(1).unwrap(), "writer", move |cx| async move {
        cx.sleep(us(1)).await;
        let _g = sem.write(&cx).await;
    });
    let r = results.clone();
    h.spawn(h.cpu(2).unwrap(), "trier", move |cx| async move {
        cx.sleep(us(2)).await;
        let read = sem.try_read(&cx).await.is_some();
        r.borrow_mut().push(read);
        cx.sleep(us(20)).await;
        let write = sem.try_write(&cx).await.is_some();
        r.borrow_mut().push(write);
    });
    sim.run().unwrap();
    assert_eq!(*results.borrow(), [false, true]);
    assert_eq!(h.now(), SimTime::from_ns(22_000));
}

/// Given a waiter that checks a flag and then waits on a wait queue, and a task that sets the
/// flag and wakes the queue, no interleaving loses the wake-up: like `prepare_to_wait`, the wait
/// registers in the step that checked (no preemption point between the check and the queueing).
#[test]
fn a_wait_registers_in_the_step_that_checked_its_condition() {
    for seed in 0..200 {
        let config = SimConfig {
            cpus: 2,
            seed,
            scheduler: engine::SchedulerKind::Random,
            ..SimConfig::default()
        };
        let mut sim = Sim::new(config).unwrap();
        let h = sim.handle().clone();
        let wq = h.wait_queue("wq");
        let flag = Rc::new(RefCell::new(false));
        let f = flag.clone();
        h.spawn(h.cpu(0).unwrap(), "waiter", move |cx| async move {
            cx.charge(us(1)).await;
            while !*f.borrow() {
                wq.wait(&cx).await;
            }
        });
        h.spawn(h.cpu(1).unwrap(), "waker", move |cx| async move {
            cx.charge(us(1)).await;
            *flag.borrow_mut() = true;
            wq.wake_up_all(&cx);
        });
        sim.run().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// Given readers on four CPUs that each take an rwsem for read at the same instant (nobody ever
/// waits for the lock itself), when the lock word's cache line costs 50 ns to move, then the
/// readers' `down_read`s are served one transfer after another: the first reader pays nothing
/// (the line comes from memory) and releases before anyone else writes, each later one waits a
/// transfer more; their `up_read`s queue for the line again and are paid with each reader's next
/// charge.
#[test]
fn readers_on_many_cpus_queue_for_the_lock_words_cache_line() {
    let costs = engine::LineCosts {
        same_socket: SimDuration::from_ns(50),
        cross_socket: SimDuration::from_ns(150),
        cpus_per_socket: 0,
    };
    let mut sim =
        Sim::new(SimConfig { cpus: 4, line_costs: costs, ..SimConfig::default() }).unwrap();
    let h = sim.handle().clone();
    let sem = h.rwsem("test_rwsem");
    let log: Log = Rc::default();
    for i in 0..4u32 {
        let log = log.clone();
        h.spawn(h.cpu(i).unwrap(), format!("r{i}"), move |cx| async move {
            let g = sem.read(&cx).await;
            log.borrow_mut().push((cx.now().as_ns(), format!("r{i} in")));
            drop(g);
            cx.charge(SimDuration::from_ns(1000)).await;
            log.borrow_mut().push((cx.now().as_ns(), format!("r{i} done")));
        });
    }
    sim.run().unwrap();
    let got: Vec<(u64, String)> = log.borrow().clone();
    // Acquisitions: r0 at 0 (its release is free: CPU 0 still owns the line), r1 at 50, r2 at
    // 100, r3 at 150. The later releases queue behind the acquisitions: r1's line arrives at 200
    // (done 1200), r2's at 250 (1250), r3's at 300 (1300).
    let want = [
        (0, "r0 in"),
        (50, "r1 in"),
        (100, "r2 in"),
        (150, "r3 in"),
        (1000, "r0 done"),
        (1200, "r1 done"),
        (1250, "r2 done"),
        (1300, "r3 done"),
    ];
    assert_eq!(got, want.map(|(t, s)| (t, s.to_string())));
}

/// A simulation whose woken tasks run 2 us after their wake-up.
fn sim_with_wakeup_latency(cpus: u32) -> Sim {
    Sim::new(SimConfig { cpus, wakeup_latency: us(2), ..SimConfig::default() }).unwrap()
}

/// Which lock a [`run_plan`] task takes.
#[derive(Clone, Copy)]
enum Take {
    Mutex,
    Read,
    Write,
}

/// Runs one task per CPU: each sleeps until its start, takes the lock, notes when it got it,
/// sleeps `hold` us inside (so no rwsem writer spins on it) and releases. Returns the log and
/// the lock's (contentions, longest wait in ns).
fn run_plan(plan: &[(&'static str, u64, Take, u64)]) -> (Vec<(u64, String)>, (u64, u64)) {
    let mut sim = sim_with_wakeup_latency(plan.len() as u32);
    let h = sim.handle().clone();
    let (mutex, sem) = (h.mutex("test_mutex"), h.rwsem("test_rwsem"));
    let log: Log = Rc::default();
    for (i, &(name, start, take, hold)) in plan.iter().enumerate() {
        let log = log.clone();
        h.spawn(h.cpu(i as u32).unwrap(), name, move |cx| async move {
            cx.sleep(us(start)).await;
            let g = match take {
                Take::Mutex => mutex.lock(&cx).await,
                Take::Read => sem.read(&cx).await,
                Take::Write => sem.write(&cx).await,
            };
            note(&log, &cx, name);
            cx.sleep(us(hold)).await;
            drop(g);
        });
    }
    sim.run().unwrap();
    let name = if matches!(plan[0].2, Take::Mutex) { "test_mutex" } else { "test_rwsem" };
    let stats = h.lock_stats().into_iter().find(|c| c.name == name).unwrap();
    let got = log.borrow().clone();
    (got, (stats.contentions, stats.wait_ns.max()))
}

fn entries(want: &[(u64, &str)]) -> Vec<(u64, String)> {
    want.iter().map(|&(t, s)| (t, s.to_string())).collect()
}

/// kernel/locking/mutex.c (v4.10+): an unlock wakes the head waiter without giving it the lock,
/// so a running task takes the lock between the wake-up (10 us) and the waiter's run (12 us);
/// the waiter's failed retry sets HANDOFF, and the next unlock (15 us) hands the lock to it,
/// ahead of a task that asks while the hand-off is in flight (16 us). The waiter's contention
/// counts once and its wait runs from its first sleep (1 us) to the hand-off (15 us).
#[test]
fn mutex_running_task_steals_then_head_gets_handoff() {
    let (got, stats) = run_plan(&[
        ("a", 0, Take::Mutex, 10),
        ("b", 1, Take::Mutex, 1),
        ("c", 11, Take::Mutex, 4),
        ("d", 16, Take::Mutex, 1),
    ]);
    assert_eq!(got, entries(&[(0, "a"), (11, "c"), (17, "b"), (20, "d")]));
    assert_eq!(stats, (2, 14_000));
}

/// kernel/locking/rwsem.c (v5.3+): a writer at the head of the queue is woken, not granted, and
/// retries when it runs; a writer and a reader that run in between take the free rwsem first.
#[test]
fn rwsem_running_writer_and_reader_steal_from_woken_writer() {
    for (take, name) in [(Take::Write, "w2"), (Take::Read, "r2")] {
        let (got, stats) =
            run_plan(&[("w0", 0, Take::Write, 10), ("w1", 1, Take::Write, 1), (name, 11, take, 4)]);
        assert_eq!(got, entries(&[(0, "w0"), (11, name), (17, "w1")]));
        assert_eq!(stats, (1, 16_000));
    }
}

/// Once the head writer has waited `RWSEM_WAIT_TIMEOUT` (4 ms) the release hands it the lock:
/// a writer asking between the wake-up and the head's run queues behind it.
#[test]
fn rwsem_head_writer_gets_handoff_after_timeout() {
    let (got, _) = run_plan(&[
        ("w0", 0, Take::Write, 5000),
        ("w1", 1, Take::Write, 1),
        ("w2", 5001, Take::Write, 1),
    ]);
    assert_eq!(got, entries(&[(0, "w0"), (5002, "w1"), (5005, "w2")]));
}

/// A sleeper whose CPU is idle runs `wakeup_latency` (2 us) after its wake-up; one whose CPU
/// is running another task joins that CPU's run queue at once and runs when the CPU is given up
/// (kernel/sched/core.c `try_to_wake_up`: only an idle CPU has an idle state to leave).
#[test]
fn wakeup_latency_is_charged_only_to_an_idle_cpu() {
    for (busy_until, want) in [(None, 12), (Some(11), 11)] {
        let mut sim = sim_with_wakeup_latency(2);
        let h = sim.handle().clone();
        let mutex = h.mutex("test_mutex");
        let log: Log = Rc::default();
        let (m, l) = (mutex, log.clone());
        h.spawn(h.cpu(0).unwrap(), "holder", move |cx| async move {
            let g = m.lock(&cx).await;
            cx.sleep(us(10)).await;
            drop(g);
            note(&l, &cx, "released");
        });
        let (m, l) = (mutex, log.clone());
        h.spawn(h.cpu(1).unwrap(), "waiter", move |cx| async move {
            cx.sleep(us(1)).await;
            let _g = m.lock(&cx).await;
            note(&l, &cx, "waiter");
        });
        if let Some(end) = busy_until {
            h.spawn(h.cpu(1).unwrap(), "busy", move |cx| async move {
                cx.sleep(us(5)).await;
                cx.charge(us(end - 5)).await;
            });
        }
        sim.run().unwrap();
        let got = log.borrow().clone();
        assert_eq!(got, entries(&[(10, "released"), (want, "waiter")]), "busy {busy_until:?}");
    }
}
