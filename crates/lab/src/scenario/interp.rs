//! Executes a task's operations on a simulated thread, binding results to names and checking
//! each operation's expectation.

use super::model::{AddrExpr, FileRef, MsgExpect, Op, OpExpect, OpKind, UffdOp, Until};
use mm::filemap::CachestatRange;
use mm::kernel::KState;
use mm::types::ids::HoldId;
use mm::types::userfaultfd::{PAGEFAULT_FLAG_MINOR, PAGEFAULT_FLAG_WP, PAGEFAULT_FLAG_WRITE};
use mm::userfaultfd::UffdMsg;
use mm::{ExecLayout, MmapArgs, Pid, Switches, SysError, Thread};
use simcore::VirtAddr;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// A value bound to a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Addr(VirtAddr),
    Fd(i32),
    Process(Pid),
    Layout(ExecLayout),
    Hold(HoldId),
    /// The read and write ends of a pipe.
    Pipe(i32, i32),
    /// An asynchronous read.
    Io(mm::types::ids::DioId),
    /// A System V shared memory segment's id.
    Shm(i32),
    /// A page frame number read from pagemap (0 when nothing was present).
    Frame(u64),
}

/// Why a name that the parser saw bound may hold no value at run time.
const UNBOUND: &str = " (the operation that binds it failed or did not run)";

/// The names a run has bound and the values they hold: the lookups every operation and
/// expectation makes, shared by the model's runs and the native executor (`crates/host`).
#[derive(Debug, Default)]
pub struct Names {
    values: BTreeMap<String, Value>,
}

impl Names {
    pub fn bind(&mut self, name: &str, v: Value) {
        self.values.insert(name.to_string(), v);
    }

    pub fn process(&self, name: &str) -> Result<Pid, String> {
        match self.values.get(name) {
            Some(Value::Process(p)) => Ok(*p),
            _ => Err(format!("`{name}` is not a process{UNBOUND}")),
        }
    }

    pub fn fd(&self, name: &str) -> Result<i32, String> {
        let (root, end) = name.split_once('.').map_or((name, None), |(r, e)| (r, Some(e)));
        match (self.values.get(root), end) {
            (Some(Value::Fd(fd)), None) => Ok(*fd),
            (Some(Value::Pipe(r, _)), Some("read")) => Ok(*r),
            (Some(Value::Pipe(_, w)), Some("write")) => Ok(*w),
            _ => Err(format!("`{name}` is not a file descriptor{UNBOUND}")),
        }
    }

    pub fn shm(&self, name: &str) -> Result<i32, String> {
        match self.values.get(name) {
            Some(Value::Shm(id)) => Ok(*id),
            _ => Err(format!("`{name}` is not a System V segment{UNBOUND}")),
        }
    }

    pub fn frame(&self, name: &str) -> Result<u64, String> {
        match self.values.get(name) {
            Some(Value::Frame(pfn)) => Ok(*pfn),
            _ => Err(format!("`{name}` is not a frame{UNBOUND}")),
        }
    }

    fn io(&self, name: &str) -> Result<mm::types::ids::DioId, String> {
        match self.values.get(name) {
            Some(Value::Io(id)) => Ok(*id),
            _ => Err(format!("`{name}` is not an asynchronous read{UNBOUND}")),
        }
    }

    pub fn hold(&self, name: &str) -> Result<HoldId, String> {
        match self.values.get(name) {
            Some(Value::Hold(h)) => Ok(*h),
            _ => Err(format!("`{name}` is not a pin{UNBOUND}")),
        }
    }

    /// The address an expression denotes.
    pub fn addr(&self, a: &AddrExpr) -> Result<VirtAddr, String> {
        let base = match &a.base {
            None => 0,
            Some(name) => {
                let (root, field) =
                    name.split_once('.').map_or((name.as_str(), None), |(r, f)| (r, Some(f)));
                match (self.values.get(root), field) {
                    (Some(Value::Addr(v)), None) => v.0,
                    (Some(Value::Layout(l)), Some(f)) => match f {
                        "text" => l.text.0,
                        "rodata" => l.rodata.0,
                        "data" => l.data.0,
                        "bss" => l.bss.0,
                        "stack" => l.stack_top.0,
                        _ => {
                            return Err(format!(
                                "`{name}`: an exec layout has text, rodata, data, bss and stack"
                            ));
                        }
                    },
                    _ => return Err(format!("`{name}` is not an address{UNBOUND}")),
                }
            }
        };
        base.checked_add_signed(a.offset)
            .map(VirtAddr)
            .ok_or_else(|| format!("address `{a:?}` overflows"))
    }
}

/// Names bound so far in a run, and the switches and kernel that select expectations.
#[derive(Debug)]
pub struct Env {
    pub names: Names,
    /// The scenario's flags (`notify`, `wait`), each a completion raised with `complete_all`,
    /// created when first named; `true` once raised.
    flags: BTreeMap<String, (engine::Completion, bool)>,
    pub switches: Switches,
    pub kernel: mm::KernelVersion,
    /// The run seed (workloads draw from streams of it).
    pub seed: u64,
    /// The engine running the kernel (for lockdep's report).
    pub handle: engine::Handle,
}

impl Env {
    pub fn new(
        switches: Switches,
        kernel: mm::KernelVersion,
        seed: u64,
        handle: engine::Handle,
    ) -> Env {
        Env { names: Names::default(), flags: BTreeMap::new(), switches, kernel, seed, handle }
    }

    /// The completion of flag `name`, created on `handle` when first named.
    fn flag(&mut self, handle: &engine::Handle, name: &str) -> engine::Completion {
        let entry = self.flags.entry(name.to_string());
        entry.or_insert_with(|| (handle.completion("scenario_flag"), false)).0
    }

