//! Deterministic counters and histograms.
//!
//! `Counters<K>` is a dense array of `u64` indexed by a key enum, iterated in declaration order, so
//! `/proc/vmstat`-style output is stable. `Histogram` is a log-linear histogram of `u64` values
//! (HdrHistogram's bucket scheme with 64 sub-buckets per power of two: every quantile is within
//! 1/64 = 1.6% of the true value, min, max, count and sum are exact). Integer arithmetic only.

use std::fmt;
use std::marker::PhantomData;

/// A key of a [`Counters`] set: a fieldless enum with a name per variant.
pub trait CounterKey: Copy + 'static {
    /// Every key, in output order.
    const ALL: &'static [Self];
    fn index(self) -> usize;
    fn name(self) -> &'static str;
}

/// Defines a fieldless enum implementing [`CounterKey`], with the kernel's names.
#[macro_export]
macro_rules! counter_keys {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis enum $name { $($(#[$vmeta])* $variant,)* }

        impl $crate::stats::CounterKey for $name {
            const ALL: &'static [Self] = &[$($name::$variant,)*];
            fn index(self) -> usize {
                self as usize
            }
            fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }
        }
    };
}

/// A set of named `u64` counters.
#[derive(Clone, PartialEq, Eq)]
pub struct Counters<K: CounterKey> {
    values: Box<[u64]>,
    _key: PhantomData<K>,
}

impl<K: CounterKey> Counters<K> {
    pub fn new() -> Self {
        Counters { values: vec![0; K::ALL.len()].into_boxed_slice(), _key: PhantomData }
    }

    pub fn get(&self, key: K) -> u64 {
        self.values[key.index()]
    }

    pub fn add(&mut self, key: K, n: u64) {
        let v = &mut self.values[key.index()];
        *v = v.checked_add(n).expect("counter overflow");
    }

    pub fn inc(&mut self, key: K) {
        self.add(key, 1);
    }

    /// Subtracts `n`; a counter going below zero is an accounting bug.
    pub fn sub(&mut self, key: K, n: u64) {
        let v = &mut self.values[key.index()];
        *v = v.checked_sub(n).unwrap_or_else(|| panic!("counter {} below zero", key.name()));
    }

    /// `(name, value)` in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        K::ALL.iter().map(|&k| (k.name(), self.get(k)))
    }
}

impl<K: CounterKey> Default for Counters<K> {
    fn default() -> Self {
        Counters::new()
    }
}

impl<K: CounterKey> fmt::Debug for Counters<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

const SUB_BITS: u32 = 6;
const SUB_COUNT: u64 = 1 << SUB_BITS;

/// A log-linear histogram of `u64` values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

/// Bucket of `v`: exact below `2 * SUB_COUNT`, then `SUB_COUNT` buckets per power of two.
fn bucket_of(v: u64) -> usize {
    if v < 2 * SUB_COUNT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let sub = (v >> shift) - SUB_COUNT;
    (2 * SUB_COUNT + u64::from(shift - 1) * SUB_COUNT + sub) as usize
}

/// The largest value that falls in bucket `b`.
fn bucket_high(b: usize) -> u64 {
    let b = b as u64;
    if b < 2 * SUB_COUNT {
        return b;
    }
    let shift = (b - 2 * SUB_COUNT) / SUB_COUNT + 1;
    let sub = (b - 2 * SUB_COUNT) % SUB_COUNT + SUB_COUNT;
    let high = (u128::from(sub + 1) << shift) - 1;
    u64::try_from(high).unwrap_or(u64::MAX)
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram::default()
    }

    pub fn record(&mut self, v: u64) {
        let b = bucket_of(v);
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.min = if self.count == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.count += 1;
        self.sum += u128::from(v);
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if other.buckets.len() > self.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.min = if self.count == 0 { other.min } else { self.min.min(other.min) };
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum(&self) -> u128 {
        self.sum
    }

    pub fn min(&self) -> u64 {
        self.min
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean, rounded down; 0 when empty.
    pub fn mean(&self) -> u64 {
        if self.count == 0 { 0 } else { (self.sum / u128::from(self.count)) as u64 }
    }

    /// The value at quantile `num/den` (the smallest recorded value with at least that fraction
    /// of values at or below it, to bucket precision, never above `max`); 0 when empty.
    pub fn quantile(&self, num: u64, den: u64) -> u64 {
        assert!(den > 0 && num <= den, "quantile {num}/{den}");
        if self.count == 0 {
            return 0;
        }
        let rank = (u128::from(self.count) * u128::from(num)).div_ceil(u128::from(den)).max(1);
        let mut seen = 0u128;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += u128::from(n);
            if seen >= rank {
                return bucket_high(b).min(self.max).max(self.min);
            }
        }
        self.max
    }

    pub fn p50(&self) -> u64 {
        self.quantile(50, 100)
    }

    pub fn p99(&self) -> u64 {
        self.quantile(99, 100)
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Histogram(n={}, min={}, p50={}, p99={}, max={})",
            self.count,
            self.min,
            self.p50(),
            self.p99(),
            self.max
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    counter_keys! {
        enum Demo { Alpha = "alpha", Beta = "beta", }
    }

    #[test]
    fn counters_iterate_in_declaration_order() {
        let mut c: Counters<Demo> = Counters::new();
        c.add(Demo::Beta, 3);
        c.inc(Demo::Alpha);
        c.sub(Demo::Beta, 1);
        assert_eq!(c.iter().collect::<Vec<_>>(), [("alpha", 1), ("beta", 2)]);
    }

    #[test]
    #[should_panic(expected = "counter alpha below zero")]
    fn counters_refuse_negative() {
        Counters::<Demo>::new().sub(Demo::Alpha, 1);
    }

    #[test]
    fn buckets_round_trip() {
        for v in [0u64, 1, 127, 128, 129, 1000, 4096, 65_535, 1 << 40, u64::MAX] {
            let b = bucket_of(v);
            assert!(bucket_high(b) >= v, "v={v} b={b}");
            if b > 0 {
                assert!(bucket_high(b - 1) < v, "v={v} b={b}");
            }
        }
    }

    #[test]
    fn quantiles_within_precision() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v);
        }
        assert_eq!((h.count(), h.min(), h.max(), h.mean()), (10_000, 1, 10_000, 5_000));
        let p50 = h.p50();
        let p99 = h.p99();
        assert!(p50.abs_diff(5_000) <= 5_000 / 64, "p50={p50}");
        assert!(p99.abs_diff(9_900) <= 9_900 / 64, "p99={p99}");
        assert_eq!(h.quantile(1, 1), 10_000);
        let mut other = Histogram::new();
        other.record(20_000);
        h.merge(&other);
        assert_eq!((h.count(), h.max()), (10_001, 20_000));
    }

    #[test]
    fn exact_for_small_values() {
        let mut h = Histogram::new();
        for v in [5u64, 5, 7, 9] {
            h.record(v);
        }
        assert_eq!((h.p50(), h.quantile(3, 4), h.max()), (5, 7, 9));
        assert_eq!(Histogram::new().p99(), 0);
    }
}
