//! x86-64 four-level page tables (`arch/x86/include/asm/pgtable_types.h`,
//! `arch/x86/include/asm/pgtable_64_types.h`, Linux v6.8): PGD -> PUD -> PMD -> PTE, 512 entries
//! per table, with PMD (2 MiB) and PUD (1 GiB) leaves.
//!
//! Entries use x86's bit positions (present 0, RW 1, user 2, accessed 5, dirty 6, PSE 7, the
//! software `special` bit 9, soft-dirty 11, NX 63). A non-leaf entry holds the id of the table it
//! points to where hardware holds its physical address; each table is still backed by one
//! simulated frame, so page tables cost simulated memory (`PageTables` in meminfo) as in Linux.
//! A non-present, non-zero PTE is a swap entry: offset in bits 12-56, type in bits 57-61, with the
//! swap soft-dirty (bit 7) and exclusive (bit 3, `_PAGE_SWP_EXCLUSIVE`) bits. The last type,
//! `SWP_PTE_MARKER` (31 on x86-64: 32 types less the device, migration, hardware-poison and
//! marker ones leave `MAX_SWAPFILES` = 24, and the marker type comes after the other 7), is no
//! swap device's: its offset holds marker bits (`include/linux/swapops.h`). The only marker
//! modelled is `PTE_MARKER_GUARD` (bit 2, v6.13, 662df3e5c376), a guard region's page
//! (`madvise.rs`). [`Pte::is_swap`] is a swap device's entry; the kernel's `is_swap_pte`, any
//! non-present entry, is [`Pte::is_swap_pte`].
//!
//! Locks: each PTE and PMD table has its split page-table lock (`ptlock`, one lockdep class for
//! both, as `ptlock_init` gives them); the upper levels are populated under
//! `mm->page_table_lock`. This module holds the data; the mechanisms take the locks.

use crate::types::ids::PtId;
use engine::SpinLock;
use simcore::{Bytes, Pfn, VirtAddr};

pub const PTRS_PER_TABLE: usize = 512;

/// Top of the user address space (`TASK_SIZE_MAX` with 4-level paging).
pub const TASK_SIZE: u64 = 0x7fff_ffff_f000;

/// The kind of user access a translation is for (the x86 page-fault error code's `W` and `I`
/// bits): what the TLB, the page walk and the fault handler check a PTE's permissions against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// An instruction fetch.
    Exec,
}

impl Access {
    pub fn is_write(self) -> bool {
        self == Access::Write
    }
}

/// Table levels, named as in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Pte = 1,
    Pmd = 2,
    Pud = 3,
    Pgd = 4,
}

impl Level {
    pub fn shift(self) -> u32 {
        12 + 9 * (self as u32 - 1)
    }

    /// The entry index of `addr` in a table of this level.
    pub fn index(self, addr: VirtAddr) -> usize {
        ((addr.0 >> self.shift()) & 511) as usize
    }

    /// log2 of the address span that one table of this level covers.
    pub fn table_span_shift(self) -> u32 {
        self.shift() + 9
    }

    pub fn below(self) -> Level {
        match self {
            Level::Pgd => Level::Pud,
            Level::Pud => Level::Pmd,
            Level::Pmd => Level::Pte,
            Level::Pte => panic!("no level below PTE"),
        }
    }
}

/// A leaf entry (a PTE, or a PMD/PUD that maps a huge page) or a swap entry.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Pte(pub u64);

impl Pte {
    pub const PRESENT: u64 = 1 << 0;
    pub const RW: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    pub const PSE: u64 = 1 << 7;
    pub const SPECIAL: u64 = 1 << 9;
    pub const SOFT_DIRTY: u64 = 1 << 11;
    /// `_PAGE_UFFD_WP` (x86's software bit 10, v5.7): a userfaultfd write-protected the page.
    pub const UFFD_WP: u64 = 1 << 10;
    pub const NX: u64 = 1 << 63;
    const PFN_MASK: u64 = ((1 << 52) - 1) & !0xfff;
    /// Swap entries (not present).
    pub const SWP_EXCLUSIVE: u64 = 1 << 3;
    pub const SWP_SOFT_DIRTY: u64 = 1 << 7;
    /// The swap type of PTE markers, and the guard marker's bit in their offset.
    const SWP_PTE_MARKER: u64 = 31;
    const PTE_MARKER_GUARD: u64 = 1 << 2;
    /// `_PAGE_SWP_UFFD_WP` (bit 2 of a swap entry, v5.7).
    pub const SWP_UFFD_WP: u64 = 1 << 2;

