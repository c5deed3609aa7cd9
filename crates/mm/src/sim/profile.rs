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
//!
//! Hugetlb figures, measured on 2026-11-26 on the same machine (Linux 6.18 guest, a 2 MiB pool
//! of 40 pages, one CPU; the program is described beside each cost): a loop mapping a 64 MiB
//! hugetlbfs file (`memfd_create(MFD_HUGETLB)`), writing its 32 cached pages and unmapping it
//! 53.9 us a pass, the mmap and munmap alone 9.0 us; fork, child `_exit` and `waitpid` with a
//! 64 MiB shared hugetlb mapping 169.6 us. The walk of an empty hugetlb range was measured again
//! the same day (beside `hugetlb_unmap_empty_gib`).
//!
//! The wake-up latency of a sleeper on an idle CPU was measured on 2026-11-28 with
//! `tools/wakeup.c` (beside `wakeup_latency`), the context switches between processes and
//! between threads of one on 2026-12-07 with `tools/calibrate.c` (beside `context_switch`).
//!
//! TLB geometries (`crate::arch::tlb`) follow published figures of one core each, cited beside them:
//! AMD Zen 5 for `epyc-vm` and `tiny` (the development machine reports CPU family 0x1A, Zen 5),
//! Intel Golden Cove for `xeon-spr`, Arm Cortex-A76 for `arm-a76`. The latter two profiles reuse
//! the `epyc-vm` cost table for kernel operations (an approximation: those were measured only
//! here; their context switches too: no `lat_ctx`-style figure of either core under Linux was
//! found to cite, so `--set cost.context_switch=NS` is the way to study one); what
//! distinguishes them is their TLB hierarchy and CPU count. Only `arm-a76` fetches
//! instructions in blocks (one iTLB lookup per 16-byte fetch, as its `iTLB-loads` counts them);
//! the x86 profiles look the iTLB up once per instruction, an approximation of their fetch.
//!
//! Data caches (`crate::arch::caches`): every built-in profile has a Skylake-SP core's (1 MiB of
//! L2 and 1.375 MiB of L3 a core, two threads a core), the memory system of the seed machine's
//! class whose bus (`mem_bus_64k`) and cache-line transfers the cost table already has; only
//! stores that follow a huge page's copy-on-write copy consult them (published figures, not
//! measured: cited in that module).
//!
//! Any other machine is a profile file (`lab::profile_file`, docs/profiles.md), which
//! `mmsim calibrate` writes for the host it runs on with the same measurements and this note's
//! decomposition (`lab::calibrate`); it takes the TLB geometry of a profile named here.

use crate::arch::caches::Caches;
use crate::arch::tlb::{ArrayGeometry as A, SecondLevel, TlbGeometry, sizes};
use crate::sim::cost::{Cost, CostTable};
use simcore::Bytes;

/// A simulated machine.
#[derive(Clone, Debug)]
pub struct Profile {
    /// A built-in profile's name, or a profile file's (`mmsim calibrate` names it after its host).
    pub name: String,
    pub cpus: u32,
    pub memory: Bytes,
    pub costs: CostTable,
    /// Each CPU's TLBs and page-walk caches.
    pub tlb: TlbGeometry,
    /// CPUs per socket (cache-line transfers between sockets cost more); 0 is one socket.
    pub cpus_per_socket: u32,
    /// Each core's data caches (`crate::arch::caches`).
    pub caches: Caches,
    pub description: String,
}

/// Linux x86's per-CPU ASID slots (`TLB_NR_DYN_ASIDS`, `arch/x86/include/asm/tlbflush.h`).
const X86_ASID_SLOTS: u32 = 6;

/// AMD Zen 5. Entries from AMD's Hot Chips 2024 talk "Next Generation Zen 5 Core" (B. Cohen,
/// M. Subramony): L1 64-entry ITLB and 96-entry DTLB, L2 2K-entry ITLB and 4K-entry DTLB holding
/// "everything but 1G". AMD's L1 TLBs are fully associative and hold all page sizes (AMD
/// Software Optimization Guide for Zen 2/Zen 4, "L1 TLB"); the L2 associativities (8-way ITLB,
/// 16-way DTLB) are not in the talk and are approximations, as are the walk caches (AMD keeps
/// PDEs in the L2 DTLB; modelled as separate caches), the 7-cycle L2 hit (7-cpu.com, Zen 2) and
/// the 20 cycles per table entry read (an L2-cache hit). 3 GHz clock.
fn zen5() -> TlbGeometry {
    TlbGeometry {
        core: "AMD Zen 5",
        source: "AMD, Hot Chips 2024 \"Next Generation Zen 5 Core\"; AMD Software Optimization Guide",
        itlb: vec![A::full(64, sizes::ALL)],
        dtlb: vec![A::full(96, sizes::ALL)],
        l2: SecondLevel::Split {
            instr: vec![A::new(2048, 8, sizes::K4 | sizes::M2)],
            data: vec![A::new(4096, 16, sizes::K4 | sizes::M2)],
        },
        pwc: [A::full(4, 0), A::full(8, 0), A::new(64, 4, 0)],
        asid_slots: X86_ASID_SLOTS,
        clock_mhz: 3000,
        l2_hit_cycles: 7,
        walk_ref_cycles: 20,
        fetch_bytes: 0,
    }
}

