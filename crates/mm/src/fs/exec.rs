//! An exec-style loader (`fs/exec.c`, `fs/binfmt_elf.c`, Linux v6.8, much simplified).
//!
//! `exec` replaces the address space with a fresh one holding an executable file's segments:
//! text (`PROT_READ|PROT_EXEC`, from file offset 0), optional read-only data (`PROT_READ`, from
//! the page after the text, as an ELF's `.rodata` segment), data (`PROT_READ|PROT_WRITE`,
//! private, from the page after those), bss (anonymous), and a stack. Like the kernel it denies writes to the
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
use crate::fork::exit_mmap;
use crate::fs::fmode;
use crate::kernel::{Cx, KState};
use crate::mm_struct::MMAP_BASE;
use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::types::ids::Pid;
use crate::types::mm_types::VmOps;
use crate::vma::{VmFlags, Vma, VmaRole};
use simcore::{Bytes, VirtAddr};

/// The segments of an executable file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecImage {
    pub text: Bytes,
    /// Read-only data right after the text (none by default).
    pub rodata: Bytes,
    pub data: Bytes,
    pub bss: Bytes,
    pub stack: Bytes,
}

impl Default for ExecImage {
    fn default() -> Self {
        ExecImage {
            text: Bytes::mib(2),
            rodata: Bytes::ZERO,
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
    /// Where the read-only data starts (right after the text, even when there is none).
    pub rodata: VirtAddr,
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
    let rodata = page(image.rodata)?;
    if text.as_u64() == 0 || stack.as_u64() == 0 {
        return Err(Errno::EINVAL);
    }
    let exe = {
        let mut st = cx.st();
        let inode = *st.paths.get(path).ok_or(Errno::ENOENT)?;
        if st.inodes[inode].size < (text + rodata + data).as_u64() {
            return Err(Errno::EINVAL);
        }
        open_exec(&mut st, inode, exec_denies_write(cx))?
    };
    let text_at = VirtAddr(TEXT_BASE);
    let rodata_at = text_at + text;
    let data_at = (rodata_at + rodata).align_up(Bytes::PMD).expect("in range");
    let bss_at = data_at + data;
    let stack_top = VirtAddr(MMAP_BASE + (64 << 20));
    let file = |pgoff| Some((exe, pgoff));
    let segments = [
        ExecSegment::new(text_at, text, VmFlags::READ | VmFlags::EXEC | VmFlags::DENYWRITE)
            .file(file(0)),
        ExecSegment::new(rodata_at, rodata, VmFlags::READ | VmFlags::DENYWRITE)
            .file(file(text.as_u64() >> 12)),
        ExecSegment::new(data_at, data, VmFlags::READ | VmFlags::WRITE | VmFlags::DENYWRITE)
            .file(file((text + rodata).as_u64() >> 12)),
        ExecSegment::new(bss_at, bss, VmFlags::READ | VmFlags::WRITE | VmFlags::ACCOUNT),
        ExecSegment::stack(stack_top, stack),
    ];
    let segments: Vec<ExecSegment> = segments.into_iter().filter(|s| s.len > Bytes::ZERO).collect();
    begin_new_exec(cx, pid, exe, path, &segments, bss_at + bss).await?;
    Ok(ExecLayout { text: text_at, rodata: rodata_at, data: data_at, bss: bss_at, stack_top })
}

/// One mapping `exec` makes: a file's segment (with its page offset) or anonymous memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExecSegment {
    pub start: VirtAddr,
    pub len: Bytes,
    pub flags: u64,
    pub file: Option<(FileId, u64)>,
    pub role: VmaRole,
}

impl ExecSegment {
    pub(crate) fn new(start: VirtAddr, len: Bytes, flags: u64) -> ExecSegment {
        ExecSegment { start, len, flags, file: None, role: VmaRole::Plain }
    }

    /// The stack, `len` below `top`.
    pub(crate) fn stack(top: VirtAddr, len: Bytes) -> ExecSegment {
        let flags = VmFlags::READ | VmFlags::WRITE | VmFlags::GROWSDOWN | VmFlags::ACCOUNT;
        ExecSegment::new(VirtAddr(top.0 - len.as_u64()), len, flags).role(VmaRole::Stack)
    }

    pub(crate) fn file(self, file: Option<(FileId, u64)>) -> ExecSegment {
        ExecSegment { file, ..self }
    }

