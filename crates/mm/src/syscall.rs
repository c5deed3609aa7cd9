//! The syscall-level API of a simulated user thread: what tests, scenario files, the Python
//! bindings and workloads drive.
//!
//! Each method is the syscall (or memory access) of the same name, running the mechanism code in
//! the thread's simulated task: it charges virtual time, takes the kernel's locks and may block.
//! Errors are the kernel's: an errno for a syscall, a signal for a memory access.

use crate::arch::uaccess::{fault_and_retry, read_user, settle, touch, translate_run, write_user};
use crate::errno::{Errno, Signal, SysError};
use crate::filemap::{Cachestat, CachestatRange, writeback};
use crate::fork::{do_fork, exit_mmap};
use crate::fs::direct_io::{direct_read, direct_write, end_io, submit_read};
use crate::fs::exec::{ExecImage, ExecLayout, do_exec};
use crate::fs::fmode;
use crate::fs::ops::PageFill;
use crate::fs::pipe::vmsplice;
use crate::fs::proc::clear_refs::{ClearRefs, clear_refs};
use crate::gup::{hold, hold_read, hold_release};
use crate::kernel::Cx;
use crate::mmap::{MmapArgs, do_madvise, do_mmap, do_mprotect, do_munmap, map, prot};
use crate::pgtable::Access;
use crate::process::ProcState;
use crate::truncate::do_truncate;
use crate::types::fs::Submitted;
use crate::types::ids::DioId;
use crate::types::ids::FileId;
use crate::types::ids::HoldId;
use crate::types::ids::MmId;
use crate::types::ids::Pid;
use crate::types::mm_types::GupFlags;
use simcore::{Bytes, VirtAddr};

/// `/proc/lock_stat` (`kernel/locking/lockdep_proc.c`, `CONFIG_LOCK_STAT`): written `0` to clear.
pub const LOCK_STAT: &str = "/proc/lock_stat";

/// `open(2)` flags that the model reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub direct: bool,
    pub append: bool,
    pub truncate: bool,
}

impl OpenFlags {
    pub const RDONLY: OpenFlags =
        OpenFlags { read: true, write: false, direct: false, append: false, truncate: false };
    pub const RDWR: OpenFlags =
        OpenFlags { read: true, write: true, direct: false, append: false, truncate: false };
    pub const WRONLY: OpenFlags =
        OpenFlags { read: false, write: true, direct: false, append: false, truncate: false };
}

/// A simulated user thread.
#[derive(Debug)]
pub struct Thread {
    cx: Cx,
}

impl Thread {
    pub(crate) fn new(cx: Cx) -> Thread {
        Thread { cx }
    }

    /// The kernel-side context (for mechanisms in other crates of the workspace).
    pub fn cx(&self) -> &Cx {
        &self.cx
    }

    pub fn pid(&self) -> Pid {
        self.cx.current()
    }

    pub fn now(&self) -> simcore::SimTime {
        self.cx.now()
    }

    fn mm(&self) -> Result<MmId, Errno> {
        self.cx.st().procs[self.pid()].mm.ok_or(Errno::EINVAL)
    }

    fn fd(&self, fd: i32) -> Result<FileId, Errno> {
        self.cx.st().procs[self.pid()].fds.get(&fd).copied().ok_or(Errno::EBADF)
    }

    /// `mmap(2)`.
    pub async fn mmap(&self, args: MmapArgs) -> Result<VirtAddr, Errno> {
        do_mmap(&self.cx, self.pid(), args).await
    }

    /// `mmap(NULL, len, prot, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0)`.
    pub async fn mmap_anon(&self, len: Bytes, prot: u32) -> Result<VirtAddr, Errno> {
        let args = MmapArgs {
            addr: None,
            len,
            prot,
            flags: map::PRIVATE | map::ANONYMOUS,
            fd: None,
            offset: 0,
        };
        self.mmap(args).await
    }

    pub async fn munmap(&self, addr: VirtAddr, len: Bytes) -> Result<(), Errno> {
        do_munmap(&self.cx, self.mm()?, addr, len).await
    }

    pub async fn mprotect(&self, addr: VirtAddr, len: Bytes, prot: u32) -> Result<(), Errno> {
        do_mprotect(&self.cx, self.mm()?, addr, len, prot).await
    }

