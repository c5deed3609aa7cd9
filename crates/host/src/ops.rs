//! The scenario's operations as the real system calls and accesses, one arm per operation
//! group, mirroring `lab::scenario::interp`'s routing. Every number passes through as the model
//! keeps it (the kernel's x86-64 values, `sys.rs`); paths go through the plan's host path map.
//! The operations the native executor cannot make (`support.rs` refuses their scenarios before
//! anything runs) answer ENOSYS here rather than panicking.

use crate::access;
use crate::agent::{Agent, Stop};
use crate::sys::{self, SysErr, SysResult};
use crate::uring;
use lab::scenario::interp::{Outcome, Value};
use lab::scenario::model::{AddrExpr, Op, OpKind, UffdOp};
use mm::filemap::CachestatRange;
use mm::{Access, Errno, OpenFlags, Pid};
use simcore::VirtAddr;

type OpResult = Result<SysResult<Outcome>, Stop>;

fn done(r: SysResult<u64>) -> SysResult<Outcome> {
    r.map(|_| Outcome::Done)
}

fn addr_of(v: SysResult<u64>) -> SysResult<Outcome> {
    v.map(|a| Outcome::Bound(Value::Addr(VirtAddr(a))))
}

fn fd_of(v: SysResult<i32>) -> SysResult<Outcome> {
    v.map(|fd| Outcome::Bound(Value::Fd(fd)))
}

fn count(v: SysResult<u64>) -> SysResult<Outcome> {
    v.map(Outcome::Count)
}

/// Runs `op` on `agent`'s process.
pub(crate) fn run(agent: &mut Agent<'_>, op: &Op) -> OpResult {
    match &op.kind {
        OpKind::Mmap { .. }
        | OpKind::Munmap { .. }
        | OpKind::Mprotect { .. }
        | OpKind::RemapFilePages { .. }
        | OpKind::Madvise { .. }
        | OpKind::Mremap { .. }
        | OpKind::Mlock { .. }
        | OpKind::Munlock { .. }
        | OpKind::Mseal { .. }
        | OpKind::Mlockall { .. }
        | OpKind::Munlockall
        | OpKind::Msync { .. } => mapping_op(agent, op),
        OpKind::Touch { .. }
        | OpKind::ReadBytes { .. }
        | OpKind::WriteBytes { .. }
        | OpKind::Increment { .. }
        | OpKind::Mincore { .. }
        | OpKind::Pagemap { .. }
        | OpKind::ProcMemWrite { .. } => memory_op(agent, op),
        OpKind::Open { .. }
        | OpKind::MemfdCreate { .. }
        | OpKind::Close { .. }
        | OpKind::Dup { .. }
        | OpKind::Read { .. }
        | OpKind::Write { .. }
        | OpKind::Truncate { .. }
        | OpKind::Ftruncate { .. }
        | OpKind::Fsync { .. }
        | OpKind::Fallocate { .. }
        | OpKind::Fadvise { .. }
        | OpKind::Readahead { .. }
        | OpKind::Cachestat { .. }
        | OpKind::PreadDirect { submit: false, .. }
        | OpKind::PwriteFrom { .. }
        | OpKind::Pipe
        | OpKind::Vmsplice { .. } => file_op(agent, op),
        OpKind::Shmget { .. }
        | OpKind::Shmat { .. }
        | OpKind::Shmdt { .. }
        | OpKind::Shmctl { .. } => shm_op(agent, op),
        OpKind::Exit
        | OpKind::ClearRefs { .. }
        | OpKind::Prctl { .. }
        | OpKind::SysfsRead { .. }
        | OpKind::SysfsWrite { .. }
        | OpKind::MemoryReclaim { .. }
        | OpKind::Sleep { .. } => task_op(agent, op),
        OpKind::Uffd(u) => uffd_op(agent, u),
        OpKind::IoUringRegister { .. }
        | OpKind::IoUringUnregister { .. }
        | OpKind::Unpin { .. }
        | OpKind::Fixed { .. }
        | OpKind::PinRead { .. } => uring_op(agent, op),
        // Refused before anything runs (`support.rs`), or run by the agent itself.
        _ => Ok(Err(SysErr::Errno(Errno::ENOSYS))),
    }
}

