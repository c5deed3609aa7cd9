//! What a blocking point of the model stands for in the kernel: the explorer and the trace name
//! each step by its source location (`crates/mm/src/fault.rs:470:8`), which a kernel developer
//! should not have to look up. [`site`] turns the location into the model function it is in (an
//! index built from the source by `build.rs`), the kernel function that function models, and,
//! where the step is one of a race's key events (a pin, a write-protect, a copy, a DMA
//! completion, an unmap, a TLB flush), what happened.
//!
//! Most model functions carry their kernel function's name (`do_wp_page`, `wp_page_copy`,
//! `zap_pte_range`); [`KERNEL_NAMES`] lists the others and what each stands for, and a test
//! holds every entry to a function that exists. Syscall entry points (`syscall.rs`) are named by
//! their kernel entry (`sys_<name>`) unless the table says otherwise; user-space work (loads,
//! stores, computation) is `(user)`.

use std::fmt;

include!(concat!(env!("OUT_DIR"), "/fn_lines.rs"));

/// A blocking point in kernel terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// The model function the point is in.
    pub model: &'static str,
    /// The kernel function it models (`(user)` for user-space work).
    pub kernel: &'static str,
    /// The race event the step is, if it is one.
    pub event: Option<&'static str>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kernel)?;
        if let Some(e) = self.event {
            write!(f, " [{e}]")?;
        }
        Ok(())
    }
}

/// Model functions whose names are not their kernel function's: `(model, point, kernel)`, where
/// `point` (when given) restricts the entry to steps resumed from that kind of point.
pub const KERNEL_NAMES: &[(&str, Option<&str>, &str)] = &[
    // User space, and the MMU's part of its accesses.
    ("access_all", None, "(user)"),
    ("access_settle", None, "(user)"),
    ("compute", None, "(user)"),
    ("touch", None, "(user)"),
    ("read_bytes", None, "(user)"),
    ("write_bytes", None, "(user)"),
    ("read_settle", None, "(user)"),
    ("settle", None, "(user)"),
    ("access_page", None, "(user)"),
    ("read_user", None, "(user)"),
    ("write_user", None, "(user)"),
    ("access_fault", None, "exc_page_fault"),
    ("fault_and_retry", None, "exc_page_fault"),
    // mlock.rs and msync.rs: the syscalls' bodies.
    ("do_munlock", None, "sys_munlock"),
    ("do_mlockall", None, "sys_mlockall"),
    ("do_munlockall", None, "sys_munlockall"),
    ("do_msync", None, "sys_msync"),
    // brk.rs: the syscall's body.
    ("do_brk", None, "sys_brk"),
    // Syscall entries whose kernel names are not `sys_<name>`.
    ("fork", None, "kernel_clone"),
    ("exit", None, "do_exit"),
    ("exec", None, "do_execve"),
    ("do_exec", None, "begin_new_exec"),
    ("mmap_anon", None, "sys_mmap"),
    ("pwrite_data", None, "sys_pwrite64"),
    ("write_data", None, "sys_write"),
    ("gup_hold", None, "pin_user_pages"),
    ("hold", None, "pin_user_pages"),
    ("gup_read", None, "(driver reads the pinned pages)"),
    ("gup_release", None, "unpin_user_pages"),
    ("spawn_user_thread", None, "(thread starts)"),
    ("spawn_kthread", None, "kthread"),
    ("writeback", None, "filemap_write_and_wait_range"),
    ("do_fork", None, "copy_process"),
    // Model helpers and the kernel functions they stand for.
    ("clear_refs", None, "clear_refs_write"),
    ("clear_table", None, "clear_refs_pte_range"),
    ("direct_read", Some("sleep"), "iomap_dio_bio_end_io"),
    ("direct_read", None, "iomap_dio_rw"),
    ("gup_slow", None, "__get_user_pages"),
    ("swapin", None, "swapin_readahead"),
    ("fault_alloc", None, "vma_alloc_zeroed_movable_folio"),
    ("install_new_anon", None, "do_anonymous_page"),
    ("table_alloc", None, "__pte_alloc"),
    ("pmd_install_lock", None, "pmd_lock"),
    ("lock_faulted_folio", None, "lock_folio_maybe_drop_mmap"),
    ("read_folios", None, "filemap_read_folio"),
    ("read_pages", None, "page_cache_ra_unbounded"),
    ("file_read", None, "filemap_read"),
    ("file_write", None, "generic_perform_write"),
    ("shmem_alloc_page", None, "shmem_alloc_folio"),
    ("shmem_get_page", None, "shmem_get_folio_gfp"),
    ("shmem_swapin", None, "shmem_swapin_folio"),
    ("take_page", None, "collapse_file"),
    ("retract_one", None, "retract_page_tables"),
    ("pte_mapped_thp_locked", None, "collapse_pte_mapped_thp"),
    ("collapse_deferred_pte_mapped_thps", None, "khugepaged_collapse_pte_mapped_thps"),
    ("khugepaged_scan_file", None, "khugepaged_scan_mm_slot"),
    ("open_for_write_drop_thps", None, "do_dentry_open"),
    ("thps_seen_before_open", None, "do_dentry_open"),
    ("writer_present", None, "collapse_file"),
    ("check_references", None, "folio_check_references"),
    ("age_node", None, "kswapd_age_node"),
    ("alloc_folio", None, "__alloc_pages_slowpath"),
    ("prepare_reclaim", None, "shrink_folio_list"),
    ("write_out", None, "pageout"),
    ("shrink_lists", None, "shrink_lruvec"),
    ("read_file", None, "filemap_read"),
    ("unmap_locked", None, "do_vmi_munmap"),
    ("zap_vma_range", None, "unmap_single_vma"),
    ("split_huge_pmd_edges", None, "vma_adjust_trans_huge"),
    ("zero_cached", None, "truncate_inode_partial_folio"),
    ("dax_cow_fault", None, "dax_fault_cow_page"),
    ("dax_pte_fault", None, "dax_iomap_pte_fault"),
    ("dax_pmd_fault", None, "dax_iomap_pmd_fault"),
    ("dax_read", None, "dax_iomap_rw"),
    ("dax_write", None, "dax_iomap_rw"),
    ("dax_wp_shared", None, "dax_iomap_fault"),
    ("dax_delete_entry", None, "dax_delete_mapping_entry"),
    ("map_file", None, "dax_fault_iter"),
    ("map_hole_page", None, "dax_load_hole"),
    ("pmd_fallback", None, "dax_iomap_pmd_fault"),
    ("insert_pfn", None, "vmf_insert_mixed"),
    ("insert_pfn_pmd", None, "vmf_insert_pfn_pmd"),
    ("invalidate_range", None, "invalidate_inode_pages2_range"),
    ("iomap_begin", None, "ext4_iomap_begin"),
];