    fn flag_raised(&self, name: &str) -> bool {
        self.flags.get(name).is_some_and(|&(_, raised)| raised)
    }

    pub fn bind(&mut self, name: &str, v: Value) {
        self.names.bind(name, v);
    }

    pub fn process(&self, name: &str) -> Result<Pid, String> {
        self.names.process(name)
    }

    fn fd(&self, name: &str) -> Result<i32, String> {
        self.names.fd(name)
    }

    /// The inode of a file named by path or by a process's descriptor.
    pub fn inode(&self, st: &KState, file: &FileRef) -> Result<mm::types::ids::InodeId, String> {
        match file {
            FileRef::Path(p) => st.paths.get(p).copied().ok_or_else(|| format!("no file `{p}`")),
            FileRef::Fd { process, fd } => Ok(st.file(self.file(st, process, fd)?).inode),
        }
    }

    fn shm(&self, name: &str) -> Result<i32, String> {
        self.names.shm(name)
    }

    fn io(&self, name: &str) -> Result<mm::types::ids::DioId, String> {
        self.names.io(name)
    }

    /// The open file (`struct file`) of descriptor `fd` of `process`.
    pub fn file(
        &self,
        st: &KState,
        process: &str,
        fd: &str,
    ) -> Result<mm::types::ids::FileId, String> {
        let n = self.fd(fd)?;
        let f = st.procs[self.process(process)?].fds.get(&n).copied();
        f.ok_or_else(|| format!("`{process}` has no descriptor `{fd}` ({n})"))
    }

    /// The address space of `process`.
    pub fn mm(&self, st: &KState, process: &str) -> Result<mm::types::ids::MmId, String> {
        st.procs[self.process(process)?]
            .mm
            .ok_or_else(|| format!("process `{process}` has no address space"))
    }

    pub fn hold(&self, name: &str) -> Result<HoldId, String> {
        self.names.hold(name)
    }

    /// The address an expression denotes.
    pub fn addr(&self, a: &AddrExpr) -> Result<VirtAddr, String> {
        self.names.addr(a)
    }
}

/// What a successful operation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Bound(Value),
    Data(Vec<u8>),
    Count(u64),
    /// A number read (`sysfs_read`).
    Value(u64),
    /// A userfaultfd message: a fault's address or a fork event's descriptor is bound by `as`.
    Uffd(UffdMsg),
    /// A `repeat` ran this many iterations; `ended`: its condition was met (a count always is;
    /// a flag or a success may not be within its `max`).
    Iterations {
        n: u64,
        ended: bool,
    },
}

/// An operation whose result did not match its expectation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    pub line: usize,
    pub expected: String,
    pub observed: String,
}

/// The result of running an operation: the outer error is a name the operation uses that no
/// earlier operation bound (the one that would have failed or did not run), so the operation
/// did not run at all.
pub type OpResult = Result<Result<Outcome, SysError>, String>;

/// Why an operation stopped: the kernel refused it, or it names a value no operation bound.
#[derive(Debug)]
enum Stop {
    Sys(SysError),
    Unbound(String),
}

impl From<SysError> for Stop {
    fn from(e: SysError) -> Stop {
        Stop::Sys(e)
    }
}

impl From<mm::Errno> for Stop {
    fn from(e: mm::Errno) -> Stop {
        Stop::Sys(e.into())
    }
}

impl From<mm::Signal> for Stop {
    fn from(s: mm::Signal) -> Stop {
        Stop::Sys(s.into())
    }
}

impl From<String> for Stop {
    fn from(e: String) -> Stop {
        Stop::Unbound(e)
    }
}

/// Runs one operation, through the function of its group (the match is exhaustive: a new
/// operation must be routed).
pub async fn execute(t: &Thread, op: &Op, env: &RefCell<Env>) -> OpResult {
    let result = match &op.kind {
        OpKind::Mmap { .. }
        | OpKind::Munmap { .. }
        | OpKind::Mprotect { .. }
        | OpKind::RemapFilePages { .. }
        | OpKind::Madvise { .. }
        | OpKind::Mremap { .. }
        | OpKind::Brk { .. }
        | OpKind::Touch { .. }
        | OpKind::ReadBytes { .. }
        | OpKind::Mincore { .. }
        | OpKind::Pagemap { .. }
        | OpKind::WriteBytes { .. }
        | OpKind::ProcMemWrite { .. }
        | OpKind::Increment { .. }
        | OpKind::Run { .. } => memory_op(t, op, env).await,
        OpKind::Mlock { .. }
        | OpKind::Munlock { .. }
        | OpKind::Mseal { .. }
        | OpKind::Mlockall { .. }
        | OpKind::Munlockall
        | OpKind::Msync { .. } => lock_op(t, op, env).await,
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
        | OpKind::PreadDirect { .. }
        | OpKind::PwriteFrom { .. }
        | OpKind::Pipe
        | OpKind::Vmsplice { .. } => file_op(t, op, env).await,
        OpKind::Shmget { .. }
        | OpKind::Shmat { .. }
        | OpKind::Shmdt { .. }
        | OpKind::Shmctl { .. } => shm_op(t, op, env).await,
        OpKind::Fork
        | OpKind::Exit
        | OpKind::Exec { .. }
        | OpKind::ClearRefs { .. }
        | OpKind::Prctl { .. }
        | OpKind::SysfsWrite { .. }
        | OpKind::SysfsRead { .. }
        | OpKind::Sleep { .. }
        | OpKind::MemoryReclaim { .. } => task_op(t, op, env).await,
        OpKind::Pin { .. }
        | OpKind::PinRead { .. }
        | OpKind::Unpin { .. }
        | OpKind::IoUringRegister { .. }
        | OpKind::IoUringUnregister { .. }
        | OpKind::Fixed { .. }
        | OpKind::Complete { .. } => pin_op(t, op, env).await,
        OpKind::Notify { .. } | OpKind::Wait { .. } => flag_op(t, op, env).await,
        OpKind::Uffd(u) => uffd_op(t, u, env).await,
        OpKind::Repeat { .. } => unreachable!("`run_task` runs loops, with their bodies checked"),
    };
    match result {
        Ok(outcome) => Ok(Ok(outcome)),
        Err(Stop::Sys(e)) => Ok(Err(e)),
        Err(Stop::Unbound(name)) => Err(name),
    }
}