fn at(agent: &Agent<'_>, a: &AddrExpr) -> Result<u64, Stop> {
    Ok(agent.names().addr(a)?.0)
}

fn fd(agent: &Agent<'_>, name: &str) -> Result<i32, Stop> {
    Ok(agent.names().fd(name)?)
}

/// Mappings and their flags.
fn mapping_op(agent: &mut Agent<'_>, op: &Op) -> OpResult {
    use libc::{SYS_madvise, SYS_mlock, SYS_mlock2, SYS_mlockall, SYS_mprotect, SYS_msync};
    Ok(match &op.kind {
        OpKind::Mmap { addr, len, prot, flags, fd: f, offset } => {
            let a = addr.as_ref().map(|a| at(agent, a)).transpose()?;
            let f = f.as_ref().map(|f| fd(agent, f)).transpose()?.unwrap_or(-1);
            let (len, prot, flags, off) = (len.as_u64(), *prot, *flags, *offset);
            let placed = if a.is_none() { agent.placed(op.line, len) } else { None };
            if let Some(p) = placed {
                // MAP_SHARED_VALIDATE refuses MAP_FIXED_NOREPLACE (not a legacy flag, EOPNOTSUPP):
                // there the model's address is only a hint.
                let validate = flags & mm::map::SHARED_VALIDATE == mm::map::SHARED_VALIDATE;
                let fixed = if validate { flags } else { flags | mm::map::FIXED_NOREPLACE };
                let r = agent.sys(|| sys::mmap(p, len, prot, fixed, f, off));
                if r != Err(SysErr::Errno(Errno::EEXIST)) {
                    return Ok(addr_of(r));
                }
            }
            addr_of(agent.sys(|| sys::mmap(a.unwrap_or(0), len, prot, flags, f, off)))
        }
        OpKind::Munmap { addr, len } => {
            let a = at(agent, addr)?;
            done(agent.sys(|| sys::munmap(a, len.as_u64())))
        }
        OpKind::Mprotect { addr, len, prot } => {
            let a = [at(agent, addr)?, len.as_u64(), u64::from(*prot), 0, 0, 0];
            done(agent.sys(|| sys::raw(SYS_mprotect, a)))
        }
        OpKind::RemapFilePages { addr, len, prot, pgoff, flags } => {
            let a =
                [at(agent, addr)?, len.as_u64(), u64::from(*prot), *pgoff, u64::from(*flags), 0];
            done(agent.sys(|| sys::raw(libc::SYS_remap_file_pages, a)))
        }
        OpKind::Madvise { addr, len, advice } => {
            let a = [at(agent, addr)?, len.as_u64(), u64::from(*advice), 0, 0, 0];
            done(agent.sys(|| sys::raw(SYS_madvise, a)))
        }
        OpKind::Mremap { addr, old_len, new_len, flags, new_addr } => {
            let to = new_addr.as_ref().map(|a| at(agent, a)).transpose()?.unwrap_or(0);
            let a =
                [at(agent, addr)?, old_len.as_u64(), new_len.as_u64(), u64::from(*flags), to, 0];
            addr_of(agent.sys(|| sys::raw(libc::SYS_mremap, a)))
        }
        OpKind::Mlock { addr, len, flags } => {
            let a = [at(agent, addr)?, len.as_u64(), u64::from(flags.unwrap_or(0)), 0, 0, 0];
            let nr = if flags.is_some() { SYS_mlock2 } else { SYS_mlock };
            done(agent.sys(|| sys::raw(nr, a)))
        }
        OpKind::Munlock { addr, len } => {
            let a = [at(agent, addr)?, len.as_u64(), 0, 0, 0, 0];
            done(agent.sys(|| sys::raw(libc::SYS_munlock, a)))
        }
        OpKind::Mseal { addr, len, flags } => {
            let a = [at(agent, addr)?, len.as_u64(), *flags, 0, 0, 0];
            done(agent.sys(|| sys::raw(libc::SYS_mseal, a)))
        }
        OpKind::Mlockall { flags } => {
            done(agent.sys(|| sys::raw(SYS_mlockall, [u64::from(*flags), 0, 0, 0, 0, 0])))
        }
        OpKind::Munlockall => done(agent.sys(|| sys::raw(libc::SYS_munlockall, [0; 6]))),
        OpKind::Msync { addr, len, flags } => {
            let a = [at(agent, addr)?, len.as_u64(), u64::from(*flags), 0, 0, 0];
            done(agent.sys(|| sys::raw(SYS_msync, a)))
        }
        _ => unreachable!("`run` routes only mapping operations here"),
    })
}