/// Kernel functions that are a race's key events, and what each does.
const EVENTS: &[(&str, &str)] = &[
    ("__get_user_pages", "GUP takes the page"),
    ("get_user_pages", "GUP takes the page"),
    ("pin_user_pages", "pin"),
    ("unpin_user_pages", "unpin"),
    ("clear_refs_pte_range", "write-protect"),
    ("wp_page_copy", "copy"),
    ("wp_page_shared", "write-enable shared"),
    ("iomap_dio_bio_end_io", "DMA completion"),
    ("zap_pte_range", "unmap"),
    ("zap_huge_pmd", "unmap"),
    ("try_to_unmap", "unmap for reclaim"),
    ("flush_tlb_range", "TLB flush"),
    ("flush_tlb_page", "TLB flush"),
    ("copy_page_range", "fork copies page tables"),
    ("pageout", "write-out"),
    ("truncate_inode_pages_range", "truncate"),
];

/// The model's source directory as locations name it (`crates/mm/src/`).
fn src_prefix() -> &'static str {
    let here = file!();
    &here[..here.len() - "sim/sites.rs".len()]
}

/// A location in the model (`file:line:col` or `file:line`): its file below the model's source
/// directory and the model function it is in.
fn locate(at: &str) -> Option<(&str, &'static str)> {
    let rel = at.strip_prefix(src_prefix())?;
    let mut parts = rel.split(':');
    let file = parts.next()?;
    let line: u32 = parts.next()?.parse().ok()?;
    let (_, fns) = FN_LINES.iter().find(|(f, _)| *f == file)?;
    let i = fns.partition_point(|&(first, _)| first <= line);
    Some((file, fns[i.checked_sub(1)?].1))
}