/// Locking, sealing and syncing memory: `mlock`, `mlock2`, `munlock`, `mseal`, `mlockall`,
/// `munlockall`, `msync`.
async fn lock_op(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let addr = |a: &AddrExpr| env.borrow().addr(a);
    match &op.kind {
        OpKind::Mlock { addr: a, len, flags } => t.mlock(addr(a)?, *len, *flags).await?,
        OpKind::Munlock { addr: a, len } => t.munlock(addr(a)?, *len).await?,
        OpKind::Mseal { addr: a, len, flags } => t.mseal(addr(a)?, *len, *flags).await?,
        OpKind::Mlockall { flags } => t.mlockall(*flags).await?,
        OpKind::Munlockall => t.munlockall().await?,
        OpKind::Msync { addr: a, len, flags } => t.msync(addr(a)?, *len, *flags).await?,
        _ => unreachable!("only locking operations are routed here"),
    }
    Ok(Outcome::Done)
}

/// `mremap`, binding the new address.
async fn remap_file_pages(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let OpKind::RemapFilePages { addr, len, prot, pgoff, flags } = &op.kind else {
        unreachable!("remap_file_pages is routed here only")
    };
    let start = env.borrow().addr(addr)?;
    t.remap_file_pages((start, len.as_u64()), (*prot, *pgoff, *flags)).await?;
    Ok(Outcome::Done)
}

async fn mremap(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let OpKind::Mremap { addr, old_len, new_len, flags, new_addr } = &op.kind else {
        unreachable!("mremap is routed here only")
    };
    let at = |a: &AddrExpr| env.borrow().addr(a);
    let args = mm::MremapArgs {
        addr: at(addr)?,
        old_len: *old_len,
        new_len: *new_len,
        flags: *flags,
        new_addr: new_addr.as_ref().map(at).transpose()?,
    };
    Ok(Outcome::Bound(Value::Addr(t.mremap(args).await?)))
}

/// Mappings and the memory they map.
async fn memory_op(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let addr = |a: &AddrExpr| env.borrow().addr(a);
    let fd = |n: &String| env.borrow().fd(n);
    Ok(match &op.kind {
        OpKind::Mmap { addr: a, len, prot, flags, fd: f, offset } => {
            let args = MmapArgs {
                addr: a.as_ref().map(addr).transpose()?,
                len: *len,
                prot: *prot,
                flags: *flags,
                fd: f.as_ref().map(fd).transpose()?,
                offset: *offset,
            };
            Outcome::Bound(Value::Addr(t.mmap(args).await?))
        }
        OpKind::Munmap { addr: a, len } => {
            t.munmap(addr(a)?, *len).await?;
            Outcome::Done
        }
        OpKind::Mprotect { addr: a, len, prot } => {
            t.mprotect(addr(a)?, *len, *prot).await?;
            Outcome::Done
        }
        OpKind::Madvise { addr: a, len, advice } => {
            t.madvise(addr(a)?, *len, *advice).await?;
            Outcome::Done
        }
        OpKind::RemapFilePages { .. } => remap_file_pages(t, op, env).await?,
        OpKind::Mremap { .. } => mremap(t, op, env).await?,
        OpKind::Brk { addr: a } => Outcome::Bound(Value::Addr(t.brk(addr(a)?).await?)),
        OpKind::Touch { addr: a, len, access } => {
            t.touch(addr(a)?, *len, *access).await?;
            Outcome::Done
        }
        OpKind::ReadBytes { addr: a, len } => Outcome::Data(t.read_bytes(addr(a)?, *len).await?),
        OpKind::Mincore { addr: a, len } => Outcome::Data(t.mincore(addr(a)?, *len).await?),
        OpKind::Pagemap { addr: a } => Outcome::Bound(Value::Frame(t.pagemap_pfn(addr(a)?)?)),
        OpKind::WriteBytes { addr: a, data } => {
            t.write_bytes(addr(a)?, data).await?;
            Outcome::Done
        }
        OpKind::ProcMemWrite { addr: a, data } => {
            Outcome::Count(t.proc_mem_write(addr(a)?, data).await?)
        }
        OpKind::Increment { addr: a } => {
            let at = addr(a)?;
            let old = t.read_bytes(at, 8).await?;
            let value = u64::from_le_bytes(old.try_into().expect("8 bytes"));
            t.write_bytes(at, &value.wrapping_add(1).to_le_bytes()).await?;
            Outcome::Done
        }
        OpKind::Run { addr: a, len, pattern, reads, accesses } => {
            // One stream per operation line: adding a `run` elsewhere changes no other's draws.
            let mut rng =
                simcore::Prng::from_seed(env.borrow().seed).stream("run").substream(op.line as u64);
            let run = workload::access::AccessLoop {
                base: addr(a)?,
                pages: len.pages_ceil(),
                pattern: *pattern,
                read_ratio: *reads,
                accesses: *accesses,
            };
            run.run(t, &mut rng, &Default::default()).await?;
            Outcome::Count(*accesses)
        }
        _ => unreachable!("`execute` routes only these operations here"),
    })
}