    /// A read of a number from a sysfs or sysctl file (`fs/sysfs.rs`), or from KSM's
    /// per-process files (`ksm/proc.rs`; `field`: the line of `/proc/self/ksm_stat`): ENOENT for
    /// a file or line this kernel or the model lacks.
    pub async fn sysfs_read(&self, path: &str, field: Option<&str>) -> Result<u64, Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        if let Ok(mm) = self.mm()
            && let Some(read) = crate::ksm::proc_read(&self.cx.st(), mm, path, field)
        {
            return read;
        }
        if field.is_some() {
            return Err(Errno::ENOENT);
        }
        let text = self.cx.st().sysfs_show(path).ok_or(Errno::ENOENT)?;
        text.trim().parse().map_err(|_| Errno::EINVAL)
    }

    /// A write of `value` to a sysfs or sysctl file (`fs/sysfs.rs`: the THP knobs, the hugetlb
    /// pools' files; debugfs's `split_huge_pages`, `huge_memory/split.rs`, and `lru_gen`,
    /// `mglru/debugfs.rs`, under `lru = mglru`): ENOENT for a file
    /// this kernel or the model lacks, EINVAL for a value the file refuses.
    pub async fn sysfs_write(&self, path: &str, value: &str) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        if path == crate::huge_memory::split::SPLIT_HUGE_PAGES {
            return crate::huge_memory::split::split_huge_pages_write(&self.cx, value).await;
        }
        if path == LOCK_STAT {
            // `lock_stat_write`: a write starting with `0` clears; any other is ignored.
            if value.starts_with('0') {
                let handle: &engine::Handle = &self.cx;
                handle.lock_stat_clear();
            }
            return Ok(());
        }
        if path == crate::mglru::debugfs::LRU_GEN {
            if !self.cx.st().lru.reclaim.lru_gen_enabled() {
                return Err(Errno::ENOENT);
            }
            return crate::mglru::debugfs::lru_gen_write(&self.cx, value).await;
        }
        let k = self.cx.kernel().version;
        let stored = self.cx.st().sysfs_store(path, value, k)?;
        match stored {
            Some(v) => crate::ksm::sysfs_stored(&self.cx, path, v).await,
            None => Ok(()),
        }
    }

    /// `prctl(option, arg)` with arguments 3 to 5 zero (`kernel/sys.c`): the value a get
    /// returns, `None` for a set. A get with `arg` other than 0 is EINVAL, as is an option the
    /// kernel lacks (`PR_SET_MEMORY_MERGE` and `PR_GET_MEMORY_MERGE` before v6.4).
    pub async fn prctl(&self, option: Prctl, arg: u64) -> Result<Option<u64>, Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let merge = matches!(option, Prctl::SetMemoryMerge | Prctl::GetMemoryMerge);
        if merge && !crate::era::has_prctl_memory_merge(self.cx.kernel().version) {
            return Err(Errno::EINVAL);
        }
        let mm = self.mm()?;
        match option {
            Prctl::SetThpDisable => {
                let lock = self.cx.st().mm(mm).mmap_lock;
                let _g = lock.write(&self.cx).await;
                self.cx.st().prctl_set_thp_disable(mm, arg != 0);
                Ok(None)
            }
            Prctl::SetMemoryMerge => {
                crate::ksm::prctl_set_memory_merge(&self.cx, mm, arg != 0).await.map(|()| None)
            }
            _ if arg != 0 => Err(Errno::EINVAL),
            Prctl::GetThpDisable => Ok(Some(u64::from(self.cx.st().prctl_get_thp_disable(mm)))),
            Prctl::GetMemoryMerge => {
                Ok(Some(u64::from(crate::ksm::prctl_get_memory_merge(&self.cx.st(), mm))))
            }
        }
    }

    /// `mremap(2)`; returns the mapping's address (`mremap.rs`).
    pub async fn mremap(&self, args: crate::mremap::MremapArgs) -> Result<VirtAddr, Errno> {
        let moved = crate::mremap::do_mremap(&self.cx, self.mm()?, args).await;
        self.cx.st().mlock_drain();
        moved
    }

    pub async fn madvise(&self, addr: VirtAddr, len: Bytes, advice: u32) -> Result<(), Errno> {
        let advised = do_madvise(&self.cx, self.mm()?, addr, len, advice).await;
        self.cx.st().mlock_drain();
        advised
    }

    /// `mlock(2)`, or `mlock2(2)` with `flags` (`mlock::mlock_flags`).
    pub async fn mlock(&self, addr: VirtAddr, len: Bytes, flags: Option<u32>) -> Result<(), Errno> {
        crate::mlock::do_mlock(&self.cx, self.mm()?, addr, len, flags).await
    }

    /// `mseal(2)` (`mseal.rs`).
    pub async fn mseal(&self, addr: VirtAddr, len: Bytes, flags: u64) -> Result<(), Errno> {
        crate::mseal::do_mseal(&self.cx, self.mm()?, addr, len, flags).await
    }

    /// `munlock(2)`.
    pub async fn munlock(&self, addr: VirtAddr, len: Bytes) -> Result<(), Errno> {
        crate::mlock::do_munlock(&self.cx, self.mm()?, addr, len).await
    }

    /// `brk(2)`: asks for the program break `addr` and returns the break in force afterwards
    /// (`addr` when granted, the old break when refused; `brk.rs`).
    pub async fn brk(&self, addr: VirtAddr) -> Result<VirtAddr, Errno> {
        Ok(crate::brk::do_brk(&self.cx, self.mm()?, addr).await)
    }

    /// `mlockall(2)` with `mlock::mcl` flags.
    pub async fn mlockall(&self, flags: u32) -> Result<(), Errno> {
        crate::mlock::do_mlockall(&self.cx, self.mm()?, flags).await
    }

    /// `munlockall(2)`.
    pub async fn munlockall(&self) -> Result<(), Errno> {
        crate::mlock::do_munlockall(&self.cx, self.mm()?).await
    }

    /// `remap_file_pages(2)` of `[start, start + size)` to file page `pgoff`
    /// (`remap_file_pages.rs`; `prot` must be 0, `flags` only `MAP_NONBLOCK`).
    pub async fn remap_file_pages(
        &self,
        (start, size): (VirtAddr, u64),
        (prot, pgoff, flags): (u32, u64, u32),
    ) -> Result<(), Errno> {
        let who = (self.pid(), self.mm()?);
        let args = (prot, pgoff, flags);
        crate::remap_file_pages::do_remap_file_pages(&self.cx, who, (start, size), args).await
    }

    /// `msync(2)` with `msync::ms` flags.
    pub async fn msync(&self, addr: VirtAddr, len: Bytes, flags: u32) -> Result<(), Errno> {
        crate::msync::do_msync(&self.cx, self.mm()?, addr, len, flags).await
    }

    /// `memfd_create(2)`; returns the descriptor (`memfd.rs`).
    pub async fn memfd_create(&self, name: &str, flags: u32) -> Result<i32, Errno> {
        crate::memfd::memfd_create(&self.cx, name, flags).await
    }

    /// `shmget(2)`: the System V segment of `key` (made with `IPC_CREAT`; `IPC_PRIVATE` makes
    /// a new one), its id.
    pub async fn shmget(&self, key: i32, size: u64, flags: u32) -> Result<i32, Errno> {
        crate::shm::shmget(&self.cx, key, size, flags).await
    }

    /// `shmat(2)`: maps segment `id` (at `addr` if given), returns where.
    pub async fn shmat(
        &self,
        id: i32,
        addr: Option<VirtAddr>,
        flags: u32,
    ) -> Result<VirtAddr, Errno> {
        crate::shm::shmat(&self.cx, id, addr, flags).await
    }

    /// `shmdt(2)`: unmaps the attach at `addr`.
    pub async fn shmdt(&self, addr: VirtAddr) -> Result<(), Errno> {
        crate::shm::shmdt(&self.cx, addr).await
    }

    /// `shmctl(id, IPC_STAT)`.
    pub async fn shmctl_stat(&self, id: i32) -> Result<crate::shm::ShmidDs, Errno> {
        crate::shm::shmctl_stat(&self.cx, id).await
    }

    /// `shmctl(id, IPC_RMID)`.
    pub async fn shmctl_rmid(&self, id: i32) -> Result<(), Errno> {
        crate::shm::shmctl_rmid(&self.cx, id).await
    }

    /// `open(2)` of an existing file; returns the descriptor.
    pub async fn open(&self, path: &str, flags: OpenFlags) -> Result<i32, Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        if !flags.read && !flags.write {
            return Err(Errno::EINVAL);
        }
        self.cx.st().procs[self.pid()].unused_fd()?;
        let inode = *self.cx.st().paths.get(path).ok_or(Errno::ENOENT)?;
        let mode =
            if flags.read { fmode::READ } else { 0 } | if flags.write { fmode::WRITE } else { 0 };
        let seen = match flags.write {
            true => crate::huge_memory::thps_seen_before_open(&self.cx, inode).await,
            false => None,
        };
        let f = self.cx.st().open_file(inode, mode, flags.direct, flags.append)?;
        if flags.write {
            crate::huge_memory::open_for_write_drop_thps(&self.cx, inode, seen).await;
        }
        // `may_open` drops O_TRUNC for a device node.
        if flags.truncate && flags.write && !self.cx.st().inodes[inode].fs.is_blkdev() {
            do_truncate(&self.cx, inode, 0).await;
        }
        // The kernel reserves the descriptor before the lookup; here another thread may take
        // the last free one meanwhile, and then this open fails as if it had come first.
        let mut st = self.cx.st();
        let fd = st.procs[self.pid()].unused_fd();
        let fd = fd.inspect_err(|_| st.file_put(f))?;
        st.procs[self.pid()].fds.insert(fd, f);
        Ok(fd)
    }

    /// `close(2)`.
    pub async fn close(&self, fd: i32) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let mut st = self.cx.st();
        let f = st.procs[self.pid()].fds.remove(&fd).ok_or(Errno::EBADF)?;
        st.file_put(f);
        drop(st);
        crate::userfaultfd::wake_released(&self.cx);
        Ok(())
    }

    /// `dup(2)`: a new descriptor for the same open file description.
    pub async fn dup(&self, fd: i32) -> Result<i32, Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        let mut st = self.cx.st();
        let new = st.procs[self.pid()].unused_fd()?;
        st.file_mut(f).refs += 1;
        st.procs[self.pid()].fds.insert(new, f);
        Ok(new)
    }

    /// `pread(2)` into user memory at `buf` (or, with `buf = None`, a read whose data nobody
    /// looks at: the same kernel work, no bytes generated). Returns the bytes read. A descriptor
    /// opened with O_DIRECT reads through DMA into the buffer's pages (`buf` is then required);
    /// a pipe returns what its buffers hold.
    pub async fn pread(
        &self,
        fd: i32,
        buf: Option<VirtAddr>,
        len: u64,
        pos: u64,
    ) -> Result<u64, SysError> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        let (inode, readable, ra, direct, fs) = {
            let st = self.cx.st();
            let file = st.file(f);
            // FMODE_RANDOM (POSIX_FADV_RANDOM): read only what was asked (`force_page_cache_ra`).
            let ra = if file.mode & fmode::RANDOM != 0 { 0 } else { file.ra.ra_pages };
            (file.inode, file.readable(), ra, file.direct, st.inodes[file.inode].fs)
        };
        if !readable {
            return Err(Errno::EBADF.into());
        }
        if direct && fs.has_direct_io() {
            let buf = buf.ok_or(Errno::EFAULT)?;
            return direct_read(&self.cx, self.mm()?, inode, buf, len, pos).await;
        }
        let (n, data) = fs.read_iter(&self.cx, inode, (pos, len), ra, buf.is_some()).await?;
        if let (Some(buf), Some(data)) = (buf, data) {
            // `copy_to_user` into memory the process cannot write fails the call with EFAULT
            // (`filemap_read`; no signal: the kernel's own access faults and is fixed up).
            // Approximation: a buffer that faults partway reads nothing, not a short count.
            let copied = write_user(&self.cx, self.mm()?, buf, &data).await;
            copied.map_err(|_| Errno::EFAULT)?;
        }
        Ok(n)
    }

    /// `pwrite(2)` of `len` bytes from `buf` at `pos`: on an O_DIRECT descriptor the device reads
    /// the buffer's pages (`fs/direct_io.rs`), otherwise the bytes are copied into the file
    /// (EFAULT when the buffer cannot be read). Returns the bytes written.
    pub async fn pwrite_from(
        &self,
        fd: i32,
        buf: VirtAddr,
        len: u64,
        pos: u64,
    ) -> Result<u64, SysError> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        let (inode, writable, direct, fs) = {
            let st = self.cx.st();
            let file = st.file(f);
            (file.inode, file.writable(), file.direct, st.inodes[file.inode].fs)
        };
        if !writable {
            return Err(Errno::EBADF.into());
        }
        if direct && fs.has_direct_io() {
            return direct_write(&self.cx, self.mm()?, inode, buf, len, pos).await;
        }
        let data = read_user(&self.cx, self.mm()?, buf, len).await.map_err(|_| Errno::EFAULT)?;
        Ok(fs.write_iter(&self.cx, inode, pos, &data).await?)
    }

    /// An asynchronous `pread` into `buf` (`io_submit` of `IOCB_CMD_PREAD`): on a descriptor
    /// opened with O_DIRECT (a regular file) the pages are taken and the DMA left in flight until
    /// [`Thread::dio_complete`]; any other read is done at submission, as aio does it. Returns
    /// the request's id.
    pub async fn pread_submit(
        &self,
        fd: i32,
        buf: VirtAddr,
        len: u64,
        pos: u64,
    ) -> Result<DioId, SysError> {
        let f = self.fd(fd)?;
        let (inode, async_dma) = {
            let st = self.cx.st();
            let file = st.file(f);
            let fs = st.inodes[file.inode].fs;
            (file.inode, file.direct && file.readable() && fs.has_direct_io())
        };
        let submitted = if async_dma {
            self.cx.charge(crate::sim::cost::Cost::Syscall).await;
            submit_read(&self.cx, self.mm()?, inode, buf, len, pos).await?
        } else {
            Submitted::Done(self.pread(fd, Some(buf), len, pos).await?)
        };
        Ok(self.cx.st().dio_reads.push(Some(submitted)))
    }

    /// Completes an asynchronous read and reaps it (`io_getevents`): the device writes the held
    /// pages now, as the DMA ends. Returns the bytes read; EINVAL for a request already reaped.
    pub async fn dio_complete(&self, id: DioId) -> Result<u64, Errno> {
        self.cx.preempt_point().await;
        let slot = self.cx.st().dio_reads.get_mut(id).and_then(Option::take);
        match slot.ok_or(Errno::EINVAL)? {
            Submitted::Done(n) => Ok(n),
            Submitted::InFlight(req) => Ok(end_io(&self.cx, req)),
        }
    }

    /// `read(2)` at the file position, advancing it.
    pub async fn read(&self, fd: i32, buf: Option<VirtAddr>, len: u64) -> Result<u64, SysError> {
        let f = self.fd(fd)?;
        let pos = self.cx.st().file(f).pos;
        let n = self.pread(fd, buf, len, pos).await?;
        self.cx.st().file_mut(f).pos = pos + n;
        Ok(n)
    }

    /// `pwrite(2)` of `len` bytes from user memory at `buf`.
    pub async fn pwrite(
        &self,
        fd: i32,
        buf: VirtAddr,
        len: u64,
        pos: u64,
    ) -> Result<u64, SysError> {
        let data = read_user(&self.cx, self.mm()?, buf, len).await?;
        self.pwrite_data(fd, &data, pos).await.map_err(SysError::from)
    }

    /// `pwrite(2)` of `data` (as if from a user buffer already holding it).
    pub async fn pwrite_data(&self, fd: i32, data: &[u8], pos: u64) -> Result<u64, Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        let (inode, writable) = {
            let st = self.cx.st();
            (st.file(f).inode, st.file(f).writable())
        };
        if !writable {
            return Err(Errno::EBADF);
        }
        let fs = self.cx.st().inodes[inode].fs;
        fs.write_iter(&self.cx, inode, pos, data).await
    }

    /// `write(2)` of `data` at the file position (the end with `O_APPEND`).
    pub async fn write_data(&self, fd: i32, data: &[u8]) -> Result<u64, Errno> {
        let f = self.fd(fd)?;
        let pos = {
            let st = self.cx.st();
            let file = st.file(f);
            if file.append { st.inodes[file.inode].size } else { file.pos }
        };
        let n = self.pwrite_data(fd, data, pos).await?;
        self.cx.st().file_mut(f).pos = pos + n;
        Ok(n)
    }

    /// A read of `/proc/self/pagemap` at `addr` as root: the PFN mapped there, 0 when no page is
    /// present (a swap entry's offset is not a frame).
    pub fn pagemap_pfn(&self, addr: VirtAddr) -> Result<u64, Errno> {
        use crate::fs::proc::{PM_PFN_MASK, PM_PRESENT};
        let mm = self.mm()?;
        let e = self.cx.st().pagemap(mm, addr, 1)[0];
        Ok(if e & PM_PRESENT != 0 { e & PM_PFN_MASK } else { 0 })
    }

    /// `mincore(2)`: one byte per page of `[addr, addr + len)`, bit 0 set when it is resident.
    pub async fn mincore(&self, addr: VirtAddr, len: u64) -> Result<Vec<u8>, Errno> {
        crate::mincore::do_mincore(&self.cx, self.mm()?, addr, len).await
    }

    /// `ftruncate(2)`.
    pub async fn ftruncate(&self, fd: i32, size: u64) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        let (inode, writable) = {
            let st = self.cx.st();
            (st.file(f).inode, st.file(f).writable())
        };
        // `do_sys_ftruncate`: only a regular file opened for write.
        if !writable || self.cx.st().inodes[inode].fs.is_blkdev() {
            return Err(Errno::EINVAL);
        }
        crate::fs::hugetlbfs::check_truncate_size(&self.cx.st(), inode, size)?;
        do_truncate(&self.cx, inode, size).await;
        Ok(())
    }

    /// `truncate(2)` by path: needs write access, like opening for write.
    pub async fn truncate(&self, path: &str, size: u64) -> Result<(), Errno> {
        let fd = self.open(path, OpenFlags::WRONLY).await?;
        let r = self.ftruncate(fd, size).await;
        self.close(fd).await?;
        r
    }

    /// `posix_fadvise(2)` (`advice` is a `POSIX_FADV_*` value, [`crate::fadvise::advice`]).
    pub async fn fadvise(&self, fd: i32, offset: i64, len: i64, advice: i32) -> Result<(), Errno> {
        let f = self.fd(fd)?;
        crate::fadvise::fadvise(&self.cx, f, offset, len, advice).await
    }

    /// `cachestat(2)` of `range` of open file `fd` ([`crate::filemap`]): `range` is `None` and
    /// `cstat` false for a NULL pointer.
    pub async fn cachestat(
        &self,
        fd: i32,
        range: Option<CachestatRange>,
        cstat: bool,
        flags: u32,
    ) -> Result<Cachestat, Errno> {
        crate::filemap::cachestat(&self.cx, self.fd(fd), range, cstat, flags).await
    }

    /// `readahead(2)` of `count` bytes from `offset` ([`crate::fadvise`]).
    pub async fn readahead(&self, fd: i32, offset: u64, count: u64) -> Result<(), Errno> {
        let f = self.fd(fd)?;
        crate::fadvise::readahead(&self.cx, f, offset, count).await
    }

    /// A write of `amount` to a cgroup's `memory.reclaim`: reclaims from it until that much was
    /// freed (EAGAIN when reclaim stops making progress first).
    pub async fn memory_reclaim(
        &self,
        memcg: crate::types::ids::MemcgId,
        amount: Bytes,
    ) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let want = amount.pages_ceil();
        let mut freed = 0;
        let mut retries = 0;
        while freed < want {
            let n =
                crate::vmscan::try_to_free_mem_cgroup_pages(&self.cx, memcg, want - freed).await;
            freed += n;
            if n == 0 {
                retries += 1;
                if retries >= crate::memcontrol::MAX_RECLAIM_RETRIES {
                    return Err(Errno::EAGAIN);
                }
            }
        }
        Ok(())
    }

    /// `fallocate(2)`: `mode` is a set of [`crate::fs::falloc`] flags (none: allocate and extend
    /// the file; `KEEP_SIZE`: allocate only; `PUNCH_HOLE | KEEP_SIZE`: free the range).
    pub async fn fallocate(&self, fd: i32, mode: u32, offset: u64, len: u64) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        crate::truncate::vfs_fallocate(&self.cx, f, mode, offset, len).await
    }

    /// `fsync(2)`: writes the file's dirty pages back.
    pub async fn fsync(&self, fd: i32) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        let inode = self.cx.st().file(f).inode;
        writeback(&self.cx, inode).await;
        Ok(())
    }

    /// `fork(2)`: returns the child's pid. The child has no running thread until one is started
    /// in it (`Machine::spawn_thread`).
    pub async fn fork(&self) -> Result<Pid, Errno> {
        do_fork(&self.cx, self.pid()).await
    }

    /// `exit(2)`: tears the address space down and closes every file.
    pub async fn exit(&self) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let pid = self.pid();
        let mm = self.cx.st().procs[pid].mm.take();
        if let Some(mm) = mm {
            exit_mmap(&self.cx, mm).await;
        }
        let mut st = self.cx.st();
        let fds = std::mem::take(&mut st.procs[pid].fds);
        for f in fds.into_values() {
            st.file_put(f);
        }
        st.procs[pid].state = ProcState::Exited;
        drop(st);
        crate::userfaultfd::wake_released(&self.cx);
        Ok(())
    }

    /// `wait4(2)` for `child`, which has exited: reaps it (`release_task`). ECHILD if `child` is
    /// not an exited child of this process.
    pub async fn wait(&self, child: Pid) -> Result<(), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let ok = self
            .cx
            .st()
            .procs
            .get(child)
            .is_some_and(|p| p.parent == Some(self.pid()) && p.state == ProcState::Exited);
        if !ok {
            return Err(Errno::ECHILD);
        }
        self.cx.charge(crate::sim::cost::Cost::TaskReap).await;
        Ok(())
    }

    /// `execve(2)` of a file laid out as `image`.
    pub async fn exec(&self, path: &str, image: ExecImage) -> Result<ExecLayout, Errno> {
        do_exec(&self.cx, self.pid(), path, image).await
    }

    /// `execve(2)` of an ELF executable whose program headers (and its interpreter's) were read
    /// into `image`.
    pub async fn exec_elf(&self, image: &crate::fs::binfmt_elf::ElfExec) -> Result<(), Errno> {
        crate::fs::binfmt_elf::load_elf_binary(&self.cx, self.pid(), image).await
    }

    /// `pipe(2)`: returns the read and write descriptors.
    pub async fn pipe(&self) -> Result<(i32, i32), Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let mut st = self.cx.st();
        let [rfd, wfd] = st.procs[self.pid()].unused_fds::<2>()?;
        let (r, w) = st.pipe_create(&self.cx);
        let p = &mut st.procs[self.pid()];
        p.fds.insert(rfd, r);
        p.fds.insert(wfd, w);
        Ok((rfd, wfd))
    }

    /// `userfaultfd(2)`: a userfaultfd for this process's address space (`userfaultfd.rs`);
    /// `flags` are `O_CLOEXEC`, `O_NONBLOCK` and `UFFD_USER_MODE_ONLY`
    /// (`mm::userfaultfd::flags`). With `dev`, `open("/dev/userfaultfd")` and its
    /// `USERFAULTFD_IOC_NEW` (v6.1) instead.
    pub async fn userfaultfd(&self, flags: u32, dev: bool) -> Result<i32, Errno> {
        crate::userfaultfd::new_userfaultfd(&self.cx, self.pid(), flags, dev).await
    }

    /// `ioctl(fd, UFFDIO_API)` with `api` (`UFFD_API`) and `features`: returns the features
    /// offered that the model implements (the kernel's answer lists every one it has).
    pub async fn uffdio_api(&self, fd: i32, api: u64, features: u64) -> Result<u64, Errno> {
        crate::userfaultfd::userfaultfd_api(&self.cx, self.pid(), fd, (api, features)).await
    }

    /// `ioctl(fd, UFFDIO_REGISTER)` of `[addr, addr + len)` with `mode`
    /// (`UFFDIO_REGISTER_MODE_*`).
    pub async fn uffdio_register(
        &self,
        fd: i32,
        addr: VirtAddr,
        len: u64,
        mode: u64,
    ) -> Result<(), Errno> {
        let at = (self.pid(), fd);
        crate::userfaultfd::register::userfaultfd_register(&self.cx, at, (addr, len), mode).await
    }

    /// `ioctl(fd, UFFDIO_UNREGISTER)` of `[addr, addr + len)`.
    pub async fn uffdio_unregister(&self, fd: i32, addr: VirtAddr, len: u64) -> Result<(), Errno> {
        let at = (self.pid(), fd);
        crate::userfaultfd::register::userfaultfd_unregister(&self.cx, at, (addr, len)).await
    }

    /// `ioctl(fd, UFFDIO_WAKE)` of `[addr, addr + len)`: the faults waiting there retry.
    pub async fn uffdio_wake(&self, fd: i32, addr: VirtAddr, len: u64) -> Result<(), Errno> {
        crate::userfaultfd::userfaultfd_wake(&self.cx, (self.pid(), fd), (addr, len)).await
    }

    /// `ioctl(fd, UFFDIO_COPY)` of `len` bytes from this thread's `src` to `dst` of the
    /// userfaultfd's address space, with `mode` (`UFFDIO_COPY_MODE_*`): the bytes copied.
    pub async fn uffdio_copy(
        &self,
        fd: i32,
        (dst, src): (VirtAddr, VirtAddr),
        len: u64,
        mode: u64,
    ) -> Result<u64, Errno> {
        let at = (self.pid(), fd);
        crate::userfaultfd::mfill::userfaultfd_copy(&self.cx, at, (dst, src), (len, mode)).await
    }

    /// `ioctl(fd, UFFDIO_ZEROPAGE)` of `[dst, dst + len)` with `mode`: the bytes zero-filled.
    pub async fn uffdio_zeropage(
        &self,
        fd: i32,
        dst: VirtAddr,
        len: u64,
        mode: u64,
    ) -> Result<u64, Errno> {
        let at = (self.pid(), fd);
        crate::userfaultfd::mfill::userfaultfd_zeropage(&self.cx, at, dst, (len, mode)).await
    }

    /// `ioctl(fd, UFFDIO_CONTINUE)` of `[dst, dst + len)` with `mode` (v5.13): the pages the file
    /// caches mapped; the bytes mapped.
    pub async fn uffdio_continue(
        &self,
        fd: i32,
        dst: VirtAddr,
        len: u64,
        mode: u64,
    ) -> Result<u64, Errno> {
        let at = (self.pid(), fd);
        crate::userfaultfd::mfill::userfaultfd_continue(&self.cx, at, dst, (len, mode)).await
    }

    /// `ioctl(fd, UFFDIO_WRITEPROTECT)` of `[addr, addr + len)` with `mode`
    /// (`UFFDIO_WRITEPROTECT_MODE_*`, v5.7): sets or resolves the write-protection.
    pub async fn uffdio_writeprotect(
        &self,
        fd: i32,
        addr: VirtAddr,
        len: u64,
        mode: u64,
    ) -> Result<(), Errno> {
        let at = (self.pid(), fd);
        crate::userfaultfd::writeprotect::userfaultfd_writeprotect(&self.cx, at, (addr, len), mode)
            .await
    }

    /// `read(2)` of one message from userfaultfd `fd`, decoded: sleeps until a fault or an event
    /// is posted (EAGAIN with `O_NONBLOCK`); EINVAL for a descriptor that is no userfaultfd.
    pub async fn uffd_read(&self, fd: i32) -> Result<crate::userfaultfd::UffdMsg, Errno> {
        self.cx.charge(crate::sim::cost::Cost::Syscall).await;
        let f = self.fd(fd)?;
        let inode = self.cx.st().file(f).inode;
        if !self.cx.st().uffd.ctxs.contains_key(&inode) {
            return Err(Errno::EINVAL);
        }
        let len = crate::userfaultfd::UFFD_MSG_SIZE;
        let msg = crate::userfaultfd::userfaultfd_read(&self.cx, inode, len).await?;
        Ok(crate::userfaultfd::UffdMsg::decode(&msg).expect("the model writes known events"))
    }

    /// `vmsplice(2)`: queues references to the pages of `[addr, addr + len)` in the pipe `fd`.
    pub async fn vmsplice(&self, fd: i32, addr: VirtAddr, len: u64) -> Result<u64, Errno> {
        let f = self.fd(fd)?;
        let (inode, writable) = {
            let st = self.cx.st();
            (st.file(f).inode, st.file(f).writable())
        };
        if !writable || !self.cx.st().inodes[inode].fs.is_fifo() {
            return Err(Errno::EBADF);
        }
        vmsplice(&self.cx, self.mm()?, inode, addr, len).await
    }

    /// Takes the pages of `[addr, addr + len)` with GUP and keeps them, as a device driver (or
    /// the kernel's `gup_test` facility) would; returns the holder's id.
    pub async fn gup_hold(
        &self,
        addr: VirtAddr,
        len: u64,
        flags: GupFlags,
    ) -> Result<HoldId, Errno> {
        hold(&self.cx, self.mm()?, addr, len, flags).await
    }

    /// What the holder sees in the held pages (the physical pages, whatever the page tables map
    /// now).
    pub async fn gup_read(&self, id: HoldId) -> Result<Vec<u8>, Errno> {
        self.cx.preempt_point().await;
        hold_read(&self.cx.st(), id)
    }

    /// Releases a holder's pages.
    pub async fn gup_release(&self, id: HoldId) -> Result<(), Errno> {
        self.cx.preempt_point().await;
        hold_release(&self.cx, id)
    }

    /// `IORING_REGISTER_BUFFERS` of one buffer `[addr, addr + len)`: a long-term writable pin
    /// (`io_uring.rs`); returns the registered buffer, which `gup_read` reads and
    /// `gup_release` unregisters.
    pub async fn io_uring_register_buffers(
        &self,
        addr: VirtAddr,
        len: u64,
    ) -> Result<HoldId, Errno> {
        crate::io_uring::register_buffers(&self.cx, self.mm()?, addr, len).await
    }

    /// `IORING_OP_WRITE_FIXED`: writes `len` bytes at `addr` of registered buffer `id`, as its
    /// pinned pages hold them, to `fd` at `pos`. Returns the bytes written.
    pub async fn io_uring_write_fixed(
        &self,
        id: HoldId,
        addr: VirtAddr,
        len: u64,
        fd: i32,
        pos: u64,
    ) -> Result<u64, Errno> {
        crate::io_uring::check_io_uring(&self.cx)?;
        let data = {
            let st = self.cx.st();
            let off = crate::io_uring::fixed_offset(&st, id, addr, len)? as usize;
            hold_read(&st, id)?[off..off + len as usize].to_vec()
        };
        self.pwrite_data(fd, &data, pos).await
    }

    /// `IORING_OP_READ_FIXED`: reads `len` bytes of `fd` at `pos` into the pinned pages of
    /// registered buffer `id` at `addr`, through the page cache. Returns the bytes read.
    pub async fn io_uring_read_fixed(
        &self,
        id: HoldId,
        addr: VirtAddr,
        len: u64,
        fd: i32,
        pos: u64,
    ) -> Result<u64, SysError> {
        crate::io_uring::check_io_uring(&self.cx)?;
        let off = crate::io_uring::fixed_offset(&self.cx.st(), id, addr, len)?;
        let f = self.fd(fd)?;
        let (inode, readable, ra) = {
            let st = self.cx.st();
            let file = st.file(f);
            (file.inode, file.readable(), file.ra.ra_pages)
        };
        if !readable {
            return Err(Errno::EBADF.into());
        }
        let fs = self.cx.st().inodes[inode].fs;
        let (n, data) = fs.read_iter(&self.cx, inode, (pos, len), ra, true).await?;
        crate::io_uring::copy_to_fixed(&self.cx, id, off, &data.expect("asked for the data"))?;
        Ok(n)
    }

    /// Writes `value` to `/proc/PID/clear_refs` of process `target`.
    pub async fn clear_refs(&self, target: Pid, value: u64) -> Result<(), Errno> {
        let kind = ClearRefs::from_value(value)?;
        let mm = self.cx.st().procs.get(target).and_then(|p| p.mm).ok_or(Errno::ENOENT)?;
        clear_refs(&self.cx, mm, kind).await;
        Ok(())
    }

    /// Accesses one byte in every page of `[addr, addr + len)`.
    pub async fn touch(&self, addr: VirtAddr, len: Bytes, access: Access) -> Result<(), Signal> {
        let mm = self.mm().map_err(|_| Signal::SIGSEGV)?;
        let _user = self.cx.uffd_scope(crate::kernel::UffdFlag::User, true);
        self.deliver(touch(&self.cx, mm, addr, len, access).await)
    }

    /// Loads `len` bytes from `addr`.
    pub async fn read_bytes(&self, addr: VirtAddr, len: u64) -> Result<Vec<u8>, Signal> {
        let mm = self.mm().map_err(|_| Signal::SIGSEGV)?;
        let _user = self.cx.uffd_scope(crate::kernel::UffdFlag::User, true);
        self.deliver(read_user(&self.cx, mm, addr, len).await)
    }

    /// Runs the MMU over `refs` (trace replay) without blocking: returns how many accesses were
    /// translated; the next one, if any, faults and goes to [`Thread::access_fault`].
    pub fn access_run(&self, refs: &[(VirtAddr, Access)]) -> usize {
        match self.mm() {
            Ok(mm) => translate_run(&self.cx, mm, refs),
            Err(_) => 0,
        }
    }

    /// Takes the page fault of the access [`Thread::access_run`] stopped at and retries it, as
    /// the CPU does.
    pub async fn access_fault(&self, addr: VirtAddr, access: Access) -> Result<(), Signal> {
        let mm = self.mm().map_err(|_| Signal::SIGSEGV)?;
        let _user = self.cx.uffd_scope(crate::kernel::UffdFlag::User, true);
        self.deliver(fault_and_retry(&self.cx, mm, addr, access).await)
    }

    /// Page-sized `pread`s of `pages` (page indexes of the file open as `fd`) served from the
    /// page cache without blocking (trace replay): returns how many were hits, in order; the
    /// next one, if any, must go through [`Thread::pread`]. Their time is charged by
    /// [`Thread::read_settle`].
    pub fn read_run(&self, fd: i32, pages: &[u64]) -> usize {
        let Ok(f) = self.fd(fd) else { return 0 };
        let mut st = self.cx.st();
        let file = st.file(f);
        let inode = file.inode;
        if file.direct
            || !file.readable()
            || st.inodes[inode].fs.page_fill() != Some(PageFill::ReadFolio)
        {
            return 0;
        }
        let size = st.inodes[inode].size_pages();
        for (i, &p) in pages.iter().enumerate() {
            if p >= size
                || !matches!(st.filemap_read_lookup(inode, p), crate::filemap::ReadLookup::Hit(_))
            {
                return i;
            }
        }
        pages.len()
    }

    /// Charges `n` page-sized reads served by [`Thread::read_run`].
    pub async fn read_settle(&self, n: u64) {
        use crate::sim::cost::Cost;
        let each = self.cx.cost(Cost::Syscall)
            + self.cx.cost(Cost::PageCacheLookup)
            + self.cx.cost(Cost::UserCopy4k);
        engine::Cx::charge(&self.cx, each * n).await;
    }

    /// Runs the MMU over every access of `refs`: runs of translated ones without blocking
    /// ([`Thread::access_run`]), each one that must fault through the fault handler, then
    /// retried; stops at the first signal.
    pub async fn access_all(&self, refs: &[(VirtAddr, Access)]) -> Result<(), Signal> {
        let mut i = 0;
        while i < refs.len() {
            let done = self.access_run(&refs[i..]);
            self.access_settle(done as u64).await;
            i += done;
            if let Some(&(addr, access)) = refs.get(i) {
                self.access_fault(addr, access).await?;
                i += 1;
            }
        }
        Ok(())
    }

    /// Spends `d` of CPU time in user mode (the program's own computation).
    pub async fn compute(&self, d: simcore::SimDuration) {
        engine::Cx::charge(&self.cx, d).await;
    }

    /// Charges the time of `n` accesses translated by [`Thread::access_run`].
    pub async fn access_settle(&self, n: u64) {
        settle(&self.cx, n).await;
    }

    /// Charges `n` stores translated through the entry of a page this task's last store
    /// faulted in and the kernel copied for it (copy-on-write), over `len` bytes of it in order:
    /// as [`Thread::access_settle`], with the reads for ownership and write-backs of the lines
    /// the copy left outside the CPU's caches (`arch::caches`; none for a small page).
    pub async fn stores_after_copy(&self, n: u64, len: Bytes) {
        crate::arch::uaccess::settle_stores_after_copy(&self.cx, n, len).await;
    }

    /// `pwrite(2)` of `data` at `addr` to `/proc/self/mem`: a forced write, which reaches
    /// mappings the process cannot write itself (`fs/proc/mem.rs`). Returns the bytes written.
    pub async fn proc_mem_write(&self, addr: VirtAddr, data: &[u8]) -> Result<u64, Errno> {
        crate::fs::proc::mem::mem_write(&self.cx, self.mm()?, addr, data).await
    }

    /// Stores `data` at `addr`.
    pub async fn write_bytes(&self, addr: VirtAddr, data: &[u8]) -> Result<(), Signal> {
        let mm = self.mm().map_err(|_| Signal::SIGSEGV)?;
        let _user = self.cx.uffd_scope(crate::kernel::UffdFlag::User, true);
        self.deliver(write_user(&self.cx, mm, addr, data).await)
    }

    /// Counts the signal a user access of this thread raised (`force_sig_fault` from the fault
    /// handler's `mm_fault_error`) in its process's `signals`, and passes the result on.
    fn deliver<T>(&self, r: Result<T, Signal>) -> Result<T, Signal> {
        if let Err(sig) = r {
            let pid = self.cx.current();
            *self.cx.st().procs[pid].signals.entry(sig).or_default() += 1;
        }
        r
    }
}

