//! Address and size units with x86-64 page geometry.
//!
//! `VirtAddr`/`Vpn` live in a process address space, `PhysAddr`/`Pfn` in simulated physical
//! memory; the types never mix, so a virtual address cannot be used as a frame number by accident
//! (the ChampSim `address_slice` idea). `Bytes` is a size, `Order` a power-of-two page count as in
//! the buddy allocator (`order 9` = one 2 MiB PMD page on x86-64).

use std::fmt;
use std::ops::{Add, Sub};

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
pub const PMD_SHIFT: u32 = 21;
pub const PMD_SIZE: u64 = 1 << PMD_SHIFT;
pub const PUD_SHIFT: u32 = 30;
pub const PUD_SIZE: u64 = 1 << PUD_SHIFT;
/// Pages in one PMD mapping (HPAGE_PMD_NR).
pub const HPAGE_PMD_NR: u64 = PMD_SIZE / PAGE_SIZE;

/// A size in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    pub const ZERO: Bytes = Bytes(0);
    pub const PAGE: Bytes = Bytes(PAGE_SIZE);
    pub const PMD: Bytes = Bytes(PMD_SIZE);
    pub const PUD: Bytes = Bytes(PUD_SIZE);

    #[inline]
    pub const fn kib(n: u64) -> Bytes {
        Bytes(n << 10)
    }

    #[inline]
    pub const fn mib(n: u64) -> Bytes {
        Bytes(n << 20)
    }

    #[inline]
    pub const fn gib(n: u64) -> Bytes {
        Bytes(n << 30)
    }

    #[inline]
    pub const fn tib(n: u64) -> Bytes {
        Bytes(n << 40)
    }

    #[inline]
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Kilobytes, as `/proc` prints them (truncating).
    #[inline]
    pub const fn as_kib(self) -> u64 {
        self.0 >> 10
    }

    /// Pages needed to hold this size (rounding up).
    #[inline]
    pub const fn pages_ceil(self) -> u64 {
        self.0.div_ceil(PAGE_SIZE)
    }

    #[inline]
    pub const fn is_page_aligned(self) -> bool {
        self.0.is_multiple_of(PAGE_SIZE)
    }

    #[inline]
    pub const fn from_pages(pages: u64) -> Bytes {
        Bytes(pages << PAGE_SHIFT)
    }

    /// Rounds up to a multiple of `align` (a power of two); `None` on overflow.
    #[inline]
    pub fn align_up(self, align: Bytes) -> Option<Bytes> {
        debug_assert!(align.0.is_power_of_two());
        self.0.checked_add(align.0 - 1).map(|v| Bytes(v & !(align.0 - 1)))
    }
}

impl Add for Bytes {
    type Output = Bytes;
    #[inline]
    fn add(self, o: Bytes) -> Bytes {
        Bytes(self.0.checked_add(o.0).expect("Bytes overflow"))
    }
}

impl Sub for Bytes {
    type Output = Bytes;
    #[inline]
    fn sub(self, o: Bytes) -> Bytes {
        Bytes(self.0.checked_sub(o.0).expect("negative Bytes"))
    }
}

