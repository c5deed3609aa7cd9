//! Building one operation (`Op`) from its table: the operation's name picks its arguments,
//! each read with its type and line; `as` binds its result where it returns one; `expect` holds
//! its alternatives of results, each optionally under a `when` on switches or the kernel
//! version; keys an operation does not take are refused.

use super::Parser;
use super::fields::Fields;
use super::words::{
    UNMODELLED_OPS, parse_fallocate_mode, parse_kernel_cond, parse_map_flags, parse_mcl_flags,
    parse_memfd_flags, parse_mlock2_flags, parse_mremap_flags, parse_msync_flags, parse_percent,
    parse_prot, parse_shmat_flags, parse_shmget_flags, parse_uffd_copy_mode, parse_uffd_features,
    parse_uffd_flags, parse_uffd_mode, parse_uffd_wp_mode, unmodelled,
};
use crate::scenario::ScenarioError;
use crate::scenario::limits;
use crate::scenario::model::*;
use crate::scenario::node::{Kind, Node};
use mm::{Errno, ExecImage, Signal, Switches};
use simcore::Bytes;

impl Parser<'_> {
    pub(super) fn op(&self, node: &Node) -> Result<Op, ScenarioError> {
        let f = self.fields(node, "an operation")?;
        let name = f.string("op")?;
        let line = node.line;
        let kind = self.op_kind(&f, &name)?;
        let bind = f.opt_str("as")?;
        if bind.is_some() && kind.binds().is_none() {
            return Err(
                self.err(f.line_of("as"), format!("`{name}` returns nothing to bind with `as`"))
            );
        }
        let expect = match f.get("expect") {
            None => Vec::new(),
            Some(Node { kind: Kind::Array(items), .. }) => {
                items.iter().map(|n| self.op_alternative(n, &kind)).collect::<Result<_, _>>()?
            }
            Some(n) => vec![self.op_alternative(n, &kind)?],
        };
        let mut all = vec!["op", "as", "expect"];
        all.extend_from_slice(op_keys(&kind));
        f.finish(&all)?;
        let mut kind = kind;
        if let OpKind::Uffd(UffdOp::Read { fork, .. }) = &mut kind {
            *fork = expect.iter().any(|a: &Alternative| a.expect == OpExpect::Msg(MsgExpect::Fork));
        }
        Ok(Op { line, kind, bind, expect })
    }

    /// The operation `name`, its arguments read from `f`.
    fn op_kind(&self, f: &Fields<'_>, name: &str) -> Result<OpKind, ScenarioError> {
        if let Some(kind) = self.memory_op(f, name)? {
            return Ok(kind);
        }
        if let Some(kind) = self.file_op(f, name)? {
            return Ok(kind);
        }
        if let Some(kind) = self.shm_op(f, name)? {
            return Ok(kind);
        }
        if let Some(kind) = self.task_op(f, name)? {
            return Ok(kind);
        }
        if let Some(kind) = self.pin_op(f, name)? {
            return Ok(kind);
        }
        if let Some(kind) = self.control_op(f, name)? {
            return Ok(kind);
        }
        if let Some(kind) = self.uffd_op(f, name)? {
            return Ok(kind);
        }
        if let Some(why) = unmodelled(UNMODELLED_OPS, name) {
            return Err(self.err(f.line_of("op"), why));
        }
        Err(self.err(f.line_of("op"), format!(
            "unknown operation `{name}`: expected one of mmap, munmap, mremap, mprotect, madvise, mlock, mlock2, munlock, mseal, mlockall, munlockall, msync, brk, open, memfd_create, shmget, shmat, shmdt, shmctl, close, dup, read, write, truncate, ftruncate, fallocate, fsync, fork, exit, exec, touch, read_bytes, write_bytes, increment, mincore, pagemap, run, pin, pin_read, unpin, io_uring_register_buffers, userfaultfd, uffdio_api, uffdio_register, uffdio_unregister, uffdio_wake, uffdio_copy, uffdio_zeropage, uffdio_continue, uffd_read, io_uring_unregister_buffers, read_fixed, write_fixed, pread_direct, pwrite, complete, clear_refs, pipe, vmsplice, sleep, fadvise, readahead, cachestat, memory_reclaim, prctl, sysfs_write, repeat, notify, wait"
        )))
    }

    /// An operation on mappings or on the memory they map; `None` for another name.
    fn memory_op(&self, f: &Fields<'_>, name: &str) -> Result<Option<OpKind>, ScenarioError> {
        Ok(Some(match name {
            "mmap" => OpKind::Mmap {
                addr: f.opt_addr("addr")?,
                len: f.size("len")?,
                prot: f.prot("prot")?,
                flags: f.map_flags("flags")?,
                fd: f.opt_str("fd")?,
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
            },
            "munmap" => OpKind::Munmap { addr: f.addr("addr")?, len: f.size("len")? },
            "mlock" => OpKind::Mlock { addr: f.addr("addr")?, len: f.size("len")?, flags: None },
            "mlock2" => OpKind::Mlock {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                flags: Some(f.keyword("flags", parse_mlock2_flags, Some(0))?),
            },
            "munlock" => OpKind::Munlock { addr: f.addr("addr")?, len: f.size("len")? },
            "mseal" => OpKind::Mseal {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                flags: f.opt_u64("flags")?.unwrap_or(0),
            },
            "mlockall" => OpKind::Mlockall { flags: f.keyword("flags", parse_mcl_flags, None)? },
            "munlockall" => OpKind::Munlockall,
            "brk" => OpKind::Brk { addr: f.addr("addr")? },
            "msync" => OpKind::Msync {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                flags: f.keyword("flags", parse_msync_flags, None)?,
            },
            "mremap" => self.mremap_op(f)?,
            "mprotect" => OpKind::Mprotect {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                prot: f.prot("prot")?,
            },
            "remap_file_pages" => OpKind::RemapFilePages {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                prot: f.keyword("prot", parse_prot, Some(0))?,
                pgoff: f.opt_u64("pgoff")?.unwrap_or(0),
                flags: f.keyword("flags", parse_map_flags, Some(0))?,
            },
            "madvise" => OpKind::Madvise {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                advice: f.advice("advice")?,
            },
            "touch" => OpKind::Touch {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                access: f.access("access")?,
            },
            "read_bytes" => {
                OpKind::ReadBytes { addr: f.addr("addr")?, len: f.size("len")?.as_u64() }
            }
            "mincore" => OpKind::Mincore { addr: f.addr("addr")?, len: f.mincore_len()? },
            "pagemap" => OpKind::Pagemap { addr: f.addr("addr")? },
            "write_bytes" => OpKind::WriteBytes { addr: f.addr("addr")?, data: f.data()? },
            "proc_mem_write" => OpKind::ProcMemWrite { addr: f.addr("addr")?, data: f.data()? },
            "increment" => OpKind::Increment { addr: f.addr("addr")? },
            _ => return Ok(None),
        }))
    }

    /// A userfaultfd operation; `None` for another name.
    fn uffd_op(&self, f: &Fields<'_>, name: &str) -> Result<Option<OpKind>, ScenarioError> {
        let fd = || f.string("fd");
        let range = || Ok::<_, ScenarioError>((f.addr("addr")?, f.size("len")?.as_u64()));
        Ok(Some(OpKind::Uffd(match name {
            "userfaultfd" => UffdOp::Create {
                flags: f.keyword("flags", parse_uffd_flags, Some(0))?,
                dev: f.opt_bool("dev")?.unwrap_or(false),
            },
            "uffdio_api" => UffdOp::Api {
                fd: fd()?,
                features: f.keyword("features", parse_uffd_features, Some(0))?,
            },
            "uffdio_register" => {
                let (addr, len) = range()?;
                let mode = f.keyword("mode", parse_uffd_mode, None)?;
                UffdOp::Register { fd: fd()?, addr, len, mode }
            }
            "uffdio_unregister" => {
                let (addr, len) = range()?;
                UffdOp::Unregister { fd: fd()?, addr, len }
            }
            "uffdio_wake" => {
                let (addr, len) = range()?;
                UffdOp::Wake { fd: fd()?, addr, len }
            }
            "uffdio_copy" => UffdOp::Copy {
                fd: fd()?,
                dst: f.addr("dst")?,
                src: f.addr("src")?,
                len: f.size("len")?.as_u64(),
                mode: f.keyword("mode", parse_uffd_copy_mode, Some(0))?,
            },
            "uffdio_zeropage" => UffdOp::Zeropage {
                fd: fd()?,
                dst: f.addr("dst")?,
                len: f.size("len")?.as_u64(),
                mode: f.keyword("mode", parse_uffd_copy_mode, Some(0))?,
            },
            "uffdio_continue" => UffdOp::Continue {
                fd: fd()?,
                dst: f.addr("dst")?,
                len: f.size("len")?.as_u64(),
                mode: f.keyword("mode", parse_uffd_copy_mode, Some(0))?,
            },
            "uffdio_writeprotect" => {
                let (addr, len) = range()?;
                let mode = f.keyword("mode", parse_uffd_wp_mode, Some(0))?;
                UffdOp::Writeprotect { fd: fd()?, addr, len, mode }
            }
            // `fork` is set once the expectation is read (`Parser::op`).
            "uffd_read" => UffdOp::Read { fd: fd()?, fork: false },
            _ => return Ok(None),
        })))
    }

    /// `mremap`: `old_len` 0 (duplicating a shared mapping) is not modelled, and `MREMAP_FIXED`
    /// needs `new_addr`.
    fn mremap_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let old_len = f.size("old_len")?;
        if old_len.as_u64() == 0 {
            return Err(self.err(
                f.line_of("old_len"),
                "`old_len` = 0 of `mremap` (duplicating a shared mapping) is not modelled",
            ));
        }
        let flags = f.keyword("flags", parse_mremap_flags, Some(0))?;
        let new_addr = f.opt_addr("new_addr")?;
        if flags & mm::mremap_flags::FIXED != 0 && new_addr.is_none() {
            return Err(self.err(f.line_of("flags"), "`mremap` with `fixed` needs `new_addr`"));
        }
        Ok(OpKind::Mremap {
            addr: f.addr("addr")?,
            old_len,
            new_len: f.size("new_len")?,
            flags,
            new_addr,
        })
    }

    /// An operation on files, file descriptors or pipes; `None` for another name.
    fn file_op(&self, f: &Fields<'_>, name: &str) -> Result<Option<OpKind>, ScenarioError> {
        Ok(Some(match name {
            "open" => OpKind::Open { path: f.string("path")?, flags: f.open_flags("flags")? },
            "memfd_create" => OpKind::MemfdCreate {
                name: f.string("name")?,
                flags: f.keyword("flags", parse_memfd_flags, Some(0))?,
            },
            "close" => OpKind::Close { fd: f.string("fd")? },
            "dup" => OpKind::Dup { fd: f.string("fd")? },
            "read" => OpKind::Read {
                fd: f.string("fd")?,
                buf: f.opt_addr("buf")?,
                len: f.size("len")?.as_u64(),
                offset: f.opt_size("offset")?.map(Bytes::as_u64),
            },
            "write" => OpKind::Write {
                fd: f.string("fd")?,
                data: f.data()?,
                offset: f.opt_size("offset")?.map(Bytes::as_u64),
            },
            "truncate" => {
                OpKind::Truncate { path: f.string("path")?, size: f.size("size")?.as_u64() }
            }
            "ftruncate" => {
                OpKind::Ftruncate { fd: f.string("fd")?, size: f.size("size")?.as_u64() }
            }
            "fsync" => OpKind::Fsync { fd: f.string("fd")? },
            "fallocate" => OpKind::Fallocate {
                fd: f.string("fd")?,
                mode: f.keyword("mode", parse_fallocate_mode, Some(0))?,
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
                len: f.size("len")?.as_u64(),
            },
            "fadvise" => OpKind::Fadvise {
                fd: f.string("fd")?,
                offset: f.opt_signed_size("offset")?.unwrap_or(0),
                len: f.opt_signed_size("len")?.unwrap_or(0),
                advice: f.fadvice("advice")?,
            },
            "readahead" => OpKind::Readahead {
                fd: f.string("fd")?,
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
                len: f.size("len")?.as_u64(),
            },
            "cachestat" => self.cachestat_op(f)?,
            "pread_direct" => self.pread_direct_op(f)?,
            "pwrite" => OpKind::PwriteFrom {
                fd: f.string("fd")?,
                buf: f.addr("buf")?,
                len: f.size("len")?.as_u64(),
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
            },
            "complete" => OpKind::Complete { io: f.string("io")? },
            "pipe" => OpKind::Pipe,
            "vmsplice" => OpKind::Vmsplice {
                fd: f.string("fd")?,
                addr: f.addr("addr")?,
                len: f.size("len")?.as_u64(),
            },
            _ => return Ok(None),
        }))
    }

    /// `cachestat`: the range (from `offset`, `len` bytes, 0 to the end), `flags`, NULL
    /// pointers by `null_range` and `null_cstat`, and the `field` it reads, if any.
    fn cachestat_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let field = f.get("field").map(|_| f.keyword("field", CachestatField::parse, None));
        Ok(OpKind::Cachestat {
            fd: f.string("fd")?,
            offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
            len: f.opt_size("len")?.map_or(0, Bytes::as_u64),
            flags: self.c_uint(f, "flags")?,
            null_range: f.opt_bool("null_range")?.unwrap_or(false),
            null_cstat: f.opt_bool("null_cstat")?.unwrap_or(false),
            field: field.transpose()?,
        })
    }

    /// An `unsigned int` argument at `key` (0 when absent).
    fn c_uint(&self, f: &Fields<'_>, key: &str) -> Result<u32, ScenarioError> {
        let n = f.opt_u64(key)?.unwrap_or(0);
        u32::try_from(n).map_err(|_| {
            self.err(f.line_of(key), format!("`{key}`: {n} does not fit an unsigned int"))
        })
    }

    /// `pread_direct`: an O_DIRECT read, submitted only with `async` (then `as` names it).
    fn pread_direct_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let submit = f.opt_bool("async")?.unwrap_or(false);
        if submit && f.get("as").is_none() {
            return Err(self.err(
                f.line_of("async"),
                "`pread_direct` with `async` needs `as`, the name a `complete` ends it by",
            ));
        }
        Ok(OpKind::PreadDirect {
            fd: f.string("fd")?,
            buf: f.addr("buf")?,
            len: f.size("len")?.as_u64(),
            offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
            submit,
        })
    }

    /// A System V shared memory operation; `None` for another name.
    fn shm_op(&self, f: &Fields<'_>, name: &str) -> Result<Option<OpKind>, ScenarioError> {
        Ok(Some(match name {
            "shmget" => OpKind::Shmget {
                key: f.opt_u64("key")?.map_or(Ok(0), i32::try_from).map_err(|_| {
                    self.err(f.line_of("key"), "`key`: expected at most 2147483647")
                })?,
                size: f.size("size")?.as_u64(),
                flags: f.keyword("flags", parse_shmget_flags, Some(0o600))?,
            },
            "shmat" => OpKind::Shmat {
                shmid: f.string("shmid")?,
                addr: f.opt_addr("addr")?,
                flags: f.keyword("flags", parse_shmat_flags, Some(0))?,
            },
            "shmdt" => OpKind::Shmdt { addr: f.addr("addr")? },
            "shmctl" => self.shmctl_op(f)?,
            _ => return Ok(None),
        }))
    }

    /// `shmctl`: `cmd = "ipc_rmid"`, or `"ipc_stat"` with the `field` it reads.
    fn shmctl_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let shmid = f.string("shmid")?;
        let stat = match f.string("cmd")?.as_str() {
            "ipc_rmid" => None,
            "ipc_stat" => Some(f.keyword("field", ShmField::parse, None)?),
            other => {
                return Err(self.err(
                    f.line_of("cmd"),
                    format!("`shmctl`: unknown `cmd` `{other}`: expected ipc_stat or ipc_rmid"),
                ));
            }
        };
        Ok(OpKind::Shmctl { shmid, stat })
    }

    /// An operation on the task or its process: fork, exit, exec, a workload, a pause; `None` for another name.
    fn task_op(&self, f: &Fields<'_>, name: &str) -> Result<Option<OpKind>, ScenarioError> {
        Ok(Some(match name {
            "fork" => OpKind::Fork,
            "exit" => OpKind::Exit,
            "exec" => {
                let d = ExecImage::default();
                OpKind::Exec {
                    path: f.string("path")?,
                    image: ExecImage {
                        text: f.opt_size("text")?.unwrap_or(d.text),
                        rodata: f.opt_size("rodata")?.unwrap_or(d.rodata),
                        data: f.opt_size("data")?.unwrap_or(d.data),
                        bss: f.opt_size("bss")?.unwrap_or(d.bss),
                        stack: f.opt_size("stack")?.unwrap_or(d.stack),
                    },
                }
            }
            "run" => self.run_op(f)?,
            "clear_refs" => OpKind::ClearRefs {
                process: f.string("process")?,
                value: f.opt_u64("value")?.unwrap_or(4),
            },
            "sleep" => OpKind::Sleep { duration: f.duration("duration")? },
            "prctl" => self.prctl_op(f)?,
            "sysfs_read" => self.sysfs_read_op(f)?,
            "sysfs_write" => {
                let path = f.string("path")?;
                let per_size = mm::huge_memory::policy::sysfs_knob(&path)
                    .and_then(mm::huge_memory::policy::mthp_path);
                if per_size.is_some_and(|(_, file)| file == "shmem_enabled") {
                    return Err(self.err(f.line_of("path"), format!(
                        "`sysfs_write`: `{path}` is a per-size shmem THP knob (v6.11): multi-size shmem THP is not modelled"
                    )));
                }
                let value = f.scalar_text("value")?;
                if path == mm::mglru::debugfs::LRU_GEN
                    && let Some(why) = mm::mglru::debugfs::unmodelled(&value)
                {
                    return Err(self.err(f.line_of("value"), format!("`sysfs_write`: {why}")));
                }
                OpKind::SysfsWrite { path, value }
            }
            "memory_reclaim" => {
                OpKind::MemoryReclaim { cgroup: f.string("cgroup")?, amount: f.size("amount")? }
            }
            _ => return Ok(None),
        }))
    }

    /// Pinning pages (`pin_user_pages`, `get_user_pages`) and using or releasing them; `None` for another name.
    fn pin_op(&self, f: &Fields<'_>, name: &str) -> Result<Option<OpKind>, ScenarioError> {
        Ok(Some(match name {
            "pin" => {
                let kind = f.opt_str("kind")?.unwrap_or_else(|| "pin".into());
                let pin = match kind.as_str() {
                    "pin" => true,
                    "get" => false,
                    other => return Err(self.err(f.line_of("kind"), format!("`kind` in `pin`: expected \"pin\" (FOLL_PIN) or \"get\" (FOLL_GET), found \"{other}\""))),
                };
                let flags = mm::types::mm_types::GupFlags {
                    write: f.opt_bool("write")?.unwrap_or(false),
                    pin,
                    longterm: f.opt_bool("longterm")?.unwrap_or(false),
                    ..mm::types::mm_types::GupFlags::default()
                };
                OpKind::Pin { addr: f.addr("addr")?, len: f.size("len")?.as_u64(), flags }
            }
            "pin_read" => OpKind::PinRead {
                hold: f.string("pin")?,
                offset: f.opt_size("offset")?.map_or(0, |b| b.as_u64()),
                len: f.opt_size("len")?.map(|b| b.as_u64()),
            },
            "unpin" => OpKind::Unpin { hold: f.string("pin")? },
            "io_uring_register_buffers" => {
                OpKind::IoUringRegister { addr: f.addr("addr")?, len: f.size("len")?.as_u64() }
            }
            "io_uring_unregister_buffers" => OpKind::IoUringUnregister { hold: f.string("buf")? },
            "read_fixed" | "write_fixed" => OpKind::Fixed {
                write: name == "write_fixed",
                hold: f.string("buf")?,
                addr: f.addr("addr")?,
                len: f.size("len")?.as_u64(),
                fd: f.string("fd")?,
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
            },
            _ => return Ok(None),
        }))
    }

    /// The scenario's control flow: loops and flags between tasks; `None` for another name.
    fn control_op(&self, f: &Fields<'_>, name: &str) -> Result<Option<OpKind>, ScenarioError> {
        Ok(Some(match name {
            "repeat" => self.repeat_op(f)?,
            "notify" => OpKind::Notify { flag: f.string("flag")? },
            "wait" => OpKind::Wait { flag: f.string("flag")? },
            _ => return Ok(None),
        }))
    }

    /// `repeat`: `times = N`, or `until = "flag"` (with `flag`) or `"success"` with `max = N`;
    /// the count within [`limits::MAX_ITERATIONS`], its sleeps within
    /// [`limits::MAX_LOOP_SLEEP`], no `repeat` in the body.
    fn repeat_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let (until, max, key) = match (f.opt_u64("times")?, f.opt_str("until")?) {
            (Some(n), None) => (Until::Count, n, "times"),
            (None, Some(u)) => {
                let until = match u.as_str() {
                    "flag" => Until::Flag(f.string("flag")?),
                    "success" => Until::Success,
                    other => return Err(self.err(f.line_of("until"), format!("`until` in `repeat`: expected \"flag\" or \"success\", found \"{other}\""))),
                };
                let max = f.opt_u64("max")?.ok_or_else(|| self.err(f.line, "`repeat` with `until` needs `max`, the most iterations it may take: an unbounded loop is not a scenario"))?;
                (until, max, "max")
            }
            _ => {
                return Err(self.err(f.line, "`repeat` needs exactly one of `times` or `until`"));
            }
        };
        let stray = [("flag", !matches!(until, Until::Flag(_))), ("max", key == "times")];
        if let Some((k, _)) = stray.iter().find(|(k, unused)| *unused && f.get(k).is_some()) {
            return Err(self.err(f.line_of(k), format!("`{k}` does not belong to this `repeat`")));
        }
        if !(1..=limits::MAX_ITERATIONS).contains(&max) {
            return Err(self.err(
                f.line_of(key),
                format!("`{key}` in `repeat`: expected 1 to {}", limits::MAX_ITERATIONS),
            ));
        }
        let Some(items) = f.get("ops") else {
            return Err(self.err(f.line, "`repeat` needs `ops`, the operations it repeats"));
        };
        let body =
            self.array(items, "ops")?.iter().map(|n| self.op(n)).collect::<Result<Vec<_>, _>>()?;
        if body.is_empty() {
            return Err(self.err(f.line_of("ops"), "`repeat`: `ops` must hold an operation"));
        }
        if let Some(inner) = body.iter().find(|op| matches!(op.kind, OpKind::Repeat { .. })) {
            return Err(self.err(inner.line, "a `repeat` inside a `repeat` is not supported"));
        }
        let sleep: u64 = body
            .iter()
            .map(|op| match op.kind {
                OpKind::Sleep { duration } => duration.as_ns(),
                _ => 0,
            })
            .sum();
        if sleep.saturating_mul(max) > limits::MAX_LOOP_SLEEP.as_ns() {
            return Err(self.err(
                f.line_of(key),
                "`repeat`: its sleeps add up to more than 100 years of virtual time",
            ));
        }
        Ok(OpKind::Repeat { body, until, max })
    }

    /// `prctl`: an option the model has, by name; `arg` (arg2) defaults to 1 for a set and 0
    /// for a get.
    fn prctl_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let name = f.string("option")?;
        let option = super::words::parse_prctl_option(&name)
            .map_err(|e| self.err(f.line_of("option"), format!("`prctl`: {e}")))?;
        let arg = f.opt_u64("arg")?.unwrap_or(u64::from(!option.is_get()));
        Ok(OpKind::Prctl { option, arg })
    }

    /// `sysfs_read`: a file, with `field` (the line) for `/proc/self/ksm_stat` and only there.
    fn sysfs_read_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let path = f.string("path")?;
        let field = f.opt_str("field")?;
        let stat = path == mm::ksm::PROC_SELF_KSM_STAT;
        if stat && field.is_none() {
            let why = format!("`sysfs_read` of {path}: expected `field` (the line to read)");
            return Err(self.err(f.line_of("path"), why));
        }
        if !stat && field.is_some() {
            let why = format!(
                "`sysfs_read`: `field` reads a line of {} only",
                mm::ksm::PROC_SELF_KSM_STAT
            );
            return Err(self.err(f.line_of("field"), why));
        }
        Ok(OpKind::SysfsRead { path, field })
    }

    /// `run`: a workload (pmbench) over a range.
    fn run_op(&self, f: &Fields<'_>) -> Result<OpKind, ScenarioError> {
        let name = f.string("workload")?;
        if name != "pmbench" {
            return Err(self.err(
                f.line_of("workload"),
                format!("unknown workload `{name}`: expected \"pmbench\""),
            ));
        }
        let pattern = f.opt_str("pattern")?.unwrap_or_else(|| "normal_ih".into());
        let pattern = workload::access::Pattern::named(&pattern)
            .map_err(|e| self.err(f.line_of("pattern"), e))?;
        let reads = f.opt_str("reads")?.unwrap_or_else(|| "100%".into());
        let reads = parse_percent(&reads).map_err(|e| self.err(f.line_of("reads"), e))?;
        let len = f.size("len")?;
        if len.pages_ceil() == 0 {
            return Err(self.err(f.line_of("len"), "`run`: `len` must cover at least one page"));
        }
        Ok(OpKind::Run {
            addr: f.addr("addr")?,
            len,
            pattern,
            reads,
            accesses: f.opt_u64("accesses")?.unwrap_or(1),
        })
    }

    /// One alternative of an operation's `expect`: a result, optionally under `when`.
    fn op_alternative(&self, node: &Node, kind: &OpKind) -> Result<Alternative, ScenarioError> {
        let when = match &node.kind {
            Kind::Table(entries) => match entries.iter().find(|(k, _)| k == "when") {
                Some((_, w)) => self.when(w)?,
                None => When::default(),
            },
            _ => When::default(),
        };
        Ok(Alternative { when, expect: self.op_expect(node, kind)? })
    }

    /// `when = { switch = "value" }` or `{ switch = ["a", "b"] }`, checked against the switches.
    pub(super) fn when(&self, node: &Node) -> Result<When, ScenarioError> {
        let f = self.fields(node, "when")?;
        let mut conds = Vec::new();
        let mut kernel = Vec::new();
        for (key, value) in f.entries {
            if key == "kernel" {
                kernel = self.kernel_bounds(value)?;
                continue;
            }
            let values: Vec<String> =
                match &value.kind {
                    Kind::Str(v) => vec![v.clone()],
                    Kind::Array(items) => items
                        .iter()
                        .map(|i| match &i.kind {
                            Kind::Str(v) => Ok(v.clone()),
                            k => Err(self.err(
                                i.line,
                                format!(
                                    "`when`: expected switch values as strings, found {}",
                                    k.describe()
                                ),
                            )),
                        })
                        .collect::<Result<_, _>>()?,
                    k => return Err(self.err(
                        value.line,
                        format!(
                            "`when`: expected a value or a list of values for `{key}`, found {}",
                            k.describe()
                        ),
                    )),
                };
            let mut scratch = Switches::default();
            for v in &values {
                scratch.set(key, v).map_err(|e| self.err(value.line, e))?;
            }
            conds.push((key.clone(), values));
        }
        f.mark_all();
        Ok(When { switches: conds, kernel })
    }

    /// `kernel` in `when`: one bound (`">=v5.11"`) or a list of bounds that all hold.
    fn kernel_bounds(
        &self,
        value: &Node,
    ) -> Result<Vec<(std::cmp::Ordering, bool, mm::KernelVersion)>, ScenarioError> {
        let bad = |line| {
            self.err(
                line,
                "`kernel` in `when`: expected a string like \">=v5.11\" or a list of them",
            )
        };
        let items = match &value.kind {
            Kind::Array(items) => items.iter().collect(),
            _ => vec![value],
        };
        items
            .into_iter()
            .map(|n| match &n.kind {
                Kind::Str(text) => parse_kernel_cond(text).map_err(|e| self.err(n.line, e)),
                _ => Err(bad(n.line)),
            })
            .collect()
    }

    fn op_expect(&self, node: &Node, kind: &OpKind) -> Result<OpExpect, ScenarioError> {
        if let Kind::Str(s) = &node.kind {
            return match s.as_str() {
                "ok" => Ok(OpExpect::Success),
                "any" => Ok(OpExpect::Any),
                _ => Err(self.err(
                    node.line,
                    format!(
                        "expect `{s}`: expected \"ok\", \"any\" or a table like {{ errno = \"EINVAL\" }}"
                    ),
                )),
            };
        }
        let f = self.fields(node, "expect")?;
        // `when` belongs to the enclosing alternative, parsed by `op_alternative`.
        f.get("when");
        let e = if let Some(e) = f.opt_str("errno")? {
            OpExpect::Errno(
                Errno::from_name(&e)
                    .ok_or_else(|| self.err(f.line_of("errno"), format!("unknown errno `{e}`")))?,
            )
        } else if let Some(s) = f.opt_str("signal")? {
            OpExpect::Signal(Signal::from_name(&s).ok_or_else(|| {
                self.err(
                    f.line_of("signal"),
                    format!("unknown signal `{s}`: expected SIGSEGV, SIGBUS or SIGKILL"),
                )
            })?)
        } else if f.get("data").is_some() || f.get("data_hex").is_some() || f.get("fill").is_some()
        {
            if !matches!(
                kind,
                OpKind::ReadBytes { .. }
                    | OpKind::Mincore { .. }
                    | OpKind::Read { buf: Some(_), .. }
                    | OpKind::PinRead { .. }
                    | OpKind::PreadDirect { submit: false, .. }
            ) {
                return Err(
                    self.err(node.line, format!("`{}` returns no data to compare", kind.name()))
                );
            }
            OpExpect::Data(f.data()?)
        } else if matches!(kind, OpKind::Uffd(UffdOp::Read { .. }))
            && MSG_KEYS.iter().any(|k| f.get(k).is_some())
        {
            OpExpect::Msg(self.msg_expect(&f)?)
        } else if let Some(n) = f.opt_u64("bytes")? {
            OpExpect::Count(n)
        } else if let Some(e) = self.numeric_expect(&f, node, kind)? {
            e
        } else {
            return Err(self.err(
                node.line,
                "expect: expected one of errno, signal, data, data_hex, fill, bytes, iterations, value, resident, addr",
            ));
        };
        f.finish(&EXPECT_KEYS)?;
        Ok(e)
    }
}