/// Protection bits for convenience: `prot::READ | prot::WRITE`.
pub const PROT_RW: u32 = prot::READ | prot::WRITE;

/// The `prctl(2)` options the model has (`include/uapi/linux/prctl.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prctl {
    SetThpDisable,
    GetThpDisable,
    SetMemoryMerge,
    GetMemoryMerge,
}

impl Prctl {
    /// Every option with its name and number.
    pub const ALL: [(Prctl, &'static str, u64); 4] = [
        (Prctl::SetThpDisable, "PR_SET_THP_DISABLE", 41),
        (Prctl::GetThpDisable, "PR_GET_THP_DISABLE", 42),
        (Prctl::SetMemoryMerge, "PR_SET_MEMORY_MERGE", 67),
        (Prctl::GetMemoryMerge, "PR_GET_MEMORY_MERGE", 68),
    ];

    /// The option named `name` (`"PR_SET_THP_DISABLE"`).
    pub fn from_name(name: &str) -> Option<Prctl> {
        Prctl::ALL.iter().find(|(_, n, _)| *n == name).map(|&(p, _, _)| p)
    }

    fn entry(self) -> &'static (Prctl, &'static str, u64) {
        Prctl::ALL.iter().find(|(p, _, _)| *p == self).expect("every option is listed")
    }

    pub fn name(self) -> &'static str {
        self.entry().1
    }

    /// The option's number, as the syscall takes it.
    pub fn number(self) -> u64 {
        self.entry().2
    }

    /// Whether the option reads a value (its `arg` must be 0).
    pub fn is_get(self) -> bool {
        matches!(self, Prctl::GetThpDisable | Prctl::GetMemoryMerge)
    }
}