    pub const NONE: Pte = Pte(0);

    /// A present mapping of `pfn` with the given bits.
    pub fn new(pfn: Pfn, bits: u64) -> Pte {
        debug_assert_eq!(bits & Pte::PFN_MASK, 0);
        Pte((pfn.0 << 12) | bits | Pte::PRESENT)
    }

    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    pub fn is_present(self) -> bool {
        self.0 & Pte::PRESENT != 0
    }

    /// The kernel's `is_swap_pte`: any entry neither none nor present (a swap entry or a PTE
    /// marker).
    pub fn is_swap_pte(self) -> bool {
        !self.is_none() && !self.is_present()
    }

    /// A swap device's entry (not a PTE marker).
    pub fn is_swap(self) -> bool {
        self.is_swap_pte() && (self.0 >> 57) & 31 != Pte::SWP_PTE_MARKER
    }

    /// A PTE marker (`is_pte_marker`).
    pub fn is_marker(self) -> bool {
        self.is_swap_pte() && (self.0 >> 57) & 31 == Pte::SWP_PTE_MARKER
    }

    /// A guard region's marker (`is_guard_swp_entry`).
    pub fn is_guard(self) -> bool {
        self.is_marker() && (self.0 >> 12) & Pte::PTE_MARKER_GUARD != 0
    }

    /// `make_pte_marker(PTE_MARKER_GUARD)`.
    pub fn guard_marker() -> Pte {
        Pte((Pte::SWP_PTE_MARKER << 57) | (Pte::PTE_MARKER_GUARD << 12))
    }

    /// The frame of a present entry that maps a normal page (`vm_normal_page`'s test: not a
    /// special one such as the zero page).
    pub fn normal_pfn(self) -> Option<Pfn> {
        (self.is_present() && !self.special()).then(|| self.pfn())
    }

    pub fn pfn(self) -> Pfn {
        debug_assert!(self.is_present());
        Pfn((self.0 & Pte::PFN_MASK) >> 12)
    }

    fn has(self, bit: u64) -> bool {
        self.0 & bit != 0
    }

    pub fn write(self) -> bool {
        self.has(Pte::RW)
    }

    pub fn dirty(self) -> bool {
        self.has(Pte::DIRTY)
    }

    pub fn young(self) -> bool {
        self.has(Pte::ACCESSED)
    }

    pub fn special(self) -> bool {
        self.has(Pte::SPECIAL)
    }

    pub fn soft_dirty(self) -> bool {
        if self.is_present() { self.has(Pte::SOFT_DIRTY) } else { self.has(Pte::SWP_SOFT_DIRTY) }
    }

    /// `pte_uffd_wp` (or `pte_swp_uffd_wp` of a swap entry).
    pub fn uffd_wp(self) -> bool {
        if self.is_present() { self.has(Pte::UFFD_WP) } else { self.has(Pte::SWP_UFFD_WP) }
    }

    /// `pte_mkuffd_wp` (write-protected as well) or `pte_swp_mkuffd_wp`; `pte_clear_uffd_wp`
    /// or `pte_swp_clear_uffd_wp` when `on` is false.
    pub fn with_uffd_wp(self, on: bool) -> Pte {
        let bit = if self.is_present() { Pte::UFFD_WP } else { Pte::SWP_UFFD_WP };
        match (on, self.is_present()) {
            (true, true) => self.with(bit).wrprotect(),
            (true, false) => self.with(bit),
            (false, _) => self.without(bit),
        }
    }

    pub fn huge(self) -> bool {
        self.has(Pte::PSE)
    }

    pub fn with(self, bits: u64) -> Pte {
        Pte(self.0 | bits)
    }

    pub fn without(self, bits: u64) -> Pte {
        Pte(self.0 & !bits)
    }

    /// `pte_wrprotect`.
    pub fn wrprotect(self) -> Pte {
        self.without(Pte::RW)
    }