/// Loads and stores, and what reads the memory's state.
fn memory_op(agent: &mut Agent<'_>, op: &Op) -> OpResult {
    Ok(match &op.kind {
        OpKind::Touch { addr, len, access } => {
            let (a, write) = (at(agent, addr)?, *access == Access::Write);
            agent.sys(|| access::touch(a, len.as_u64(), write))?;
            Ok(Outcome::Done)
        }
        OpKind::ReadBytes { addr, len } => {
            let a = at(agent, addr)?;
            let mut out = sys::own_buffer(*len);
            agent.sys(|| access::read(a, &mut out))?;
            Ok(Outcome::Data(out))
        }
        OpKind::WriteBytes { addr, data } => {
            let a = at(agent, addr)?;
            agent.sys(|| access::write(a, data))?;
            Ok(Outcome::Done)
        }
        OpKind::Increment { addr } => {
            let a = at(agent, addr)?;
            let mut old = [0u8; 8];
            agent.sys(|| access::read(a, &mut old))?;
            let new = u64::from_le_bytes(old).wrapping_add(1).to_le_bytes();
            agent.sys(|| access::write(a, &new))?;
            Ok(Outcome::Done)
        }
        OpKind::Mincore { addr, len } => {
            let (a, pages) = (at(agent, addr)?, len.div_ceil(4096) as usize);
            agent.sys(|| sys::mincore(a, *len, pages)).map(Outcome::Data)
        }
        OpKind::Pagemap { addr } => {
            // The agent's own pagemap as root reads it: the PFN, 0 when nothing is present.
            let a = at(agent, addr)?;
            let pfn = crate::observe::frame(std::process::id() as i32, a);
            pfn.map(|p| Outcome::Bound(Value::Frame(p.unwrap_or(0))))
                .map_err(|_| SysErr::Errno(Errno::EIO))
        }
        OpKind::ProcMemWrite { addr, data } => {
            let a = at(agent, addr)?;
            let mem = sys::open("/proc/self/mem", libc::O_RDWR, 0);
            mem.and_then(|m| {
                let n = agent.sys(|| sys::write_from(m, data, Some(a)));
                let _ = sys::close(m);
                n.map(Outcome::Count)
            })
        }
        _ => unreachable!("`run` routes only memory operations here"),
    })
}

/// `open(2)`'s flags for the model's.
fn open_flags(f: OpenFlags) -> i32 {
    let access = match (f.read, f.write) {
        (true, true) => libc::O_RDWR,
        (false, true) => libc::O_WRONLY,
        _ => libc::O_RDONLY,
    };
    let extra =
        [(f.direct, libc::O_DIRECT), (f.append, libc::O_APPEND), (f.truncate, libc::O_TRUNC)];
    extra.iter().filter(|(on, _)| *on).fold(access, |acc, (_, bit)| acc | bit)
}

