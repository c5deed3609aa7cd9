//! Access loops: a thread touching a region one byte per access, the page chosen by a pattern
//! and the kind (load or store) by a ratio, each access timed in virtual time — the inner loop of
//! pmbench (`pmbench.c`, `pattern.c`, v0.9) and of the scenario operation `run`.
//!
//! Patterns, as pmbench defines them: `normal_ih`, the mean of twelve uniform draws over the
//! region (an Irwin-Hall bell centred on the middle, standard deviation about a twelfth of the
//! region), redrawn when it falls outside — integer arithmetic, as in pmbench; `uniform`, every
//! page equally likely; `linear`, page after page, wrapping around.

use mm::{Access, Signal, Thread};
use simcore::{Bytes, Histogram, Prng, Ratio, SimTime, VirtAddr};
use std::cell::RefCell;

/// How the next page is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    NormalIh,
    Uniform,
    Linear,
}

impl Pattern {
    pub const NAMES: [&'static str; 3] = ["normal_ih", "uniform", "linear"];

    /// The pattern called `name` (pmbench's names).
    pub fn named(name: &str) -> Result<Pattern, String> {
        match name {
            "normal_ih" => Ok(Pattern::NormalIh),
            "uniform" => Ok(Pattern::Uniform),
            "linear" => Ok(Pattern::Linear),
            _ => Err(format!(
                "unknown access pattern `{name}`: expected one of {}",
                Pattern::NAMES.join(", ")
            )),
        }
    }

    /// The page of access number `i` in a region of `pages` pages.
    fn page(self, rng: &mut Prng, pages: u64, i: u64) -> u64 {
        match self {
            Pattern::NormalIh => normal_ih(rng, pages),
            Pattern::Uniform => rng.below(pages),
            Pattern::Linear => i % pages,
        }
    }
}

/// What an access loop observed (shared by the threads of a benchmark).
#[derive(Debug, Default)]
pub struct Stats {
    /// Latency of every access, in ns.
    pub latency_ns: Histogram,
    pub reads: u64,
    pub writes: u64,
    /// Accesses that raised SIGSEGV/SIGBUS/SIGKILL (none expected).
    pub failed: u64,
    pub start: Option<SimTime>,
    pub end: SimTime,
}

impl Stats {
    /// Accesses per virtual second over the measured phase.
    pub fn throughput_aps(&self) -> f64 {
        let Some(start) = self.start else { return 0.0 };
        let ns = self.end.as_ns().saturating_sub(start.as_ns()).max(1);
        self.latency_ns.count() as f64 * 1e9 / ns as f64
    }
}

/// One thread's accesses to `[base, base + pages)`.
#[derive(Clone, Copy, Debug)]
pub struct AccessLoop {
    pub base: VirtAddr,
    pub pages: u64,
    pub pattern: Pattern,
    /// The share of accesses that are loads.
    pub read_ratio: Ratio,
    pub accesses: u64,
}

impl AccessLoop {
    /// Runs the accesses on `t`, recording each in `stats`; stops at the first signal.
    pub async fn run(
        &self,
        t: &Thread,
        rng: &mut Prng,
        stats: &RefCell<Stats>,
    ) -> Result<(), Signal> {
        {
            let mut s = stats.borrow_mut();
            let now = t.now();
            s.start = Some(s.start.map_or(now, |st| st.min(now)));
        }
        for i in 0..self.accesses {
            let page = self.pattern.page(rng, self.pages, i);
            let read = rng.chance(self.read_ratio);
            let before = t.now();
            let access = if read { Access::Read } else { Access::Write };
            t.touch(self.base + Bytes::from_pages(page), Bytes(1), access).await?;
            let mut s = stats.borrow_mut();
            s.latency_ns.record(t.now().as_ns() - before.as_ns());
            if read {
                s.reads += 1;
            } else {
                s.writes += 1;
            }
        }
        let mut s = stats.borrow_mut();
        s.end = s.end.max(t.now());
        Ok(())
    }
}

/// A page of `[0, pages)` by pmbench's `normal_ih`: the support is widened or narrowed to a
/// multiple of twelve pages `n` around the set's middle; the mean of twelve uniform draws of
/// `[0, n)`, shifted back, is redrawn until it falls inside the set.
fn normal_ih(rng: &mut Prng, pages: u64) -> u64 {
    const ORDER: u64 = 12;
    let last = pages - 1;
    let n = (ORDER * last.div_ceil(ORDER).max(1)).max(ORDER);
    let shift = (last as i64 - n as i64) / 2;
    loop {
        let sum: u64 = (0..ORDER).map(|_| rng.below(n)).sum();
        let page = (sum / ORDER) as i64 + shift;
        if (0..=last as i64).contains(&page) {
            return page as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_ih_is_a_centred_bell_with_a_twelfth_deviation() {
        let mut rng = Prng::from_seed(7);
        let pages = 1200;
        let mut counts = vec![0u32; pages as usize];
        let draws = 120_000;
        for _ in 0..draws {
            let p = normal_ih(&mut rng, pages);
            counts[p as usize] += 1;
        }
        // One standard deviation (100 pages) each side of the middle holds about 68%.
        let sigma: u32 = counts[500..700].iter().sum();
        assert!((0.64..0.72).contains(&(f64::from(sigma) / f64::from(draws))), "{sigma}");
        // Four deviations out is nearly never reached.
        let tails: u32 = counts[..200].iter().chain(&counts[1000..]).sum();
        assert!(tails < 20, "{tails}");
    }

    #[test]
    fn tiny_sets_stay_in_range() {
        let mut rng = Prng::from_seed(1);
        for pages in [1, 2, 5, 13] {
            for _ in 0..100 {
                assert!(normal_ih(&mut rng, pages) < pages);
            }
        }
    }
}