    /// A swap entry for `(swap type, offset)`; offset 0 is a device's header, never an entry.
    pub fn swap(kind: u8, offset: u64, exclusive: bool, soft_dirty: bool) -> Pte {
        assert!(
            u64::from(kind) < Pte::SWP_PTE_MARKER && offset < (1 << 45),
            "swap entry out of range"
        );
        assert!(offset > 0, "swap offset 0 is the device's header");
        let mut v = (u64::from(kind) << 57) | (offset << 12);
        if exclusive {
            v |= Pte::SWP_EXCLUSIVE;
        }
        if soft_dirty {
            v |= Pte::SWP_SOFT_DIRTY;
        }
        Pte(v)
    }

    /// `(type, offset)` of a swap entry.
    pub fn swap_entry(self) -> (u8, u64) {
        debug_assert!(self.is_swap_pte());
        (((self.0 >> 57) & 31) as u8, (self.0 >> 12) & ((1 << 45) - 1))
    }

    pub fn swap_exclusive(self) -> bool {
        self.is_swap() && self.has(Pte::SWP_EXCLUSIVE)
    }
}

impl std::fmt::Debug for Pte {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_none() {
            return f.write_str("none");
        }
        if self.is_guard() {
            return f.write_str("guard marker");
        }
        if self.is_swap() {
            let (t, o) = self.swap_entry();
            return write!(
                f,
                "swap({t}:{o:#x}{})",
                if self.swap_exclusive() { " excl" } else { "" }
            );
        }
        write!(f, "pfn {}", self.pfn())?;
        for (bit, name) in [
            (Pte::RW, " rw"),
            (Pte::DIRTY, " dirty"),
            (Pte::ACCESSED, " young"),
            (Pte::SPECIAL, " special"),
            (Pte::SOFT_DIRTY, " soft-dirty"),
            (Pte::UFFD_WP, " uffd-wp"),
            (Pte::PSE, " huge"),
        ] {
            if self.has(bit) {
                f.write_str(name)?;
            }
        }
        Ok(())
    }
}

/// An entry of an upper-level table, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upper {
    None,
    Table(PtId),
    /// A huge leaf (`pmd_trans_huge`, `pud_leaf`).
    Leaf(Pte),
}

impl std::fmt::Display for Upper {
    /// An upper-level entry as a page-table dump reads it: `none`, the PTE table it points at,
    /// or a huge leaf with its PFN and bits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upper::None => f.write_str("none"),
            Upper::Table(t) => write!(f, "table (page table {t})"),
            Upper::Leaf(e) => write!(f, "huge {e:?}"),
        }
    }
}

const TABLE_BITS: u64 = Pte::PRESENT | Pte::RW | Pte::USER;

fn decode_upper(raw: u64) -> Upper {
    let e = Pte(raw);
    if e.is_none() {
        Upper::None
    } else if e.huge() || !e.is_present() {
        Upper::Leaf(e)
    } else {
        Upper::Table(PtId((raw >> 12) as u32))
    }
}

/// Bits a narrow entry keeps: x86's low flag bits 0-3, 5-7, 9 and 11 and NX (bit 63); any other
/// bit below 12, or bit 62, makes the table wide.
const NARROW_UNSUPPORTED: u64 = (1 << 4) | (1 << 8) | (1 << 10) | (1 << 62);
/// Bits 12-61 of an entry: a present entry's pfn, a swap entry's offset and type.
const PAYLOAD_MASK: u64 = (1 << 50) - 1;
/// Payload bits a narrow entry holds; the rest are the table's `hi` for that kind of entry.
const NARROW_PAYLOAD_BITS: u32 = 22;
const NARROW_FLAG_BITS: u32 = 10;

/// The ten flag bits of an entry, packed into bits 0-9 (present stays bit 0).
fn pack_flags(raw: u64) -> u32 {
    ((raw & 0xf) | ((raw >> 1) & 0x70) | ((raw >> 2) & 0x80) | ((raw >> 3) & 0x100)) as u32
        | ((raw >> 54) & 0x200) as u32
}

fn unpack_flags(n: u32) -> u64 {
    let n = u64::from(n);
    (n & 0xf) | ((n & 0x70) << 1) | ((n & 0x80) << 2) | ((n & 0x100) << 3) | ((n & 0x200) << 54)
}

