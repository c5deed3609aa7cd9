//! System V shared memory (`ipc/shm.c` `ksys_shmget`, `newseg`, `do_shmat`, `ksys_shmdt`,
//! `shmctl_down`, `shmctl_stat`, `shm_destroy`; `ipc/util.c` `ipc_addid`; Linux v4.0-v6.19, the
//! same in every era mmsim models).
//!
//! A segment is an unlinked file the kernel makes at `shmget`: on tmpfs (the kernel's
//! `shm_mnt`, `shmem_kernel_file_setup`) or, with `SHM_HUGETLB`, on hugetlbfs with the page size
//! its flags encode as `mmap`'s `MAP_HUGE_*` do (`hugetlb_file_setup`, size rounded up to the
//! page size). A hugetlb segment reserves its pages at `shmget` (ENOMEM when the pool cannot
//! promise them) unless `SHM_NORESERVE`. `/proc/PID/maps` names it `/SYSV<key> (deleted)`.
//!
//! `shmat` opens a new file on the segment's inode, read-only with `SHM_RDONLY`, and maps all of
//! it shared (`do_mmap` with `MAP_FIXED` when an address is given, after `SHM_RND` rounding;
//! EINVAL when that range is already mapped, unless `SHM_REMAP`). `shmdt` unmaps the attach that
//! starts at the address and the rest of it within the segment's size. `shm_nattch` counts the
//! segment's VMAs, as the kernel's `shm_open`/`shm_close` do: fork adds the child's, a VMA split
//! adds one. `IPC_RMID` destroys a segment nobody has attached; otherwise it marks it
//! `SHM_DEST`, makes its key private, and the segment goes when its last VMA does.
//!
//! Limits boot at the defaults since "ipc,shm: increase the defaults for SHMALL, SHMMAX"
//! (v3.16): `SHMMAX` and `SHMALL` are `ULONG_MAX - 2^24` (bytes and pages), `SHMMNI` 4096,
//! `SHMMIN` 1; `/proc/sys/kernel/shmmax`, `shmall` and `shmmni` change them (`ipc/ipc_sysctl.c`:
//! `shmmni` at most `IPCMNI`, 32768, else EINVAL). `newseg` checks the size against `shmmax`
//! (EINVAL) and the pages against `shmall` (ENOSPC) first, then makes the segment's file (a
//! hugetlb segment's reservation: ENOMEM), and only then `ipc_addid` finds the table full at
//! `shmmni` (ENOSPC, the file dropped with its reservation), as LTP's hugeshmget03 fills it.
//!
//! Approximations: the caller is root (no `ipcperms` refusals, no `hugetlb_shm_group` check);
//! ids are `seq * 32768 + index` with `seq` counting every segment made, which differs from the
//! kernel's sequence in detail (a test compares ids only with each other); `shm_atime`,
//! `shm_dtime` and `shm_ctime` are not kept; no `SHM_LOCK`, `IPC_SET`, `IPC_INFO` or
//! `/proc/sysvipc/shm`; a segment whose key was made private by `IPC_RMID` is gone from the table
//! once its last attach goes, noticed at the next System V call; the pages go at that moment
//! all the same, with the last reference to the segment's file (`hugetlbfs_evict_inode`,
//! `shmem_evict_inode`).

use crate::errno::Errno;
use crate::fs::fmode;
use crate::hugetlb::MAP_HUGE_SHIFT;
use crate::kernel::{Cx, KState};
use crate::mmap::{MmapArgs, map, prot};
use crate::types::fs::FsType;
use crate::types::hugetlb::HugeSize;
use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::types::ids::Pid;
use crate::types::shm::{ShmIds, ShmLimits, ShmSegment};
use simcore::{Bytes, VirtAddr};

/// `shmget` and `shmat` flags (`include/uapi/linux/ipc.h`, `include/uapi/linux/shm.h`).
pub mod shmflg {
    pub const IPC_CREAT: u32 = 0o1000;
    pub const IPC_EXCL: u32 = 0o2000;
    pub const SHM_HUGETLB: u32 = 0o4000;
    pub const SHM_NORESERVE: u32 = 0o10000;
    /// The page size's log2 (`SHM_HUGE_SHIFT` = `MAP_HUGE_SHIFT`).
    pub const SHM_HUGE_BITS: u32 = 0x3f << super::MAP_HUGE_SHIFT;
    pub const SHM_RDONLY: u32 = 0o10000;
    pub const SHM_RND: u32 = 0o20000;
    pub const SHM_REMAP: u32 = 0o40000;
    pub const SHM_EXEC: u32 = 0o100000;
}

