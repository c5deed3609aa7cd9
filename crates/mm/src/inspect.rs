//! Inspection by kernel names: what a kernel developer reads with drgn or crash (a folio's
//! `_refcount`, `_mapcount`, `_pincount`, its `PG_*` flags, the PTE and PMD entries at an
//! address, the page-cache entry at a file index, `mapping->nr_thps`, a file's `f_mode`),
//! answered from the model's state, read-only. Every name is in [`FIELDS`], with what it
//! reads on (an address, a file index, a file, the machine) and the kernels that have it.
//!
//! Kernel sources, by name (Linux v6.8 unless said): `include/linux/mm_types.h` (`struct
//! folio`: `_refcount`, `_mapcount`, `_entire_mapcount`, `_pincount`), `include/linux/mm.h`
//! (`folio_mapcount`, `folio_order`, `folio_maybe_dma_pinned`), `include/linux/page-flags.h`
//! (`PG_locked`, `PG_referenced`, `PG_uptodate`, `PG_dirty`, `PG_lru`, `PG_active`,
//! `PG_workingset`, `PG_writeback`, `PG_swapbacked`, `PG_swapcache`, `PG_unevictable`;
//! `PageAnonExclusive` from v5.19, 6c287605fd56 "mm: remember exclusively mapped anonymous pages
//! with PG_anon_exclusive"), `arch/x86/include/asm/pgtable_types.h` (`_PAGE_RW`,
//! `_PAGE_DIRTY`, `_PAGE_ACCESSED`, `_PAGE_SPECIAL`, `_PAGE_SOFT_DIRTY`, `_PAGE_PSE`),
//! `include/linux/xarray.h` (`xa_is_value`: shadow and shmem swap entries), `fs/dax.c`
//! (`dax_is_zero_entry`, `dax_is_empty_entry`, `dax_is_pmd_entry`, `dax_is_locked`),
//! `include/linux/fs.h` (`f_mode`: `FMODE_READ`, `FMODE_WRITE`, `FMODE_EXEC`, `FMODE_RANDOM`,
//! and `FMODE_NOREUSE` from v6.3, 17e810229cb3 "mm: support POSIX_FADV_NOREUSE";
//! `struct file_ra_state`), `include/linux/mm_inline.h` (`folio_lru_gen`), `include/linux/mm.h`
//! (`vm_flags`: `VM_MIXEDMAP`, `VM_HUGEPAGE`).
//!
//! Lockdep (`kernel/locking/lockdep.c`; the engine's simulated lockdep, `engine::lock::lockdep`):
//! `lockdep.reports` counts its splats (0 is clean) and [`lockdep_report`] prints the first as
//! the kernel logs it (`debug_locks_off` stops the kernel after one; the model keeps counting,
//! once per class pair).
//!
//! Approximations, stated: `folio.pincount` is the model's exact count of FOLL_PIN pins. The
//! kernel keeps an exact `_pincount` only for large folios (`hpage_pinned_refcount` from v5.7,
//! 47e29d32afba, not verified; `folio->_pincount` since the folio conversion); for a small folio
//! a pin adds `GUP_PIN_COUNTING_BIAS` (1024) to `_refcount`, so drgn reads `_refcount / 1024`,
//! the same number while fewer than 1024 other references exist. The names say `folio` in every
//! era: before v5.16 the same fields sat in the head `struct page`. Of `struct file_ra_state`
//! the model keeps only `ra_pages` (readahead sizes each window from the fault or read that
//! starts it), so `file.ra.start`, `file.ra.size` and `file.ra.async_size` are refused as not
//! modelled rather than invented.

use crate::folio::pg;

use crate::fs::fmode;
use crate::kernel::KState;
use crate::memory::vm_normal_page;
use crate::pgtable::{Level, Pte, Upper};
use crate::types::fs::EntryKind;
use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::swap::ShadowSlot;
use crate::vma::VmFlags;
use crate::{KernelVersion, Switches};
use simcore::{Pfn, VirtAddr};
use std::fmt::Write;