/// Step bits of a compact entry, above its ten flag bits.
const COMPACT_STEP_BITS: u32 = 6;
/// A compact table's base for a kind of entry sits this far below the first such entry's
/// `payload - index`, so that later entries may step a little below it as well as above.
const COMPACT_SLACK: u64 = 32;

/// A table's entries. Upper-level tables hold the hardware's 8-byte entries. A PTE table starts
/// uniform: a bitmap of its non-none entries and one entry `at0` such that the entry at index
/// `i` is `at0` with `i` added to its payload (pfn, or swap offset), so every entry has the same
/// flag bits and maps the next frame (or slot) after its neighbour's: 64 bytes a table, what a
/// first-touch sequence that writes 512 consecutive pages leaves. An entry that does not fit
/// makes it compact: 2 bytes per entry, the flag bits packed and a 6-bit step, the entry at index
/// `i` holding payload `base + i + step`, with one base per table for present entries
/// (`base[1]`) and one for swap entries (`base[0]`): a page-table frame allocated among the
/// pages moves the step by one. An entry that does not fit makes the table narrow: 4 bytes per
/// entry, the flag bits and the low 22 bits of the payload, the high bits shared by the table's
/// present entries (`hi[1]`) and by its swap entries (`hi[0]`), as 512 pages usually come from
/// one 16 GiB region; an entry that does not fit that either makes it wide. A table keeps the
/// widest form it needed for the rest of its life; the entries read the same in every form, so
/// this is host memory only (the simulated table is still one 4 KiB frame).
#[derive(Debug)]
enum Entries {
    Wide(Box<[u64; PTRS_PER_TABLE]>),
    Narrow { hi: [Option<u64>; 2], e: Box<[u32; PTRS_PER_TABLE]> },
    Compact { base: [Option<u64>; 2], e: Box<[u16; PTRS_PER_TABLE]> },
    Uniform { at0: u64, set: Box<[u64; PTRS_PER_TABLE / 64]> },
}

impl Entries {
    fn get(&self, idx: usize) -> u64 {
        match self {
            Entries::Wide(e) => e[idx],
            Entries::Narrow { hi, e } => {
                let n = e[idx];
                if n == 0 {
                    return 0;
                }
                let high = hi[(n & 1) as usize].expect("narrow entry without its high bits");
                let payload = (high << NARROW_PAYLOAD_BITS) | u64::from(n >> NARROW_FLAG_BITS);
                unpack_flags(n) | (payload << 12)
            }
            Entries::Compact { base, e } => {
                let n = u32::from(e[idx]);
                if n == 0 {
                    return 0;
                }
                let b = base[(n & 1) as usize].expect("compact entry without its base");
                let step = u64::from(n >> NARROW_FLAG_BITS);
                unpack_flags(n) | (b.wrapping_add(idx as u64).wrapping_add(step) << 12)
            }
            Entries::Uniform { at0, set } => {
                let present = set[idx / 64] & (1 << (idx % 64)) != 0;
                if present { at0.wrapping_add((idx as u64) << 12) } else { 0 }
            }
        }
    }

    /// Stores `raw` at `idx`; `empty` says the table holds no other entry.
    fn set(&mut self, idx: usize, raw: u64, empty: bool) {
        let fits = match self {
            Entries::Wide(e) => {
                e[idx] = raw;
                true
            }
            Entries::Narrow { hi, e } => {
                if empty {
                    *hi = [None, None];
                }
                Entries::narrow(hi, raw).map(|n| e[idx] = n).is_some()
            }
            Entries::Compact { base, e } => {
                if empty {
                    *base = [None, None];
                }
                Entries::compact(base, idx, raw).map(|n| e[idx] = n).is_some()
            }
            Entries::Uniform { at0, set } => {
                let bit = 1 << (idx % 64);
                set[idx / 64] &= !bit;
                let at = raw.wrapping_sub((idx as u64) << 12);
                if empty {
                    *at0 = at;
                }
                if raw != 0 && at == *at0 {
                    set[idx / 64] |= bit;
                }
                raw == 0 || at == *at0
            }
        };
        if !fits {
            *self = self.widened(idx, raw);
        }
    }

