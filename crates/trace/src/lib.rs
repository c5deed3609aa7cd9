//! Memory-reference traces and their replay: the edge between recorded programs and the
//! simulated MMU.
//!
//! - [`record`]: one reference (instruction fetch, load, store, modify) with its address and size;
//! - [`lackey`]: valgrind lackey's `--trace-mem=yes` text, parsed line by line with line numbers;
//! - [`binary`]: mmsim's compact format (delta-encoded varints, a counted trailer that detects
//!   truncation), and its writer (`mmsim trace convert`);
//! - [`input`]: opening a trace file, gzip or zstd compressed or not, as a stream of references in
//!   constant memory;
//! - [`maps`]: the `/proc/PID/maps` text that describes the replayed process's address space;
//! - [`replay`]: a simulated process built from a maps description, running a trace through the
//!   TLBs and page walk (`mm::arch::tlb`), faulting through the mm model only on a miss that needs it;
//! - [`elf`]: an ELF file's program headers (`PT_LOAD`, `PT_INTERP`), for the loader and the
//!   dynamic-linker model;
//! - [`program`]: a recorded program: its address space (ELF objects with their program headers,
//!   file and anonymous mappings) and one trace per thread, in one file;
//! - [`ld_so`]: the dynamic linker's model (glibc 2.36's `_dl_map_segments`);
//! - [`program_replay`]: a recorded program replayed with the OS in the loop: the ELF loader,
//!   the linker model, a thread per recorded thread, khugepaged's warm-up, a measured pass;
//! - [`qemu`]: `mmsim record`, the recorder (qemu-user and a TCG plugin);
//! - [`block`]: block traces for page-cache replay (the ARC paper's `.lis` text, libCacheSim's
//!   oracleGeneral binary), and the oracleGeneral writer;
//! - [`pagecache`]: a block trace replayed as reads or mapped accesses of one file by a process
//!   in a memory cgroup of a given size, reporting hits, misses, refaults and reclaim counters;
//! - [`skip`]: how a test that cannot run on this host (no qemu-user, Chromium or root) says so
//!   (the lowest crate that does IO, so every crate's tests reach it).
//!
//! An edge crate: it reads files, and leaves simulation semantics to `mm`.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

pub mod binary;
pub mod block;
pub mod elf;
pub mod footprint;
pub mod input;
pub mod lackey;
pub mod ld_so;
pub mod maps;
pub mod pagecache;
pub mod program;
pub mod program_replay;
pub mod qemu;
pub mod rebase;
pub mod record;
pub mod replay;
pub mod skip;

/// A trace or maps input error, naming the file and, where it has one, the line or record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    /// The 1-based line (text formats) or record (binary format), when the error has one.
    pub line: Option<u64>,
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for InputError {}

/// Why a replay's simulation stopped: `refused` when it outgrew its events budget (bad input,
/// exit 2), `sim` otherwise (a checker or the simulation failed).
pub(crate) fn stopped<E>(
    e: &engine::SimError,
    refused: fn(String) -> E,
    sim: fn(String) -> E,
) -> E {
    match e.over_event_budget() {
        Some(why) => refused(why),
        None => sim(e.to_string()),
    }
}