/// System V shared memory.
async fn shm_op(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let addr = |a: &AddrExpr| env.borrow().addr(a);
    let shm = |n: &String| env.borrow().shm(n);
    Ok(match &op.kind {
        OpKind::Shmget { key, size, flags } => {
            Outcome::Bound(Value::Shm(t.shmget(*key, *size, *flags).await?))
        }
        OpKind::Shmat { shmid, addr: a, flags } => {
            let at = a.as_ref().map(addr).transpose()?;
            Outcome::Bound(Value::Addr(t.shmat(shm(shmid)?, at, *flags).await?))
        }
        OpKind::Shmdt { addr: a } => {
            t.shmdt(addr(a)?).await?;
            Outcome::Done
        }
        OpKind::Shmctl { shmid, stat: Some(field) } => {
            Outcome::Value(field.of(&t.shmctl_stat(shm(shmid)?).await?))
        }
        OpKind::Shmctl { shmid, stat: None } => {
            t.shmctl_rmid(shm(shmid)?).await?;
            Outcome::Done
        }
        _ => unreachable!("`execute` routes only these operations here"),
    })
}

/// Files, file descriptors and pipes.
async fn file_op(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let addr = |a: &AddrExpr| env.borrow().addr(a);
    let fd = |n: &String| env.borrow().fd(n);
    Ok(match &op.kind {
        OpKind::Open { path, flags } => Outcome::Bound(Value::Fd(t.open(path, *flags).await?)),
        OpKind::MemfdCreate { name, flags } => {
            Outcome::Bound(Value::Fd(t.memfd_create(name, *flags).await?))
        }
        OpKind::Close { fd: f } => {
            t.close(fd(f)?).await?;
            Outcome::Done
        }
        OpKind::Dup { fd: f } => Outcome::Bound(Value::Fd(t.dup(fd(f)?).await?)),
        OpKind::Cachestat { fd: f, offset, len, flags, null_range, null_cstat, field } => {
            let range = (!null_range).then_some(CachestatRange { off: *offset, len: *len });
            let stat = t.cachestat(fd(f)?, range, !null_cstat, *flags).await?;
            field.map_or(Outcome::Done, |field| Outcome::Value(field.of(&stat)))
        }
        OpKind::Read { fd: f, buf, len, offset } => {
            let buf = buf.as_ref().map(addr).transpose()?;
            let n = match offset {
                Some(off) => t.pread(fd(f)?, buf, *len, *off).await?,
                None => t.read(fd(f)?, buf, *len).await?,
            };
            match buf {
                Some(b) => Outcome::Data(t.read_bytes(b, n).await?),
                None => Outcome::Count(n),
            }
        }
        OpKind::Write { fd: f, data, offset } => Outcome::Count(match offset {
            Some(off) => t.pwrite_data(fd(f)?, data, *off).await?,
            None => t.write_data(fd(f)?, data).await?,
        }),
        OpKind::Truncate { .. }
        | OpKind::Ftruncate { .. }
        | OpKind::Fsync { .. }
        | OpKind::Fallocate { .. }
        | OpKind::Fadvise { .. }
        | OpKind::Readahead { .. } => {
            file_effect(t, op, env).await?;
            Outcome::Done
        }
        OpKind::PreadDirect { fd: f, buf, len, offset, submit: true } => {
            Outcome::Bound(Value::Io(t.pread_submit(fd(f)?, addr(buf)?, *len, *offset).await?))
        }
        OpKind::PreadDirect { fd: f, buf, len, offset, submit: false } => {
            let b = addr(buf)?;
            let n = t.pread(fd(f)?, Some(b), *len, *offset).await?;
            Outcome::Data(t.read_bytes(b, n).await?)
        }
        OpKind::PwriteFrom { fd: f, buf, len, offset } => {
            Outcome::Count(t.pwrite_from(fd(f)?, addr(buf)?, *len, *offset).await?)
        }

        OpKind::Pipe => {
            let (r, w) = t.pipe().await?;
            Outcome::Bound(Value::Pipe(r, w))
        }
        OpKind::Vmsplice { fd: f, addr: a, len } => {
            Outcome::Count(t.vmsplice(fd(f)?, addr(a)?, *len).await?)
        }
        _ => unreachable!("`execute` routes only these operations here"),
    })
}

