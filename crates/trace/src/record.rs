//! One memory reference of a trace, as valgrind's lackey tool reports it
//! (`lackey/lk_main.c`, valgrind 3.x): an instruction fetch, a data load, a store, or a modify
//! (a load and a store to the same place, like `inc [mem]`), with its address and size in bytes.

use mm::Access;
use simcore::VirtAddr;

/// What a reference does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefKind {
    Instr = 0,
    Load = 1,
    Store = 2,
    Modify = 3,
}

impl RefKind {
    pub fn letter(self) -> char {
        ['I', 'L', 'S', 'M'][self as usize]
    }

    pub(crate) fn from_code(code: u8) -> RefKind {
        [RefKind::Instr, RefKind::Load, RefKind::Store, RefKind::Modify][usize::from(code & 3)]
    }
}

/// A memory reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRef {
    pub kind: RefKind,
    pub addr: VirtAddr,
    /// Bytes accessed (at least 1).
    pub size: u32,
}

impl MemRef {
    /// The MMU lookups this reference makes: one per access kind (a modify loads, then stores)
    /// and per page touched (a reference that crosses a page boundary looks up both pages, as a
    /// split load does).
    pub fn lookups(self, out: &mut Vec<(VirtAddr, Access)>) {
        let accesses: &[Access] = match self.kind {
            RefKind::Instr => &[Access::Exec],
            RefKind::Load => &[Access::Read],
            RefKind::Store => &[Access::Write],
            RefKind::Modify => &[Access::Read, Access::Write],
        };
        let last = self.addr.0.wrapping_add(u64::from(self.size.max(1)) - 1);
        let crosses = last >> 12 != self.addr.0 >> 12 && last > self.addr.0;
        for &a in accesses {
            out.push((self.addr, a));
            if crosses {
                out.push((VirtAddr(last & !0xfff), a));
            }
        }
    }
}