/// Files, descriptors and pipes.
fn file_op(agent: &mut Agent<'_>, op: &Op) -> OpResult {
    use libc::{SYS_dup, SYS_fadvise64, SYS_fallocate, SYS_fsync, SYS_ftruncate, SYS_readahead};
    let path = |p: &str| (agent.plan().host_path)(p);
    Ok(match &op.kind {
        OpKind::Open { path: p, flags } => {
            let (host, flags) = (path(p), open_flags(*flags));
            fd_of(agent.sys(|| sys::open(&host, flags, 0o600)))
        }
        OpKind::MemfdCreate { name, flags } => fd_of(agent.sys(|| sys::memfd_create(name, *flags))),
        OpKind::Close { fd: f } => {
            let f = fd(agent, f)?;
            done(agent.sys(|| sys::close(f)))
        }
        OpKind::Dup { fd: f } => {
            let f = fd(agent, f)? as u64;
            fd_of(agent.sys(|| sys::raw(SYS_dup, [f, 0, 0, 0, 0, 0]).map(|n| n as i32)))
        }
        OpKind::Read { fd: f, buf, len, offset } => read(agent, fd(agent, f)?, buf, *len, *offset)?,
        OpKind::PreadDirect { fd: f, buf, len, offset, .. } => {
            read(agent, fd(agent, f)?, &Some(buf.clone()), *len, Some(*offset))?
        }
        OpKind::PwriteFrom { fd: f, buf, len, offset } => {
            let a = [fd(agent, f)? as u64, at(agent, buf)?, *len, *offset, 0, 0];
            count(agent.sys(|| sys::raw(libc::SYS_pwrite64, a)))
        }
        OpKind::Write { fd: f, data, offset } => {
            let f = fd(agent, f)?;
            count(agent.sys(|| sys::write_from(f, data, *offset)))
        }
        OpKind::Truncate { path: p, size } => {
            let host = path(p);
            done(agent.sys(|| sys::truncate(&host, *size)))
        }
        OpKind::Ftruncate { fd: f, size } => {
            let a = [fd(agent, f)? as u64, *size, 0, 0, 0, 0];
            done(agent.sys(|| sys::raw(SYS_ftruncate, a)))
        }
        OpKind::Fsync { fd: f } => {
            let a = [fd(agent, f)? as u64, 0, 0, 0, 0, 0];
            done(agent.sys(|| sys::raw(SYS_fsync, a)))
        }
        OpKind::Fallocate { fd: f, mode, offset, len } => {
            let a = [fd(agent, f)? as u64, u64::from(*mode), *offset, *len, 0, 0];
            done(agent.sys(|| sys::raw(SYS_fallocate, a)))
        }
        OpKind::Fadvise { fd: f, offset, len, advice } => {
            // The kernel's loff_t and int arguments, sign and all.
            let a =
                [fd(agent, f)? as u64, *offset as u64, *len as u64, *advice as i64 as u64, 0, 0];
            done(agent.sys(|| sys::raw(SYS_fadvise64, a)))
        }
        OpKind::Readahead { fd: f, offset, len } => {
            let a = [fd(agent, f)? as u64, *offset, *len, 0, 0, 0];
            done(agent.sys(|| sys::raw(SYS_readahead, a)))
        }
        OpKind::Cachestat { fd: f, offset, len, flags, null_range, null_cstat, field } => {
            let f = fd(agent, f)?;
            let range = (!null_range).then_some(CachestatRange { off: *offset, len: *len });
            let stat = agent.sys(|| sys::cachestat(f, range, !null_cstat, *flags));
            stat.map(|s| field.map_or(Outcome::Done, |field| Outcome::Value(field.of(&s))))
        }
        OpKind::Pipe => agent.sys(sys::pipe).map(|(r, w)| Outcome::Bound(Value::Pipe(r, w))),
        OpKind::Vmsplice { fd: f, addr, len } => {
            let (f, a) = (fd(agent, f)?, at(agent, addr)?);
            count(agent.sys(|| sys::vmsplice(f, a, *len)))
        }
        _ => unreachable!("`run` routes only file operations here"),
    })
}