/// The file operations that return nothing but success or an errno.
async fn file_effect(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<(), Stop> {
    let fd = |n: &String| env.borrow().fd(n);
    match &op.kind {
        OpKind::Truncate { path, size } => t.truncate(path, *size).await?,
        OpKind::Ftruncate { fd: f, size } => t.ftruncate(fd(f)?, *size).await?,
        OpKind::Fsync { fd: f } => t.fsync(fd(f)?).await?,
        OpKind::Fallocate { fd: f, mode, offset, len } => {
            t.fallocate(fd(f)?, *mode, *offset, *len).await?;
        }
        OpKind::Fadvise { fd: f, offset, len, advice } => {
            t.fadvise(fd(f)?, *offset, *len, *advice).await?;
        }
        OpKind::Readahead { fd: f, offset, len } => t.readahead(fd(f)?, *offset, *len).await?,
        _ => unreachable!("`file_op` routes only these operations here"),
    }
    Ok(())
}

/// The task and its process.
async fn task_op(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    Ok(match &op.kind {
        OpKind::Fork => Outcome::Bound(Value::Process(t.fork().await?)),
        OpKind::Exit => {
            t.exit().await?;
            Outcome::Done
        }
        OpKind::Exec { path, image } => Outcome::Bound(Value::Layout(t.exec(path, *image).await?)),
        OpKind::ClearRefs { process, value } => {
            let pid = env.borrow().process(process)?;
            t.clear_refs(pid, *value).await?;
            Outcome::Done
        }
        OpKind::Sleep { duration } => {
            t.cx().sleep(*duration).await;
            Outcome::Done
        }
        OpKind::Prctl { option, arg } => match t.prctl(*option, *arg).await? {
            Some(v) => Outcome::Value(v),
            None => Outcome::Done,
        },
        OpKind::SysfsRead { path, field } => {
            Outcome::Value(t.sysfs_read(path, field.as_deref()).await?)
        }
        OpKind::SysfsWrite { path, value } => {
            t.sysfs_write(path, value).await?;
            Outcome::Done
        }
        OpKind::MemoryReclaim { cgroup, amount } => {
            let memcg = t.cx().kernel().state().mem_cgroup_by_path(cgroup);
            let memcg = memcg.expect("cgroups were checked when parsing");
            t.memory_reclaim(memcg, *amount).await?;
            Outcome::Done
        }
        _ => unreachable!("`execute` routes only these operations here"),
    })
}

/// Held pages: by `pin`, as io_uring buffers, by an asynchronous read in flight.
async fn pin_op(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let addr = |a: &AddrExpr| env.borrow().addr(a);
    Ok(match &op.kind {
        OpKind::Pin { addr: a, len, flags } => {
            Outcome::Bound(Value::Hold(t.gup_hold(addr(a)?, *len, *flags).await?))
        }
        OpKind::PinRead { hold, offset, len } => {
            let h = env.borrow().hold(hold)?;
            let data = t.gup_read(h).await?;
            // Like a read: a range past the held pages returns what there is.
            let start = (*offset as usize).min(data.len());
            let end = len.map_or(data.len(), |n| start.saturating_add(n as usize).min(data.len()));
            Outcome::Data(data[start..end].to_vec())
        }
        OpKind::Unpin { hold } | OpKind::IoUringUnregister { hold } => {
            let h = env.borrow().hold(hold)?;
            t.gup_release(h).await?;
            Outcome::Done
        }
        OpKind::Complete { io } => {
            let id = env.borrow().io(io)?;
            Outcome::Count(t.dio_complete(id).await?)
        }
        OpKind::IoUringRegister { addr: a, len } => {
            Outcome::Bound(Value::Hold(t.io_uring_register_buffers(addr(a)?, *len).await?))
        }
        OpKind::Fixed { write, hold, addr: a, len, fd, offset } => {
            let (h, fd) = (env.borrow().hold(hold)?, env.borrow().fd(fd)?);
            Outcome::Count(if *write {
                t.io_uring_write_fixed(h, addr(a)?, *len, fd, *offset).await?
            } else {
                t.io_uring_read_fixed(h, addr(a)?, *len, fd, *offset).await?
            })
        }
        _ => unreachable!("`execute` routes only these operations here"),
    })
}

/// userfaultfd: the descriptor, its ioctls and its messages.
async fn uffd_op(t: &Thread, u: &UffdOp, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    let addr = |a: &AddrExpr| env.borrow().addr(a);
    let fd = |n: &String| env.borrow().fd(n);
    Ok(match u {
        UffdOp::Create { flags, dev } => {
            let flags = u32::try_from(*flags).expect("userfaultfd flags fit 32 bits");
            Outcome::Bound(Value::Fd(t.userfaultfd(flags, *dev).await?))
        }
        UffdOp::Api { fd: f, features } => {
            t.uffdio_api(fd(f)?, mm::types::userfaultfd::UFFD_API, *features).await?;
            Outcome::Done
        }
        UffdOp::Register { fd: f, addr: a, len, mode } => {
            t.uffdio_register(fd(f)?, addr(a)?, *len, *mode).await?;
            Outcome::Done
        }
        UffdOp::Unregister { fd: f, addr: a, len } => {
            t.uffdio_unregister(fd(f)?, addr(a)?, *len).await?;
            Outcome::Done
        }
        UffdOp::Wake { fd: f, addr: a, len } => {
            t.uffdio_wake(fd(f)?, addr(a)?, *len).await?;
            Outcome::Done
        }
        UffdOp::Copy { fd: f, dst, src, len, mode } => {
            Outcome::Count(t.uffdio_copy(fd(f)?, (addr(dst)?, addr(src)?), *len, *mode).await?)
        }
        UffdOp::Zeropage { fd: f, dst, len, mode } => {
            Outcome::Count(t.uffdio_zeropage(fd(f)?, addr(dst)?, *len, *mode).await?)
        }
        UffdOp::Continue { fd: f, dst, len, mode } => {
            Outcome::Count(t.uffdio_continue(fd(f)?, addr(dst)?, *len, *mode).await?)
        }
        UffdOp::Writeprotect { fd: f, addr: a, len, mode } => {
            t.uffdio_writeprotect(fd(f)?, addr(a)?, *len, *mode).await?;
            Outcome::Done
        }
        UffdOp::Read { fd: f, .. } => Outcome::Uffd(t.uffd_read(fd(f)?).await?),
    })
}

/// Raising a flag and waiting for one.
async fn flag_op(t: &Thread, op: &Op, env: &RefCell<Env>) -> Result<Outcome, Stop> {
    match &op.kind {
        OpKind::Notify { flag } => {
            let c = env.borrow_mut().flag(t.cx(), flag);
            env.borrow_mut().flags.get_mut(flag).expect("just created").1 = true;
            c.complete_all(t.cx());
        }
        OpKind::Wait { flag } => {
            let c = env.borrow_mut().flag(t.cx(), flag);
            c.wait(t.cx()).await;
        }
        _ => unreachable!("`execute` routes only these operations here"),
    }
    Ok(Outcome::Done)
}

/// Bytes for a message: short printable text quoted, a few bytes in hex, anything longer as
/// runs of equal bytes (`512 bytes: 0x44 x512`), never the bytes one by one.
fn show_bytes(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if s.len() <= 64 && s.chars().all(|c| !c.is_control()) => format!("\"{s}\""),
        _ if b.len() <= 16 => {
            format!("hex {}", b.iter().map(|x| format!("{x:02x}")).collect::<String>())
        }
        _ => format!("{} bytes: {}", b.len(), show_runs(b)),
    }
}