/// The model function a location (`file:line:col` or `file:line`) is in; `None` outside `mm`.
pub fn model_function(at: &str) -> Option<&'static str> {
    locate(at).map(|(_, model)| model)
}

/// The kernel function a model function stands for at a point of kind `point`.
fn kernel_name(model: &'static str, file: &str, point: &str) -> &'static str {
    let named = KERNEL_NAMES.iter().find(|(m, p, _)| *m == model && p.is_none_or(|p| p == point));
    if let Some(&(_, _, kernel)) = named {
        return kernel;
    }
    if file == "syscall.rs" {
        return SYSCALLS.iter().find(|(m, _)| *m == model).map_or(model, |&(_, k)| k);
    }
    model
}

/// Syscall entries named `sys_<name>`.
const SYSCALLS: &[(&str, &str)] = &[
    ("mmap", "sys_mmap"),
    ("munmap", "sys_munmap"),
    ("mprotect", "sys_mprotect"),
    ("madvise", "sys_madvise"),
    ("open", "sys_openat"),
    ("close", "sys_close"),
    ("dup", "sys_dup"),
    ("pread", "sys_pread64"),
    ("read", "sys_read"),
    ("pwrite", "sys_pwrite64"),
    ("ftruncate", "sys_ftruncate"),
    ("truncate", "sys_truncate"),
    ("fadvise", "sys_fadvise64"),
    ("readahead", "sys_readahead"),
    ("fallocate", "sys_fallocate"),
    ("fsync", "sys_fsync"),
    ("pipe", "sys_pipe2"),
    ("vmsplice", "sys_vmsplice"),
];

/// The blocking point at `at`, resumed from a point of kind `point` (`charge`, `sleep`,
/// `preempt`, a lock operation), in kernel terms; `None` outside `mm`.
pub fn site(at: &str, point: &str) -> Option<Site> {
    let (file, model) = locate(at)?;
    let kind = point.split_whitespace().next().unwrap_or(point);
    let kernel = kernel_name(model, file, kind);
    let event = EVENTS.iter().find(|(k, _)| *k == kernel).map(|&(_, e)| e);
    Some(Site { model, kernel, event })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_functions() -> impl Iterator<Item = &'static str> {
        FN_LINES.iter().flat_map(|(_, fns)| fns.iter().map(|&(_, name)| name))
    }

    #[test]
    fn every_renamed_function_exists_in_the_model() {
        let renamed = KERNEL_NAMES.iter().map(|&(m, _, _)| m);
        for model in renamed.chain(SYSCALLS.iter().map(|&(m, _)| m)) {
            assert!(all_functions().any(|f| f == model), "no model function {model}");
        }
    }

    #[test]
    fn a_location_resolves_to_its_function_and_kernel_name() {
        // This function's own first line resolves to it.
        let here = format!("{}:{}:1", file!(), line!());
        assert_eq!(
            model_function(&here),
            Some("a_location_resolves_to_its_function_and_kernel_name")
        );
        let fault = FN_LINES.iter().find(|(f, _)| *f == "fault.rs").unwrap();
        let (first, _) = fault.1.iter().find(|(_, n)| *n == "wp_page_copy").unwrap();
        let at = format!("{}fault.rs:{}:8", src_prefix(), first + 1);
        let s = site(&at, "charge").unwrap();
        assert_eq!((s.model, s.kernel, s.event), ("wp_page_copy", "wp_page_copy", Some("copy")));
        assert_eq!(site("crates/lab/src/scenario/run.rs:222:22", "spawn"), None);
        assert_eq!(model_function(&format!("{}nonexistent.rs:1:1", src_prefix())), None);
    }

    #[test]
    fn a_point_kind_selects_the_dma_completion() {
        let dio = FN_LINES.iter().find(|(f, _)| *f == "fs/direct_io.rs").unwrap();
        let (first, _) = dio.1.iter().find(|(_, n)| *n == "direct_read").unwrap();
        let at = format!("{}fs/direct_io.rs:{}:1", src_prefix(), first + 2);
        assert_eq!(site(&at, "sleep").unwrap().event, Some("DMA completion"));
        assert_eq!(site(&at, "charge").unwrap().kernel, "iomap_dio_rw");
        assert_eq!(site(&at, "exclusive mmap_lock#3").unwrap().kernel, "iomap_dio_rw");
    }
}