/// `read`/`pread` of `len` bytes: into the scenario's memory at `buf` (then what it holds), or
/// into the agent's own buffer (then how many bytes came).
fn read(
    agent: &mut Agent<'_>,
    f: i32,
    buf: &Option<AddrExpr>,
    len: u64,
    offset: Option<u64>,
) -> OpResult {
    let Some(b) = buf else {
        let mut own = sys::own_buffer(len);
        let p = own.as_mut_ptr() as u64;
        return Ok(count(agent.sys(|| sys::read_to(f, p, len, offset))));
    };
    let b = at(agent, b)?;
    let n = match agent.sys(|| sys::read_to(f, b, len, offset)) {
        Ok(n) => n,
        Err(e) => return Ok(Err(e)),
    };
    let mut out = sys::own_buffer(n);
    agent.sys(|| access::read(b, &mut out))?;
    Ok(Ok(Outcome::Data(out)))
}

/// userfaultfd: the syscall, its ioctls (each `struct uffdio_*` as its 64-bit words) and a
/// message read without sleeping (`sys::uffd_read`).
fn uffd_op(agent: &mut Agent<'_>, u: &UffdOp) -> OpResult {
    use sys::uffdio;
    Ok(match u {
        UffdOp::Create { flags, dev: false } => {
            let a = [*flags, 0, 0, 0, 0, 0];
            fd_of(agent.sys(|| sys::raw(libc::SYS_userfaultfd, a).map(|fd| fd as i32)))
        }
        UffdOp::Create { flags, dev: true } => fd_of(agent.sys(|| sys::dev_userfaultfd(*flags))),
        UffdOp::Api { fd: f, features } => {
            let mut api = [mm::types::userfaultfd::UFFD_API, *features, 0];
            let f = fd(agent, f)?;
            done(agent.sys(|| sys::uffd_ioctl(f, uffdio::API, &mut api)))
        }
        UffdOp::Register { fd: f, addr, len, mode } => {
            let (f, mut reg) = (fd(agent, f)?, [at(agent, addr)?, *len, *mode, 0]);
            done(agent.sys(|| sys::uffd_ioctl(f, uffdio::REGISTER, &mut reg)))
        }
        UffdOp::Unregister { fd: f, addr, len } => {
            let (f, mut range) = (fd(agent, f)?, [at(agent, addr)?, *len]);
            done(agent.sys(|| sys::uffd_ioctl(f, uffdio::UNREGISTER, &mut range)))
        }
        UffdOp::Wake { fd: f, addr, len } => {
            let (f, mut range) = (fd(agent, f)?, [at(agent, addr)?, *len]);
            done(agent.sys(|| sys::uffd_ioctl(f, uffdio::WAKE, &mut range)))
        }
        UffdOp::Copy { fd: f, dst, src, len, mode } => {
            let (f, mut copy) = (fd(agent, f)?, [at(agent, dst)?, at(agent, src)?, *len, *mode, 0]);
            agent.sys(|| sys::uffd_ioctl(f, uffdio::COPY, &mut copy)).map(|_| Outcome::Count(*len))
        }
        UffdOp::Zeropage { fd: f, dst, len, mode } => {
            let (f, mut zero) = (fd(agent, f)?, [at(agent, dst)?, *len, *mode, 0]);
            agent
                .sys(|| sys::uffd_ioctl(f, uffdio::ZEROPAGE, &mut zero))
                .map(|_| Outcome::Count(*len))
        }
        UffdOp::Continue { fd: f, dst, len, mode } => {
            let (f, mut cont) = (fd(agent, f)?, [at(agent, dst)?, *len, *mode, 0]);
            agent
                .sys(|| sys::uffd_ioctl(f, uffdio::CONTINUE, &mut cont))
                .map(|_| Outcome::Count(*len))
        }
        UffdOp::Writeprotect { fd: f, addr, len, mode } => {
            let (f, mut wp) = (fd(agent, f)?, [at(agent, addr)?, *len, *mode]);
            done(agent.sys(|| sys::uffd_ioctl(f, uffdio::WRITEPROTECT, &mut wp)))
        }
        UffdOp::Read { fd: f, .. } => {
            let f = fd(agent, f)?;
            // An event the model does not know reads as a bare success, which no expectation
            // of a message meets.
            agent.sys(|| sys::uffd_read(f)).map(|msg| {
                mm::userfaultfd::UffdMsg::decode(&msg).map_or(Outcome::Done, Outcome::Uffd)
            })
        }
    })
}