/// Runs of equal bytes: `0x44 x512, 0x00 x3584`, the first eight.
fn show_runs(b: &[u8]) -> String {
    let mut runs: Vec<(u8, usize)> = Vec::new();
    for &x in b {
        match runs.last_mut() {
            Some((v, n)) if *v == x => *n += 1,
            _ => runs.push((x, 1)),
        }
    }
    let mut out: Vec<String> = runs.iter().take(8).map(|(v, n)| format!("{v:#04x} x{n}")).collect();
    if runs.len() > 8 {
        out.push(format!("... ({} runs)", runs.len()));
    }
    out.join(", ")
}

/// Where `got` differs from `want`: each differing range (the first four) with what was expected
/// and what came, and a length difference.
fn show_difference(want: &[u8], got: &[u8]) -> String {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for i in (0..want.len().min(got.len())).filter(|&i| want[i] != got[i]) {
        match ranges.last_mut() {
            Some((_, end)) if *end == i => *end = i + 1,
            _ => ranges.push((i, i + 1)),
        }
    }
    let differing: usize = ranges.iter().map(|(a, b)| b - a).sum();
    let mut parts = vec![format!("{differing} of {} bytes differ", want.len())];
    for &(a, b) in ranges.iter().take(4) {
        parts.push(format!(
            "at {a}..{b} expected {}, got {}",
            show_runs(&want[a..b]),
            show_runs(&got[a..b])
        ));
    }
    if want.len() != got.len() {
        parts.push(format!("{} bytes expected, {} came", want.len(), got.len()));
    }
    parts.join("; ")
}

/// What one operation returned or one expectation read, whether or not it met what the scenario
/// expects: the rows `mmsim diff` sets beside the kernel's. Values that depend on the machine
/// (addresses, descriptors, ids) are left out of `observed`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    pub line: usize,
    /// The operation (`mmap`) or the observable (`smaps Rss of reader at buf`).
    pub what: String,
    /// What the scenario expects (`success`, `ENOMEM`, `= 16`).
    pub expected: String,
    pub observed: String,
    /// The number an expectation read (none for an operation, or when it could not be read).
    pub value: Option<u64>,
    /// Whether it met the scenario's expectation.
    pub held: bool,
    /// The address an operation returned (where the model placed a mapping), which the native
    /// executor reproduces relative to its own placement (`crates/host`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub addr: Option<u64>,
}

/// An operation's result judged against its expectation: the reading, and the failure when it
/// did not hold.
#[derive(Debug)]
pub struct Judged {
    pub reading: Reading,
    pub failure: Option<Failure>,
}

/// A result as a reading shows it: addresses, descriptors and ids are the machine's, so only
/// their kind is kept; long data gets a checksum beside its summary.
fn neutral(result: &Result<Outcome, SysError>) -> String {
    match result {
        Ok(Outcome::Bound(v)) => {
            let kind = match v {
                Value::Addr(_) => "an address",
                Value::Fd(_) => "a descriptor",
                Value::Process(_) => "a process",
                Value::Layout(_) => "a layout",
                Value::Hold(_) => "held pages",
                Value::Pipe(..) => "a pipe",
                Value::Io(_) => "a request",
                Value::Shm(_) => "a segment",
                Value::Frame(_) => "a frame",
            };
            format!("success ({kind})")
        }
        Ok(Outcome::Uffd(m)) => format!("success ({})", msg_kind(m)),
        Ok(Outcome::Data(d)) if d.len() > 16 => {
            let fnv = d.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            format!("data {} (fnv {fnv:016x})", show_bytes(d))
        }
        r => observed_text(r),
    }
}

/// A userfaultfd message's kind, without the machine's addresses and numbers.
fn msg_kind(m: &UffdMsg) -> &'static str {
    match m {
        UffdMsg::Pagefault { flags, .. } if flags & PAGEFAULT_FLAG_MINOR != 0 => "a minor fault",
        UffdMsg::Pagefault { flags, .. } if flags & PAGEFAULT_FLAG_WP != 0 => {
            "a write-protect fault"
        }
        UffdMsg::Pagefault { flags, .. } if flags & PAGEFAULT_FLAG_WRITE != 0 => "a write fault",
        UffdMsg::Pagefault { .. } => "a read fault",
        UffdMsg::Fork { .. } => "a fork event",
        UffdMsg::Remap { .. } => "a remap event",
        UffdMsg::Remove { .. } => "a remove event",
        UffdMsg::Unmap { .. } => "an unmap event",
    }
}

/// A userfaultfd message as a failure message shows it.
fn msg_text(m: &UffdMsg) -> String {
    match *m {
        UffdMsg::Pagefault { address, ptid, .. } => {
            format!("{} at {address:?} (thread {ptid})", msg_kind(m))
        }
        UffdMsg::Fork { ufd } => format!("a fork event (descriptor {ufd})"),
        UffdMsg::Remap { from, to, len } => {
            format!("a remap event of {len} bytes {from:?} -> {to:?}")
        }
        UffdMsg::Remove { start, end } | UffdMsg::Unmap { start, end } => {
            format!("{} of [{start:?}, {end:?})", msg_kind(m))
        }
    }
}

/// A result as a failure message shows it.
fn observed_text(result: &Result<Outcome, SysError>) -> String {
    match result {
        Ok(Outcome::Done) => "success".to_string(),
        Ok(Outcome::Bound(Value::Addr(a))) => format!("success ({a})"),
        Ok(Outcome::Bound(v)) => format!("success ({v:?})"),
        Ok(Outcome::Data(d)) => format!("data {}", show_bytes(d)),
        Ok(Outcome::Count(n)) => format!("{n} bytes"),
        Ok(Outcome::Value(n)) => format!("{n}"),
        Ok(Outcome::Uffd(m)) => msg_text(m),
        Ok(Outcome::Iterations { n, ended: true }) => format!("after {n} iterations"),
        Ok(Outcome::Iterations { n, ended: false }) => {
            format!("after {n} iterations, its condition unmet")
        }
        Err(e) => e.to_string(),
    }
}

