//! An exec-style loader (`fs/exec.c`, `fs/binfmt_elf.c`, Linux v6.8, much simplified).
//!
//! `exec` replaces the address space with a fresh one holding an executable file's segments:
//! text (`PROT_READ|PROT_EXEC`, from file offset 0), data (`PROT_READ|PROT_WRITE`, private, from
//! the page after the text), bss (anonymous), and a stack. Like the kernel it denies writes to the
//! executable for the life of the mm (`deny_write_access`, ETXTBSY for writers; not on v6.11 and
//! v6.12, the `exec_deny_write = allow` era of 2a010c412853 until its revert 3b832035387f, where
//! an opener for write gets the running binary and, if its text was collapsed, drops its THPs),
//! and — as kernels before v5.15 did — marks the file mappings `VM_DENYWRITE`, which the file-THP
//! rule of those kernels looks at.
//!
//! Segments are placed at fixed addresses (no ASLR): text at 4 MiB (2 MiB aligned, as linking
//! with `-z max-page-size=0x200000` gives), the others after it; the stack below the mmap area.
//! No ELF parsing: the image description gives the segment sizes. Each segment's operations
//! (`vm_ops.rs`) are set as `mmap` sets them: the file's for text and data, anonymous for bss
//! and the stack.

use crate::errno::Errno;
use crate::folio::InodeId;
use crate::fork::exit_mmap;
use crate::fs::{FileId, fmode};
use crate::kernel::{Cx, KState};
use crate::mm_struct::MMAP_BASE;
use crate::process::Pid;
use crate::vm_ops::VmOps;
use crate::vma::{VmFlags, Vma, VmaRole};
use simcore::{Bytes, VirtAddr};

/// The segments of an executable file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecImage {
    pub text: Bytes,
    pub data: Bytes,
    pub bss: Bytes,
    pub stack: Bytes,
}

impl Default for ExecImage {
    fn default() -> Self {
        ExecImage {
            text: Bytes::mib(2),
            data: Bytes::kib(64),
            bss: Bytes::kib(64),
            stack: Bytes::kib(132),
        }
    }
}

/// Where `exec` put the segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecLayout {
    pub text: VirtAddr,
    pub data: VirtAddr,
    pub bss: VirtAddr,
    pub stack_top: VirtAddr,
}

/// The load address of the text segment.
const TEXT_BASE: u64 = 0x40_0000;

/// `execve`: maps `path` as the new image of `pid`.
pub(crate) async fn do_exec(
    cx: &Cx,
    pid: Pid,
    path: &str,
    image: ExecImage,
) -> Result<ExecLayout, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let page = |b: Bytes| b.align_up(Bytes::PAGE).ok_or(Errno::EINVAL);
    let (text, data, bss, stack) =
        (page(image.text)?, page(image.data)?, page(image.bss)?, page(image.stack)?);
    if text.as_u64() == 0 || stack.as_u64() == 0 {
        return Err(Errno::EINVAL);
    }
    let exe = {
        let mut st = cx.st();
        let inode = *st.paths.get(path).ok_or(Errno::ENOENT)?;
        if st.inodes[inode].size < (text + data).as_u64() {
            return Err(Errno::EINVAL);
        }
        open_exec(&mut st, inode, exec_denies_write(cx))?
    };
    let old = cx.st().procs[pid].mm.take();
    if let Some(old) = old {
        exit_mmap(cx, old).await;
    }
    let mm = cx.st().mm_alloc(cx, pid)?;
    let text_at = VirtAddr(TEXT_BASE);
    let data_at = (text_at + text).align_up(Bytes::PMD).expect("in range");
    let bss_at = data_at + data;
    let stack_top = VirtAddr(MMAP_BASE + (64 << 20));
    let base = VmFlags::MAYREAD | VmFlags::MAYWRITE | VmFlags::MAYEXEC | VmFlags::SOFTDIRTY;
    let segments = [
        (
            text_at,
            text,
            VmFlags::READ | VmFlags::EXEC | VmFlags::DENYWRITE,
            Some(0),
            VmaRole::Plain,
        ),
        (
            data_at,
            data,
            VmFlags::READ | VmFlags::WRITE | VmFlags::DENYWRITE,
            Some(text.as_u64() >> 12),
            VmaRole::Plain,
        ),
        (bss_at, bss, VmFlags::READ | VmFlags::WRITE | VmFlags::ACCOUNT, None, VmaRole::Heap),
        (
            VirtAddr(stack_top.0 - stack.as_u64()),
            stack,
            VmFlags::READ | VmFlags::WRITE | VmFlags::GROWSDOWN | VmFlags::ACCOUNT,
            None,
            VmaRole::Stack,
        ),
    ];
    let i_mmap = {
        let st = cx.st();
        st.inodes[st.file(exe).inode].mapping.i_mmap_rwsem
    };
    let _g = i_mmap.write(cx).await;
    let mut st = cx.st();
    for (start, len, flags, pgoff, role) in segments {
        if len.as_u64() == 0 {
            continue;
        }
        let file = pgoff.map(|_| {
            st.file_mut(exe).refs += 1;
            exe
        });
        let vm_ops = VmOps::of(&st, file);
        st.vma_link(Vma {
            mm,
            start,
            end: start + len,
            flags: VmFlags(base | flags),
            pgoff: pgoff.unwrap_or(start.0 >> 12),
            file,
            vm_ops,
            anon_vma: None,
            anon_vma_chain: Vec::new(),
            role,
        });
    }
    st.mm_mut(mm).exe_file = Some(exe);
    let p = &mut st.procs[pid];
    p.mm = Some(mm);
    p.name = path.rsplit('/').next().unwrap_or(path).chars().take(15).collect();
    Ok(ExecLayout { text: text_at, data: data_at, bss: bss_at, stack_top })
}

/// Opens the executable `inode` for exec, denying writes to it first when `deny`.
fn open_exec(st: &mut KState, inode: InodeId, deny: bool) -> Result<FileId, Errno> {
    if deny {
        st.inodes[inode].deny_write_access()?;
    }
    let opened = st.open_file(inode, fmode::READ | fmode::EXEC, false, false);
    if opened.is_err() && deny {
        st.inodes[inode].allow_write_access();
    }
    opened
}

/// Whether exec denies writes to the running binary, for its life (the `exec_deny_write`
/// switch): exec itself, fork's copy of `mm->exe_file` and the mm's teardown ask it.
pub(crate) fn exec_denies_write(cx: &Cx) -> bool {
    cx.kernel().switches.exec_deny_write == crate::era::ExecDenyWrite::Deny
}