/// What a field is read on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// An address of a process: the entries that map it and the folio they map.
    Addr,
    /// An index of a file's page cache: the entry there (and the folio, if one).
    Index,
    /// A file: its `address_space`.
    Mapping,
    /// An open file (`struct file`) of a process's descriptor.
    File,
    /// The machine.
    Global,
}

/// One inspectable name.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub target: Target,
    /// What it reads, for the documentation and the dump.
    pub doc: &'static str,
}

const fn f(name: &'static str, target: Target, doc: &'static str) -> Field {
    Field { name, target, doc }
}

/// The folio fields: read on the folio mapped at an address, or cached at a file index.
const FOLIO: [(&str, &str); 20] = [
    ("folio.refcount", "_refcount"),
    ("folio.mapcount", "folio_mapcount(): PTE mappings of all pages plus PMD mappings"),
    ("folio.entire_mapcount", "_entire_mapcount: PMD mappings"),
    ("page.mapcount", "page_mapcount() of the page itself (PTE mappings plus PMD mappings)"),
    ("folio.pincount", "FOLL_PIN pins (see the module notes for how the kernel reads them)"),
    ("folio.maybe_dma_pinned", "folio_maybe_dma_pinned()"),
    ("folio.order", "folio_order()"),
    ("folio.anon", "folio_test_anon()"),
    ("folio.anon_exclusive", "PageAnonExclusive() of the page (v5.19+)"),
    ("folio.locked", "PG_locked"),
    ("folio.referenced", "PG_referenced"),
    ("folio.uptodate", "PG_uptodate"),
    ("folio.dirty", "PG_dirty"),
    ("folio.lru", "PG_lru"),
    ("folio.active", "PG_active"),
    ("folio.workingset", "PG_workingset"),
    ("folio.writeback", "PG_writeback"),
    ("folio.swapbacked", "PG_swapbacked"),
    ("folio.swapcache", "PG_swapcache"),
    ("folio.unevictable", "PG_unevictable"),
];

/// Every name, with its target; the folio fields read on an address or a file index.
/// The `vma.VM_*` fields and the flag each reads.
const VM_FLAG_FIELDS: [(&str, u64); 12] = [
    ("vma.VM_MIXEDMAP", VmFlags::MIXEDMAP),
    ("vma.VM_HUGEPAGE", VmFlags::HUGEPAGE),
    ("vma.VM_LOCKED", VmFlags::LOCKED),
    ("vma.VM_DONTDUMP", VmFlags::DONTDUMP),
    ("vma.VM_NOHUGEPAGE", VmFlags::NOHUGEPAGE),
    ("vma.VM_SYNC", VmFlags::SYNC),
    ("vma.VM_LOCKONFAULT", VmFlags::LOCKONFAULT),
    ("vma.VM_SEALED", VmFlags::SEALED),
    ("vma.VM_UFFD_MISSING", VmFlags::UFFD_MISSING),
    ("vma.VM_UFFD_MINOR", VmFlags::UFFD_MINOR),
    ("vma.VM_UFFD_WP", VmFlags::UFFD_WP),
    ("vma.VM_MERGEABLE", VmFlags::MERGEABLE),
];

/// The flag an `inspect` field `vma.VM_*` reads.
pub fn vm_flag_field(field: &str) -> Option<u64> {
    VM_FLAG_FIELDS.iter().find(|(n, _)| *n == field).map(|(_, bit)| *bit)
}

