//! The hardware, apart from the kernel, as Linux keeps `arch/x86/mm` apart from `mm/`: the CPU's
//! TLB arrays, page-walk caches and page walk (`tlb/`), the flushes and shootdowns the kernel
//! asks of them (`tlbflush.rs`, `arch/x86/mm/tlb.c`), and the MMU's access path with
//! `copy_to_user`/`copy_from_user` (`uaccess.rs`), and the data caches' capacities, for the stores
//! that outgrow them (`caches.rs`). What belongs here is what a CPU does, and the
//! arch code that drives it; kernel policy stays in the flat `mm` modules.

pub mod caches;
pub mod tlb;
pub(crate) mod tlbflush;
pub(crate) mod uaccess;