/// `IPC_PRIVATE`: a key that always makes a new segment.
pub const IPC_PRIVATE: i32 = 0;
/// The sysctl files of the limits.
const SHMMAX_PATH: &str = "/proc/sys/kernel/shmmax";
const SHMALL_PATH: &str = "/proc/sys/kernel/shmall";
const SHMMNI_PATH: &str = "/proc/sys/kernel/shmmni";

impl Default for ShmLimits {
    /// `SHMMAX`, `SHMALL` (since v3.16) and `SHMMNI`.
    fn default() -> Self {
        ShmLimits { max: u64::MAX - (1 << 24), all: u64::MAX - (1 << 24), mni: 4096 }
    }
}
/// `SHMLBA` on x86-64: attach addresses are page-aligned.
const SHMLBA: u64 = 4096;
/// `IPCMNI`: an id is `seq * IPCMNI + index`.
const IPCMNI: i32 = 32768;

/// What `shmctl(IPC_STAT)` reports (`struct shmid64_ds`, the fields mmsim keeps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShmidDs {
    pub key: i32,
    pub segsz: u64,
    pub mode: u32,
    pub nattch: u64,
    pub cpid: u32,
    pub lpid: u32,
}

impl ShmIds {
    /// The lowest index no segment holds (`ipc_addid`'s `idr_alloc` from 0): the held indices
    /// sorted, then the first gap, so a call costs O(n log n) in the n <= `SHMMNI` segments.
    fn lowest_free_index(&self) -> i32 {
        let mut held: Vec<i32> = self.segs.keys().map(|id| id % IPCMNI).collect();
        held.sort_unstable();
        let mut index = 0;
        for i in held {
            if i != index {
                break;
            }
            index += 1;
        }
        index
    }
}

impl KState {
    /// Whether `inode` is a SysV shm segment's file.
    pub(crate) fn shm_inode(&self, inode: InodeId) -> bool {
        self.shm.segs.values().any(|s| s.inode == inode)
    }

    /// `shm_nattch`: the segment's VMAs.
    fn shm_nattch(&self, s: &ShmSegment) -> u64 {
        self.inodes[s.inode].mapping.i_mmap.len() as u64
    }

    /// Drops removed segments nobody maps any more (`shm_close` calling `shm_destroy`).
    fn shm_reap(&mut self) {
        let gone: Vec<i32> = (self.shm.segs.iter())
            .filter(|(_, s)| s.dest && self.shm_nattch(s) == 0)
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            self.shm_destroy(id);
        }
    }

    /// `shm_destroy`: the segment leaves the table and drops its file.
    fn shm_destroy(&mut self, id: i32) {
        let s = self.shm.segs.remove(&id).expect("a segment");
        self.shm.tot -= s.segsz.div_ceil(4096);
        if let Some(f) = s.file {
            self.file_put(f);
        }
    }

    /// `newseg`: a new segment of `size` bytes under `key`.
    fn shm_newseg(
        &mut self,
        handle: &engine::Handle,
        pid: Pid,
        key: i32,
        size: u64,
        flg: u32,
    ) -> Result<i32, Errno> {
        let limits = self.shm.limits;
        if !(1..=limits.max).contains(&size) {
            return Err(Errno::EINVAL);
        }
        let pages = size.div_ceil(4096);
        if self.shm.tot.checked_add(pages).is_none_or(|t| t > limits.all) {
            return Err(Errno::ENOSPC);
        }
        let name = format!("/SYSV{:08x} (deleted)", key as u32);
        let (inode, file) = self.shm_file_setup(handle, name, size, flg)?;
        if self.shm.segs.len() as u64 >= limits.mni {
            self.file_put(file);
            return Err(Errno::ENOSPC);
        }
        let id = self.shm.seq.wrapping_mul(IPCMNI) + self.shm.lowest_free_index();
        self.shm.seq = (self.shm.seq + 1) % (i32::MAX / IPCMNI);
        self.shm.tot += pages;
        let s = ShmSegment {
            key,
            segsz: size,
            mode: flg & 0o777,
            cpid: pid,
            lpid: None,
            inode,
            file: Some(file),
            dest: false,
        };
        self.shm.segs.insert(id, s);
        Ok(id)
    }

    /// The segment's file: `hugetlb_file_setup` (reserving its pages unless `SHM_NORESERVE`)
    /// or `shmem_kernel_file_setup`.
    fn shm_file_setup(
        &mut self,
        handle: &engine::Handle,
        name: String,
        size: u64,
        flg: u32,
    ) -> Result<(InodeId, FileId), Errno> {
        let (fs, len) = if flg & shmflg::SHM_HUGETLB != 0 {
            let h = HugeSize::of_map_flags(flg & shmflg::SHM_HUGE_BITS).ok_or(Errno::EINVAL)?;
            let len = size.checked_next_multiple_of(h.bytes()).ok_or(Errno::ENOSPC)?;
            (FsType::Hugetlbfs(h), len)
        } else {
            (FsType::Tmpfs(crate::types::fs::TmpfsMount::ShmMnt), size)
        };
        let inode = self.new_inode(handle, name, fs, len, None);
        let file = self
            .open_file(inode, fmode::READ | fmode::WRITE, false, false)
            .expect("a new segment's inode is never write-denied");
        if let Some(h) = fs.hugetlb_size()
            && flg & shmflg::SHM_NORESERVE == 0
            && self.hugetlb_reserve_file(inode, 0, len / h.bytes()).is_err()
        {
            self.file_put(file);
            return Err(Errno::ENOMEM);
        }
        Ok((inode, file))
    }

    /// The value of `/proc/sys/kernel/shmmax`, `shmall` or `shmmni`, if `path` names one.
    pub(crate) fn shm_sysctl_read(&self, path: &str) -> Option<u64> {
        let l = &self.shm.limits;
        match path {
            SHMMAX_PATH => Some(l.max),
            SHMALL_PATH => Some(l.all),
            SHMMNI_PATH => Some(l.mni),
            _ => None,
        }
    }

    /// A write of `v` to a System V shm sysctl, if `path` names one (`shmmni` above `IPCMNI`:
    /// EINVAL).
    pub(crate) fn shm_sysctl_write(&mut self, path: &str, v: u64) -> Option<Result<(), Errno>> {
        let l = &mut self.shm.limits;
        match path {
            SHMMAX_PATH => l.max = v,
            SHMALL_PATH => l.all = v,
            SHMMNI_PATH if v > IPCMNI as u64 => return Some(Err(Errno::EINVAL)),
            SHMMNI_PATH => l.mni = v,
            _ => return None,
        }
        Some(Ok(()))
    }

    /// The segment `id` names, if it exists.
    fn shm_seg(&self, id: i32) -> Result<&ShmSegment, Errno> {
        self.shm.segs.get(&id).ok_or(Errno::EINVAL)
    }
}

