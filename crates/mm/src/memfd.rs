//! `memfd_create(2)` (`mm/memfd.c` since v5.1, before in `mm/shmem.c`; the syscall since v3.17).
//!
//! A memfd is an unlinked file opened read-write: on tmpfs (the kernel's internal `shm_mnt`,
//! whose THPs follow `shmem_enabled`, `shmem.rs`), or with `MFD_HUGETLB` (v4.14, 749df87bd7be)
//! on hugetlbfs with the page size its flags encode as `mmap`'s `MAP_HUGE_*` do.
//! `/proc/PID/maps` names it `/memfd:NAME (deleted)`. Its size starts at zero; `ftruncate` or
//! `write` gives it pages' room, as for any tmpfs or hugetlbfs file.
//!
//! Arguments, checked in the kernel's order:
//! - flags outside the era's set are EINVAL: `MFD_CLOEXEC`, `MFD_ALLOW_SEALING`; `MFD_HUGETLB`
//!   and its size bits from v4.14; `MFD_NOEXEC_SEAL` and `MFD_EXEC` from v6.3 (105ff5339f49),
//!   which refuses the two together; size bits without `MFD_HUGETLB` are EINVAL;
//! - a name longer than 249 bytes (`NAME_MAX` less `memfd:`) is EINVAL;
//! - a huge page size with no pool (`hstate_sizelog`) is EINVAL.
//!
//! Approximations: seals are not modelled (no `fcntl(F_ADD_SEALS)`): `MFD_ALLOW_SEALING` and
//! `MFD_NOEXEC_SEAL` are accepted and change nothing a scenario can observe; `MFD_CLOEXEC`
//! likewise, as mmsim has no `exec` of a new program image that closes descriptors. The
//! `vm.memfd_noexec` sysctl (v6.3) is its default, 0.

use crate::era::{KernelVersion, has_mfd_hugetlb, has_mfd_noexec};
use crate::errno::Errno;
use crate::fs::fmode;
use crate::hugetlb::MAP_HUGE_SHIFT;
use crate::kernel::{Cx, KState};
use crate::types::fs::FsType;
use crate::types::fs::TmpfsMount;
use crate::types::hugetlb::HugeSize;
use crate::types::ids::FileId;

/// `memfd_create` flags (`include/uapi/linux/memfd.h`).
pub mod mfd {
    pub const CLOEXEC: u32 = 0x1;
    pub const ALLOW_SEALING: u32 = 0x2;
    pub const HUGETLB: u32 = 0x4;
    pub const NOEXEC_SEAL: u32 = 0x8;
    pub const EXEC: u32 = 0x10;
    /// `MFD_HUGE_MASK << MFD_HUGE_SHIFT`: the page size's log2, as `MAP_HUGE_*` encodes it.
    pub const HUGE_BITS: u32 = 0x3f << super::MAP_HUGE_SHIFT;
}

/// The longest name (`MFD_NAME_MAX_LEN`: `NAME_MAX` less the `memfd:` prefix).
pub const MFD_NAME_MAX_LEN: usize = 255 - "memfd:".len();

/// The flags `memfd_create` knows on kernel `k`.
fn known_flags(k: KernelVersion) -> u32 {
    let mut known = mfd::CLOEXEC | mfd::ALLOW_SEALING;
    if has_mfd_hugetlb(k) {
        known |= mfd::HUGETLB | mfd::HUGE_BITS;
    }
    if has_mfd_noexec(k) {
        known |= mfd::NOEXEC_SEAL | mfd::EXEC;
    }
    known
}

/// The file system a memfd with `flags` lives on, or the errno `memfd_create` returns.
fn memfd_fs(k: KernelVersion, flags: u32, name: &str) -> Result<FsType, Errno> {
    if flags & !known_flags(k) != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & mfd::HUGETLB == 0 && flags & mfd::HUGE_BITS != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & (mfd::EXEC | mfd::NOEXEC_SEAL) == mfd::EXEC | mfd::NOEXEC_SEAL {
        return Err(Errno::EINVAL);
    }
    if name.len() > MFD_NAME_MAX_LEN {
        return Err(Errno::EINVAL);
    }
    if flags & mfd::HUGETLB == 0 {
        return Ok(FsType::Tmpfs(TmpfsMount::ShmMnt));
    }
    let size = HugeSize::of_map_flags(flags & mfd::HUGE_BITS).ok_or(Errno::EINVAL)?;
    Ok(FsType::Hugetlbfs(size))
}

impl KState {
    /// Creates the unlinked file of a memfd, opened read-write.
    fn memfd_file(&mut self, handle: &engine::Handle, fs: FsType, name: &str) -> FileId {
        let path = format!("/memfd:{name} (deleted)");
        let inode = self.new_inode(handle, path, fs, 0, None);
        self.open_file(inode, fmode::READ | fmode::WRITE, false, false)
            .expect("a new memfd inode is never write-denied")
    }
}

/// `memfd_create(name, flags)`: the new descriptor.
pub(crate) async fn memfd_create(cx: &Cx, name: &str, flags: u32) -> Result<i32, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let fs = memfd_fs(cx.kernel().version, flags, name)?;
    let mut st = cx.st();
    let fd = st.procs[cx.current()].unused_fd()?;
    let f = st.memfd_file(cx, fs, name);
    st.procs[cx.current()].fds.insert(fd, f);
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file system name of the memfd `memfd_create(name, flags)` makes on `kernel`.
    fn made(kernel: &str, flags: u32, name: &str) -> Result<&'static str, Errno> {
        memfd_fs(kernel.parse().unwrap(), flags, name).map(FsType::name)
    }

    /// Flags are checked against the era's set; names against their limit; huge sizes against
    /// the pools.
    #[test]
    fn flags_and_names_per_era() {
        let huge_1g = mfd::HUGETLB | (30 << MAP_HUGE_SHIFT);
        let size = memfd_fs("v5.10".parse().unwrap(), huge_1g, "x").map(FsType::hugetlb_size);
        assert_eq!(size, Ok(Some(HugeSize::Size1G)));
        assert_eq!(made("v4.13", mfd::HUGETLB, "x"), Err(Errno::EINVAL));
        assert_eq!(made("v5.10", 30 << MAP_HUGE_SHIFT, "x"), Err(Errno::EINVAL));
        assert_eq!(made("v5.10", mfd::HUGETLB | (25 << MAP_HUGE_SHIFT), "x"), Err(Errno::EINVAL));
        assert_eq!(made("v4.14", mfd::HUGETLB, "x"), Ok("hugetlbfs"));
        assert_eq!(made("v6.8", mfd::HUGETLB, "x"), Ok("hugetlbfs"));
        assert_eq!(made("v6.2", mfd::NOEXEC_SEAL, "x"), Err(Errno::EINVAL));
        assert_eq!(made("v6.3", mfd::NOEXEC_SEAL, "x"), Ok("tmpfs"));
        assert_eq!(made("v6.3", mfd::NOEXEC_SEAL | mfd::EXEC, "x"), Err(Errno::EINVAL));
        assert_eq!(made("v4.8", mfd::CLOEXEC | mfd::ALLOW_SEALING, "x"), Ok("tmpfs"));
        assert_eq!(made("v6.8", 0x100, "x"), Err(Errno::EINVAL));
        assert_eq!(made("v6.8", 0, &"n".repeat(249)), Ok("tmpfs"));
        assert_eq!(made("v6.8", 0, &"n".repeat(250)), Err(Errno::EINVAL));
    }
}
