//! Cache-line transfers: what an atomic write costs when another CPU wrote the line last.
//!
//! A lock word (a spinlock, a mutex's owner field, an rwsem's count) or a reference count is one
//! cache line. x86 executes a locked read-modify-write only on a line it holds exclusively
//! (Intel 64 and IA-32 Architectures Software Developer's Manual, vol. 3A, 9.1.4 "Effects of a
//! LOCK Operation on Internal Processor Caches"), so a CPU writing a line another CPU modified
//! last first pulls it over: a cache-to-cache transfer. Transfers of one line are serialised (the
//! line has one owner at a time), so many CPUs writing one line queue for it; that queue is what
//! makes an rwsem's reader count a bottleneck on many CPUs even when no reader ever waits for a
//! writer.
//!
//! The model: each line remembers the CPU that wrote it last and when the last transfer in flight
//! completes. A write by another CPU starts when the line is free and takes the profile's
//! same-socket or cross-socket figure ([`LineCosts`]); a write by the owning CPU costs nothing
//! more than the work around it. A line nobody wrote yet comes from memory at no extra cost.
//! Reads are not modelled (a lock's fast path writes). Everything depends on virtual time and CPU
//! numbers only, so runs stay deterministic.

use crate::cpu::CpuId;
use simcore::{SimDuration, SimTime};

/// What moving a cache line between CPUs costs: the machine profile's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineCosts {
    /// Between two CPUs of one socket.
    pub same_socket: SimDuration,
    /// Between CPUs of two sockets.
    pub cross_socket: SimDuration,
    /// CPUs per socket: CPU `n` sits on socket `n / cpus_per_socket`; 0 is one socket.
    pub cpus_per_socket: u32,
}

impl LineCosts {
    /// The transfer of a line from `from`'s cache to `to`'s.
    fn transfer(&self, from: CpuId, to: CpuId) -> SimDuration {
        let socket = |c: CpuId| c.0.checked_div(self.cpus_per_socket).unwrap_or(0);
        if socket(from) == socket(to) { self.same_socket } else { self.cross_socket }
    }
}

/// One cache line that CPUs write with atomics: its owner and when it is next free.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CacheLine {
    owner: Option<CpuId>,
    free_at: SimTime,
}

impl CacheLine {
    /// CPU `cpu` writes the line at `now`: how long the write waits for the line (zero if
    /// `cpu` owns it), the line's queue included.
    pub(crate) fn write(&mut self, costs: &LineCosts, cpu: CpuId, now: SimTime) -> SimDuration {
        let from = self.owner.replace(cpu);
        match from {
            Some(from) if from != cpu => {
                let done = self.free_at.max(now) + costs.transfer(from, cpu);
                self.free_at = done;
                done.since(now)
            }
            _ => SimDuration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COSTS: LineCosts = LineCosts {
        same_socket: SimDuration::from_ns(50),
        cross_socket: SimDuration::from_ns(130),
        cpus_per_socket: 2,
    };

    fn at(ns: u64) -> SimTime {
        SimTime::from_ns(ns)
    }

    /// The owner writes for free; another CPU pays a transfer, more across sockets.
    #[test]
    fn a_write_pays_only_when_another_cpu_wrote_last() {
        let mut l = CacheLine::default();
        assert_eq!(l.write(&COSTS, CpuId(0), at(0)), SimDuration::ZERO);
        assert_eq!(l.write(&COSTS, CpuId(0), at(10)), SimDuration::ZERO);
        assert_eq!(l.write(&COSTS, CpuId(1), at(100)), SimDuration::from_ns(50));
        assert_eq!(l.write(&COSTS, CpuId(3), at(1000)), SimDuration::from_ns(130));
    }

    /// Three CPUs writing at once are served one transfer after another.
    #[test]
    fn transfers_of_one_line_queue() {
        let mut l = CacheLine::default();
        l.write(&COSTS, CpuId(0), at(0));
        assert_eq!(l.write(&COSTS, CpuId(1), at(100)), SimDuration::from_ns(50));
        assert_eq!(l.write(&COSTS, CpuId(0), at(100)), SimDuration::from_ns(100));
        assert_eq!(l.write(&COSTS, CpuId(1), at(100)), SimDuration::from_ns(150));
        let none = LineCosts::default();
        assert_eq!(CacheLine::default().write(&none, CpuId(5), at(0)), SimDuration::ZERO);
    }
}
