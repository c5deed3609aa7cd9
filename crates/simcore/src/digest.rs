//! Run digests: a 64-bit fingerprint of an event history.
//!
//! Two runs with the same seed and commit must give the same digest; comparing digests is how
//! tests and CI prove determinism (TigerBeetle's VOPR, FoundationDB's "unseed"). The mixing is
//! not cryptographic: it only has to make accidental equality of different histories unlikely.

use std::fmt;

const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a over `bytes`, continuing from `state`.
pub(crate) fn fnv1a(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(state ^ FNV_OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// An order-sensitive running fingerprint.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Digest(u64);

impl Digest {
    #[inline]
    pub const fn new() -> Digest {
        Digest(FNV_OFFSET)
    }

    /// Mixes one word in (one multiply-xorshift round: cheap enough for every event).
    #[inline]
    pub fn write_u64(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }

    #[inline]
    pub fn write_str(&mut self, s: &str) {
        self.write_u64(fnv1a(0, s.as_bytes()));
    }

    #[inline]
    pub const fn value(self) -> u64 {
        self.0
    }
}

impl Default for Digest {
    fn default() -> Self {
        Digest::new()
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_sensitive() {
        let (mut a, mut b) = (Digest::new(), Digest::new());
        a.write_u64(1);
        a.write_u64(2);
        b.write_u64(2);
        b.write_u64(1);
        assert_ne!(a, b);
        let mut c = Digest::new();
        c.write_u64(1);
        c.write_u64(2);
        assert_eq!(a, c);
        assert_eq!(a.to_string().len(), 16);
    }
}
