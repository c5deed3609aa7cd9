//! Memory bandwidth: each socket's memory bus, which CPUs streaming through memory share.
//!
//! A CPU clearing or copying a page streams it through its socket's memory controllers; alone it
//! runs at its own speed (the profile's single-CPU cost of the clear or copy), and many CPUs
//! streaming at once share the controllers' sustained bandwidth, so past the point where their
//! demands add up to it each gets its share and no more (the regime of McCalpin's STREAM
//! benchmark when run on every core of a socket). What the bandwidth is comes from the machine
//! profile, with its source there.
//!
//! The model: a socket's bus carries bytes at one rate, one transfer after another (first come,
//! first served), and remembers when the last transfer it accepted is carried. A transfer of `b`
//! bytes offered at `now` is carried at `max(now, free_at) + b / rate`; the CPU that offered it is
//! busy until then or until its own loop is done, whichever is later (the caller charges that).
//! While the CPUs' demands stay below the rate a transfer is carried before its own loop ends and
//! costs nothing more; above it the queue grows until each CPU waits for the others' transfers,
//! which gives each the rate divided by the number of streams. A whole transfer is reserved when
//! offered, so a small one offered behind a large one waits for all of it where the hardware
//! would interleave them (an approximation of the controllers' fair sharing: the total carried
//! per second is the same). Everything depends on virtual time and CPU numbers only, so runs stay
//! deterministic.

use crate::cpu::CpuId;
use simcore::{SimDuration, SimTime};

/// The bytes in one unit of [`BusCosts::per_64k`].
const UNIT: u64 = 64 << 10;

/// A socket's memory bandwidth: the machine profile's figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BusCosts {
    /// The time a socket's bus takes to carry 64 KiB at its sustained bandwidth; zero is no
    /// limit.
    pub per_64k: SimDuration,
    /// CPUs per socket: CPU `n` streams through socket `n / cpus_per_socket`'s bus; 0 is one
    /// socket.
    pub cpus_per_socket: u32,
}

impl BusCosts {
    /// The socket whose bus `cpu` streams through.
    pub(crate) fn socket(&self, cpu: CpuId) -> usize {
        cpu.0.checked_div(self.cpus_per_socket).unwrap_or(0) as usize
    }

    /// How long the bus takes to carry `bytes` (rounded up to the nanosecond).
    fn carry(&self, bytes: u64) -> SimDuration {
        let ns = u128::from(self.per_64k.as_ns()) * u128::from(bytes);
        SimDuration::from_ns(u64::try_from(ns.div_ceil(u128::from(UNIT))).unwrap_or(u64::MAX))
    }
}

/// One socket's memory bus: when the last transfer it accepted is carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemBus {
    free_at: SimTime,
}

impl MemBus {
    /// A transfer of `bytes` offered at `now`: how long from `now` until the bus has carried it
    /// (zero without a limit).
    pub(crate) fn transfer(&mut self, costs: &BusCosts, bytes: u64, now: SimTime) -> SimDuration {
        if costs.per_64k.is_zero() || bytes == 0 {
            return SimDuration::ZERO;
        }
        let done = self.free_at.max(now) + costs.carry(bytes);
        self.free_at = done;
        done.since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 64 KiB in 640 ns: 4 KiB in 40 ns.
    const COSTS: BusCosts = BusCosts { per_64k: SimDuration::from_ns(640), cpus_per_socket: 2 };

    fn at(ns: u64) -> SimTime {
        SimTime::from_ns(ns)
    }

    /// A transfer on an idle bus takes its own carrying time; no limit carries at once.
    #[test]
    fn an_idle_bus_carries_at_its_rate() {
        let mut bus = MemBus::default();
        assert_eq!(bus.transfer(&COSTS, 4096, at(1000)), SimDuration::from_ns(40));
        assert_eq!(bus.transfer(&COSTS, 4096, at(5000)), SimDuration::from_ns(40));
        let none = BusCosts::default();
        assert_eq!(MemBus::default().transfer(&none, 1 << 21, at(0)), SimDuration::ZERO);
        assert_eq!(COSTS.socket(CpuId(3)), 1);
        assert_eq!(none.socket(CpuId(3)), 0);
    }

    /// Transfers offered together are carried one after another: the third waits for two.
    #[test]
    fn transfers_queue_on_a_busy_bus() {
        let mut bus = MemBus::default();
        let each = |bus: &mut MemBus| bus.transfer(&COSTS, 8192, at(100));
        assert_eq!(each(&mut bus), SimDuration::from_ns(80));
        assert_eq!(each(&mut bus), SimDuration::from_ns(160));
        assert_eq!(each(&mut bus), SimDuration::from_ns(240));
    }
}