/// Whether `result` meets `expect`, and the expectation as a message names it.
fn meets(expect: &OpExpect, names: &Names, result: &Result<Outcome, SysError>) -> (bool, String) {
    let unmet = matches!(result, Ok(Outcome::Iterations { ended: false, .. }));
    match (expect, result) {
        (OpExpect::Success, r) => (r.is_ok() && !unmet, "success".to_string()),
        (OpExpect::Any, _) => (true, "anything".to_string()),
        (OpExpect::Errno(e), r) => (*r == Err(SysError::Errno(*e)), e.to_string()),
        (OpExpect::Signal(s), r) => (*r == Err(SysError::Signal(*s)), s.to_string()),
        (OpExpect::Data(d), r) => {
            (matches!(r, Ok(Outcome::Data(x)) if x == d), format!("data {}", show_bytes(d)))
        }
        (OpExpect::Count(n), r) => {
            (matches!(r, Ok(Outcome::Count(x)) if x == n), format!("{n} bytes"))
        }
        (OpExpect::Iterations(c), r) => (
            matches!(r, Ok(Outcome::Iterations { n, ended: true }) if c.holds(*n)),
            format!("success, iterations {c}"),
        ),
        (OpExpect::Value(c), r) => {
            (matches!(r, Ok(Outcome::Value(n)) if c.holds(*n)), format!("a value {c}"))
        }
        (OpExpect::Resident(c), r) => {
            let resident = |d: &[u8]| d.iter().filter(|&&b| b & 1 == 1).count() as u64;
            let held = matches!(r, Ok(Outcome::Data(d)) if c.holds(resident(d)));
            (held, format!("success, resident pages {c}"))
        }
        (OpExpect::Addr(a), r) => match names.addr(a) {
            Ok(want) => {
                let got = match r {
                    Ok(Outcome::Bound(Value::Addr(got))) => Some(*got),
                    _ => None,
                };
                (got == Some(want), format!("success ({want})"))
            }
            Err(name) => (false, format!("the address of `{name}`, which is unbound")),
        },
        (OpExpect::Msg(m), r) => {
            let got = match r {
                Ok(Outcome::Uffd(got)) => Some(got),
                _ => None,
            };
            msg_meets(m, names, got)
                .unwrap_or_else(|name| (false, format!("the value of `{name}`, which is unbound")))
        }
    }
}

/// Whether message `got` is the one `m` describes (a fault's kind only when `write` is given,
/// its thread only when `tid` is), and the expectation as a message names it; `Err` names an
/// unbound name.
fn msg_meets(
    m: &MsgExpect,
    names: &Names,
    got: Option<&UffdMsg>,
) -> Result<(bool, String), String> {
    let want = match m {
        MsgExpect::Pagefault { addr, write, minor, wp, tid } => {
            let address = names.addr(addr)?;
            let ptid = tid.as_ref().map(|p| names.process(p)).transpose()?.map(|p| p.0);
            let flag = |want: &Option<bool>, flags: u64, bit: u64| {
                want.is_none_or(|w| w == (flags & bit != 0))
            };
            let held = got.is_some_and(|g| match *g {
                UffdMsg::Pagefault { address: a, flags, ptid: t } => {
                    a == address
                        && flag(write, flags, PAGEFAULT_FLAG_WRITE)
                        && flag(minor, flags, PAGEFAULT_FLAG_MINOR)
                        && flag(wp, flags, PAGEFAULT_FLAG_WP)
                        && ptid.is_none_or(|p| p == t)
                }
                _ => false,
            });
            let kind = match write {
                Some(true) => "a write fault",
                Some(false) => "a read fault",
                None => "a fault",
            };
            let minor = match (minor, wp) {
                (Some(true), _) => " (minor)",
                (_, Some(true)) => " (write-protect)",
                _ => "",
            };
            let by = tid.as_ref().map_or(String::new(), |p| format!(" by `{p}`"));
            return Ok((held, format!("{kind}{minor} at {address:?}{by}")));
        }
        MsgExpect::Fork => {
            return Ok((
                got.is_some_and(|g| matches!(g, UffdMsg::Fork { .. })),
                "a fork event".into(),
            ));
        }
        MsgExpect::Remap { from, to, len } => {
            UffdMsg::Remap { from: names.addr(from)?, to: names.addr(to)?, len: *len }
        }
        MsgExpect::Remove { start, end } => {
            UffdMsg::Remove { start: names.addr(start)?, end: names.addr(end)? }
        }
        MsgExpect::Unmap { start, end } => {
            UffdMsg::Unmap { start: names.addr(start)?, end: names.addr(end)? }
        }
    };
    Ok((got == Some(&want), msg_text(&want)))
}

/// Judges a result against the operation's expectation (the first alternative whose `when`
/// holds under `switches` and `kernel`).
pub fn judge(
    op: &Op,
    names: &Names,
    switches: &Switches,
    kernel: mm::KernelVersion,
    result: &Result<Outcome, SysError>,
) -> Judged {
    let success = OpExpect::Success;
    let expect =
        op.expect.iter().find(|a| a.when.holds(switches, kernel)).map_or(&success, |a| &a.expect);
    let name = op.kind.name();
    let (ok, expected) = meets(expect, names, result);
    let reading = Reading {
        line: op.line,
        what: format!("`{name}`"),
        expected: expected.clone(),
        observed: neutral(result),
        value: None,
        held: ok,
        addr: match result {
            Ok(Outcome::Bound(Value::Addr(a))) => Some(a.0),
            _ => None,
        },
    };
    if ok {
        return Judged { reading, failure: None };
    }
    let observed = match (expect, result) {
        (OpExpect::Data(want), Ok(Outcome::Data(got))) => {
            format!("{} ({})", observed_text(result), show_difference(want, got))
        }
        _ => observed_text(result),
    };
    let failure = Failure {
        line: op.line,
        expected: format!("`{name}` returns {expected}"),
        observed: format!("`{name}` returned {observed}"),
    };
    Judged { reading, failure: Some(failure) }
}