    pub(crate) fn role(self, role: VmaRole) -> ExecSegment {
        ExecSegment { role, ..self }
    }
}

/// The point of no return (`begin_new_exec`, then the loader's mappings): tears down `pid`'s
/// old mm, gives it a new one holding `segments` (each file's linked under its `i_mmap_rwsem`,
/// the anonymous ones after), with `exe` as `mm->exe_file`, `brk` (the end of the executable's
/// bss) as the start of the heap and the break, and the process named after `path`.
/// Every file segment takes a reference on its file.
pub(crate) async fn begin_new_exec(
    cx: &Cx,
    pid: Pid,
    exe: FileId,
    path: &str,
    segments: &[ExecSegment],
    brk: VirtAddr,
) -> Result<(), Errno> {
    let old = cx.st().procs[pid].mm.take();
    let inherited = old.map(|o| {
        let st = cx.st();
        (st.mm_init_flags(o), crate::ksm::exec_keeps_merge_any(&st, o))
    });
    if let Some(old) = old {
        exit_mmap(cx, old).await;
    }
    let mm = cx.st().mm_alloc(cx, pid)?;
    if let Some((flags, merge_any)) = inherited {
        cx.st().mm_inherit_flags(mm, flags);
        if merge_any {
            crate::ksm::ksm_execve(cx, mm);
        }
    }
    let mut files: Vec<FileId> = Vec::new();
    for f in segments.iter().filter_map(|s| s.file.map(|(f, _)| f)) {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    for f in files.into_iter().map(Some).chain([None]) {
        let i_mmap = f.map(|f| {
            let st = cx.st();
            st.inodes[st.file(f).inode].mapping.i_mmap_rwsem
        });
        let _g = match i_mmap {
            Some(l) => Some(l.write(cx).await),
            None => None,
        };
        for s in segments.iter().filter(|s| s.file.map(|(g, _)| g) == f && s.len.as_u64() > 0) {
            link_segment(cx, mm, s);
        }
    }
    {
        let mut st = cx.st();
        let m = st.mm_mut(mm);
        (m.exe_file, m.start_brk, m.brk) = (Some(exe), brk, brk);
        let p = &mut st.procs[pid];
        p.mm = Some(mm);
        p.name = path.rsplit('/').next().unwrap_or(path).chars().take(15).collect();
    }
    // The loader maps through `vm_mmap`, so from v5.19 `mmap_region` offers each mapping to
    // khugepaged as `mmap` does (`mmap.rs`).
    if crate::era::mmap_registers_khugepaged(cx.kernel().version) {
        let vmas: Vec<_> = cx.st().mm(mm).vmas.values().copied().collect();
        for v in vmas {
            crate::khugepaged::khugepaged_enter_vma(cx, v);
        }
    }
    Ok(())
}

/// Links one segment into `mm`, with the operations `mmap` would choose for it, mergeable when
/// the mm merges any (the loader's `vm_mmap` and `vm_brk_flags` ask `ksm_vma_flags`; the stack,
/// set up by `__bprm_mm_init`, is not).
fn link_segment(cx: &Cx, mm: crate::types::ids::MmId, s: &ExecSegment) {
    let base = VmFlags::MAYREAD | VmFlags::MAYWRITE | VmFlags::MAYEXEC | VmFlags::SOFTDIRTY;
    let flags = VmFlags(base | s.flags);
    let flags = match s.role {
        VmaRole::Stack => flags,
        _ => crate::ksm::ksm_vma_flags(cx, mm, flags, false),
    };
    let mut st = cx.st();
    if let Some((f, _)) = s.file {
        st.file_mut(f).refs += 1;
    }
    let file = s.file.map(|(f, _)| f);
    let vm_ops = VmOps::of(&st, file);
    st.vma_link(Vma {
        mm,
        start: s.start,
        end: s.start + s.len,
        flags,
        pgoff: s.file.map_or(s.start.0 >> 12, |(_, pgoff)| pgoff),
        file,
        vm_ops,
        anon_vma: None,
        anon_vma_chain: Vec::new(),
        role: s.role,
        uffd: None,
    });
}

/// Opens the executable `inode` for exec, denying writes to it first when `deny`.
pub(crate) fn open_exec(st: &mut KState, inode: InodeId, deny: bool) -> Result<FileId, Errno> {
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
