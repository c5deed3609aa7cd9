//! The translation hardware as a machine profile describes it: page sizes, the geometry and
//! replacement policy of each array, the second level (unified or split), the walk caches, the
//! ASID slot count and the latencies (`profile.rs` cites the figures of each core).

use crate::pgtable::Level;

/// log2 of the span one entry covers, by span code: 4 KiB, 2 MiB and 1 GiB pages (TLB entries)
/// and the 512 GiB of a PGD entry (walk-cache entries use codes 1 to 3).
pub(super) const SPAN_SHIFTS: [u32; 4] = [12, 21, 30, 39];

/// Bits of a way number in a victim's rank key (at most 4096 ways; stamps stay below 2^52).
pub(super) const WAY_BITS: u32 = 12;

/// A page size a TLB array may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PageSize {
    Size4K = 0,
    Size2M = 1,
    Size1G = 2,
}

impl PageSize {
    pub fn shift(self) -> u32 {
        SPAN_SHIFTS[self as usize]
    }

    pub fn name(self) -> &'static str {
        ["4K", "2M", "1G"][self as usize]
    }

    pub(super) fn of_level(level: Level) -> PageSize {
        match level {
            Level::Pte => PageSize::Size4K,
            Level::Pmd => PageSize::Size2M,
            Level::Pud | Level::Pgd => PageSize::Size1G,
        }
    }
}

/// Page-size sets for [`ArrayGeometry::sizes`].
pub mod sizes {
    pub const K4: u8 = 1 << 0;
    pub const M2: u8 = 1 << 1;
    pub const G1: u8 = 1 << 2;
    pub const ALL: u8 = K4 | M2 | G1;
}

/// How an array picks its victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// True least-recently-used within the set.
    Lru,
    /// One MRU bit per entry; the first entry with a clear bit is the victim, and when a touch
    /// would set every bit of the set the others are cleared (bit-PLRU).
    BitPlru,
}

/// One set-associative array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayGeometry {
    pub entries: u32,
    /// Ways per set; `ways == entries` is fully associative.
    pub ways: u32,
    /// The page sizes held ([`sizes`]); unused for walk caches.
    pub sizes: u8,
    pub replacement: Replacement,
}

impl ArrayGeometry {
    /// An LRU array.
    pub const fn new(entries: u32, ways: u32, sizes: u8) -> ArrayGeometry {
        ArrayGeometry { entries, ways, sizes, replacement: Replacement::Lru }
    }

    /// A fully associative LRU array.
    pub const fn full(entries: u32, sizes: u8) -> ArrayGeometry {
        ArrayGeometry::new(entries, entries, sizes)
    }

    pub const fn plru(self) -> ArrayGeometry {
        ArrayGeometry { replacement: Replacement::BitPlru, ..self }
    }

    fn validate(&self, what: &str) -> Result<(), String> {
        let sets = self.entries.checked_div(self.ways).unwrap_or(0);
        if self.entries == 0 || sets == 0 || sets * self.ways != self.entries {
            return Err(format!(
                "{what}: {} entries do not divide into {}-way sets",
                self.entries, self.ways
            ));
        }
        if !sets.is_power_of_two() {
            return Err(format!("{what}: {sets} sets is not a power of two"));
        }
        if self.ways > 1 << WAY_BITS {
            return Err(format!("{what}: {} ways (at most {})", self.ways, 1 << WAY_BITS));
        }
        Ok(())
    }
}

/// The second translation level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecondLevel {
    /// One STLB for instructions and data (Intel, Cortex-A76).
    Unified(Vec<ArrayGeometry>),
    /// Separate L2 instruction and data TLBs (AMD Zen).
    Split { instr: Vec<ArrayGeometry>, data: Vec<ArrayGeometry> },
}

/// The translation hardware of one CPU, as a machine profile describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlbGeometry {
    /// The core it follows ("AMD Zen 5").
    pub core: &'static str,
    /// Where the figures come from.
    pub source: &'static str,
    pub itlb: Vec<ArrayGeometry>,
    pub dtlb: Vec<ArrayGeometry>,
    pub l2: SecondLevel,
    /// Walk caches for PGD, PUD and PMD entries (the PML4E, PDPTE and PDE caches).
    pub pwc: [ArrayGeometry; 3],
    /// ASID slots per CPU the kernel uses.
    pub asid_slots: u32,
    pub clock_mhz: u32,
    /// Extra latency of a first-level miss that hits the second level.
    pub l2_hit_cycles: u32,
    /// Latency of each page-table entry a walk reads.
    pub walk_ref_cycles: u32,
    /// Bytes of one instruction fetch, a power of two: the front end looks the first-level
    /// instruction TLB up once per aligned fetch block it fetches, not per instruction (a taken
    /// branch starts a new fetch). 0: one lookup per instruction.
    pub fetch_bytes: u32,
}

impl TlbGeometry {
    /// Checks that every array is realisable.
    pub fn validate(&self) -> Result<(), String> {
        let (l2i, l2d) = self.l2_sides();
        for (what, arrays) in
            [("itlb", &self.itlb), ("dtlb", &self.dtlb), ("l2 itlb", l2i), ("l2 dtlb", l2d)]
        {
            for a in arrays {
                a.validate(what)?;
            }
        }
        for a in &self.pwc {
            a.validate("walk cache")?;
        }
        if self.asid_slots == 0 || self.asid_slots > 4096 || self.clock_mhz == 0 {
            return Err("a TLB needs 1 to 4096 ASID slots and a clock".into());
        }
        if self.fetch_bytes != 0 && (!self.fetch_bytes.is_power_of_two() || self.fetch_bytes > 4096)
        {
            return Err(format!(
                "fetch block of {} bytes: expected 0 or a power of two up to 4096",
                self.fetch_bytes
            ));
        }
        Ok(())
    }

    fn l2_sides(&self) -> (&Vec<ArrayGeometry>, &Vec<ArrayGeometry>) {
        match &self.l2 {
            SecondLevel::Unified(a) => (a, a),
            SecondLevel::Split { instr, data } => (instr, data),
        }
    }

    /// Cycles as virtual time (rounded down; callers carry the remainder).
    pub(super) fn cycles_to_ns(&self, cycles: u64) -> u64 {
        cycles * 1000 / u64::from(self.clock_mhz)
    }
}