    /// The entries with `raw` at `idx`, in the narrowest wider form that holds them all.
    fn widened(&self, idx: usize, raw: u64) -> Entries {
        let entry = |i: usize| if i == idx { raw } else { self.get(i) };
        if let Entries::Uniform { .. } = self {
            let (mut base, mut e) = ([None, None], Box::new([0u16; PTRS_PER_TABLE]));
            if fill(&mut e, |i| Entries::compact(&mut base, i, entry(i))) {
                return Entries::Compact { base, e };
            }
        }
        if let Entries::Uniform { .. } | Entries::Compact { .. } = self {
            let (mut hi, mut e) = ([None, None], Box::new([0u32; PTRS_PER_TABLE]));
            if fill(&mut e, |i| Entries::narrow(&mut hi, entry(i))) {
                return Entries::Narrow { hi, e };
            }
        }
        let mut wide = Box::new([0u64; PTRS_PER_TABLE]);
        fill(&mut wide, |i| Some(entry(i)));
        Entries::Wide(wide)
    }

    /// `raw` as a narrow entry of a table whose high bits are `hi` (claiming them if unset).
    fn narrow(hi: &mut [Option<u64>; 2], raw: u64) -> Option<u32> {
        if raw == 0 {
            return Some(0);
        }
        if raw & NARROW_UNSUPPORTED != 0 {
            return None;
        }
        let flags = pack_flags(raw);
        let payload = (raw >> 12) & PAYLOAD_MASK;
        let high = hi[(flags & 1) as usize].get_or_insert(payload >> NARROW_PAYLOAD_BITS);
        let lo = (payload & ((1 << NARROW_PAYLOAD_BITS) - 1)) as u32;
        let n = flags | (lo << NARROW_FLAG_BITS);
        (*high == payload >> NARROW_PAYLOAD_BITS && n != 0).then_some(n)
    }

    /// `raw` at `idx` as a compact entry of a table whose bases are `base` (claiming them if
    /// unset).
    fn compact(base: &mut [Option<u64>; 2], idx: usize, raw: u64) -> Option<u16> {
        if raw == 0 {
            return Some(0);
        }
        if raw & NARROW_UNSUPPORTED != 0 {
            return None;
        }
        let flags = pack_flags(raw);
        let at = ((raw >> 12) & PAYLOAD_MASK).wrapping_sub(idx as u64);
        let b = base[(flags & 1) as usize].get_or_insert(at.wrapping_sub(COMPACT_SLACK));
        let step = at.wrapping_sub(*b);
        let n = flags | ((step as u32) << NARROW_FLAG_BITS);
        (step < 1 << COMPACT_STEP_BITS && n != 0).then_some(n as u16)
    }

    fn host_bytes(&self) -> usize {
        match self {
            Entries::Wide(_) => PTRS_PER_TABLE * 8,
            Entries::Narrow { .. } => PTRS_PER_TABLE * 4,
            Entries::Compact { .. } => PTRS_PER_TABLE * 2,
            Entries::Uniform { .. } => PTRS_PER_TABLE / 8,
        }
    }
}

/// Fills `e` with `f` of each index; false as soon as `f` finds an entry that does not fit.
fn fill<T>(e: &mut [T; PTRS_PER_TABLE], mut f: impl FnMut(usize) -> Option<T>) -> bool {
    e.iter_mut().enumerate().all(|(i, n)| f(i).map(|v| *n = v).is_some())
}

/// One page-table page.
#[derive(Debug)]
pub struct Table {
    entries: Entries,
    pub level: Level,
    /// The simulated frame that backs it.
    pub pfn: Pfn,
    /// Non-none entries.
    pub used: u16,
}

#[derive(Debug)]
struct Slot {
    table: Option<Table>,
    /// The split page-table lock; kept with the slot when the table is freed and reused.
    ptl: SpinLock,
}

/// Every page-table page of the machine.
#[derive(Debug, Default)]
pub struct PageTables {
    slots: Vec<Slot>,
    free_ids: Vec<u32>,
    live: u64,
}

