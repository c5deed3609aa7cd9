//! The bounds a scenario's values must keep, checked when parsing or configuring and before
//! anything is allocated or scheduled, so that user input can neither overflow virtual time
//! (`u64` nanoseconds, 584 years) nor make the host allocate what a literal names.
//!
//! - A `sleep` lasts at most [`MAX_SLEEP`] (one hour); a scenario file holds at most
//!   [`MAX_SCENARIO_BYTES`] and so fewer than a million operations, whose sleeps add up to less
//!   than 115 years.
//! - A `repeat` runs at most [`MAX_ITERATIONS`] times (a loop until a flag or a success names
//!   its bound too: an unbounded loop is refused), and the sleeps of its body times its count
//!   add up to at most [`MAX_LOOP_SLEEP`] (100 years), so that loops and the file's other sleeps
//!   together stay below the 584 years of virtual time.
//! - A basic operation's cost is at most `mm::sim::cost::MAX_COST_NS` (10 ms).
//! - A swap or persistent-memory device is at most [`MAX_DEVICE`] (64 TiB, as memory); the swap
//!   device's slot map grows with the slots a run uses, so its size costs the host nothing.
//! - Bytes a scenario spells out (`fill` with `len`) are at most [`MAX_DATA`] (256 MiB), and a
//!   `mincore` asks about at most [`MAX_MINCORE`] (1 TiB), whose vector is as long.
//! - The tunables keep the kernel's own ranges where it has one (`fault_around_bytes` at most
//!   2 MiB, one page table, as `fault_around_bytes_set` in mm/memory.c v6.8; `swappiness` 0 to
//!   200) and otherwise a bound far above any real setting (`read_ahead_kb` at most 1 GiB,
//!   `lru_gen_min_ttl_ms` at most one hour).

use simcore::{Bytes, SimDuration};

/// The longest `sleep`.
pub const MAX_SLEEP: SimDuration = SimDuration::from_secs(3600);

/// The most iterations of one `repeat`.
pub const MAX_ITERATIONS: u64 = 1_000_000;

/// The most virtual time the sleeps of one `repeat` may add up to (100 years).
pub const MAX_LOOP_SLEEP: SimDuration = SimDuration::from_secs(100 * 365 * 24 * 3600);

/// The largest scenario file read.
pub const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// The most bytes a scenario spells out in one value.
pub const MAX_DATA: Bytes = Bytes::mib(256);

/// The longest range a `mincore` asks about: its vector, a byte per page, is at most
/// [`MAX_DATA`].
pub const MAX_MINCORE: Bytes = Bytes::tib(1);

/// The largest swap or persistent-memory device (as the largest machine memory a profile takes).
pub const MAX_DEVICE: Bytes = Bytes::tib(64);

/// Checks a tunable (`read_ahead_kb`, `fault_around_bytes`, `swappiness`, `lru_gen_min_ttl_ms`)
/// against its range; `Ok` for other keys.
pub fn check_tunable(key: &str, value: u64) -> Result<(), String> {
    match tunable_max(key) {
        Some(max) if value > max => Err(format!("`{key}` = {value}: expected at most {max}")),
        _ => Ok(()),
    }
}

/// The largest value of a tunable ([`check_tunable`]'s keys); `None` for other keys.
pub fn tunable_max(key: &str) -> Option<u64> {
    Some(match key {
        "read_ahead_kb" => mm::kernel::MAX_READ_AHEAD_KB,
        "fault_around_bytes" => 2 << 20,
        "swappiness" => 200,
        "lru_gen_min_ttl_ms" => 3_600_000,
        // hugetlb pools: a pool stops growing when memory runs out; this only bounds the number.
        "nr_hugepages"
        | "nr_overcommit_hugepages"
        | "nr_hugepages_1g"
        | "nr_overcommit_hugepages_1g" => 1 << 32,
        // hugetlbfs mount options, bytes: the pool bounds what they can promise.
        "hugetlbfs_size" | "hugetlbfs_min_size" => 1 << 52,
        _ => return None,
    })
}
