//! The system calls the native executor makes, as safe functions over the `libc` crate's
//! bindings: each returns the kernel's errno as `mm::Errno` (or the raw number when the model
//! has no name for it), so a native result compares with the model's directly.
//!
//! The scenario's numeric arguments (`PROT_*`, `MAP_*`, `MADV_*`, `MS_*`, `MREMAP_*`,
//! `FALLOC_FL_*`, `MFD_*`, `SHM_*`, `MCL_*`, `MLOCK_*`) are the x86-64 values the model keeps, so
//! they pass through unchanged; `tests::model_constants_are_the_kernels` holds the model to
//! them.

#![allow(unsafe_code)]

use std::ffi::CString;

/// A failed system call: the errno the model can name, or the raw number it cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SysErr {
    Errno(mm::Errno),
    Raw(i32),
}

impl std::fmt::Display for SysErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SysErr::Errno(e) => write!(f, "{e}"),
            SysErr::Raw(n) => write!(f, "errno {n}"),
        }
    }
}

pub(crate) type SysResult<T> = Result<T, SysErr>;

/// The errno of the call that just failed.
pub(crate) fn last_err() -> SysErr {
    let n = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    mm::Errno::ALL.iter().find(|e| **e as i32 == n).map_or(SysErr::Raw(n), |e| SysErr::Errno(*e))
}

/// `r`, or the errno when it is -1.
fn check(r: libc::c_long) -> SysResult<u64> {
    if r == -1 { Err(last_err()) } else { Ok(r as u64) }
}

fn check_int(r: libc::c_int) -> SysResult<u64> {
    check(libc::c_long::from(r))
}

fn c_string(s: &str) -> SysResult<CString> {
    CString::new(s).map_err(|_| SysErr::Errno(mm::Errno::EINVAL))
}

pub(crate) fn mmap(
    addr: u64,
    len: u64,
    prot: u32,
    flags: u32,
    fd: i32,
    off: u64,
) -> SysResult<u64> {
    // SAFETY: mmap never touches memory the caller holds; a MAP_FIXED over the executor's own
    // mappings is ruled out by the scenario (its addresses lie in the scenario's own mappings).
    let p = unsafe {
        libc::mmap(addr as *mut _, len as usize, prot as i32, flags as i32, fd, off as i64)
    };
    if p == libc::MAP_FAILED { Err(last_err()) } else { Ok(p as u64) }
}

pub(crate) fn munmap(addr: u64, len: u64) -> SysResult<u64> {
    // SAFETY: the range is the scenario's; nothing of the executor's lives there.
    check_int(unsafe { libc::munmap(addr as *mut _, len as usize) })
}

/// A raw system call with up to six integer arguments (`mprotect`, `madvise`, `mremap`,
/// `mlock2`, `msync`, `mincore`, ...): their arguments are addresses in the scenario's own
/// mappings and numbers, never pointers into the executor's memory unless the caller says so.
pub(crate) fn raw(nr: libc::c_long, a: [u64; 6]) -> SysResult<u64> {
    // SAFETY: see above; the kernel validates every user address it is given.
    check(unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) })
}

pub(crate) fn open(path: &str, flags: i32, mode: u32) -> SysResult<i32> {
    let c = c_string(path)?;
    // SAFETY: `c` is a valid NUL-terminated string.
    check_int(unsafe { libc::open(c.as_ptr(), flags, mode) }).map(|fd| fd as i32)
}

pub(crate) fn close(fd: i32) -> SysResult<u64> {
    // SAFETY: closing a descriptor has no memory effect.
    check_int(unsafe { libc::close(fd) })
}

/// `pread`/`read` into the user address `buf` (the scenario's memory; a bad address is EFAULT).
pub(crate) fn read_to(fd: i32, buf: u64, len: u64, offset: Option<u64>) -> SysResult<u64> {
    match offset {
        Some(off) => raw(libc::SYS_pread64, [fd as u64, buf, len, off, 0, 0]),
        None => raw(libc::SYS_read, [fd as u64, buf, len, 0, 0, 0]),
    }
}

/// A buffer of the agent's own for `len` bytes, every page written before the operation that
/// fills it: its faults are the executor's, not the operation's (after a soft-dirty
/// `clear_refs`, every page of the process is write-protected, the agent's heap too).
pub(crate) fn own_buffer(len: u64) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    for i in (0..buf.len()).step_by(4096) {
        // SAFETY: `i` is inside `buf`; a volatile store so that the write is not elided.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 0) };
    }
    buf
}