/// The ring of the registered buffer `name` holds.
fn ring(agent: &mut Agent<'_>, name: &str) -> Result<SysResult<uring::Ring>, Stop> {
    let fd = agent.names().hold(name)?.0 as i32;
    Ok(agent.rings().get(&fd).copied().ok_or(SysErr::Errno(Errno::EBADF)))
}

/// io_uring's registered buffers (`uring.rs`); `unpin` and `pin_read` run on them (a `pin`'s
/// scenario is refused, `support.rs`).
fn uring_op(agent: &mut Agent<'_>, op: &Op) -> OpResult {
    Ok(match &op.kind {
        OpKind::IoUringRegister { addr, len } => {
            let a = at(agent, addr)?;
            agent.sys(|| uring::register(a, *len)).map(|r| {
                agent.rings().insert(r.fd, r);
                Outcome::Bound(Value::Hold(mm::types::ids::HoldId(r.fd as u32)))
            })
        }
        OpKind::IoUringUnregister { hold } | OpKind::Unpin { hold } => match ring(agent, hold)? {
            Ok(r) => {
                agent.rings().remove(&r.fd);
                done(agent.sys(|| uring::unregister(&r)))
            }
            Err(e) => Err(e),
        },
        OpKind::Fixed { write, hold, addr, len, fd: f, offset } => {
            let req = uring::Fixed {
                write: *write,
                addr: at(agent, addr)?,
                len: *len,
                fd: fd(agent, f)?,
                offset: *offset,
            };
            ring(agent, hold)?.and_then(|r| {
                let q = uring::queue(&r, &req)?;
                agent.sys(|| q.enter())?;
                q.result().map(Outcome::Count)
            })
        }
        OpKind::PinRead { hold, offset, len } => ring(agent, hold)?
            .and_then(|r| uring::pinned_bytes(&r, *offset, *len))
            .map(Outcome::Data),
        _ => unreachable!("`run` routes only io_uring operations here"),
    })
}

/// System V shared memory.
fn shm_op(agent: &mut Agent<'_>, op: &Op) -> OpResult {
    let shm = |agent: &Agent<'_>, n: &str| -> Result<i32, Stop> { Ok(agent.names().shm(n)?) };
    Ok(match &op.kind {
        OpKind::Shmget { key, size, flags } => {
            let a = [*key as u64, *size, u64::from(*flags), 0, 0, 0];
            agent
                .sys(|| sys::raw(libc::SYS_shmget, a))
                .map(|id| Outcome::Bound(Value::Shm(id as i32)))
        }
        OpKind::Shmat { shmid, addr, flags } => {
            let id = shm(agent, shmid)?;
            let a = addr.as_ref().map(|a| at(agent, a)).transpose()?.unwrap_or(0);
            addr_of(agent.sys(|| sys::shmat(id, a, *flags)))
        }
        OpKind::Shmdt { addr } => {
            let a = [at(agent, addr)?, 0, 0, 0, 0, 0];
            done(agent.sys(|| sys::raw(libc::SYS_shmdt, a)))
        }
        OpKind::Shmctl { shmid, stat: Some(field) } => {
            let id = shm(agent, shmid)?;
            agent.sys(|| sys::shm_stat(id)).map(|ds| Outcome::Value(field.of(&ds)))
        }
        OpKind::Shmctl { shmid, stat: None } => {
            let id = shm(agent, shmid)?;
            done(agent.sys(|| sys::shm_rmid(id)))
        }
        _ => unreachable!("`run` routes only System V operations here"),
    })
}

