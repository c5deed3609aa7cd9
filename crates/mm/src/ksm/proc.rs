//! KSM's per-process files (`fs/proc/base.c`: `proc_pid_ksm_merging_pages`,
//! `proc_pid_ksm_stat`; read in v6.8, v6.12 and v6.18).
//!
//! - `/proc/PID/ksm_merging_pages` (v5.19, 7609385337a4): the process's rmap_items counted on a
//!   stable node (`mm->ksm_merging_pages`).
//! - `/proc/PID/ksm_stat` (v6.1, cb4df4cae4f2), one `name value` line each: `ksm_rmap_items`
//!   (the rmap_items the process has), from v6.6 `ksm_zero_pages` (`ksm/zero.rs`), from v6.4
//!   `ksm_merging_pages`. A scenario reads one line by name (`field`); a name this kernel's file
//!   lacks is ENOENT, as the native reader answers.
//!
//! Not offered: `ksm_process_profit` (v6.4) and the machine's `general_profit`, signed numbers
//! the scenario language's reads do not carry (a profit is negative while the rmap_items cost
//! more than the merges save), and v6.18's `ksm_merge_any`/`ksm_mergeable` lines (words, not
//! numbers).

use crate::errno::Errno;
use crate::kernel::KState;
use crate::types::ids::MmId;
use crate::types::ksm::{ItemState, RmapItem};
use simcore::VirtAddr;

/// `/proc/self/ksm_merging_pages` (v5.19): the pages of the process KSM counts as merged.
pub const PROC_SELF_MERGING_PAGES: &str = "/proc/self/ksm_merging_pages";

/// `/proc/self/ksm_stat` (v6.1): the process's KSM counters, a line each.
pub const PROC_SELF_KSM_STAT: &str = "/proc/self/ksm_stat";

/// A read of KSM's per-process file `path` by `mm` (`field`: the line of `ksm_stat`); `None`
/// when `path` is not one of them.
pub(crate) fn proc_read(
    st: &KState,
    mm: MmId,
    path: &str,
    field: Option<&str>,
) -> Option<Result<u64, Errno>> {
    let k = st.thp.kernel;
    let read = match (path, field) {
        (PROC_SELF_MERGING_PAGES, None) if crate::era::has_ksm_merging_pages(k) => {
            Ok(merging_pages(st, mm))
        }
        (PROC_SELF_KSM_STAT, Some(f)) if crate::era::has_proc_ksm_stat(k) => ksm_stat(st, mm, f),
        (PROC_SELF_MERGING_PAGES | PROC_SELF_KSM_STAT, _) => Err(Errno::ENOENT),
        _ => return None,
    };
    Some(read)
}

/// The rmap_items of `mm`.
fn mm_items(st: &KState, mm: MmId) -> impl Iterator<Item = &RmapItem> {
    st.ksm.items.range((mm, VirtAddr(0))..=(mm, VirtAddr(u64::MAX))).map(|(_, i)| i)
}

/// `mm->ksm_merging_pages`: the process's rmap_items counted on a stable node.
fn merging_pages(st: &KState, mm: MmId) -> u64 {
    mm_items(st, mm).filter(|i| matches!(i.state, ItemState::Stable(_))).count() as u64
}

/// One line of `/proc/PID/ksm_stat`.
fn ksm_stat(st: &KState, mm: MmId, field: &str) -> Result<u64, Errno> {
    let k = st.thp.kernel;
    match field {
        "ksm_rmap_items" => Ok(mm_items(st, mm).count() as u64),
        "ksm_zero_pages" if crate::era::has_ksm_zero_pages(k) => Ok(st.mm(mm).ksm_zero_pages),
        "ksm_merging_pages" if crate::era::ksm_stat_has_merging_pages(k) => {
            Ok(merging_pages(st, mm))
        }
        _ => Err(Errno::ENOENT),
    }
}
