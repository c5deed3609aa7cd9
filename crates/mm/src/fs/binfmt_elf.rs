//! The ELF loader's mappings (`fs/binfmt_elf.c` `load_elf_binary`, `elf_load`/`elf_map`,
//! Linux v6.8; VM_DENYWRITE as it was until v5.14).
//!
//! The caller (an edge crate: mm does no IO) reads the program headers; this module maps them as
//! the kernel does. For each `PT_LOAD` of the executable and, when it has `PT_INTERP`, of the
//! interpreter, at the object's load bias: a private file mapping from the page holding
//! `p_vaddr` to the page end of `p_vaddr + p_filesz`, at the file offset `p_offset` rounded
//! down to its page (the kernel refuses an object whose `p_vaddr` and `p_offset` disagree in
//! their page offsets), with the protection of `p_flags` (`make_prot`); then, when `p_memsz`
//! exceeds `p_filesz`, anonymous zero pages up to the page end of `p_vaddr + p_memsz` (the bss;
//! v6.7's `elf_load` does this for every such segment, earlier kernels only for the last, through
//! `set_brk`; mmsim does it for every one in every era). The stack is an anonymous, grows-down
//! mapping below the given top.
//!
//! Deny-write: `exec` denies writes to the executable for the life of the mm (`exec.rs`), and
//! before v5.15 (until "mm: remove VM_DENYWRITE", v5.15) the loader's `elf_map` passed
//! `MAP_DENYWRITE`, so every segment of both the executable and the interpreter carried
//! `VM_DENYWRITE`, the flag the `denywrite` file-THP rule looks at (`huge_memory/policy.rs`).
//! From v5.15 the flag no longer exists and no VMA carries it. Shared libraries are not the
//! kernel's business: the dynamic linker maps them with `mmap`, which ignores `MAP_DENYWRITE` in
//! every era, so they never carry the flag.
//!
//! Approximations: the interpreter is opened deny-write for the load only (the kernel before
//! v5.15 also kept a deny-write count per VM_DENYWRITE mapping until it was unmapped); no brk
//! area, no vDSO, no auxiliary vector or argument strings on the stack; the load bias is given
//! (the recorded one), not drawn (`arch_mmap_rnd`, `ELF_ET_DYN_BASE`).

use crate::errno::Errno;
use crate::fs::exec::{ExecSegment, begin_new_exec, exec_denies_write, open_exec};
use crate::kernel::{Cx, KState};
use crate::types::ids::FileId;
use crate::types::ids::Pid;
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// `p_flags` bits.
pub mod pf {
    pub const X: u32 = 1;
    pub const W: u32 = 2;
    pub const R: u32 = 4;
}

/// One `PT_LOAD` program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSegment {
    /// `p_vaddr`, before the load bias.
    pub vaddr: VirtAddr,
    /// `p_offset`.
    pub offset: Bytes,
    pub filesz: Bytes,
    pub memsz: Bytes,
    /// `p_flags` ([`pf`]).
    pub flags: u32,
    /// `p_align`.
    pub align: Bytes,
}

impl LoadSegment {
    /// Where the segment's file pages go once loaded at `bias`: the first page, the page end of
    /// its file contents and the page end of its memory image; `None` when out of range.
    pub fn pages(&self, bias: Bytes) -> Option<(VirtAddr, VirtAddr, VirtAddr)> {
        let at = self.vaddr.checked_add(bias)?;
        let start = at.align_down(Bytes::PAGE);
        let file_end = at.checked_add(self.filesz)?.align_up(Bytes::PAGE)?;
        let mem_end = at.checked_add(self.memsz.max(self.filesz))?.align_up(Bytes::PAGE)?;
        Some((start, file_end, mem_end))
    }

    /// The `VM_READ`/`VM_WRITE`/`VM_EXEC` bits of `p_flags`.
    pub fn vm_flags(&self) -> u64 {
        let mut f = 0;
        for (bit, vm) in [(pf::R, VmFlags::READ), (pf::W, VmFlags::WRITE), (pf::X, VmFlags::EXEC)] {
            if self.flags & bit != 0 {
                f |= vm;
            }
        }
        f
    }
}

/// An ELF object at its load bias: the path of its file and its `PT_LOAD` headers in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfObject {
    pub path: String,
    pub bias: Bytes,
    pub segments: Vec<LoadSegment>,
}

impl ElfObject {
    /// `elf_brk` page-aligned: the end of the highest segment's memory, where the break starts.
    pub fn brk(&self) -> Option<VirtAddr> {
        let ends = self.segments.iter().map(|s| s.pages(self.bias).map(|(_, _, end)| end));
        ends.collect::<Option<Vec<_>>>()?.into_iter().max()
    }

    /// The largest `p_align` of its `PT_LOAD` segments (at least a page).
    pub fn max_align(&self) -> Bytes {
        self.segments.iter().map(|s| s.align).max().unwrap_or(Bytes::PAGE).max(Bytes::PAGE)
    }
}

/// What `execve` of an ELF file loads: the executable, its interpreter, and the stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfExec {
    pub exe: ElfObject,
    pub interp: Option<ElfObject>,
    pub stack_top: VirtAddr,
    pub stack: Bytes,
}