/// Intel Golden Cove (Sapphire Rapids). Intel 64 and IA-32 Architectures Optimization Reference
/// Manual, Golden Cove section: ITLB 256 entries for 4K pages (8-way) and 32 for 2M/4M; load
/// DTLB 96 entries for 4K (6-way), 32 for 2M/4M (4-way) and 8 for 1G; STLB 2048 entries for
/// 4K/2M (16-way) and 1024 for 1G (8-way); the 96-entry DTLB also in C. Nguyen (cpunews.net,
/// 2021). Intel does not publish its paging-structure caches: the sizes here (4 PML4E, 4 PDPTE,
/// 32 PDE) are of the order reverse-engineering studies report, an approximation, as are the
/// 9-cycle STLB hit and 20 cycles per table entry read. 3 GHz clock.
fn golden_cove() -> TlbGeometry {
    TlbGeometry {
        core: "Intel Golden Cove",
        source: "Intel 64 and IA-32 Architectures Optimization Reference Manual (Golden Cove)",
        itlb: vec![A::new(256, 8, sizes::K4), A::full(32, sizes::M2)],
        dtlb: vec![A::new(96, 6, sizes::K4), A::new(32, 4, sizes::M2), A::full(8, sizes::G1)],
        l2: SecondLevel::Unified(vec![
            A::new(2048, 16, sizes::K4 | sizes::M2),
            A::new(1024, 8, sizes::G1),
        ]),
        pwc: [A::full(4, 0), A::full(4, 0), A::new(32, 4, 0)],
        asid_slots: X86_ASID_SLOTS,
        clock_mhz: 3000,
        l2_hit_cycles: 9,
        walk_ref_cycles: 20,
        fetch_bytes: 0,
    }
}

/// Arm Cortex-A76 (Arm Cortex-A76 Core TRM, 100798_0300, §A5.2): L1 instruction and data TLBs of
/// 48 entries, fully associative, holding 4K to 2M (and 512M data) mappings; a unified 1280-entry
/// 5-way L2 TLB for every block size, usually three cycles; walk-cache entries live in the L2
/// TLB (modelled as separate caches of approximate size). The L1 arrays use pseudo-LRU, as the
/// TRM says of the A76's caches. arm64 allocates 16-bit ASIDs
/// per mm (`arch/arm64/mm/context.c`), approximated by 256 slots per CPU. 2.6 GHz clock; 20
/// cycles per table entry read (approximation). The fetch unit reads 16 bytes a cycle (Arm's
/// A76 disclosure, as AnandTech's "Arm's Cortex-A76 CPU Unveiled", 2018, reports it), and the
/// PMU's `L1I_TLB` event, perf's `iTLB-loads`, counts each fetch that accesses the L1 iTLB (TRM
/// §C2.3): one lookup per 16-byte fetch block.
fn cortex_a76() -> TlbGeometry {
    TlbGeometry {
        core: "Arm Cortex-A76",
        source: "Arm Cortex-A76 Core Technical Reference Manual r3p0, A5.2 TLB organization",
        itlb: vec![A::full(48, sizes::K4 | sizes::M2).plru()],
        dtlb: vec![A::full(48, sizes::K4 | sizes::M2).plru()],
        l2: SecondLevel::Unified(vec![A::new(1280, 5, sizes::ALL)]),
        pwc: [A::full(2, 0), A::full(4, 0), A::new(16, 4, 0)],
        asid_slots: 256,
        clock_mhz: 2600,
        l2_hit_cycles: 3,
        walk_ref_cycles: 20,
        fetch_bytes: 16,
    }
}