pub const FIELDS: &[Field] = &[
    f("pfn", Target::Addr, "the page frame mapped at the address (pagemap's PFN)"),
    f("folio.gen", Target::Addr, "folio_lru_gen(): the multi-gen LRU generation (lru = mglru)"),
    f("folio.seq", Target::Addr, "the sequence number of the folio's generation (lru = mglru)"),
    f("folio.youngest", Target::Addr, "the folio is in the youngest generation, max_seq"),
    f("folio.oldest", Target::Addr, "the folio is in its type's oldest generation, min_seq"),
    f("pte.none", Target::Addr, "pte_none(): no PTE (or a PMD leaf) at the address"),
    f("pte.present", Target::Addr, "pte_present()"),
    f("pte.swap", Target::Addr, "a swap entry (is_swap_pte())"),
    f("pte.write", Target::Addr, "pte_write() (_PAGE_RW)"),
    f("pte.dirty", Target::Addr, "pte_dirty() (_PAGE_DIRTY)"),
    f("pte.young", Target::Addr, "pte_young() (_PAGE_ACCESSED)"),
    f("pte.soft_dirty", Target::Addr, "pte_soft_dirty() (or pte_swp_soft_dirty())"),
    f("pte.uffd_wp", Target::Addr, "pte_uffd_wp() (or pte_swp_uffd_wp()), v5.7"),
    f("pte.special", Target::Addr, "pte_special() (zero page, DAX without struct page)"),
    f("pte.swp_exclusive", Target::Addr, "pte_swp_exclusive() of a swap entry"),
    f("pmd.none", Target::Addr, "pmd_none()"),
    f("pmd.present", Target::Addr, "pmd_present()"),
    f("pmd.leaf", Target::Addr, "pmd_leaf() / pmd_trans_huge(): the PMD maps 2 MiB itself"),
    f("pmd.table", Target::Addr, "the PMD points to a PTE table"),
    f("pmd.write", Target::Addr, "pmd_write() of a leaf"),
    f("pmd.dirty", Target::Addr, "pmd_dirty() of a leaf"),
    f("pmd.young", Target::Addr, "pmd_young() of a leaf"),
    f("pmd.special", Target::Addr, "pmd_special() of a leaf (huge zero page, DAX)"),
    f("vma.vm_flags", Target::Addr, "vm_flags of the VMA holding the address, as a number"),
    f("vma.vm_start", Target::Addr, "vm_start of the VMA holding the address (maps' first field)"),
    f("vma.vm_end", Target::Addr, "vm_end of the VMA holding the address"),
    f("vma.VM_MIXEDMAP", Target::Addr, "vm_flags & VM_MIXEDMAP (smaps `mm`; fs-DAX to v4.18)"),
    f("vma.VM_HUGEPAGE", Target::Addr, "vm_flags & VM_HUGEPAGE (smaps `hg`)"),
    f("vma.VM_LOCKED", Target::Addr, "vm_flags & VM_LOCKED (smaps `lo`)"),
    f("vma.VM_DONTDUMP", Target::Addr, "vm_flags & VM_DONTDUMP (smaps `dd`)"),
    f("vma.VM_NOHUGEPAGE", Target::Addr, "vm_flags & VM_NOHUGEPAGE (smaps `nh`)"),
    f("vma.VM_SYNC", Target::Addr, "vm_flags & VM_SYNC (smaps `sf`, MAP_SYNC, v4.15)"),
    f("vma.VM_LOCKONFAULT", Target::Addr, "vm_flags & VM_LOCKONFAULT (v4.4)"),
    f("vma.VM_SEALED", Target::Addr, "vm_flags & VM_SEALED (smaps `sl`, v6.10)"),
    f("vma.VM_MERGEABLE", Target::Addr, "vm_flags & VM_MERGEABLE (smaps `mg`: KSM may merge)"),
    f("vma.VM_UFFD_MISSING", Target::Addr, "vm_flags & VM_UFFD_MISSING (smaps `um`, v4.3)"),
    f("vma.VM_UFFD_MINOR", Target::Addr, "vm_flags & VM_UFFD_MINOR (smaps `ui`, v5.13)"),
    f("vma.VM_UFFD_WP", Target::Addr, "vm_flags & VM_UFFD_WP (smaps `uw`, v5.7)"),
    f(
        "vma.has_recency",
        Target::Addr,
        "vma_has_recency(): reclaim counts the VMA's accesses (no SEQ/RAND advice, no NOREUSE; v6.3)",
    ),
    f("entry.none", Target::Index, "nothing in the page cache at the index"),
    f("entry.folio", Target::Index, "a folio"),
    f("entry.shadow", Target::Index, "a workingset shadow (xa_is_value)"),
    f("entry.swap", Target::Index, "a shmem swap entry (xa_is_value)"),
    f("entry.dax", Target::Index, "a DAX entry (of any kind)"),
    f("entry.dax_zero", Target::Index, "dax_is_zero_entry()"),
    f("entry.dax_empty", Target::Index, "dax_is_empty_entry()"),
    f("entry.dax_pmd", Target::Index, "dax_is_pmd_entry()"),
    f("entry.dax_locked", Target::Index, "dax_is_locked()"),
    f("mapping.nrpages", Target::Mapping, "mapping->nrpages"),
    f("mapping.nr_thps", Target::Mapping, "mapping->nr_thps (filemap_nr_thps())"),
    f("file.f_mode", Target::File, "f_mode as a number"),
    f("file.FMODE_READ", Target::File, "f_mode & FMODE_READ"),
    f("file.FMODE_WRITE", Target::File, "f_mode & FMODE_WRITE"),
    f("file.FMODE_EXEC", Target::File, "f_mode & FMODE_EXEC"),
    f("file.FMODE_RANDOM", Target::File, "f_mode & FMODE_RANDOM (POSIX_FADV_RANDOM)"),
    f("file.FMODE_NOREUSE", Target::File, "f_mode & FMODE_NOREUSE (POSIX_FADV_NOREUSE, v6.3+)"),
    f("file.f_pos", Target::File, "f_pos"),
    f("file.ra.ra_pages", Target::File, "f_ra.ra_pages: the readahead window's maximum"),
    f("lockdep.reports", Target::Global, "lockdep splats so far (0: clean); text: lockdep_report"),
    f(
        "collapse_truncated_rollbacks",
        Target::Global,
        "mmsim's own: file collapses rolled back because the file was truncated",
    ),
    f(
        "collapse_slot_truncations",
        Target::Global,
        "mmsim's own: truncations that met a collapse's new page in a page-cache slot",
    ),
];

