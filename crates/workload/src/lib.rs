//! Workload generators: programs that run as simulated user threads on an `mm::Machine` and
//! measure what a benchmark would (per-access latency, throughput) in virtual time.
//!
//! A workload installs its processes and threads on a machine, the caller runs the machine, and
//! the workload's shared statistics are read afterwards. Workloads draw every random choice from
//! the run seed through named streams (`Prng::stream`), so adding one changes no other.
//!
//! Architecture invariant: like `mm`, this crate does no IO and reads no clock; experiments that
//! compare runs and publish figures live in `lab`.

pub mod access;
pub mod encoder;
pub mod fio;
pub mod hugetlb_loops;
pub mod pmbench;
pub mod usemem;