impl PageTables {
    /// Installs a new empty table backed by `pfn`; `new_lock` creates a ptlock for a new slot.
    pub(crate) fn alloc(
        &mut self,
        level: Level,
        pfn: Pfn,
        new_lock: impl FnOnce() -> SpinLock,
    ) -> PtId {
        let entries = if level == Level::Pte {
            Entries::Uniform { at0: 0, set: Box::new([0; PTRS_PER_TABLE / 64]) }
        } else {
            Entries::Wide(Box::new([0; PTRS_PER_TABLE]))
        };
        let table = Table { entries, level, pfn, used: 0 };
        self.live += 1;
        if let Some(id) = self.free_ids.pop() {
            let slot = &mut self.slots[id as usize];
            debug_assert!(slot.table.is_none());
            slot.table = Some(table);
            return PtId(id);
        }
        self.slots.push(Slot { table: Some(table), ptl: new_lock() });
        PtId(u32::try_from(self.slots.len() - 1).expect("page-table id"))
    }

    /// Frees an empty table; returns its backing frame.
    pub(crate) fn free(&mut self, id: PtId) -> Pfn {
        let t = self.slots[id.0 as usize].table.take().expect("double free of a page table");
        assert_eq!(t.used, 0, "freeing a page table with {} entries", t.used);
        self.free_ids.push(id.0);
        self.live -= 1;
        t.pfn
    }

    /// Whether table `id` is allocated (a lockless walker may hold the id of a freed one).
    pub fn is_live(&self, id: PtId) -> bool {
        self.slots.get(id.0 as usize).is_some_and(|s| s.table.is_some())
    }

    pub fn table(&self, id: PtId) -> &Table {
        self.slots[id.0 as usize].table.as_ref().expect("use of a freed page table")
    }

    fn table_mut(&mut self, id: PtId) -> &mut Table {
        self.slots[id.0 as usize].table.as_mut().expect("use of a freed page table")
    }

    pub fn ptl(&self, id: PtId) -> SpinLock {
        self.slots[id.0 as usize].ptl
    }

    /// Live page-table pages.
    pub fn live(&self) -> u64 {
        self.live
    }

    pub fn host_bytes(&self) -> usize {
        let entries: usize = self
            .slots
            .iter()
            .filter_map(|s| s.table.as_ref())
            .map(|t| t.entries.host_bytes())
            .sum();
        self.slots.len() * size_of::<Slot>() + entries
    }

    pub fn pte(&self, id: PtId, idx: usize) -> Pte {
        let t = self.table(id);
        debug_assert_eq!(t.level, Level::Pte);
        Pte(t.entries.get(idx))
    }

    pub(crate) fn set_pte(&mut self, id: PtId, idx: usize, pte: Pte) {
        let t = self.table_mut(id);
        debug_assert_eq!(t.level, Level::Pte);
        let old = t.entries.get(idx);
        t.used = t.used + u16::from(old == 0 && pte.0 != 0) - u16::from(old != 0 && pte.0 == 0);
        t.entries.set(idx, pte.0, t.used == u16::from(pte.0 != 0));
    }

    pub fn upper(&self, id: PtId, idx: usize) -> Upper {
        let t = self.table(id);
        debug_assert_ne!(t.level, Level::Pte);
        decode_upper(t.entries.get(idx))
    }

    pub(crate) fn set_upper(&mut self, id: PtId, idx: usize, e: Upper) {
        let raw = match e {
            Upper::None => 0,
            Upper::Table(t) => (u64::from(t.0) << 12) | TABLE_BITS,
            Upper::Leaf(pte) => pte.0,
        };
        let t = self.table_mut(id);
        debug_assert_ne!(t.level, Level::Pte);
        let old = t.entries.get(idx);
        t.used = t.used + u16::from(old == 0 && raw != 0) - u16::from(old != 0 && raw == 0);
        t.entries.set(idx, raw, t.used == u16::from(raw != 0));
    }

    /// Walks from `pgd` down to the table of `level` that covers `addr`, if it exists.
    pub fn find_table(&self, pgd: PtId, addr: VirtAddr, level: Level) -> Option<PtId> {
        let mut table = pgd;
        let mut l = Level::Pgd;
        while l > level {
            match self.upper(table, l.index(addr)) {
                Upper::Table(next) => table = next,
                Upper::None | Upper::Leaf(_) => return None,
            }
            l = l.below();
        }
        Some(table)
    }