/// Costs measured on the development machine (see the module note).
fn epyc_vm_costs() -> CostTable {
    CostTable::new(
        &[
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
            // Approximation: the machine has no persistent memory; the device is taken to be one
            // Intel Optane DC persistent memory module, whose read and write bandwidths J.
            // Izraelevitz et al. measured as 6.6 GB/s and 2.3 GB/s ("Basic Performance Measurements
            // of the Intel Optane DC Persistent Memory Module", arXiv:1903.05714, 2019): 4 KiB in
            // 620 ns and 1780 ns.
            (Cost::PmemRead4k, 620),
            (Cost::PmemWrite4k, 1_780),
            // Approximation, not measured and no published per-block figure found: ext4 allocating
            // one block inside a journal handle (block bitmap, extent tree, jbd2 start and stop),
            // taken as 2 us.
            (Cost::FsBlockAlloc, 2_000),
            // Approximation: reclaim of clean page cache runs at about 1 GB/s per kswapd thread on
            // current servers (about 4 us per page in all); split into a scan and a teardown part.
            (Cost::LruScan, 300),
            (Cost::ReclaimPage, 1_500),
            // Approximation: `submit_bio` to `bio_endio` on brd without device latency.
            (Cost::RamdiskRequest, 1_000),
        ]
        .into_iter()
        .chain(hugetlb_and_coherence_costs())
        .chain(switch_costs())
        .collect::<Vec<_>>(),
    )
}

/// The hugetlb figures measured on the development machine (see the module note) and the
/// published cache-line transfer and memory-bandwidth figures.
fn hugetlb_and_coherence_costs() -> [(Cost, u64); 7] {
    [
        // Measured (see the module note, hugetlb figures): fork, child exit and wait of a process
        // with a 64 MiB shared hugetlb mapping, 169.6 us, less the 33.6 us the model charges for
        // the rest of that cycle (syscalls, `fork_base`, the VMA copy, the exit's unmap) and the
        // two context switches, to the child and back (2 x 2793 ns, `switch_costs`).
        (Cost::TaskReap, 130_414),
        // Measured: mapping a 64 MiB hugetlbfs file, writing its 32 cached pages and unmapping
        // it took 53.9 us a pass, 9.0 us of it the mmap and munmap alone: 1403 ns per page,
        // against 884 ns the model charges per page for the rest of that work.
        (Cost::HugetlbFaultFolio, 519),
        // Measured on 2026-11-26 (Linux 6.18 guest, nothing touched, `MAP_SHARED|MAP_NORESERVE`
        // of a `memfd_create(MFD_HUGETLB)` file, the fastest of four runs of 1000 cycles each):
        // fork, child `_exit` and `waitpid` with a 1 GiB mapping 162.1 us, with a 250 GiB one
        // 163.2 us, so the child's exit walks 249 GiB more in at most 1.1 us: 4 ns per GiB, the
        // noise floor. (An earlier 64 GiB run gave 1225 ns per GiB, which the walk cannot take:
        // it makes one step per GiB, `mm/hugetlb.c` v6.1 `__unmap_hugepage_range`.) mmap and
        // munmap alone gave 18.2 and 30.0 us, 47 ns per GiB, outside the walk, not modelled.
        (Cost::HugetlbUnmapEmptyGib, 4),
        // Published, not measured here (the guest's vCPU placement hides the host's topology):
        // the median core-to-core latency of a compare-and-swap ping-pong on an Intel Xeon
        // Platinum 8275CL (Cascade Lake, 24 cores, AWS c5.metal), 47 ns within a socket and
        // 134 ns between its two sockets (nviennot/core-to-core-latency, README, "Single socket
        // results" and "Dual sockets results", commit 0dddf509cd3f). Cascade Lake is the
        // Skylake-SP mesh of the seed's machine (see `lab::reproduce::hugetlb_locking`).
        (Cost::LineTransfer, 47),
        (Cost::LineTransferRemote, 134),
        // Published, not measured here (the development machine's two vCPUs cannot load a
        // socket's memory controllers), for the same Skylake-SP socket as `line_transfer`: six
        // DDR4-2666 channels, 128 GB/s in theory, and Intel's figure of 199 GB/s for STREAM
        // Triad on two Xeon Platinum 8180 sockets (AVX-512 build), as AnandTech reports it
        // ("Sizing Up Servers: Intel's Skylake-SP Xeon versus AMD's EPYC 7000", 2017-07-11,
        // "Memory Subsystem: Bandwidth"): 99.5 GB/s a socket, 64 KiB in 659 ns. One CPU alone
        // never reaches it (AnandTech measured about 12 GB/s from one Skylake-SP thread; a
        // 4 KiB clear here takes 530 ns, 7.7 GB/s): only many CPUs streaming at once share it.
        (Cost::MemBus64k, 659),
        // Measured on 2026-11-28 with `tools/wakeup.c` on the development machine with nothing
        // else running (a Firecracker KVM guest, 2 vCPUs, Linux 6.x): a thread sleeping in a
        // futex on an idle CPU runs 45.3, 47.5 and 51.1 us (medians of 2000 wake-ups in three
        // runs; p10 35 us, p90 64 us) after another CPU, running, wakes it; the median of the
        // three. Charged only when the sleeper's CPU is idle (`engine::core`). A guest's idle
        // exit goes through the host (the vCPU halted); bare metal or a guest with halt polling
        // wakes in a few us, which `--set cost.wakeup_latency=NS` studies.
        (Cost::WakeupLatency, 47_500),
    ]
}