/// `pwrite`/`write` of `data`.
pub(crate) fn write_from(fd: i32, data: &[u8], offset: Option<u64>) -> SysResult<u64> {
    let (p, n) = (data.as_ptr() as u64, data.len() as u64);
    match offset {
        Some(off) => raw(libc::SYS_pwrite64, [fd as u64, p, n, off, 0, 0]),
        None => raw(libc::SYS_write, [fd as u64, p, n, 0, 0, 0]),
    }
}

pub(crate) fn truncate(path: &str, size: u64) -> SysResult<u64> {
    let c = c_string(path)?;
    raw(libc::SYS_truncate, [c.as_ptr() as u64, size, 0, 0, 0, 0])
}

/// `mincore` of `pages` pages at `addr`: a byte per page.
pub(crate) fn mincore(addr: u64, len: u64, pages: usize) -> SysResult<Vec<u8>> {
    let mut vec = vec![0u8; pages];
    raw(libc::SYS_mincore, [addr, len, vec.as_mut_ptr() as u64, 0, 0, 0])?;
    Ok(vec.into_iter().map(|b| b & 1).collect())
}

pub(crate) fn memfd_create(name: &str, flags: u32) -> SysResult<i32> {
    let c = c_string(name)?;
    raw(libc::SYS_memfd_create, [c.as_ptr() as u64, u64::from(flags), 0, 0, 0, 0])
        .map(|fd| fd as i32)
}

/// userfaultfd's ioctls (`include/uapi/linux/userfaultfd.h`, x86-64 `_IOWR`/`_IOR` numbers).
pub(crate) mod uffdio {
    pub(crate) const API: u64 = 0xc018_aa3f;
    pub(crate) const REGISTER: u64 = 0xc020_aa00;
    pub(crate) const UNREGISTER: u64 = 0x8010_aa01;
    pub(crate) const COPY: u64 = 0xc028_aa03;
    pub(crate) const ZEROPAGE: u64 = 0xc020_aa04;
    pub(crate) const WAKE: u64 = 0x8010_aa02;
    pub(crate) const CONTINUE: u64 = 0xc020_aa07;
    /// `UFFDIO_WRITEPROTECT` (`_IOWR(0xAA, 0x06, struct uffdio_writeprotect)`, 24 bytes, v5.7).
    pub(crate) const WRITEPROTECT: u64 = 0xc018_aa06;
    /// `USERFAULTFD_IOC_NEW` of `/dev/userfaultfd` (`_IO(0xAA, 0x00)`, v6.1).
    pub(crate) const IOC_NEW: u64 = 0xaa00;
}

/// A userfaultfd from `/dev/userfaultfd` (`USERFAULTFD_IOC_NEW` with `flags`), the device's
/// own descriptor closed again.
pub(crate) fn dev_userfaultfd(flags: u64) -> SysResult<i32> {
    let dev = open("/dev/userfaultfd", libc::O_RDWR | libc::O_CLOEXEC, 0)?;
    let fd = raw(libc::SYS_ioctl, [dev as u64, uffdio::IOC_NEW, flags, 0, 0, 0]);
    close(dev)?;
    fd.map(|fd| fd as i32)
}

/// `ioctl(fd, cmd, arg)` of a userfaultfd with `arg` the words of its `struct uffdio_*`
/// (`api`, `register`, `range`, `copy`, `zeropage`: all 64-bit fields).
pub(crate) fn uffd_ioctl(fd: i32, cmd: u64, arg: &mut [u64]) -> SysResult<u64> {
    raw(libc::SYS_ioctl, [fd as u64, cmd, arg.as_mut_ptr() as u64, 0, 0, 0])
}

/// How long a native read of a userfaultfd without `O_NONBLOCK` waits for a message, which
/// only another agent (another scenario process) can post meanwhile.
const UFFD_READ_WAIT_MS: i32 = 3000;