    /// The PTE mapping `addr`: `(pte table, index)` when a PTE table covers it.
    pub fn pte_slot(&self, pgd: PtId, addr: VirtAddr) -> Option<(PtId, usize)> {
        self.find_table(pgd, addr, Level::Pte).map(|t| (t, Level::Pte.index(addr)))
    }

    /// The PMD entry covering `addr`: `(pmd table, index)` when a PMD table covers it.
    pub fn pmd_slot(&self, pgd: PtId, addr: VirtAddr) -> Option<(PtId, usize)> {
        self.find_table(pgd, addr, Level::Pmd).map(|t| (t, Level::Pmd.index(addr)))
    }

    /// Where a walk that found nothing at `addr` goes next: the end of the widest empty
    /// upper-level entry covering `addr` (a page further where a PTE table covers it), so that a
    /// walk over a sparse range steps over what no table covers, as `walk_page_range` skips
    /// `pmd_none` and `pud_none` entries (mm/pagewalk.c v6.8).
    pub fn skip_empty(&self, pgd: PtId, addr: VirtAddr) -> VirtAddr {
        let mut table = pgd;
        let mut l = Level::Pgd;
        while l > Level::Pte {
            match self.upper(table, l.index(addr)) {
                Upper::Table(next) => table = next,
                Upper::Leaf(_) => break,
                Upper::None => {
                    let span = 1u64 << l.shift();
                    return VirtAddr((addr.0 & !(span - 1)).saturating_add(span));
                }
            }
            l = l.below();
        }
        addr + Bytes::PAGE
    }