impl Parser<'_> {
    /// An `expect` table's `iterations` (a `repeat`'s), `value` (a `sysfs_read`'s) or `addr` (a
    /// `brk`'s break, the address `mmap`, `mremap` or `shmat` returned), if given.
    fn numeric_expect(
        &self,
        f: &Fields,
        node: &Node,
        kind: &OpKind,
    ) -> Result<Option<OpExpect>, ScenarioError> {
        if let Some(n) = f.get("iterations") {
            if !matches!(kind, OpKind::Repeat { .. }) {
                return Err(self.err(node.line, format!("`{}` has no iterations", kind.name())));
            }
            return Ok(Some(OpExpect::Iterations(self.iterations(n)?)));
        }
        if let Some(n) = f.get("value") {
            let reads = match kind {
                OpKind::SysfsRead { .. }
                | OpKind::Shmctl { stat: Some(_), .. }
                | OpKind::Cachestat { field: Some(_), .. } => true,
                OpKind::Prctl { option, .. } => option.is_get(),
                _ => false,
            };
            if !reads {
                return Err(self.err(node.line, format!("`{}` reads no number", kind.name())));
            }
            return Ok(Some(OpExpect::Value(self.iterations(n)?)));
        }
        if let Some(n) = f.get("resident") {
            if !matches!(kind, OpKind::Mincore { .. }) {
                return Err(self.err(node.line, format!("`{}` counts no pages", kind.name())));
            }
            return Ok(Some(OpExpect::Resident(self.iterations(n)?)));
        }
        if let Some(a) = f.opt_addr("addr")? {
            let returns_addr = matches!(
                kind,
                OpKind::Brk { .. }
                    | OpKind::Mmap { .. }
                    | OpKind::Mremap { .. }
                    | OpKind::Shmat { .. }
            );
            if !returns_addr {
                return Err(
                    self.err(node.line, format!("`{}` returns no address to compare", kind.name()))
                );
            }
            if f.get("write").is_some() {
                return Err(
                    self.err(f.line_of("write"), "only `uffd_read` reads a fault's `write`")
                );
            }
            return Ok(Some(OpExpect::Addr(a)));
        }
        Ok(None)
    }

    /// A `uffd_read`'s message: `event` (`pagefault` unless given) and its fields: a fault's
    /// `addr`, `write` and `tid` (a process), a remap's `from`, `to` and `len`, a remove's or
    /// an unmap's `start` and `end`.
    fn msg_expect(&self, f: &Fields) -> Result<MsgExpect, ScenarioError> {
        let event = f.opt_str("event")?.unwrap_or_else(|| "pagefault".to_string());
        let (msg, keys): (MsgExpect, &[&str]) = match event.as_str() {
            "pagefault" => {
                let (write, minor, wp, tid) = (
                    f.opt_bool("write")?,
                    f.opt_bool("minor")?,
                    f.opt_bool("wp")?,
                    f.opt_str("tid")?,
                );
                let msg = MsgExpect::Pagefault { addr: f.addr("addr")?, write, minor, wp, tid };
                (msg, &["addr", "write", "minor", "wp", "tid"])
            }
            "fork" => (MsgExpect::Fork, &[]),
            "remap" => {
                let (from, to, len) = (f.addr("from")?, f.addr("to")?, f.size("len")?.as_u64());
                (MsgExpect::Remap { from, to, len }, &["from", "to", "len"])
            }
            "remove" => (
                MsgExpect::Remove { start: f.addr("start")?, end: f.addr("end")? },
                &["start", "end"],
            ),
            "unmap" => (
                MsgExpect::Unmap { start: f.addr("start")?, end: f.addr("end")? },
                &["start", "end"],
            ),
            other => {
                return Err(self.err(f.line_of("event"), format!(
                    "`event`: unknown `{other}`: expected pagefault, fork, remap, remove or unmap"
                )));
            }
        };
        for key in MSG_KEYS.iter().filter(|k| **k != "event" && !keys.contains(k)) {
            if f.get(key).is_some() {
                return Err(
                    self.err(f.line_of(key), format!("`{key}`: a {event} message has no `{key}`"))
                );
            }
        }
        Ok(msg)
    }

    /// `iterations = N` or `iterations = { at_least = N }` (or `at_most`, `equals`); a
    /// `sysfs_read`'s `value` alike.
    fn iterations(&self, node: &Node) -> Result<Comparison, ScenarioError> {
        if let Kind::Int(n) = node.kind {
            let n = u64::try_from(n)
                .map_err(|_| self.err(node.line, "`iterations`: must not be negative"))?;
            return Ok(Comparison::Equals(n));
        }
        let f = self.fields(node, "`iterations`")?;
        let cmp = self.comparison(&f, node.line)?;
        f.finish(&["equals", "at_least", "at_most"])?;
        Ok(cmp)
    }
}