/// `load_elf_binary`: replaces `pid`'s address space with `image`'s mappings.
pub(crate) async fn load_elf_binary(cx: &Cx, pid: Pid, image: &ElfExec) -> Result<(), Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let denywrite =
        if crate::era::vm_denywrite_exists(cx.kernel().version) { VmFlags::DENYWRITE } else { 0 };
    let (exe, interp) = {
        let mut st = cx.st();
        let inode = object_inode(&st, &image.exe)?;
        let exe = open_exec(&mut st, inode, exec_denies_write(cx))?;
        let interp = match &image.interp {
            Some(o) => match object_inode(&st, o).and_then(|i| open_exec(&mut st, i, false)) {
                Ok(f) => Some(f),
                Err(e) => {
                    st.file_put(exe);
                    return Err(e);
                }
            },
            None => None,
        };
        (exe, interp)
    };
    let laid_out = layout(image, exe, interp, denywrite);
    let (segments, brk) = match laid_out {
        Ok(l) => l,
        Err(e) => {
            let mut st = cx.st();
            for f in [Some(exe), interp].into_iter().flatten() {
                st.file_put(f);
            }
            return Err(e);
        }
    };
    let loaded = begin_new_exec(cx, pid, exe, &image.exe.path, &segments, brk).await;
    if let Some(f) = interp {
        cx.st().file_put(f);
    }
    loaded
}

/// The mappings of `image` (its objects' segments, then the stack) and where the break starts.
fn layout(
    image: &ElfExec,
    exe: FileId,
    interp: Option<FileId>,
    denywrite: u64,
) -> Result<(Vec<ExecSegment>, VirtAddr), Errno> {
    let mut segments = Vec::new();
    let objects = [Some((&image.exe, exe)), image.interp.as_ref().zip(interp)];
    for (object, file) in objects.into_iter().flatten() {
        object_segments(object, file, denywrite, &mut segments)?;
    }
    segments.push(ExecSegment::stack(image.stack_top, image.stack));
    let brk = image.exe.brk().ok_or(Errno::ENOMEM)?;
    if overlapping(&segments) {
        return Err(Errno::EINVAL);
    }
    Ok((segments, brk))
}

/// Whether two of the mappings overlap. The kernel maps a later segment over an earlier one
/// (`elf_map` with `MAP_FIXED` after the first); the model refuses such an image (`EINVAL`,
/// before the old mm goes) instead of modelling the replacement.
fn overlapping(segments: &[ExecSegment]) -> bool {
    let mut spans: Vec<(VirtAddr, VirtAddr)> = segments
        .iter()
        .filter(|s| s.len.as_u64() > 0)
        .map(|s| (s.start, s.start + s.len))
        .collect();
    spans.sort();
    spans.windows(2).any(|w| w[1].0 < w[0].1)
}

/// The inode of `object`'s file, which must hold every segment's file contents (else
/// `EINVAL`; the kernel's load fails with `ENOEXEC` there, which mmsim's errnos do not have).
fn object_inode(st: &KState, object: &ElfObject) -> Result<crate::types::ids::InodeId, Errno> {
    let inode = *st.paths.get(object.path.as_str()).ok_or(Errno::ENOENT)?;
    let size = st.inodes[inode].size;
    let fits = object
        .segments
        .iter()
        .all(|s| s.offset.as_u64().checked_add(s.filesz.as_u64()).is_some_and(|end| end <= size));
    if fits { Ok(inode) } else { Err(Errno::EINVAL) }
}

/// The mappings of `object`'s segments (`elf_load`): file pages, then bss.
fn object_segments(
    object: &ElfObject,
    file: FileId,
    denywrite: u64,
    out: &mut Vec<ExecSegment>,
) -> Result<(), Errno> {
    for s in &object.segments {
        if s.vaddr.page_offset() != s.offset.as_u64() % Bytes::PAGE.as_u64() {
            return Err(Errno::EINVAL);
        }
        let (start, file_end, mem_end) = s.pages(object.bias).ok_or(Errno::ENOMEM)?;
        let pgoff = s.offset.as_u64() >> 12;
        let flags = s.vm_flags() | denywrite;
        out.push(
            ExecSegment::new(start, file_end.offset_from(start), flags).file(Some((file, pgoff))),
        );
        if mem_end > file_end {
            out.push(ExecSegment::new(file_end, mem_end.offset_from(file_end), s.vm_flags()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(vaddr: u64, offset: u64, filesz: u64, memsz: u64) -> LoadSegment {
        LoadSegment {
            vaddr: VirtAddr(vaddr),
            offset: Bytes(offset),
            filesz: Bytes(filesz),
            memsz: Bytes(memsz),
            flags: pf::R | pf::W,
            align: Bytes::PMD,
        }
    }

    #[test]
    fn pages_round_out_to_whole_pages() {
        let s = seg(0x20_1234, 0x1234, 0x100, 0x3000);
        let (start, file_end, mem_end) = s.pages(Bytes(0x4000_0000)).unwrap();
        assert_eq!(start, VirtAddr(0x4020_1000));
        assert_eq!(file_end, VirtAddr(0x4020_2000));
        assert_eq!(mem_end, VirtAddr(0x4020_5000));
        assert_eq!(s.vm_flags(), VmFlags::READ | VmFlags::WRITE);
    }

    #[test]
    fn max_align_is_the_largest_p_align() {
        let mut small = seg(0, 0, 1, 1);
        small.align = Bytes::PAGE;
        let o =
            ElfObject { path: "/l".into(), bias: Bytes(0), segments: vec![small, seg(0, 0, 1, 1)] };
        assert_eq!(o.max_align(), Bytes::PMD);
    }
}
