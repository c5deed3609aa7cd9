//! A CPU's data caches, for the one case where the model lets stores miss them: a task storing
//! every word of a huge page the kernel has just copied for it (vm-scalability's
//! `anon-cow-seq-hugetlb`, `workload::usemem`). Every other user access is a cache hit, as
//! before (`uaccess.rs`): the model tracks no cache contents.
//!
//! The caches: each core's private L2 and its slice of the socket's shared L3, from the
//! profile ([`Caches`]). Skylake-SP's L3 is non-inclusive of the L2 (it is filled by the L2's
//! victims), so the two add; a core's hardware threads share both, and when every CPU of the
//! socket streams at once each gets an equal part of the L3 (one slice per core), so a CPU's
//! share is `(L2 + L3 slice) / threads per core` ([`Caches::share`]). Sources: Intel, "Cache
//! hierarchy changes in Intel Xeon Scalable Processors" (support article 000027820: 1 MB of
//! private mid-level cache and 1.375 MB of shared non-inclusive last-level cache per core), and
//! AnandTech's Skylake-SP cache table ("The Intel Skylake-X Review", 2017-06-19, "I Keep My
//! Cache Private": L2 1 MB 16-way, L3 1.375 MB/core 11-way non-inclusive).
//!
//! The rule ([`Caches::stores_after_copy`]). A copy-on-write fault on a huge page copies it
//! subpage by subpage, the faulting subpage last "to keep its cache lines hot"
//! (`process_huge_page`, `mm/memory.c`, read in v6.8; Huang Ying's "copy target sub-page last"
//! of 2017-2018, whose hash was not verified here), and `hugetlb_cow` (v5.x, v6.0) and
//! `hugetlb_wp` (v6.8) pass it the faulting address. The copy reads one source line for each destination line it writes, and both
//! stay in the caches (x86's `copy_page` is `rep movsq`, whose stores are not non-temporal), so
//! when it ends the CPU's share holds the last-copied half share of the destination and as much
//! of the source. usemem's first store is to the page's first word, so the copy ran from the
//! last subpage down to the first and what stays is the page's start, where the stores begin.
//! The stores then walk up the page: the lines still cached are hits (dirty already, written
//! back once, as the copy's traffic counts them), and every line past them was evicted by the
//! copy (its write-back counted there) and is read again for ownership (64 bytes in) and
//! dirtied again, to be written back when evicted (64 bytes out). So a store stream over
//! `len` bytes after its copy moves `2 * (len - share / 2)` more bytes through the socket's
//! memory bus (`engine::membus`), none when `len` fits in half the share: a 4 KiB page's
//! stores stay hits, a 2 MiB page outgrows a Skylake-SP core's share.
//!
//! Approximations, declared: the caches are taken as perfectly LRU and fully associative; the
//! L3 is divided equally among the socket's CPUs whether or not they stream (a stream alone
//! would have the whole L3; every CPU streams in the one workload that uses the rule); the
//! source page's lines, which all the tasks read, are fetched from memory by each copy (as
//! `copy_page_4k`'s bus traffic already counts them) where the L3 might serve some.

use simcore::Bytes;

/// A machine's data caches, per core: zero L2 is unbounded caches (every store hits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caches {
    /// Each core's private L2.
    pub l2_per_core: Bytes,
    /// The socket's shared L3, per core (its slice).
    pub l3_per_core: Bytes,
    /// Hardware threads per core: the profile's CPUs are threads, which share their core's
    /// caches.
    pub threads_per_core: u32,
}

/// The `--set cache.NAME` keys, in [`Caches::set`]'s terms.
pub const SET_KEYS: [&str; 3] = ["l2_per_core_kib", "l3_per_core_kib", "threads_per_core"];

impl Caches {
    /// Intel Skylake-SP (Xeon Scalable, first generation): 1 MiB of L2 and 1.375 MiB of L3 per
    /// core, two threads a core (see the module note for the sources).
    pub const SKYLAKE_SP: Caches =
        Caches { l2_per_core: Bytes(1 << 20), l3_per_core: Bytes(1408 << 10), threads_per_core: 2 };

    /// The caches one CPU has to itself while every CPU of its socket streams: its core's L2
    /// and L3 slice, split among the core's threads.
    pub fn share(&self) -> Bytes {
        Bytes(
            (self.l2_per_core.as_u64() + self.l3_per_core.as_u64())
                / self.threads_per_core.max(1) as u64,
        )
    }

    /// The bytes a CPU's stores to every word of `len` bytes, right after it copied them as a
    /// copy-on-write fault copies a huge page, move through its socket's memory bus beyond the
    /// copy's own: a read for ownership and a write-back of every line the copy left outside
    /// the half of its share that holds the destination (the module note). Zero with unbounded
    /// caches.
    pub fn stores_after_copy(&self, len: Bytes) -> u64 {
        if self.l2_per_core.as_u64() == 0 {
            return 0;
        }
        2 * len.as_u64().saturating_sub(self.share().as_u64() / 2)
    }

    /// Replaces one figure (`--set cache.NAME=N`, `NAME` one of [`SET_KEYS`]).
    pub fn set(&mut self, name: &str, n: u64) -> Result<(), String> {
        let kib = |n: u64| {
            n.checked_mul(1024)
                .filter(|&b| b <= 1 << 40)
                .map(Bytes)
                .ok_or_else(|| format!("{n} KiB: expected at most 1 TiB"))
        };
        match name {
            "l2_per_core_kib" => self.l2_per_core = kib(n)?,
            "l3_per_core_kib" => self.l3_per_core = kib(n)?,
            "threads_per_core" if (1..=8).contains(&n) => self.threads_per_core = n as u32,
            "threads_per_core" => return Err(format!("{n}: expected 1 to 8 threads a core")),
            _ => {
                return Err(format!(
                    "unknown cache figure `{name}`: expected one of {}",
                    SET_KEYS.join(", ")
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Skylake-SP: a share of 1216 KiB a CPU with two threads a core; a 2 MiB page's stores
    /// after its copy miss all but its first 608 KiB, a 4 KiB page's none.
    #[test]
    fn a_huge_page_outgrows_a_share_and_a_small_one_does_not() {
        let c = Caches::SKYLAKE_SP;
        assert_eq!(c.share(), Bytes(1216 << 10));
        assert_eq!(c.stores_after_copy(Bytes(2 << 20)), 2 * ((2048 - 608) << 10));
        assert_eq!(c.stores_after_copy(Bytes::PAGE), 0);
        let unbounded = Caches { l2_per_core: Bytes(0), ..c };
        assert_eq!(unbounded.stores_after_copy(Bytes(2 << 20)), 0);
    }

    #[test]
    fn settings_are_checked() {
        let mut c = Caches::SKYLAKE_SP;
        c.set("l3_per_core_kib", 0).unwrap();
        c.set("threads_per_core", 1).unwrap();
        assert_eq!(c.share(), Bytes(1 << 20));
        assert!(c.set("threads_per_core", 0).is_err());
        assert!(c.set("l1_kib", 32).is_err());
    }
}