/// The keys of an operation's `expect` table.
const EXPECT_KEYS: [&str; 21] = [
    "errno",
    "signal",
    "data",
    "data_hex",
    "fill",
    "len",
    "bytes",
    "iterations",
    "value",
    "resident",
    "addr",
    "write",
    "minor",
    "wp",
    "event",
    "tid",
    "from",
    "to",
    "start",
    "end",
    "when",
];

/// The keys of a `uffd_read`'s expected message.
const MSG_KEYS: [&str; 11] =
    ["event", "addr", "write", "minor", "wp", "tid", "from", "to", "len", "start", "end"];

/// The keys operation `kind` takes besides `op`, `as` and `expect`.
fn op_keys(kind: &OpKind) -> &'static [&'static str] {
    match kind {
        OpKind::Mmap { .. } => &["addr", "len", "prot", "flags", "fd", "offset"],
        OpKind::Munmap { .. } | OpKind::Munlock { .. } | OpKind::Mlock { flags: None, .. } => {
            &["addr", "len"]
        }
        OpKind::Mlock { flags: Some(_), .. } | OpKind::Msync { .. } | OpKind::Mseal { .. } => {
            &["addr", "len", "flags"]
        }
        OpKind::Mlockall { .. } => &["flags"],
        OpKind::Munlockall => &[],
        OpKind::Mprotect { .. } => &["addr", "len", "prot"],
        OpKind::RemapFilePages { .. } => &["addr", "len", "prot", "pgoff", "flags"],
        OpKind::Madvise { .. } => &["addr", "len", "advice"],
        OpKind::Mremap { .. } => &["addr", "old_len", "new_len", "flags", "new_addr"],
        OpKind::Open { .. } => &["path", "flags"],
        OpKind::MemfdCreate { .. } => &["name", "flags"],
        OpKind::Shmget { .. } => &["key", "size", "flags"],
        OpKind::Shmat { .. } => &["shmid", "addr", "flags"],
        OpKind::Shmdt { .. } | OpKind::Brk { .. } => &["addr"],
        OpKind::Shmctl { .. } => &["shmid", "cmd", "field"],
        OpKind::Close { .. } | OpKind::Dup { .. } | OpKind::Fsync { .. } => &["fd"],
        OpKind::Read { .. } => &["fd", "buf", "len", "offset"],
        OpKind::Write { .. } => &["fd", "data", "data_hex", "fill", "len", "offset"],
        OpKind::Truncate { .. } => &["path", "size"],
        OpKind::Ftruncate { .. } => &["fd", "size"],
        OpKind::Fork | OpKind::Exit => &[],
        OpKind::Exec { .. } => &["path", "text", "rodata", "data", "bss", "stack"],
        OpKind::Touch { .. } => &["addr", "len", "access"],
        OpKind::ReadBytes { .. } | OpKind::Mincore { .. } => &["addr", "len"],
        OpKind::Pagemap { .. } => &["addr"],
        OpKind::WriteBytes { .. } | OpKind::ProcMemWrite { .. } => {
            &["addr", "data", "data_hex", "fill", "len"]
        }
        OpKind::Increment { .. } => &["addr"],
        OpKind::Run { .. } => &["workload", "addr", "len", "pattern", "reads", "accesses"],
        OpKind::Pin { .. } => &["addr", "len", "kind", "write", "longterm"],
        OpKind::PinRead { .. } => &["pin", "offset", "len"],
        OpKind::Unpin { .. } => &["pin"],
        OpKind::PreadDirect { .. } => &["fd", "buf", "len", "offset", "async"],
        OpKind::PwriteFrom { .. } => &["fd", "buf", "len", "offset"],
        OpKind::Complete { .. } => &["io"],
        OpKind::IoUringRegister { .. } => &["addr", "len"],
        OpKind::IoUringUnregister { .. } => &["buf"],
        OpKind::Uffd(u) => uffd_keys(u),
        OpKind::Fixed { .. } => &["buf", "addr", "len", "fd", "offset"],
        OpKind::ClearRefs { .. } => &["process", "value"],
        OpKind::Prctl { .. } => &["option", "arg"],
        OpKind::SysfsWrite { .. } => &["path", "value"],
        OpKind::SysfsRead { .. } => &["path", "field"],
        OpKind::Pipe => &[],
        OpKind::Fadvise { .. } => &["fd", "offset", "len", "advice"],
        OpKind::Readahead { .. } => &["fd", "offset", "len"],
        OpKind::Cachestat { .. } => {
            &["fd", "offset", "len", "flags", "null_range", "null_cstat", "field"]
        }
        OpKind::MemoryReclaim { .. } => &["cgroup", "amount"],
        OpKind::Vmsplice { .. } => &["fd", "addr", "len"],
        OpKind::Sleep { .. } => &["duration"],
        OpKind::Fallocate { .. } => &["fd", "mode", "offset", "len"],
        OpKind::Repeat { .. } => &["times", "until", "flag", "max", "ops"],
        OpKind::Notify { .. } | OpKind::Wait { .. } => &["flag"],
    }
}

/// The keys userfaultfd operation `u` takes besides `op`, `as` and `expect`.
fn uffd_keys(u: &UffdOp) -> &'static [&'static str] {
    match u {
        UffdOp::Create { .. } => &["flags", "dev"],
        UffdOp::Api { .. } => &["fd", "features"],
        UffdOp::Register { .. } => &["fd", "addr", "len", "mode"],
        UffdOp::Unregister { .. } | UffdOp::Wake { .. } => &["fd", "addr", "len"],
        UffdOp::Writeprotect { .. } => &["fd", "addr", "len", "mode"],
        UffdOp::Copy { .. } => &["fd", "dst", "src", "len", "mode"],
        UffdOp::Zeropage { .. } | UffdOp::Continue { .. } => &["fd", "dst", "len", "mode"],
        UffdOp::Read { .. } => &["fd"],
    }
}