impl fmt::Display for Bytes {
    /// Prints the largest binary unit that divides the size exactly (`2 MiB`, `4100 B`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
        for (shift, unit) in UNITS {
            if self.0 != 0 && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{} {unit}", self.0 >> shift);
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// A buddy-allocator order: a block of `2^order` pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Order(pub u8);

impl Order {
    pub const BASE: Order = Order(0);
    /// HPAGE_PMD_ORDER on x86-64.
    pub const PMD: Order = Order((PMD_SHIFT - PAGE_SHIFT) as u8);
    /// PUD order (1 GiB) on x86-64.
    pub const PUD: Order = Order((PUD_SHIFT - PAGE_SHIFT) as u8);

    #[inline]
    pub const fn pages(self) -> u64 {
        1 << self.0
    }

    #[inline]
    pub const fn bytes(self) -> Bytes {
        Bytes(PAGE_SIZE << self.0)
    }
}

macro_rules! address_type {
    ($(#[$meta:meta])* $name:ident, $page:ident, $to_page:ident, $(#[$pmeta:meta])* $from_page:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u64);

        $(#[$pmeta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $page(pub u64);

        impl $name {
            #[inline]
            pub const fn as_u64(self) -> u64 {
                self.0
            }

            #[inline]
            pub const fn $to_page(self) -> $page {
                $page(self.0 >> PAGE_SHIFT)
            }

            /// Offset inside the 4 KiB page.
            #[inline]
            pub const fn page_offset(self) -> u64 {
                self.0 & (PAGE_SIZE - 1)
            }

            #[inline]
            pub const fn is_aligned(self, align: Bytes) -> bool {
                self.0 & (align.0 - 1) == 0
            }

            #[inline]
            pub const fn align_down(self, align: Bytes) -> $name {
                $name(self.0 & !(align.0 - 1))
            }

            /// Rounds up to `align`; `None` on overflow.
            #[inline]
            pub fn align_up(self, align: Bytes) -> Option<$name> {
                Bytes(self.0).align_up(align).map(|b| $name(b.0))
            }

            /// `self + len`, or `None` on overflow.
            #[inline]
            pub fn checked_add(self, len: Bytes) -> Option<$name> {
                self.0.checked_add(len.0).map($name)
            }

            /// The distance from `base` up to `self`; panics if `base` is above.
            #[inline]
            pub fn offset_from(self, base: $name) -> Bytes {
                Bytes(self.0.checked_sub(base.0).expect("address below base"))
            }
        }

        impl Add<Bytes> for $name {
            type Output = $name;
            #[inline]
            fn add(self, b: Bytes) -> $name {
                $name(self.0.checked_add(b.0).expect("address overflow"))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }

        impl $page {
            #[inline]
            pub const fn as_u64(self) -> u64 {
                self.0
            }

            #[inline]
            pub const fn $from_page(self) -> $name {
                $name(self.0 << PAGE_SHIFT)
            }
        }

        impl Add<u64> for $page {
            type Output = $page;
            #[inline]
            fn add(self, n: u64) -> $page {
                $page(self.0.checked_add(n).expect("page number overflow"))
            }
        }

        impl Sub for $page {
            type Output = u64;
            #[inline]
            fn sub(self, o: $page) -> u64 {
                self.0.checked_sub(o.0).expect("page number below base")
            }
        }

        impl fmt::Display for $page {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}

address_type!(
    /// A user virtual address.
    VirtAddr, Vpn, vpn,
    /// A virtual page number (`VirtAddr >> PAGE_SHIFT`).
    addr
);
address_type!(
    /// A simulated physical address.
    PhysAddr, Pfn, pfn,
    /// A physical frame number (`PhysAddr >> PAGE_SHIFT`).
    phys
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_geometry() {
        assert_eq!(HPAGE_PMD_NR, 512);
        assert_eq!(Order::PMD.pages(), 512);
        assert_eq!(Order::PMD.bytes(), Bytes::mib(2));
        assert_eq!(Order::PUD.bytes(), Bytes::gib(1));
    }

    #[test]
    fn address_conversions() {
        let va = VirtAddr(0x7f00_1234_5678);
        assert_eq!(va.vpn(), Vpn(0x0007_f001_2345));
        assert_eq!(va.page_offset(), 0x678);
        assert_eq!(va.vpn().addr(), VirtAddr(0x7f00_1234_5000));
        assert_eq!(va.align_down(Bytes::PMD), VirtAddr(0x7f00_1220_0000));
        assert_eq!(va.align_up(Bytes::PMD), Some(VirtAddr(0x7f00_1240_0000)));
        assert!(!va.is_aligned(Bytes::PAGE));
        assert_eq!(VirtAddr(u64::MAX).align_up(Bytes::PAGE), None);
        assert_eq!(Pfn(3).phys(), PhysAddr(0x3000));
        assert_eq!(VirtAddr(0x3000).offset_from(VirtAddr(0x1000)), Bytes::kib(8));
    }

    #[test]
    fn bytes_display_and_rounding() {
        assert_eq!(Bytes::mib(2).to_string(), "2 MiB");
        assert_eq!(Bytes(4100).to_string(), "4100 B");
        assert_eq!(Bytes(4097).pages_ceil(), 2);
        assert_eq!(Bytes::gib(1).as_kib(), 1_048_576);
    }
}