/// `shmget(key, size, shmflg)`: the segment's id.
pub(crate) async fn shmget(cx: &Cx, key: i32, size: u64, flg: u32) -> Result<i32, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let pid = cx.current();
    let mut st = cx.st();
    st.shm_reap();
    let found = (key != IPC_PRIVATE)
        .then(|| st.shm.segs.iter().find(|(_, s)| s.key == key).map(|(&id, s)| (id, s.segsz)))
        .flatten();
    match found {
        None if key != IPC_PRIVATE && flg & shmflg::IPC_CREAT == 0 => Err(Errno::ENOENT),
        None => st.shm_newseg(cx, pid, key, size, flg),
        Some(_)
            if flg & (shmflg::IPC_CREAT | shmflg::IPC_EXCL)
                == shmflg::IPC_CREAT | shmflg::IPC_EXCL =>
        {
            Err(Errno::EEXIST)
        }
        Some((_, segsz)) if size > segsz => Err(Errno::EINVAL),
        Some((id, _)) => Ok(id),
    }
}

/// `shmat(shmid, addr, shmflg)`: where the segment is mapped.
pub(crate) async fn shmat(
    cx: &Cx,
    id: i32,
    addr: Option<VirtAddr>,
    flg: u32,
) -> Result<VirtAddr, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let pid = cx.current();
    let addr = match addr {
        Some(a) if a.0 % SHMLBA != 0 && flg & shmflg::SHM_RND != 0 && a.0 >= SHMLBA => {
            Some(VirtAddr(a.0 - a.0 % SHMLBA))
        }
        Some(a) if a.0 % SHMLBA != 0 => return Err(Errno::EINVAL),
        None if flg & shmflg::SHM_REMAP != 0 => return Err(Errno::EINVAL),
        a => a,
    };
    let (mode, mut prot) = match flg & shmflg::SHM_RDONLY {
        0 => (fmode::READ | fmode::WRITE, prot::READ | prot::WRITE),
        _ => (fmode::READ, prot::READ),
    };
    if flg & shmflg::SHM_EXEC != 0 {
        prot |= prot::EXEC;
    }
    let mm = cx.st().procs[pid].mm.ok_or(Errno::EINVAL)?;
    let (file, len) = {
        let mut st = cx.st();
        st.shm_reap();
        let inode = st.shm_seg(id)?.inode;
        let file = st.open_file(inode, mode, false, false)?;
        (file, st.inodes[inode].size)
    };
    // An attach that wraps around, or whose range is mapped, is EINVAL unless `SHM_REMAP`.
    let taken = |st: &KState, a: VirtAddr| match a.checked_add(Bytes(len)) {
        Some(end) => !st.mm(mm).vmas_in(a, end, |v| st.vma(v).end).is_empty(),
        None => true,
    };
    if addr.is_some_and(|a| flg & shmflg::SHM_REMAP == 0 && taken(&cx.st(), a)) {
        cx.st().file_put(file);
        return Err(Errno::EINVAL);
    }
    let fixed = if addr.is_some() { map::FIXED } else { 0 };
    let args =
        MmapArgs { addr, len: Bytes(len), prot, flags: map::SHARED | fixed, fd: None, offset: 0 };
    let mapped = crate::mmap::do_mmap_file(cx, pid, args, Some(file)).await;
    let mut st = cx.st();
    st.file_put(file);
    let at = mapped?;
    if let Some(s) = st.shm.segs.get_mut(&id) {
        s.lpid = Some(pid);
    }
    Ok(at)
}