/// A userfaultfd message without sleeping for good: `struct uffd_msg`'s 32 bytes, EAGAIN when
/// none is pending (at once with `O_NONBLOCK`; after [`UFFD_READ_WAIT_MS`] without, since the
/// single-threaded agent's own tasks cannot post one while it waits).
pub(crate) fn uffd_read(fd: i32) -> SysResult<[u8; 32]> {
    // SAFETY: `F_GETFL` reads the descriptor's flags and touches no memory.
    let fl = check_int(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let wait = if fl & libc::O_NONBLOCK as u64 != 0 { 0 } else { UFFD_READ_WAIT_MS };
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: `pfd` is one valid pollfd for the duration of the call.
    if check_int(unsafe { libc::poll(&mut pfd, 1, wait) })? == 0 {
        return Err(SysErr::Errno(mm::Errno::EAGAIN));
    }
    let mut msg = [0u8; 32];
    raw(libc::SYS_read, [fd as u64, msg.as_mut_ptr() as u64, 32, 0, 0, 0])?;
    Ok(msg)
}

pub(crate) fn pipe() -> SysResult<(i32, i32)> {
    let mut fds = [0i32; 2];
    raw(libc::SYS_pipe2, [fds.as_mut_ptr() as u64, 0, 0, 0, 0, 0])?;
    Ok((fds[0], fds[1]))
}

/// `vmsplice` of the user range `[addr, addr + len)` into pipe end `fd`.
pub(crate) fn vmsplice(fd: i32, addr: u64, len: u64) -> SysResult<u64> {
    let iov = libc::iovec { iov_base: addr as *mut _, iov_len: len as usize };
    raw(libc::SYS_vmsplice, [fd as u64, &iov as *const _ as u64, 1, 0, 0, 0])
}

pub(crate) fn shmat(id: i32, addr: u64, flags: u32) -> SysResult<u64> {
    // SAFETY: the kernel maps the segment where no mapping is (or where `addr` says).
    let p = unsafe { libc::shmat(id, addr as *const _, flags as i32) };
    if p as isize == -1 { Err(last_err()) } else { Ok(p as u64) }
}

/// `shmctl(id, IPC_STAT)`'s `struct shmid_ds`, as the model's.
pub(crate) fn shm_stat(id: i32) -> SysResult<mm::shm::ShmidDs> {
    // SAFETY: an all-zero shmid_ds is valid, and the kernel fills it.
    let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: `ds` is a valid out-parameter.
    check_int(unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) })?;
    Ok(mm::shm::ShmidDs {
        key: ds.shm_perm.__key,
        segsz: ds.shm_segsz as u64,
        nattch: ds.shm_nattch,
        cpid: ds.shm_cpid as u32,
        lpid: ds.shm_lpid as u32,
        mode: ds.shm_perm.mode as u32,
    })
}

/// `cachestat(2)`'s number on x86-64 (the libc crate names it only for some other targets).
const SYS_CACHESTAT: libc::c_long = 451;

/// `cachestat(fd, range, cstat, flags)`, as the model's: `range` `None` and `out` false pass
/// NULL for that pointer.
pub(crate) fn cachestat(
    fd: i32,
    range: Option<mm::filemap::CachestatRange>,
    out: bool,
    flags: u32,
) -> SysResult<mm::filemap::Cachestat> {
    // `struct cachestat_range` and `struct cachestat`: `__u64`s in this order.
    let csr = range.map(|r| [r.off, r.len]);
    let mut cs = [0u64; 5];
    let range_ptr = csr.as_ref().map_or(0, |r| r.as_ptr() as u64);
    let out_ptr = if out { cs.as_mut_ptr() as u64 } else { 0 };
    // SAFETY: both pointers are this frame's arrays of the kernel's sizes, or NULL.
    check(unsafe { libc::syscall(SYS_CACHESTAT, fd, range_ptr, out_ptr, flags) })?;
    let [nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted] = cs;
    Ok(mm::filemap::Cachestat { nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted })
}

pub(crate) fn shm_rmid(id: i32) -> SysResult<u64> {
    // SAFETY: IPC_RMID takes no buffer.
    check_int(unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) })
}

pub(crate) fn fork() -> SysResult<i32> {
    // SAFETY: the executor's agents are single-threaded; the child only runs the agent loop.
    let pid = unsafe { libc::fork() };
    if pid < 0 { Err(last_err()) } else { Ok(pid) }
}

/// Ends this process at once, without running the executor's destructors or atexit handlers.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no memory of ours.
    unsafe { libc::_exit(code) }
}

/// `ftruncate(fd, size)`.
pub(crate) fn ftruncate(fd: i32, size: u64) -> SysResult<u64> {
    raw(libc::SYS_ftruncate, [fd as u64, size, 0, 0, 0, 0])
}

/// `posix_fadvise(fd, 0, 0, advice)`: the advice on the whole file.
pub(crate) fn fadvise(fd: i32, advice: i32) -> SysResult<u64> {
    raw(libc::SYS_fadvise64, [fd as u64, 0, 0, advice as u64, 0, 0])
}

