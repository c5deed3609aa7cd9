//! `_core.Process`: a simulated process whose methods are the syscalls and memory accesses of
//! `mm::Thread`. Each call runs a thread of the process on the given CPU (default 0) until the
//! call returns, in virtual time; errors become `OSError` (an errno) or a `MemoryAccessError`
//! (a signal), see [`crate::errors`].

use crate::args::{self, Size};
use crate::errors::{Origin, sys_error};
use crate::machine::Machine;
use mm::{ExecImage, MmapArgs, Pid, SysError, Thread};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use simcore::VirtAddr;
use std::future::Future;

/// A process of a simulated machine; its methods mirror the syscalls.
#[pyclass(frozen, module = "mmsim._core")]
#[derive(Debug)]
pub(crate) struct Process {
    machine: Py<Machine>,
    pid: Pid,
}

impl Process {
    pub(crate) fn new(machine: Py<Machine>, pid: Pid) -> Process {
        Process { machine, pid }
    }

    /// Runs `f` as a thread of this process on `cpu`; `call` names it in errors.
    fn run<T, E, F, Fut>(
        &self,
        py: Python<'_>,
        cpu: u32,
        call: &str,
        path: Option<&str>,
        f: F,
    ) -> PyResult<T>
    where
        T: 'static,
        E: Into<SysError> + 'static,
        F: FnOnce(Thread) -> Fut + 'static,
        Fut: Future<Output = Result<T, E>> + 'static,
    {
        let result = self.machine.bind(py).try_borrow_mut()?.call(py, self.pid, cpu, f)?;
        result.map_err(|e| sys_error(py, e.into(), Origin { call, pid: self.pid, path }))
    }
}

#[pymethods]
impl Process {
    /// The process id.
    #[getter]
    fn pid(&self) -> u32 {
        self.pid.0
    }