/// Lockdep's report as the kernel logs it: the first splat (the lock classes, the chain this
/// acquisition would add and the recorded chain it inverts; later ones are counted, as the
/// kernel turns lockdep off after its first), or `clean`.
pub fn lockdep_report(handle: &engine::Handle) -> String {
    let reports = handle.lockdep_reports();
    match reports.first() {
        None => "clean\n".to_string(),
        Some(first) if reports.len() == 1 => first.to_string(),
        Some(first) => format!("{first}({} more reports after this one)\n", reports.len() - 1),
    }
}

/// Names of `struct file_ra_state` the model does not keep.
const RA_UNMODELLED: [&str; 3] = ["file.ra.start", "file.ra.size", "file.ra.async_size"];

/// The field named `name` (a folio field's target is [`Target::Addr`]; it also reads on an
/// index).
pub fn field(name: &str) -> Option<Field> {
    FOLIO
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(name, doc)| Field { name, target: Target::Addr, doc })
        .or_else(|| FIELDS.iter().copied().find(|x| x.name == name))
}

/// Every name, for messages and the documentation.
pub fn names() -> Vec<&'static str> {
    FOLIO.iter().map(|(n, _)| *n).chain(FIELDS.iter().map(|x| x.name)).collect()
}

/// Whether a field reads on a target: folio fields read on an address or an index.
pub fn reads_on(name: &str, target: Target) -> bool {
    let folio = FOLIO.iter().any(|(n, _)| *n == name);
    field(name).is_some_and(|x| x.target == target || (folio && target == Target::Index))
}

