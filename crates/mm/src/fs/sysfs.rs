//! The sysfs and sysctl files the model has, by path: the transparent-hugepage knobs and
//! counters under `/sys/kernel/mm/transparent_hugepage/` (`huge_memory/policy.rs`) and the
//! hugetlb pools' files under `/sys/kernel/mm/hugepages/` and `/proc/sys/vm/`
//! (`hugetlb/sysfs.rs`), and KSM's under `/sys/kernel/mm/ksm/` (`ksm.rs`). Each subsystem owns its files, as each registers its own kobjects in
//! the kernel; this module only routes a path to its owner.

use crate::era::KernelVersion;
use crate::errno::Errno;
use crate::huge_memory::policy::sysfs_knob;
use crate::kernel::KState;

impl KState {
    /// What reading `path` shows, as text; `None` for a file the model (or this kernel) lacks.
    pub fn sysfs_show(&self, path: &str) -> Option<String> {
        if let Some(name) = crate::ksm::sysfs_name(path) {
            return self.ksm.show(name, self.thp.kernel).map(|v| v.to_string());
        }
        match sysfs_knob(path) {
            Some(knob) => self.thp_show(knob),
            None => self
                .hugetlb_sysfs_read(path)
                .or_else(|| self.shm_sysctl_read(path))
                .map(|v| v.to_string()),
        }
    }

    /// A write of `value` to `path`: ENOENT for a file the model (or this kernel) lacks, EINVAL
    /// for a value the file refuses. The number written, for a numeric file (what KSM's `run`
    /// applies afterwards, `ksm::sysfs_stored`).
    pub(crate) fn sysfs_store(
        &mut self,
        path: &str,
        value: &str,
        k: KernelVersion,
    ) -> Result<Option<u64>, Errno> {
        if let Some(knob) = sysfs_knob(path) {
            if self.thp.settings.show(knob, k).is_none() {
                return Err(Errno::ENOENT);
            }
            return self.thp.settings.set(knob, value, k).map(|_| None).map_err(|_| Errno::EINVAL);
        }
        let v = value.trim().parse::<u64>().map_err(|_| Errno::EINVAL)?;
        if let Some(name) = crate::ksm::sysfs_name(path) {
            self.ksm.store(name, v, k)?;
        } else if let Some(stored) = self.shm_sysctl_write(path, v) {
            stored?;
        } else {
            self.hugetlb_sysfs_write(path, v)?;
        }
        Ok(Some(v))
    }
}