/// Everything readable from `fd` until its end (a pipe's until every writer closed it), as text.
pub(crate) fn read_all(fd: i32) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = read_to(fd, buf.as_mut_ptr() as u64, buf.len() as u64, None) {
        out.extend_from_slice(&buf[..n as usize]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits for child `pid` to end.
pub(crate) fn wait(pid: i32) {
    let mut status = 0;
    // SAFETY: `status` is a valid out-parameter.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// This process's system CPU time so far, in nanoseconds (`getrusage(RUSAGE_SELF)`).
pub(crate) fn system_time_ns() -> u64 {
    // SAFETY: an all-zero rusage is valid, and the kernel fills it.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid out-parameter.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    r.ru_stime.tv_sec as u64 * 1_000_000_000 + r.ru_stime.tv_usec as u64 * 1_000
}

/// Minor and major faults of this process so far (`getrusage(RUSAGE_SELF)`).
pub(crate) fn faults() -> (u64, u64) {
    // SAFETY: an all-zero rusage is valid, and the kernel fills it.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid out-parameter.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    (r.ru_minflt as u64, r.ru_majflt as u64)
}

/// Keeps glibc's allocator on the heap (no `mmap` per allocation, no trimming, one arena), so the
/// executor's own allocations never place a mapping beside the scenario's, where the kernel
/// could merge the two VMAs.
pub(crate) fn allocator_on_heap() {
    // SAFETY: mallopt only sets allocator parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Lets the kernel reap this process's children when they exit (`SIGCHLD` ignored), so an
/// agent's forked child leaves no zombie holding its place.
pub(crate) fn reap_children_automatically() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no memory effect.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
}

/// A model process starts with no descriptor open and `RLIMIT_NOFILE`'s soft limit at 1024
/// (`INR_OPEN_CUR`); an agent holds its own (standard streams, the controller's socket), so its
/// soft limit is 1024 above them: the scenario's descriptors meet EMFILE where the model's do.
pub(crate) fn limit_descriptors_as_fresh() {
    // `read_dir` holds one descriptor of its own while it lists.
    let own = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1));
    let soft = 1024 + own as u64;
    // SAFETY: an all-zero rlimit is valid; the kernel fills it.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `lim` is a valid out-parameter, then a valid in-parameter.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = soft;
        lim.rlim_max = lim.rlim_max.max(soft);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

/// Keeps this process on the first CPU: the per-CPU batches a task's pages wait in (the LRU's,
/// MADV_FREE's) are then one CPU's, as the model's task stays on its CPU, instead of whichever
/// CPU the host's scheduler last moved the agent to.
pub(crate) fn run_on_first_cpu() {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t and 0 is within it.
    unsafe {
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Has this process killed when the thread that forked it ends (`PR_SET_PDEATHSIG`): an agent
/// never outlives its controller or its parent agent.
pub(crate) fn die_with_parent() {
    let _ = raw(libc::SYS_prctl, [libc::PR_SET_PDEATHSIG as u64, libc::SIGKILL as u64, 0, 0, 0, 0]);
}

/// Waits on the futex word at `word` while it holds `value` (a process-shared futex).
pub(crate) fn futex_wait(word: &std::sync::atomic::AtomicU32, value: u32) {
    let p = word as *const _ as u64;
    let _ = raw(libc::SYS_futex, [p, libc::FUTEX_WAIT as u64, u64::from(value), 0, 0, 0]);
}

/// Wakes every waiter on the futex word at `word`.
pub(crate) fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    let p = word as *const _ as u64;
    let _ = raw(libc::SYS_futex, [p, libc::FUTEX_WAKE as u64, i32::MAX as u64, 0, 0, 0]);
}

pub(crate) fn geteuid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The running kernel's release (`uname -r`).
pub(crate) fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string()
}

/// The file system magic of the file system holding `path` (`statfs(2)`'s `f_type`).
pub(crate) fn fs_magic(path: &str) -> SysResult<i64> {
    let c = c_string(path)?;
    // SAFETY: an all-zero statfs is valid, and the kernel fills it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` a valid out-parameter.
    check_int(unsafe { libc::statfs(c.as_ptr(), &mut st) })?;
    Ok(st.f_type)
}

/// `mount -t FSTYPE -o DATA none TARGET`.
pub(crate) fn mount(fstype: &str, target: &str, data: &str) -> SysResult<u64> {
    let (src, t, f, d) = (c_string("none")?, c_string(target)?, c_string(fstype)?, c_string(data)?);
    // SAFETY: every argument is a valid NUL-terminated string.
    check_int(unsafe { libc::mount(src.as_ptr(), t.as_ptr(), f.as_ptr(), 0, d.as_ptr().cast()) })
}

/// `mount -t FSTYPE DEVICE TARGET` (the guest's disks).
pub(crate) fn mount_device(device: &str, fstype: &str, target: &str) -> SysResult<u64> {
    mount_device_with(device, fstype, target, "")
}

/// `mount -t FSTYPE -o DATA DEVICE TARGET`.
pub(crate) fn mount_device_with(
    device: &str,
    fstype: &str,
    target: &str,
    data: &str,
) -> SysResult<u64> {
    let (src, t, f, d) = (c_string(device)?, c_string(target)?, c_string(fstype)?, c_string(data)?);
    // SAFETY: every argument is a valid NUL-terminated string.
    check_int(unsafe { libc::mount(src.as_ptr(), t.as_ptr(), f.as_ptr(), 0, d.as_ptr().cast()) })
}

/// `swapon(2)` of a block device or file holding a swap signature.
pub(crate) fn swapon(device: &str) -> SysResult<u64> {
    let d = c_string(device)?;
    // SAFETY: `d` is a valid NUL-terminated string.
    check_int(unsafe { libc::swapon(d.as_ptr(), 0) })
}

pub(crate) fn swapoff(path: &str) -> SysResult<u64> {
    let d = c_string(path)?;
    // SAFETY: `d` is a valid NUL-terminated string.
    check_int(unsafe { libc::swapoff(d.as_ptr()) })
}

/// Loads the kernel module in the (uncompressed) file at `path` with parameters `params`
/// (`finit_module(2)`).
pub(crate) fn load_module(path: &str, params: &str) -> SysResult<u64> {
    let file = std::fs::File::open(path).map_err(|_| last_err())?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file) as u64;
    let p = c_string(params)?;
    raw(libc::SYS_finit_module, [fd, p.as_ptr() as u64, 0, 0, 0, 0])
}

/// Unloads module `name` (`delete_module(2)`, not waiting for users).
pub(crate) fn unload_module(name: &str) -> SysResult<u64> {
    let n = c_string(name)?;
    raw(libc::SYS_delete_module, [n.as_ptr() as u64, libc::O_NONBLOCK as u64, 0, 0, 0, 0])
}

/// Flushes every file system and powers the machine off (the guest's end).
pub(crate) fn power_off() -> ! {
    // SAFETY: sync and reboot have no memory effect; reboot does not return on success.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    exit_now(1)
}

pub(crate) fn umount(target: &str) -> SysResult<u64> {
    let t = c_string(target)?;
    // SAFETY: `t` is a valid NUL-terminated string.
    check_int(unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) })
}