/// Why `name` cannot be read under `kernel` and `switches` (unknown, or absent in this era),
/// or `None` when it can.
pub fn unavailable(name: &str, kernel: KernelVersion, switches: &Switches) -> Option<String> {
    if RA_UNMODELLED.contains(&name) {
        return Some(format!(
            "`{name}`: the model keeps only `ra_pages` of struct file_ra_state (file.ra.ra_pages)"
        ));
    }
    if field(name).is_none() {
        return Some(format!("unknown field `{name}`: expected one of {}", names().join(", ")));
    }
    match name {
        "folio.anon_exclusive" if !crate::era::has_page_anon_exclusive(kernel) => Some(format!(
            "`{name}`: PageAnonExclusive exists from v5.19 (6c287605fd56), not on {kernel}"
        )),
        "pte.swp_exclusive" if !crate::era::has_page_anon_exclusive(kernel) => Some(format!(
            "`{name}`: the swap PTE's exclusive bit exists from v5.19 (1493a1913e34), not on {kernel}"
        )),
        "file.FMODE_NOREUSE" if !crate::era::has_fmode_noreuse(kernel) => Some(format!(
            "`{name}`: FMODE_NOREUSE exists from v6.3 (17e810229cb3), not on {kernel}"
        )),
        "vma.has_recency" if !crate::era::vma_has_recency(kernel) => Some(format!(
            "`{name}`: vma_has_recency() exists from v6.3 (8788f6781486), not on {kernel}"
        )),
        "folio.gen" | "folio.seq" | "folio.youngest" | "folio.oldest"
            if !crate::types::mmzone::Reclaim::of(switches.lru).lru_gen_enabled() =>
        {
            Some(format!("`{name}`: folio generations exist only under lru = mglru"))
        }
        _ => None,
    }
}

/// The entries at an address and the page they map.
struct AtAddr {
    pmd: Option<Upper>,
    /// The PTE-level entry (none when the PMD is not a table).
    pte: Pte,
    /// The normal page mapped (by a PTE or inside a huge leaf).
    page: Option<Pfn>,
    /// The frame mapped, normal or special.
    pfn: Option<Pfn>,
}

impl KState {
    fn at_addr(&self, mm: MmId, addr: VirtAddr) -> AtAddr {
        let pgd = self.mm(mm).pgd;
        let pmd = self.pt.pmd_slot(pgd, addr).map(|(t, i)| self.pt.upper(t, i));
        let pte = match pmd {
            Some(Upper::Table(t)) => self.pt.pte(t, Level::Pte.index(addr)),
            _ => Pte::NONE,
        };
        let (page, pfn) = match self.pt.translate(pgd, addr) {
            Some((e, level)) if e.is_present() => {
                let offset = (addr.0 & ((1 << level.shift()) - 1)) >> 12;
                (vm_normal_page(e).map(|p| p + offset), Some(e.pfn() + offset))
            }
            _ => (None, None),
        };
        AtAddr { pmd, pte, page, pfn }
    }

    /// Reads `name` at `addr` of `mm` (a [`Target::Addr`] field).
    pub fn inspect_addr(&self, mm: MmId, addr: VirtAddr, name: &str) -> Result<u64, String> {
        let at = self.at_addr(mm, addr);
        let leaf = match at.pmd {
            Some(Upper::Leaf(e)) => Some(e),
            _ => None,
        };
        let b = |x: bool| Ok(u64::from(x));
        let pmd_bit = |g: fn(Pte) -> bool| b(leaf.is_some_and(|e| e.is_present() && g(e)));
        let pte = at.pte;
        let pte_bit = |g: fn(Pte) -> bool| b(pte.is_present() && g(pte));
        let vma = || {
            let vma = self.find_vma(mm, addr).ok_or_else(|| format!("no VMA holds {addr}"))?;
            Ok::<_, String>(self.vma(vma))
        };
        let vm_flags = || Ok::<u64, String>(vma()?.flags.0);
        match name {
            "vma.vm_flags" => vm_flags(),
            "vma.vm_start" => Ok(vma()?.start.0),
            "vma.vm_end" => Ok(vma()?.end.0),
            n if let Some(bit) = vm_flag_field(n) => b(vm_flags()? & bit != 0),
            "vma.has_recency" => {
                let id = self.find_vma(mm, addr).ok_or_else(|| format!("no VMA holds {addr}"))?;
                b(self.vma_has_recency_now(id))
            }
            "pfn" => at.pfn.map(|p| p.0).ok_or_else(|| format!("nothing is mapped at {addr}")),
            "pte.none" => b(pte.is_none()),
            "pte.present" => b(pte.is_present()),
            "pte.swap" => b(pte.is_swap()),
            "pte.write" => pte_bit(Pte::write),
            "pte.dirty" => pte_bit(Pte::dirty),
            "pte.young" => pte_bit(Pte::young),
            "pte.soft_dirty" => b(!pte.is_none() && pte.soft_dirty()),
            "pte.uffd_wp" => b(!pte.is_none() && pte.uffd_wp()),
            "pte.special" => pte_bit(Pte::special),
            "pte.swp_exclusive" => b(pte.swap_exclusive()),
            "pmd.none" => b(matches!(at.pmd, None | Some(Upper::None))),
            "pmd.present" => {
                b(matches!(at.pmd, Some(Upper::Table(_))) || leaf.is_some_and(Pte::is_present))
            }
            "pmd.leaf" => b(leaf.is_some()),
            "pmd.table" => b(matches!(at.pmd, Some(Upper::Table(_)))),
            "pmd.write" => pmd_bit(Pte::write),
            "pmd.dirty" => pmd_bit(Pte::dirty),
            "pmd.young" => pmd_bit(Pte::young),
            "pmd.special" => pmd_bit(Pte::special),
            _ => {
                let page = at.page.ok_or_else(|| {
                    format!("no folio is mapped at {addr} (the entry is {pte:?}, PMD {:?})", at.pmd)
                })?;
                self.inspect_page(page, name)
            }
        }
    }