/// Judges a result in the model's run, recording its reading in `log`.
fn check(
    op: &Op,
    env: &Env,
    log: &RefCell<Log>,
    result: &Result<Outcome, SysError>,
) -> Result<(), Failure> {
    let judged = judge(op, &env.names, &env.switches, env.kernel, result);
    log.borrow_mut().record(judged.reading);
    judged.failure.map_or(Ok(()), Err)
}

/// What a run records: failures, operations run, expectations checked.
#[derive(Debug, Default)]
pub struct Log {
    pub failures: Vec<Failure>,
    pub ops: usize,
    pub expectations: usize,
    /// A failed operation is recorded and the task goes on (swarm testing, whose random
    /// operations may fail), instead of ending the task.
    pub keep_going: bool,
    /// The last reading of each operation and expectation, by line and what it reads (a loop's
    /// body keeps its last iteration's; two expectations on one line keep one each).
    pub readings: BTreeMap<(usize, String), Reading>,
}

impl Log {
    pub fn record(&mut self, r: Reading) {
        self.readings.insert((r.line, r.what.clone()), r);
    }
}

/// Runs `ops` in order on thread `t`; the first failure stops the task (unless the log says to
/// keep going) and is recorded.
pub async fn run_task(t: Thread, ops: Vec<Op>, env: Rc<RefCell<Env>>, log: Rc<RefCell<Log>>) {
    for op in &ops {
        let verdict = match &op.kind {
            OpKind::Repeat { .. } => repeat(&t, op, &env, &log).await,
            _ => attempt(&t, op, &env, &log).await,
        };
        if let Err(f) = verdict {
            let mut log = log.borrow_mut();
            log.failures.push(f);
            if !log.keep_going {
                return;
            }
        }
    }
}

/// Runs one operation (not a `repeat`), checks its result and binds it; counts it as run when
/// the values it names were bound.
async fn attempt(
    t: &Thread,
    op: &Op,
    env: &RefCell<Env>,
    log: &RefCell<Log>,
) -> Result<(), Failure> {
    let result = execute(t, op, env).await.map_err(|unbound| Failure {
        line: op.line,
        expected: format!("`{}` runs on the values it names", op.kind.name()),
        observed: unbound,
    })?;
    log.borrow_mut().ops += 1;
    check(op, &env.borrow(), log, &result)?;
    if let (Some(name), Some(v)) = (&op.bind, bound_value(&result)) {
        env.borrow_mut().bind(name, v);
    }
    Ok(())
}

/// The value an operation's `as` binds from its result: what it returned, a fault message's
/// address, a fork event's descriptor.
pub fn bound_value(result: &Result<Outcome, SysError>) -> Option<Value> {
    match result {
        Ok(Outcome::Bound(v)) => Some(*v),
        Ok(Outcome::Uffd(UffdMsg::Pagefault { address, .. })) => Some(Value::Addr(*address)),
        Ok(Outcome::Uffd(UffdMsg::Fork { ufd })) => Some(Value::Fd(*ufd)),
        _ => None,
    }
}

/// Runs a `repeat`: its body again and again until its condition holds or `max` iterations
/// ran, then checks the iteration count. An operation of the body that fails ends the loop as
/// its failure, except in a loop until success, where it ends only its iteration. A loop until a
/// flag looks at the flag before each iteration, at a preemption point (where the exploration
/// schedulers may run the task that raises it).
async fn repeat(
    t: &Thread,
    op: &Op,
    env: &RefCell<Env>,
    log: &RefCell<Log>,
) -> Result<(), Failure> {
    let OpKind::Repeat { body, until, max } = &op.kind else {
        unreachable!("`run_task` routes only loops here")
    };
    let (mut n, mut ended) = (0, false);
    loop {
        if let Until::Flag(flag) = until {
            t.cx().preempt_point().await;
            ended = env.borrow().flag_raised(flag);
        }
        if ended || n == *max {
            break;
        }
        n += 1;
        let mut iteration = Ok(());
        for inner in body {
            iteration = attempt(t, inner, env, log).await;
            if iteration.is_err() {
                break;
            }
        }
        match (until, iteration) {
            (Until::Success, Ok(())) => ended = true,
            (Until::Success, Err(_)) => {}
            (_, Err(f)) => return Err(f),
            (Until::Count, Ok(())) => ended = n == *max,
            (Until::Flag(_), Ok(())) => {}
        }
    }
    log.borrow_mut().ops += 1;
    check(op, &env.borrow(), log, &Ok(Outcome::Iterations { n, ended }))
}

#[cfg(test)]
mod tests {
    use super::{show_bytes, show_difference};

    #[test]
    fn long_data_is_shown_as_runs_and_differences_as_ranges() {
        assert_eq!(show_bytes(b"abc"), "\"abc\"");
        assert_eq!(show_bytes(&[0, 1]), "hex 0001");
        let want = vec![0x44; 512];
        assert_eq!(show_bytes(&want), "512 bytes: 0x44 x512");
        let mut got = vec![0x44; 512];
        got[..100].fill(0);
        assert_eq!(
            show_difference(&want, &got),
            "100 of 512 bytes differ; at 0..100 expected 0x44 x100, got 0x00 x100"
        );
        assert_eq!(
            show_difference(&want, &want[..500]),
            "0 of 512 bytes differ; 512 bytes expected, 500 came"
        );
    }
}
