//! Simulated CPUs: ownership, run queues, busy-time accounting, and what a CPU's passing from
//! one task to another costs.
//!
//! Context switches. When a CPU starts running a task other than the one that ran on it last,
//! the task pays the switch (the profile's figure, [`SwitchCosts`]) before its own work: it is
//! added to its next charge, as a lock word's transfer is, so the CPU is busy for it and the
//! task's work ends that much later. The figure is a whole switch as lmbench's `lat_ctx`
//! measures one: `schedule()` picking the next task, `context_switch()` and `switch_to`
//! (kernel/sched/core.c, v6.8), with hot caches; the TLB refills after it are the TLB model's.
//! What the kernel does in `context_switch()` depends on the address spaces, which the engine
//! knows only as opaque tags ([`TaskContext`]):
//! - to a user task of another address space: `switch_mm_irqs_off` loads the other page tables
//!   (x86, arch/x86/mm/tlb.c v6.8: `choose_new_asid`, the CR3 write, `cond_mitigation`'s
//!   branch-predictor barrier between processes, the `mm_cpumask` updates; arm64,
//!   arch/arm64/include/asm/mmu_context.h: `check_and_switch_context` and the TTBR0 write):
//!   [`SwitchCosts::address_space`];
//! - to a user task of the address space the CPU has loaded (another thread of the process):
//!   x86's `switch_mm_irqs_off` returns at `real_prev == next` ("switching from one thread in a
//!   process to another thread in the same process. No TLB flush required"), arm64's
//!   `switch_mm` skips `__switch_mm` when `prev == next`: [`SwitchCosts::same_space`];
//! - to a kernel thread: `context_switch` calls no `switch_mm` at all (`enter_lazy_tlb`: the
//!   kernel thread borrows the loaded address space, which stays loaded): also
//!   [`SwitchCosts::same_space`]; a user task after it pays by its own address space against
//!   the one still loaded.
//!
//! Approximations: a CPU's first task is taken as already on it (the run starts with it there);
//! a task outside the machine ([`TaskContext::Free`]: a device's completion, a harness's driver)
//! costs nothing to switch to or from and is never the CPU's last task; the switch is paid with
//! the task's next charge, so what it does before that charge (take a lock, begin a sleep)
//! happens that much early; on an idle CPU the switch is paid on top of the wake-up latency,
//! whose measurement already holds one switch from the idle task (the scheduler's part of it is
//! counted twice when a sleeper wakes on a CPU where another task ran since).

use crate::task::TaskId;
use simcore::{SimDuration, define_id};
use std::collections::VecDeque;

define_id!(
    /// A simulated CPU.
    pub struct CpuId;
);

/// Time accounting of one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Time charged by tasks on this CPU (context switches included).
    pub busy: SimDuration,
    /// Time spent spinning on spinlocks.
    pub spin: SimDuration,
    /// Tasks that had to wait on this CPU's run queue.
    pub runqueue_waits: u64,
    /// Context switches: the CPU started running a task other than the one that ran on it last.
    pub context_switches: u64,
    /// Their cost (part of `busy` once the incoming tasks have charged it).
    pub switching: SimDuration,
}

/// What a context switch costs (machine-profile costs; zero charges nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCosts {
    /// To a user task of another address space than the CPU's loaded one (a process switch).
    pub address_space: SimDuration,
    /// To a user task of the loaded address space (a thread of the same process), or to a
    /// kernel thread.
    pub same_space: SimDuration,
}

/// What a CPU must switch to run a task: the engine knows address spaces only as opaque tags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskContext {
    /// Not a task the machine's CPUs switch to (a device's completion, a harness's driver):
    /// passing the CPU to or from it costs nothing.
    #[default]
    Free,
    /// A kernel thread: runs on whatever address space the CPU has loaded (lazy TLB).
    Kernel,
    /// A user task of the address space tagged so.
    User(u64),
}

#[derive(Debug, Default)]
pub(crate) struct Cpu {
    /// The task that runs on this CPU now (charging, spinning, or between two points).
    pub owner: Option<TaskId>,
    /// Runnable tasks waiting for this CPU, FIFO.
    pub runqueue: VecDeque<TaskId>,
    pub stats: CpuStats,
    /// The last task other than a [`TaskContext::Free`] one that started on this CPU.
    last: Option<TaskId>,
    /// The address space the CPU has loaded (the last user task's).
    loaded: Option<u64>,
}

impl Cpu {
    /// `task`, running in `context`, starts on this CPU: the context switch it pays, if the
    /// CPU passes to it from another task (see the module note), counted in the CPU's figures.
    #[inline]
    pub(crate) fn switch_in(
        &mut self,
        task: TaskId,
        context: TaskContext,
        costs: &SwitchCosts,
    ) -> Option<SimDuration> {
        if context == TaskContext::Free {
            return None;
        }
        let previous = self.last.replace(task);
        let cost = match context {
            TaskContext::User(space) if self.loaded.replace(space) != Some(space) => {
                costs.address_space
            }
            _ => costs.same_space,
        };
        if previous.is_none_or(|p| p == task) {
            return None;
        }
        self.stats.context_switches += 1;
        self.stats.switching += cost;
        Some(cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_costs_by_the_address_spaces() {
        let costs = SwitchCosts {
            address_space: SimDuration::from_ns(3000),
            same_space: SimDuration::from_ns(1000),
        };
        let mut cpu = Cpu::default();
        let (a, b, c, k) = (TaskId(0), TaskId(1), TaskId(2), TaskId(3));
        let ns = |d: Option<SimDuration>| d.map(SimDuration::as_ns);
        // The CPU's first task is already there; the same task again switches nothing.
        assert_eq!(ns(cpu.switch_in(a, TaskContext::User(1), &costs)), None);
        assert_eq!(ns(cpu.switch_in(a, TaskContext::User(1), &costs)), None);
        // A thread of the same process, a free task (nothing), a process, a kernel thread.
        assert_eq!(ns(cpu.switch_in(b, TaskContext::User(1), &costs)), Some(1000));
        assert_eq!(ns(cpu.switch_in(TaskId(9), TaskContext::Free, &costs)), None);
        assert_eq!(ns(cpu.switch_in(c, TaskContext::User(2), &costs)), Some(3000));
        assert_eq!(ns(cpu.switch_in(k, TaskContext::Kernel, &costs)), Some(1000));
        // The kernel thread kept process 2's space loaded: c again is a same-space switch.
        assert_eq!(ns(cpu.switch_in(c, TaskContext::User(2), &costs)), Some(1000));
        assert_eq!(ns(cpu.switch_in(a, TaskContext::User(1), &costs)), Some(3000));
        assert_eq!(cpu.stats.context_switches, 5);
        assert_eq!(cpu.stats.switching.as_ns(), 9000);
    }
}
