//! The bottom of the mmsim stack: virtual time, address and size units, dense ids, the seeded
//! PRNG with named streams, integer probabilities, the `verify()` switch, counters, histograms and
//! digests.
//!
//! Architecture invariant: this crate depends on nothing, does no IO, reads no wall clock and
//! spawns no thread. Everything here is deterministic: the same inputs give the same bits on every
//! machine.

pub mod digest;
pub mod id;
pub mod prng;
pub mod stats;
pub mod time;
pub mod units;
pub mod verify;

pub use digest::Digest;
pub use id::IdVec;
pub use prng::{Prng, Ratio};
pub use stats::{CounterKey, Counters, Histogram};
pub use time::{SimDuration, SimTime};
pub use units::{Bytes, Order, Pfn, PhysAddr, VirtAddr, Vpn};