    /// A folio field of the folio holding `page`.
    fn inspect_page(&self, page: Pfn, name: &str) -> Result<u64, String> {
        if let Some(head) = self.hugetlb_head(page) {
            return self.inspect_huge_page(head, name);
        }
        let fo = &self.folios;
        let head = fo.head(page);
        let flag = |bit: u16| Ok(u64::from(fo.test(head, bit)));
        match name {
            "folio.refcount" => Ok(u64::from(fo.refcount(head))),
            "folio.mapcount" => Ok(u64::from(fo.folio_mapcount(head))),
            "folio.entire_mapcount" => Ok(u64::from(fo.entire_mapcount(head))),
            "page.mapcount" => Ok(u64::from(fo.page_mapcount(page) + fo.entire_mapcount(head))),
            "folio.pincount" => Ok(u64::from(match fo.large(head) {
                Some(_) => fo.pin_refs(head),
                None => fo.pin_refs(head) / crate::folio::GUP_PIN_COUNTING_BIAS,
            })),
            "folio.maybe_dma_pinned" => Ok(u64::from(fo.maybe_dma_pinned(head))),
            "folio.order" => Ok(u64::from(fo.order(head).0)),
            "folio.anon" => Ok(u64::from(fo.is_anon(head))),
            "folio.anon_exclusive" => Ok(u64::from(fo.test(page, pg::ANON_EXCLUSIVE))),
            "folio.gen" => fo
                .lru_gen(head)
                .map(u64::from)
                .ok_or_else(|| format!("folio {head} is on no multi-gen LRU list")),
            "folio.seq" | "folio.youngest" | "folio.oldest" => self.inspect_lru_seq(head, name),
            _ => {
                let i = pg::NAMES
                    .iter()
                    .position(|n| Some(*n) == name.strip_prefix("folio."))
                    .ok_or_else(|| format!("`{name}` is not a folio field"))?;
                flag(1 << i)
            }
        }
    }

    /// Where a folio sits among its lruvec's generations (`mglru/debugfs.rs`).
    fn inspect_lru_seq(&self, head: Pfn, name: &str) -> Result<u64, String> {
        let seq = self
            .folio_lru_seq(head)
            .ok_or_else(|| format!("folio {head} is on no multi-gen LRU list"))?;
        let g = &self.memcgs[self.folio_memcg(head)].lruvec.lrugen;
        Ok(match name {
            "folio.youngest" => u64::from(seq == g.max_seq),
            "folio.oldest" => {
                u64::from(seq == g.min_seq[usize::from(self.folio_is_file_lru(head))])
            }
            _ => seq,
        })
    }