/// The number a sysfs or procfs file holds.
fn read_number(path: &str) -> SysResult<u64> {
    let text = std::fs::read_to_string(path).map_err(|e| io_err(&e))?;
    text.trim().parse().map_err(|_| SysErr::Errno(Errno::EINVAL))
}

/// The number on the line of `path` that starts with `field` (`name value`, as
/// `/proc/PID/ksm_stat` has them); ENOENT when no line does.
fn read_field(path: &str, field: &str) -> SysResult<u64> {
    let text = std::fs::read_to_string(path).map_err(|e| io_err(&e))?;
    let line = text.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(' '));
    let line = line.ok_or(SysErr::Errno(Errno::ENOENT))?;
    line.trim().parse().map_err(|_| SysErr::Errno(Errno::EINVAL))
}

/// Writes `value` to the sysfs file `path` opened without `O_CREAT`, so a file the kernel lacks
/// is ENOENT, as the model answers (with `O_CREAT` kernfs refuses the create: EACCES).
fn write_existing(path: &str, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new().write(true).open(path)?.write_all(value.as_bytes())
}

fn io_err(e: &std::io::Error) -> SysErr {
    let n = e.raw_os_error().unwrap_or(libc::EIO);
    Errno::ALL.iter().find(|x| **x as i32 == n).map_or(SysErr::Raw(n), |x| SysErr::Errno(*x))
}

/// The task's process and the machine's files.
fn task_op(agent: &mut Agent<'_>, op: &Op) -> OpResult {
    Ok(match &op.kind {
        OpKind::Exit => Ok(Outcome::Done),
        OpKind::ClearRefs { process, value } => {
            let Pid(pid) = agent.names().process(process)?;
            let path = format!("/proc/{pid}/clear_refs");
            let write = || std::fs::write(&path, value.to_string());
            // Of the agent's own process, not counted: the kernel's clear_refs takes no fault, but
            // the agent's own stack and heap, write-protected by it, would until rewritten.
            let r = if pid == std::process::id() {
                let r = write();
                agent.rewrite_own();
                r
            } else {
                agent.sys(write)
            };
            r.map_err(|e| io_err(&e)).map(|()| Outcome::Done)
        }
        OpKind::Prctl { option, arg } => {
            let r = agent.sys(|| sys::raw(libc::SYS_prctl, [option.number(), *arg, 0, 0, 0, 0]));
            r.map(|v| if option.is_get() { Outcome::Value(v) } else { Outcome::Done })
        }
        OpKind::SysfsRead { path, field: Some(field) } => {
            agent.sys(|| read_field(path, field)).map(Outcome::Value)
        }
        OpKind::SysfsRead { path, field: None } => {
            let v = agent.sys(|| read_number(path));
            v.map(|v| Outcome::Value(crate::observe::since(path, v, agent.plan().sysfs_start)))
        }
        OpKind::SysfsWrite { path, value } => {
            let r = agent.sys(|| write_existing(path, value));
            r.map_err(|e| io_err(&e)).map(|()| Outcome::Done)
        }
        OpKind::MemoryReclaim { cgroup, amount } => {
            let Some(dir) = (agent.plan().cgroup_dir)(cgroup) else {
                return Ok(Err(SysErr::Errno(Errno::ENOENT)));
            };
            let path = format!("{dir}/memory.reclaim");
            let r = agent.sys(|| std::fs::write(&path, amount.as_u64().to_string()));
            r.map_err(|e| io_err(&e)).map(|()| Outcome::Done)
        }
        OpKind::Sleep { duration } => {
            std::thread::sleep(std::time::Duration::from_nanos(duration.as_ns()));
            Ok(Outcome::Done)
        }
        _ => unreachable!("`run` routes only task operations here"),
    })
}