    /// The process's name (a child of `fork` has its parent's).
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.machine.bind(py).try_borrow()?.process_name(self.pid))
    }

    /// The `_core.Machine` the process runs on.
    #[getter]
    fn machine(&self, py: Python<'_>) -> Py<Machine> {
        self.machine.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Process(pid={}, name={:?})", self.pid.0, self.name(py)?))
    }

    /// `mmap(2)`: maps `length` bytes with protection `prot` ("rw", "r-x", "none") and `flags`
    /// ("private|anonymous", "shared", ...; add "fixed" to place it at `addr`), from file
    /// descriptor `fd` at `offset` for a file mapping. Returns the address.
    #[pyo3(
        signature = (length, prot="rw", flags="private|anonymous", fd=None, offset=Size(0), addr=None, *, cpu=0),
        text_signature = "($self, length, prot=\"rw\", flags=\"private|anonymous\", fd=None, offset=0, addr=None, *, cpu=0)"
    )]
    #[allow(clippy::too_many_arguments, reason = "the keyword arguments of mmap(2)")]
    fn mmap(
        &self,
        py: Python<'_>,
        length: Size,
        prot: &str,
        flags: &str,
        fd: Option<i32>,
        offset: Size,
        addr: Option<u64>,
        cpu: u32,
    ) -> PyResult<u64> {
        let a = MmapArgs {
            addr: addr.map(VirtAddr),
            len: length.bytes(),
            prot: args::prot(prot)?,
            flags: args::map_flags(flags)?,
            fd,
            offset: offset.0,
        };
        let at = self.run(py, cpu, "mmap", None, move |t| async move { t.mmap(a).await })?;
        Ok(at.0)
    }

    /// `munmap(2)`.
    #[pyo3(signature = (addr, length, *, cpu=0))]
    fn munmap(&self, py: Python<'_>, addr: u64, length: Size, cpu: u32) -> PyResult<()> {
        let len = length.bytes();
        self.run(
            py,
            cpu,
            "munmap",
            None,
            move |t| async move { t.munmap(VirtAddr(addr), len).await },
        )
    }

    /// `mprotect(2)` with protection `prot` ("r", "rw", "none", ...).
    #[pyo3(signature = (addr, length, prot, *, cpu=0))]
    fn mprotect(
        &self,
        py: Python<'_>,
        addr: u64,
        length: Size,
        prot: &str,
        cpu: u32,
    ) -> PyResult<()> {
        let (len, prot) = (length.bytes(), args::prot(prot)?);
        self.run(py, cpu, "mprotect", None, move |t| async move {
            t.mprotect(VirtAddr(addr), len, prot).await
        })
    }

    /// `madvise(2)` with `advice` ("dontneed", "random", "sequential", "normal").
    #[pyo3(signature = (addr, length, advice, *, cpu=0))]
    fn madvise(
        &self,
        py: Python<'_>,
        addr: u64,
        length: Size,
        advice: &str,
        cpu: u32,
    ) -> PyResult<()> {
        let (len, advice) = (length.bytes(), args::advice(advice)?);
        self.run(py, cpu, "madvise", None, move |t| async move {
            t.madvise(VirtAddr(addr), len, advice).await
        })
    }

    /// `mlock(2)`, or `mlock2(2)` when `flags` is given ("onfault" or "").
    #[pyo3(signature = (addr, length, flags=None, *, cpu=0))]
    fn mlock(
        &self,
        py: Python<'_>,
        addr: u64,
        length: Size,
        flags: Option<&str>,
        cpu: u32,
    ) -> PyResult<()> {
        let (len, flags) = (length.bytes(), flags.map(args::mlock2_flags).transpose()?);
        self.run(py, cpu, "mlock", None, move |t| async move {
            t.mlock(VirtAddr(addr), len, flags).await
        })
    }

    /// `mseal(2)` (v6.10; ENOSYS before): seals the range's VMAs against unmapping, `mprotect`,
    /// `mremap` and discarding advice on read-only anonymous memory.
    #[pyo3(signature = (addr, length, *, cpu=0))]
    fn mseal(&self, py: Python<'_>, addr: u64, length: Size, cpu: u32) -> PyResult<()> {
        let len = length.bytes();
        self.run(
            py,
            cpu,
            "mseal",
            None,
            move |t| async move { t.mseal(VirtAddr(addr), len, 0).await },
        )
    }

    /// `munlock(2)`.
    #[pyo3(signature = (addr, length, *, cpu=0))]
    fn munlock(&self, py: Python<'_>, addr: u64, length: Size, cpu: u32) -> PyResult<()> {
        let len = length.bytes();
        self.run(
            py,
            cpu,
            "munlock",
            None,
            move |t| async move { t.munlock(VirtAddr(addr), len).await },
        )
    }

    /// `mlockall(2)` with `flags` ("current|future|onfault").
    #[pyo3(signature = (flags, *, cpu=0))]
    fn mlockall(&self, py: Python<'_>, flags: &str, cpu: u32) -> PyResult<()> {
        let flags = args::mcl_flags(flags)?;
        self.run(py, cpu, "mlockall", None, move |t| async move { t.mlockall(flags).await })
    }

    /// `munlockall(2)`.
    #[pyo3(signature = (*, cpu=0))]
    fn munlockall(&self, py: Python<'_>, cpu: u32) -> PyResult<()> {
        self.run(py, cpu, "munlockall", None, move |t| async move { t.munlockall().await })
    }

    /// `brk(2)`: asks for the program break `addr` (0 to read it) and returns the break in
    /// force afterwards (the old one when refused).
    #[pyo3(signature = (addr, *, cpu=0))]
    fn brk(&self, py: Python<'_>, addr: u64, cpu: u32) -> PyResult<u64> {
        let at =
            self.run(py, cpu, "brk", None, move |t| async move { t.brk(VirtAddr(addr)).await })?;
        Ok(at.0)
    }

    /// `msync(2)` with `flags` ("sync", "async", "invalidate" joined with "|", or "").
    #[pyo3(signature = (addr, length, flags, *, cpu=0))]
    fn msync(
        &self,
        py: Python<'_>,
        addr: u64,
        length: Size,
        flags: &str,
        cpu: u32,
    ) -> PyResult<()> {
        let (len, flags) = (length.bytes(), args::msync_flags(flags)?);
        self.run(py, cpu, "msync", None, move |t| async move {
            t.msync(VirtAddr(addr), len, flags).await
        })
    }

    /// `prctl(2)` with `option` by name ("PR_SET_THP_DISABLE", "PR_GET_THP_DISABLE",
    /// "PR_SET_MEMORY_MERGE", "PR_GET_MEMORY_MERGE") and `arg` (arg2: 1 by default for a set, 0
    /// for a get). A get returns its value, a set `None`.
    #[pyo3(signature = (option, arg=None, *, cpu=0))]
    fn prctl(
        &self,
        py: Python<'_>,
        option: &str,
        arg: Option<u64>,
        cpu: u32,
    ) -> PyResult<Option<u64>> {
        let option = args::prctl_option(option)?;
        let arg = arg.unwrap_or(u64::from(!option.is_get()));
        self.run(py, cpu, "prctl", None, move |t| async move { t.prctl(option, arg).await })
    }

    /// Sleeps `duration` (`"10us"`, `"2ms"`) of virtual time, while the machine's daemons
    /// (ksmd, khugepaged, kswapd) run.
    #[pyo3(signature = (duration, *, cpu=0))]
    fn sleep(&self, py: Python<'_>, duration: &str, cpu: u32) -> PyResult<()> {
        let d = args::duration(duration)?;
        self.run(py, cpu, "sleep", None, move |t| async move {
            t.cx().sleep(d).await;
            Ok::<(), mm::Errno>(())
        })
    }

    /// Reads the number in a sysfs or sysctl file (`/sys/kernel/mm/ksm/pages_sharing`), or in
    /// the process's `/proc/self/ksm_merging_pages`, or with `field` one line of
    /// `/proc/self/ksm_stat` (`ksm_zero_pages`). OSError ENOENT for a file or line the kernel
    /// lacks.
    #[pyo3(signature = (path, field=None, *, cpu=0))]
    fn sysfs_read(
        &self,
        py: Python<'_>,
        path: &str,
        field: Option<String>,
        cpu: u32,
    ) -> PyResult<u64> {
        let owned = path.to_string();
        self.run(py, cpu, "sysfs_read", Some(path), move |t| async move {
            t.sysfs_read(&owned, field.as_deref()).await
        })
    }

    /// Writes `value` to a sysfs or sysctl file while the machine runs (a THP knob, KSM's
    /// `run`, a hugetlb pool's size): OSError EINVAL for a value the file refuses, ENOENT for a
    /// file the kernel lacks.
    #[pyo3(signature = (path, value, *, cpu=0))]
    fn sysfs_write(&self, py: Python<'_>, path: &str, value: &str, cpu: u32) -> PyResult<()> {
        let (owned, value) = (path.to_string(), value.to_string());
        self.run(py, cpu, "sysfs_write", Some(path), move |t| async move {
            t.sysfs_write(&owned, &value).await
        })
    }

    /// `posix_fadvise(2)` with `advice` ("normal", "random", "sequential", "willneed",
    /// "dontneed", "noreuse") over `length` bytes at `offset` (0: to the end of the file).
    #[pyo3(signature = (fd, advice, offset=Size(0), length=Size(0), *, cpu=0))]
    fn fadvise(
        &self,
        py: Python<'_>,
        fd: i32,
        advice: &str,
        offset: Size,
        length: Size,
        cpu: u32,
    ) -> PyResult<()> {
        let advice = args::fadvice(advice)?;
        let (off, len) = (offset.bytes().as_u64() as i64, length.bytes().as_u64() as i64);
        self.run(
            py,
            cpu,
            "fadvise",
            None,
            move |t| async move { t.fadvise(fd, off, len, advice).await },
        )
    }

    /// `open(2)` of an existing file with `flags` ("rdonly", "rdwr", "wronly|trunc",
    /// "rdwr|direct", ...). Returns the file descriptor.
    #[pyo3(signature = (path, flags="rdonly", *, cpu=0))]
    fn open(&self, py: Python<'_>, path: &str, flags: &str, cpu: u32) -> PyResult<i32> {
        let (owned, flags) = (path.to_string(), args::open_flags(flags)?);
        self.run(py, cpu, "open", Some(path), move |t| async move { t.open(&owned, flags).await })
    }

    /// `close(2)`.
    #[pyo3(signature = (fd, *, cpu=0))]
    fn close(&self, py: Python<'_>, fd: i32, cpu: u32) -> PyResult<()> {
        self.run(py, cpu, "close", None, move |t| async move { t.close(fd).await })
    }

    /// `dup(2)`: returns a new descriptor for the same open file.
    #[pyo3(signature = (fd, *, cpu=0))]
    fn dup(&self, py: Python<'_>, fd: i32, cpu: u32) -> PyResult<i32> {
        self.run(py, cpu, "dup", None, move |t| async move { t.dup(fd).await })
    }

    /// `read(2)` of `length` bytes at the file position (advancing it), or `pread(2)` at
    /// `offset`. With `buf`, the data is copied to user memory there; without, the kernel does
    /// the same work and nobody looks at the bytes. Returns the number of bytes read.
    #[pyo3(signature = (fd, length, buf=None, offset=None, *, cpu=0))]
    #[allow(clippy::too_many_arguments, reason = "the keyword arguments of read(2)")]
    fn read(
        &self,
        py: Python<'_>,
        fd: i32,
        length: Size,
        buf: Option<u64>,
        offset: Option<Size>,
        cpu: u32,
    ) -> PyResult<u64> {
        let (len, buf) = (length.0, buf.map(VirtAddr));
        self.run(py, cpu, "read", None, move |t| async move {
            match offset {
                Some(pos) => t.pread(fd, buf, len, pos.0).await,
                None => t.read(fd, buf, len).await,
            }
        })
    }

    /// `write(2)` of `data` at the file position (the end with "append"), or `pwrite(2)` at
    /// `offset`. Returns the number of bytes written.
    #[pyo3(signature = (fd, data, offset=None, *, cpu=0))]
    fn write(
        &self,
        py: Python<'_>,
        fd: i32,
        data: Vec<u8>,
        offset: Option<Size>,
        cpu: u32,
    ) -> PyResult<u64> {
        self.run(py, cpu, "write", None, move |t| async move {
            match offset {
                Some(pos) => t.pwrite_data(fd, &data, pos.0).await,
                None => t.write_data(fd, &data).await,
            }
        })
    }

    /// `truncate(2)`: sets the size of the file at `path`.
    #[pyo3(signature = (path, size, *, cpu=0))]
    fn truncate(&self, py: Python<'_>, path: &str, size: Size, cpu: u32) -> PyResult<()> {
        let owned = path.to_string();
        self.run(py, cpu, "truncate", Some(path), move |t| async move {
            t.truncate(&owned, size.0).await
        })
    }

    /// `ftruncate(2)`.
    #[pyo3(signature = (fd, size, *, cpu=0))]
    fn ftruncate(&self, py: Python<'_>, fd: i32, size: Size, cpu: u32) -> PyResult<()> {
        self.run(py, cpu, "ftruncate", None, move |t| async move { t.ftruncate(fd, size.0).await })
    }

    /// `fsync(2)`: writes the file's dirty pages back.
    #[pyo3(signature = (fd, *, cpu=0))]
    fn fsync(&self, py: Python<'_>, fd: i32, cpu: u32) -> PyResult<()> {
        self.run(py, cpu, "fsync", None, move |t| async move { t.fsync(fd).await })
    }

    /// `fork(2)`: returns the child process (its address space a copy-on-write copy of this one).
    #[pyo3(signature = (*, cpu=0))]
    fn fork(&self, py: Python<'_>, cpu: u32) -> PyResult<Process> {
        let child = self.run(py, cpu, "fork", None, |t| async move { t.fork().await })?;
        Ok(Process::new(self.machine.clone_ref(py), child))
    }

    /// `exit(2)`: tears the address space down and closes every file; later calls on this
    /// process raise `ProcessLookupError`.
    #[pyo3(signature = (*, cpu=0))]
    fn exit(&self, py: Python<'_>, cpu: u32) -> PyResult<()> {
        self.run(py, cpu, "exit", None, |t| async move { t.exit().await })
    }

    /// `execve(2)` of the file at `path`, laid out as segments of the given sizes (defaults: a
    /// 2 MiB text, 64 KiB data and bss, a 132 KiB stack). Returns the segment addresses:
    /// `{"text", "data", "bss", "stack_top"}`.
    #[pyo3(signature = (path, text=None, data=None, bss=None, stack=None, *, cpu=0))]
    #[allow(clippy::too_many_arguments, reason = "the keyword arguments of an exec image")]
    fn exec<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        text: Option<Size>,
        data: Option<Size>,
        bss: Option<Size>,
        stack: Option<Size>,
        cpu: u32,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = ExecImage::default();
        let image = ExecImage {
            text: text.map_or(d.text, Size::bytes),
            data: data.map_or(d.data, Size::bytes),
            bss: bss.map_or(d.bss, Size::bytes),
            rodata: d.rodata,
            stack: stack.map_or(d.stack, Size::bytes),
        };
        let owned = path.to_string();
        let layout =
            self.run(
                py,
                cpu,
                "exec",
                Some(path),
                move |t| async move { t.exec(&owned, image).await },
            )?;
        let out = PyDict::new(py);
        out.set_item("text", layout.text.0)?;
        out.set_item("data", layout.data.0)?;
        out.set_item("bss", layout.bss.0)?;
        out.set_item("stack_top", layout.stack_top.0)?;
        Ok(out)
    }

    /// Accesses one byte in every page of `[addr, addr + length)` with `access` ("read",
    /// "write", "exec"), faulting pages in as the MMU would.
    #[pyo3(signature = (addr, length, access="read", *, cpu=0))]
    fn touch(
        &self,
        py: Python<'_>,
        addr: u64,
        length: Size,
        access: &str,
        cpu: u32,
    ) -> PyResult<()> {
        let (len, access) = (length.bytes(), args::access(access)?);
        self.run(py, cpu, "touch", None, move |t| async move {
            t.touch(VirtAddr(addr), len, access).await
        })
    }

    /// Loads `n` bytes from user memory at `addr`.
    #[pyo3(signature = (addr, n, *, cpu=0))]
    fn read_bytes<'py>(
        &self,
        py: Python<'py>,
        addr: u64,
        n: Size,
        cpu: u32,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.run(py, cpu, "read_bytes", None, move |t| async move {
            t.read_bytes(VirtAddr(addr), n.0).await
        })?;
        Ok(PyBytes::new(py, &data))
    }

    /// Stores `data` in user memory at `addr`.
    #[pyo3(signature = (addr, data, *, cpu=0))]
    fn write_bytes(&self, py: Python<'_>, addr: u64, data: Vec<u8>, cpu: u32) -> PyResult<()> {
        self.run(py, cpu, "write_bytes", None, move |t| async move {
            t.write_bytes(VirtAddr(addr), &data).await
        })
    }
}