    /// A folio field of a hugetlb page (its head `struct page`, `hugetlb/gup.rs`).
    fn inspect_huge_page(&self, head: Pfn, name: &str) -> Result<u64, String> {
        let p = self.huge_page(head);
        let b = |x: bool| Ok(u64::from(x));
        match name {
            "folio.refcount" => Ok(u64::from(p.refs)),
            "folio.mapcount" | "folio.entire_mapcount" | "page.mapcount" => {
                Ok(u64::from(p.mapcount))
            }
            "folio.pincount" => Ok(u64::from(self.hugetlb.gup_of(head).pins)),
            "folio.maybe_dma_pinned" => b(self.hugetlb.gup_of(head).pins > 0),
            "folio.order" => Ok(u64::from(p.size.shift() - 12)),
            "folio.anon" => b(p.owner == crate::types::hugetlb::Owner::Anon),
            "folio.anon_exclusive" => b(p.anon_exclusive),
            "folio.locked" => b(p.locked),
            _ => Err(format!("`{name}` is not modelled for a hugetlb folio")),
        }
    }

    /// Reads `name` at page-cache index `index` of `inode` (an entry or a folio field).
    pub fn inspect_index(&self, inode: InodeId, index: u64, name: &str) -> Result<u64, String> {
        let folio = self.page_cache_get(inode, index);
        let dax = self.dax.inodes.contains_key(&inode).then(|| self.dax_entry(inode, index));
        let dax = dax.flatten().map(|(_, e)| e);
        let shadow = self.shadow_at(ShadowSlot::PageCache(inode, index)).is_some();
        let swap = self.inodes[inode].mapping.swapped.contains_key(&index);
        let b = |x: bool| Ok(u64::from(x));
        match name {
            "entry.none" => b(folio.is_none() && dax.is_none() && !shadow && !swap),
            "entry.folio" => b(folio.is_some()),
            "entry.shadow" => b(shadow),
            "entry.swap" => b(swap),
            "entry.dax" => b(dax.is_some()),
            "entry.dax_zero" => b(dax.is_some_and(|e| e.kind == EntryKind::Zero)),
            "entry.dax_empty" => b(dax.is_some_and(|e| e.kind == EntryKind::Empty)),
            "entry.dax_pmd" => b(dax.is_some_and(|e| e.pmd)),
            "entry.dax_locked" => b(dax.is_some_and(|e| e.locked)),
            _ => {
                let head = folio.ok_or_else(|| {
                    format!("no folio at index {index} of {}", self.inodes[inode].path)
                })?;
                self.inspect_page(head + (index - self.folio_index(head)), name)
            }
        }
    }

    /// Reads a [`Target::Mapping`] field of `inode`.
    pub fn inspect_mapping(&self, inode: InodeId, name: &str) -> Result<u64, String> {
        let m = &self.inodes[inode].mapping;
        match name {
            // hugetlbfs keeps its pages apart (`hugetlb.rs`); the kernel's `__filemap_add_folio`
            // counts one per huge page until v6.7 ("mm/filemap: remove hugetlb special casing in
            // filemap.c", a08c7193e4f1), every base page from then on.
            "mapping.nrpages" if self.hugetlb.inodes.contains_key(&inode) => {
                let hi = &self.hugetlb.inodes[&inode];
                let per_page = crate::era::hugetlb_nrpages_in_base_pages(self.thp.kernel);
                Ok(hi.cache.len() as u64 * if per_page { hi.size.pages() } else { 1 })
            }
            "mapping.nrpages" => Ok(m.nrpages),
            "mapping.nr_thps" => Ok(m.nr_thps),
            _ => Err(format!("`{name}` is not a field of an address_space")),
        }
    }

    /// Reads a [`Target::File`] field of the open file `file`.
    pub fn inspect_file(&self, file: FileId, name: &str) -> Result<u64, String> {
        let f = self.file(file);
        let bit = |b: u32| Ok(u64::from(f.mode & b != 0));
        match name {
            "file.f_mode" => Ok(u64::from(f.mode)),
            "file.FMODE_READ" => bit(fmode::READ),
            "file.FMODE_WRITE" => bit(fmode::WRITE),
            "file.FMODE_EXEC" => bit(fmode::EXEC),
            "file.FMODE_RANDOM" => bit(fmode::RANDOM),
            "file.FMODE_NOREUSE" => bit(fmode::NOREUSE),
            "file.f_pos" => Ok(f.pos),
            "file.ra.ra_pages" => Ok(f.ra.ra_pages),
            _ => Err(format!("`{name}` is not a field of struct file")),
        }
    }