/// The context switches measured on the development machine (see the module note).
fn switch_costs() -> [(Cost, u64); 2] {
    [
        // Measured on 2026-12-07 with `tools/calibrate.c` (the loops of `mmsim calibrate`) on
        // the development machine (Linux 6.18 Firecracker guest, 2 vCPUs, other builds running,
        // at SCHED_FIFO): lmbench's `lat_ctx` method, two processes pinned to one CPU passing a
        // byte back and forth over two pipes, 7336 ns of their CPU time a round trip, less the
        // 1750 ns the same writes and reads take within one thread, halved (medians of five
        // runs of 100 000 round trips; the runs' own halves spread 2713 to 2858 ns).
        (Cost::ContextSwitch, 2_793),
        // The same with two threads of one process: 7412 ns a round trip (runs 2788 to
        // 2867 ns), no cheaper than between processes on this guest: what a process switch
        // adds (`switch_mm_irqs_off`'s CR3 write with PCID, no flush, and no branch-predictor
        // barrier for tasks that did not ask for one, `cond_mitigation`, arch/x86/mm/tlb.c
        // v6.8) is lost in the spread of a 2.8 us switch.
        (Cost::ThreadSwitch, 2_831),
    ]
}

impl Profile {
    pub const NAMES: &'static [&'static str] = &["epyc-vm", "tiny", "xeon-spr", "arm-a76"];

    /// The profile called `name`.
    pub fn named(name: &str) -> Result<Profile, String> {
        match name {
            "epyc-vm" => Ok(Profile {
                name: "epyc-vm".into(),
                cpus: 2,
                memory: Bytes::gib(24),
                costs: epyc_vm_costs(),
                tlb: zen5(),
                cpus_per_socket: 0,
                caches: Caches::SKYLAKE_SP,
                description: "the development machine: 2 vCPUs of an AMD EPYC KVM guest, 24 GiB"
                    .into(),
            }),
            "tiny" => Ok(Profile {
                name: "tiny".into(),
                cpus: 4,
                memory: Bytes::mib(512),
                costs: epyc_vm_costs(),
                tlb: zen5(),
                cpus_per_socket: 0,
                caches: Caches::SKYLAKE_SP,
                description: "a small machine for tests: 4 CPUs, 512 MiB, epyc-vm costs".into(),
            }),
            "xeon-spr" => Ok(Profile {
                name: "xeon-spr".into(),
                cpus: 48,
                memory: Bytes::gib(256),
                costs: epyc_vm_costs(),
                tlb: golden_cove(),
                cpus_per_socket: 0,
                caches: Caches::SKYLAKE_SP,
                description:
                    "a Sapphire Rapids socket: 48 Golden Cove CPUs, 256 GiB, epyc-vm costs".into(),
            }),
            "arm-a76" => Ok(Profile {
                name: "arm-a76".into(),
                cpus: 4,
                memory: Bytes::gib(8),
                costs: epyc_vm_costs(),
                tlb: cortex_a76(),
                cpus_per_socket: 0,
                caches: Caches::SKYLAKE_SP,
                description: "a phone-class Arm machine: 4 Cortex-A76 CPUs, 8 GiB, epyc-vm costs"
                    .into(),
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

    #[test]
    fn wakeup_latency_reaches_the_engine() {
        let mut config = crate::MachineConfig::new(
            Profile::named("tiny").unwrap(),
            crate::KernelVersion::new(6, 0),
        );
        let measured = config.profile.costs.get(Cost::WakeupLatency).as_ns();
        assert_eq!(crate::Machine::sim_config(&config).wakeup_latency.as_ns(), measured);
        config.profile.costs.set("wakeup_latency", 7_000).unwrap();
        assert_eq!(crate::Machine::sim_config(&config).wakeup_latency.as_ns(), 7_000);
        config.profile.costs.set("context_switch", 3_000).unwrap();
        config.profile.costs.set("thread_switch", 1_000).unwrap();
        let switch = crate::Machine::sim_config(&config).switch_costs;
        assert_eq!((switch.address_space.as_ns(), switch.same_space.as_ns()), (3_000, 1_000));
    }

    #[test]
    fn every_tlb_geometry_is_realisable() {
        for name in Profile::NAMES {
            let p = Profile::named(name).unwrap();
            p.tlb.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
