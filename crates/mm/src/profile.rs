//! Machine profiles: CPUs, memory, and the cost table, each with the source of its figures.
//!
//! Rule (DESIGN.md, "Costs"): constants are per profile, never per experiment. Profiles are
//! calibrated from single-CPU measurements of basic operations; multi-CPU and whole-workload
//! figures must come out of the model.
//!
//! `epyc-vm` was measured on 2026-11-21 on the development machine (an AMD EPYC KVM guest, Linux
//! host kernel) with `tools/calibrate.c`: anonymous write fault 1.5 us, zero-page read fault
//! 0.75 us, write fault replacing the zero page 1.83 us, cold `clear 4 KiB` 0.53 us, `copy 4 KiB`
//! 0.26 us, `getppid` 0.14 us, cached file read fault with fault-around 0.95 us per 16 pages,
//! `mmap`+`munmap` of one page 4.1 us. The basic costs below are the decomposition of those
//! figures: fault entry 650 plus PTE install 100 is the zero-page read fault; adding page
//! allocation 150, clear 530 and LRU/rmap 70 gives the anonymous write fault; adding a local TLB
//! flush of 330 gives the write fault that replaces the zero page. Figures not measured here (block device, IPIs) give their
//! source beside them and are marked as approximations.

use crate::cost::{Cost, CostTable};
use simcore::Bytes;

/// A simulated machine.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: &'static str,
    pub cpus: u32,
    pub memory: Bytes,
    pub costs: CostTable,
    pub description: &'static str,
}

/// Costs measured on the development machine (see the module note).
fn epyc_vm_costs() -> CostTable {
    CostTable::new(&[
        (Cost::Syscall, 140),
        (Cost::FaultEntry, 650),
        (Cost::PteInstall, 100),
        (Cost::FaultAroundPage, 19),
        (Cost::PageAlloc, 150),
        // Approximation: proportional share of a buddy split per page of a large block.
        (Cost::PageAllocHighOrderPerPage, 2),
        (Cost::PageFree, 60),
        (Cost::ZeroPage4k, 530),
        (Cost::CopyPage4k, 260),
        (Cost::LruAdd, 70),
        // A page-table page is allocated and cleared like a data page.
        (Cost::PgtableAlloc, 680),
        (Cost::PageCacheLookup, 40),
        (Cost::PageCacheInsert, 120),
        (Cost::PteUpdate, 15),
        (Cost::TlbFlushOne, 330),
        (Cost::TlbFlushAll, 600),
        // Approximation: x86 TLB shootdown IPI round trip of 2-4 us in guests ("x86/mm/tlb:
        // make lazy TLB mode lazier" discussion, 2018); 3 us.
        (Cost::TlbShootdownIpi, 3000),
        // mmap+munmap of one page took 4.1 us: two syscalls, two VMA updates, one flush.
        (Cost::VmaUpdate, 1500),
        (Cost::UserCopy4k, 260),
        // Approximation: a datacenter NVMe SSD, 4 KiB random read of about 80 us and about
        // 3 GB/s sequential transfer.
        (Cost::BlockIoLatency, 80_000),
        (Cost::BlockIoPerPage, 1_300),
        // Approximation: fork of a small process is about 100 us on Linux; the address-space
        // copy is modelled separately, the rest is charged here.
        (Cost::ForkBase, 30_000),
        (Cost::MemAccess, 1),
        // Approximation: reclaim of clean page cache runs at about 1 GB/s per kswapd thread on
        // current servers (about 4 us per page in all); split into a scan and a teardown part.
        (Cost::LruScan, 300),
        (Cost::ReclaimPage, 1_500),
    ])
}

impl Profile {
    pub const NAMES: &'static [&'static str] = &["epyc-vm", "tiny"];

    /// The profile called `name`.
    pub fn named(name: &str) -> Result<Profile, String> {
        match name {
            "epyc-vm" => Ok(Profile {
                name: "epyc-vm",
                cpus: 2,
                memory: Bytes::gib(24),
                costs: epyc_vm_costs(),
                description: "the development machine: 2 vCPUs of an AMD EPYC KVM guest, 24 GiB",
            }),
            "tiny" => Ok(Profile {
                name: "tiny",
                cpus: 4,
                memory: Bytes::mib(512),
                costs: epyc_vm_costs(),
                description: "a small machine for tests: 4 CPUs, 512 MiB, epyc-vm costs",
            }),
            _ => Err(format!(
                "unknown machine profile `{name}`: expected one of {}",
                Profile::NAMES.join(", ")
            )),
        }
    }

    /// This profile with another CPU count and memory size (an "impossible machine" is refused).
    pub fn resized(mut self, cpus: Option<u32>, memory: Option<Bytes>) -> Result<Profile, String> {
        if let Some(c) = cpus {
            if c == 0 || c > 4096 {
                return Err(format!("cpus = {c}: a machine has 1 to 4096 CPUs"));
            }
            self.cpus = c;
        }
        if let Some(m) = memory {
            if m < Bytes::mib(16) || m > Bytes::tib(64) || !m.is_page_aligned() {
                return Err(format!(
                    "memory = {m}: expected a page-aligned size from 16 MiB to 64 TiB"
                ));
            }
            self.memory = m;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_decompose_the_measured_faults() {
        let p = Profile::named("epyc-vm").unwrap();
        let c = |x| p.costs.get(x).as_ns();
        assert_eq!(c(Cost::FaultEntry) + c(Cost::PteInstall), 750);
        let anon_write = c(Cost::FaultEntry)
            + c(Cost::PageAlloc)
            + c(Cost::ZeroPage4k)
            + c(Cost::LruAdd)
            + c(Cost::PteInstall);
        assert_eq!(anon_write, 1500);
        assert!(Profile::named("vax").unwrap_err().contains("expected one of epyc-vm"));
        assert!(p.clone().resized(Some(0), None).is_err());
        assert!(p.resized(None, Some(Bytes(12345))).is_err());
    }
}