    /// Reads a [`Target::Global`] field; lockdep's from the engine running the kernel.
    pub fn inspect_global(&self, handle: &engine::Handle, name: &str) -> Result<u64, String> {
        match name {
            "lockdep.reports" => Ok(handle.lockdep_reports().len() as u64),
            "collapse_truncated_rollbacks" => Ok(self.thp.khugepaged.truncated_rollbacks),
            "collapse_slot_truncations" => Ok(self.thp.khugepaged.slot_truncations),
            _ => Err(format!("`{name}` is not a machine-wide field")),
        }
    }

    /// Every address field at `addr` of `mm` that can be read under `kernel` and `switches`,
    /// with its value; fields with no value there (no folio mapped) are left out.
    pub fn inspect_fields(
        &self,
        mm: MmId,
        addr: VirtAddr,
        kernel: KernelVersion,
        switches: &Switches,
    ) -> Vec<(&'static str, u64)> {
        let all = FOLIO
            .iter()
            .map(|(n, _)| *n)
            .chain(FIELDS.iter().filter(|x| x.target == Target::Addr).map(|x| x.name));
        all.filter(|n| unavailable(n, kernel, switches).is_none())
            .filter_map(|n| self.inspect_addr(mm, addr, n).ok().map(|v| (n, v)))
            .collect()
    }

    /// [`inspect_fields`](KState::inspect_fields) as text, one `.name = value,` line each
    /// (drgn's way of printing a struct), after a header naming the entries and the folio.
    pub fn inspect_dump(
        &self,
        mm: MmId,
        addr: VirtAddr,
        kernel: KernelVersion,
        switches: &Switches,
    ) -> String {
        let at = self.at_addr(mm, addr);
        let pmd = at.pmd.map_or("not reached (no PMD table)".to_string(), |u| u.to_string());
        let mut out = format!("{addr}: pmd {pmd}, pte {:?}\n", at.pte);
        if let Some(page) = at.page {
            let head = self.folios.head(page);
            let flags = crate::folio::flag_names_on(self.folios.meta(head).flags, kernel).join("|");
            let _ = writeln!(out, "*(struct folio *)pfn {head} (page {page}): flags {flags}");
        }
        for (name, v) in self.inspect_fields(mm, addr, kernel, switches) {
            let _ = writeln!(out, "\t.{name} = {v},");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use engine::{Sim, SimConfig};

    /// A deliberately inverted lock order (A then B, later B then A) is reported through the
    /// inspect surface: `lockdep.reports` counts it and the text names both classes and chains.
    #[test]
    fn inverted_lock_order_is_reported() {
        let mut sim = Sim::new(SimConfig { cpus: 2, ..SimConfig::default() }).unwrap();
        let h = sim.handle().clone();
        assert_eq!(super::lockdep_report(&h), "clean\n");
        let (a, b) = (h.mutex("lock_a"), h.mutex("lock_b"));
        h.spawn(h.cpu(0).unwrap(), "one", move |cx| async move {
            let _ga = a.lock(&cx).await;
            let _gb = b.lock(&cx).await;
        });
        h.spawn(h.cpu(1).unwrap(), "two", move |cx| async move {
            cx.sleep(simcore::SimDuration::from_us(100)).await;
            let _gb = b.lock(&cx).await;
            let _ga = a.lock(&cx).await;
        });
        sim.run().expect("this interleaving does not deadlock");
        assert_eq!(h.lockdep_reports().len(), 1);
        let text = super::lockdep_report(&h);
        assert!(
            text.starts_with("WARNING: possible circular locking dependency detected"),
            "{text}"
        );
        assert!(text.contains("task two is trying to acquire lock_a"), "{text}");
        assert!(text.contains("but task is already holding lock_b"), "{text}");
        assert!(text.contains("lock_a -> lock_b"), "{text}");
    }
}
