//! The real kernel as mmsim's oracle. A scenario file runs natively on the machine's own Linux
//! (`mmsim run FILE --on host`): each scenario process is a real process, each operation the
//! real system call or memory access, its files on real ext4, tmpfs and hugetlbfs, its machine's
//! knobs written to the host's sysfs and restored afterwards, its memory limits real memory
//! cgroups, and every observable read from the real `/proc` and `/sys` files. `mmsim diff FILE`
//! runs it in the model too, at the host's kernel version, and sets the two side by side.
//!
//! - `support.rs`: what the host can run, refused by name before anything is touched;
//! - `setup.rs`: the host made into the scenario's machine, journalled and restored;
//! - `controller.rs`: the agents, the steps in the scenario's order, the expectations;
//! - `agent.rs` and `ops.rs`: one process per scenario process, running its tasks;
//! - `access.rs`: loads and stores whose SIGSEGV or SIGBUS is a result;
//! - `sys.rs`: the system calls, over the `libc` crate;
//! - `uring.rs`: io_uring's registered buffers and fixed-buffer requests, over raw system calls;
//! - `observe.rs`: the host's files read by comparison class;
//! - `diff.rs`: the kernel against the model;
//! - `guest.rs`: the same in a Debian kernel booted under qemu, for other eras and swap;
//! - `pagecache.rs`: the page-cache replay's requests as real `pread`s, the kernel work that
//!   `mmsim bench pagecache` sets the model's machinery beside;
//! - `calibrate.rs`: the basic costs of a machine profile and seed 001's hugetlb loops, timed
//!   natively (`mmsim calibrate`).
//!
//! This crate is an edge (it does IO, forks and reads the clock); nothing in the simulation
//! depends on it. See `docs/host.md`.

// An edge crate: the native run is real time, real processes and real files.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod access;
mod agent;
pub mod calibrate;
mod controller;
pub mod diff;
pub mod guest;
pub mod observe;
mod ops;
pub mod pagecache;
mod setup;
pub mod support;
mod sys;
mod uring;

pub use controller::{HostReading, NativeOptions, NativeReport, run_native};
pub use support::Refusal;