    /// What maps `addr`: a PTE, or a PMD or PUD leaf, or nothing.
    pub fn translate(&self, pgd: PtId, addr: VirtAddr) -> Option<(Pte, Level)> {
        let pud_t = self.find_table(pgd, addr, Level::Pud)?;
        if let Upper::Leaf(e) = self.upper(pud_t, Level::Pud.index(addr)) {
            return Some((e, Level::Pud));
        }
        let (pmd_t, pmd_i) = self.pmd_slot(pgd, addr)?;
        match self.upper(pmd_t, pmd_i) {
            Upper::None => None,
            Upper::Leaf(e) => Some((e, Level::Pmd)),
            Upper::Table(pt) => {
                let pte = self.pte(pt, Level::Pte.index(addr));
                (!pte.is_none()).then_some((pte, Level::Pte))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pte_bits_round_trip() {
        let p = Pte::new(Pfn(0x1234), Pte::RW | Pte::DIRTY | Pte::USER);
        assert!(p.is_present() && p.write() && p.dirty() && !p.young());
        assert_eq!(p.pfn(), Pfn(0x1234));
        assert!(!p.wrprotect().write());
        let s = Pte::swap(3, 0xabcdef, true, true);
        assert!(s.is_swap() && s.swap_exclusive() && s.soft_dirty());
        assert_eq!(s.swap_entry(), (3, 0xabcdef));
        assert_eq!(format!("{p:?}"), "pfn 0x1234 rw dirty");
        let g = Pte::guard_marker();
        assert!(g.is_guard() && g.is_marker() && g.is_swap_pte() && !g.is_swap());
        assert!(!s.is_marker() && !s.is_guard() && !p.is_swap_pte());
        assert_eq!(g.swap_entry(), (31, 4));
        assert_eq!(format!("{g:?}"), "guard marker");
    }

    #[test]
    fn narrow_entries_read_back_and_widen() {
        let mut t = Entries::Narrow { hi: [None, None], e: Box::new([0; PTRS_PER_TABLE]) };
        let near = Pte::new(Pfn(0x40_1234), Pte::RW | Pte::USER | Pte::NX | Pte::SOFT_DIRTY);
        let swap = Pte::swap(3, 0xabcdef, true, true);
        let special = Pte::new(Pfn(0x40_0000), Pte::SPECIAL | Pte::ACCESSED | Pte::DIRTY);
        for (i, p) in [near, swap, special].into_iter().enumerate() {
            t.set(i, p.0, i == 0);
        }
        assert!(matches!(t, Entries::Narrow { .. }));
        assert_eq!([t.get(0), t.get(1), t.get(2)], [near.0, swap.0, special.0]);
        let far = Pte::new(Pfn(0x80_0000), Pte::RW);
        t.set(3, far.0, false);
        assert!(matches!(t, Entries::Wide(_)));
        assert_eq!([t.get(0), t.get(1), t.get(2), t.get(3)], [near.0, swap.0, special.0, far.0]);
    }

    #[test]
    fn uniform_entries_until_one_differs() {
        let mut t = Entries::Uniform { at0: 0, set: Box::new([0; PTRS_PER_TABLE / 64]) };
        let bits = Pte::RW | Pte::USER | Pte::NX | Pte::DIRTY | Pte::ACCESSED;
        for i in [7, 8, 9, 200] {
            t.set(i, Pte::new(Pfn(0x1000 + i as u64), bits).0, i == 7);
        }
        t.set(8, 0, false);
        assert!(matches!(t, Entries::Uniform { .. }), "consecutive frames, the same flags");
        assert_eq!(
            (t.get(7), t.get(8), t.get(200)),
            (Pte::new(Pfn(0x1007), bits).0, 0, Pte::new(Pfn(0x10c8), bits).0)
        );
        let old = Pte::new(Pfn(0x1009), bits & !Pte::DIRTY).0;
        t.set(9, old, false);
        assert!(matches!(t, Entries::Compact { .. }), "other flags make it compact");
        assert_eq!(
            (t.get(7), t.get(9), t.get(200)),
            (Pte::new(Pfn(0x1007), bits).0, old, Pte::new(Pfn(0x10c8), bits).0)
        );
    }

    #[test]
    fn compact_entries_step_then_narrow() {
        let mut t = Entries::Compact { base: [None, None], e: Box::new([0; PTRS_PER_TABLE]) };
        let bits = Pte::RW | Pte::USER | Pte::NX | Pte::DIRTY;
        let run: Vec<Pte> = (0..8).map(|i| Pte::new(Pfn(0x40_1000 + i + i / 4), bits)).collect();
        let swap = Pte::swap(3, 0xabcdef, true, false);
        for (i, p) in run.iter().chain([&swap]).enumerate() {
            t.set(i + 100, p.0, i == 0);
        }
        assert!(matches!(t, Entries::Compact { .. }), "a step of one frame fits");
        let read: Vec<u64> = (100..109).map(|i| t.get(i)).collect();
        let want: Vec<u64> = run.iter().chain([&swap]).map(|p| p.0).collect();
        assert_eq!(read, want);
        let apart = Pte::new(Pfn(0x40_2000), Pte::RW);
        t.set(300, apart.0, false);
        assert!(matches!(t, Entries::Narrow { .. }), "a frame far from the run narrows");
        assert_eq!((t.get(103), t.get(108), t.get(300), t.get(0)), (run[3].0, swap.0, apart.0, 0));
        let mut w = Entries::Compact { base: [None, None], e: Box::new([0; PTRS_PER_TABLE]) };
        w.set(0, run[0].0, true);
        w.set(1, Pte::new(Pfn(0x1_0000_0000), Pte::RW).0, false);
        assert!(matches!(w, Entries::Wide(_)), "entries no narrow table holds");
        assert_eq!(w.get(0), run[0].0);
    }

    #[test]
    fn indices_follow_x86() {
        let a = VirtAddr(0x7f12_3456_7000);
        assert_eq!(Level::Pgd.index(a), 0xfe);
        assert_eq!(Level::Pud.index(a), 0x48);
        assert_eq!(Level::Pmd.index(a), 0x1a2);
        assert_eq!(Level::Pte.index(a), 0x167);
        assert_eq!(Level::Pmd.shift(), 21);
    }

    #[test]
    fn upper_entries_decode() {
        assert_eq!(decode_upper(0), Upper::None);
        let t = (7u64 << 12) | TABLE_BITS;
        assert_eq!(decode_upper(t), Upper::Table(PtId(7)));
        let leaf = Pte::new(Pfn(512), Pte::PSE | Pte::RW);
        assert_eq!(decode_upper(leaf.0), Upper::Leaf(leaf));
    }
}