/// Sends `sig` to process `pid`.
pub(crate) fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory effect.
    unsafe { libc::kill(pid, sig) };
}

/// Waits for child `pid` to end (reaps it).
pub(crate) fn wait_for(pid: i32) {
    let mut status = 0;
    // SAFETY: `status` is a valid out-parameter.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn model_constants_are_the_kernels() {
        use mm::{madv, map, prot};
        let pairs: [(u32, i32); 22] = [
            (prot::READ, libc::PROT_READ),
            (prot::WRITE, libc::PROT_WRITE),
            (prot::EXEC, libc::PROT_EXEC),
            (map::SHARED, libc::MAP_SHARED),
            (map::PRIVATE, libc::MAP_PRIVATE),
            (map::FIXED, libc::MAP_FIXED),
            (map::ANONYMOUS, libc::MAP_ANONYMOUS),
            (map::POPULATE, libc::MAP_POPULATE),
            (map::HUGETLB, libc::MAP_HUGETLB),
            (map::NORESERVE, libc::MAP_NORESERVE),
            (map::FIXED_NOREPLACE, libc::MAP_FIXED_NOREPLACE),
            (map::SHARED_VALIDATE, libc::MAP_SHARED_VALIDATE),
            (map::SYNC, libc::MAP_SYNC),
            (map::STACK, libc::MAP_STACK),
            (map::NONBLOCK, libc::MAP_NONBLOCK),
            (map::EXECUTABLE, libc::MAP_EXECUTABLE),
            (madv::DONTDUMP, libc::MADV_DONTDUMP),
            (madv::DODUMP, libc::MADV_DODUMP),
            (madv::DONTNEED_LOCKED, 24),
            (madv::DONTNEED, libc::MADV_DONTNEED),
            (madv::HUGEPAGE, libc::MADV_HUGEPAGE),
            (madv::COLLAPSE, 25),
        ];
        for (model, kernel) in pairs {
            assert_eq!(model as i32, kernel);
        }
        assert_eq!(mm::fadvise::advice::NOREUSE, libc::POSIX_FADV_NOREUSE);
        for e in mm::Errno::ALL {
            assert_eq!(std::io::Error::from_raw_os_error(e as i32).raw_os_error(), Some(e as i32));
        }
    }
}