/// `shmdt(addr)`: unmaps the attach that starts at `addr` (EINVAL when none does).
pub(crate) async fn shmdt(cx: &Cx, addr: VirtAddr) -> Result<(), Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    if !addr.0.is_multiple_of(4096) {
        return Err(Errno::EINVAL);
    }
    let mm = cx.st().procs[cx.current()].mm.ok_or(Errno::EINVAL)?;
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    let ranges = attach_ranges(&cx.st(), mm, addr);
    if ranges.is_empty() {
        return Err(Errno::EINVAL);
    }
    for (start, end) in ranges {
        crate::mmap::unmap_locked(cx, mm, start, end).await;
    }
    drop(_g);
    cx.st().shm_reap();
    Ok(())
}

/// The VMAs `shmdt(addr)` unmaps: the first segment VMA at or after `addr` whose offset matches
/// its distance from `addr`, and the later ones of the same file within the segment's size.
fn attach_ranges(
    st: &KState,
    mm: crate::types::ids::MmId,
    addr: VirtAddr,
) -> Vec<(VirtAddr, VirtAddr)> {
    let is_shm = |inode: InodeId| st.shm.segs.values().any(|s| s.inode == inode);
    let matches =
        |v: &crate::vma::Vma| v.start.0 >= addr.0 && (v.start.0 - addr.0) / 4096 == v.pgoff;
    let vmas = st.mm(mm).vmas_in(addr, VirtAddr(u64::MAX), |id| st.vma(id).end);
    let mut out = Vec::new();
    let mut first: Option<(InodeId, u64)> = None;
    for id in vmas {
        let v = st.vma(id);
        let Some(inode) = v.file.map(|f| st.file(f).inode).filter(|&i| is_shm(i)) else { continue };
        match first {
            None if matches(v) => {
                first = Some((inode, st.inodes[inode].size.next_multiple_of(4096)));
                out.push((v.start, v.end));
            }
            Some((i, size)) if i == inode && matches(v) && v.end.0 - addr.0 <= size => {
                out.push((v.start, v.end));
            }
            _ => {}
        }
    }
    out
}

/// `shmctl(id, IPC_STAT)`.
pub(crate) async fn shmctl_stat(cx: &Cx, id: i32) -> Result<ShmidDs, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let mut st = cx.st();
    st.shm_reap();
    let s = st.shm_seg(id)?;
    let dest = if s.dest { 0o1000 } else { 0 };
    Ok(ShmidDs {
        key: s.key,
        segsz: s.segsz,
        mode: s.mode | dest,
        nattch: st.shm_nattch(s),
        cpid: s.cpid.0,
        lpid: s.lpid.map_or(0, |p| p.0),
    })
}

/// `shmctl(id, IPC_RMID)`: destroys the segment, or marks it for destruction while attached.
pub(crate) async fn shmctl_rmid(cx: &Cx, id: i32) -> Result<(), Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let mut st = cx.st();
    st.shm_reap();
    let attached = st.shm_nattch(st.shm_seg(id)?) > 0;
    if !attached {
        st.shm_destroy(id);
        return Ok(());
    }
    let s = st.shm.segs.get_mut(&id).expect("looked up above");
    s.dest = true;
    s.key = IPC_PRIVATE;
    if let Some(f) = s.file.take() {
        st.file_put(f);
    }
    Ok(())
}
