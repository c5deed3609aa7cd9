//! The `verify()` switch for O(N) validators.
//!
//! O(1) assertions are always on. Validators that cost O(N) (walk every page table, recount every
//! mapcount) run only when `verify()` is true: after every event in tests and the explorer, at
//! phase boundaries in reports (TigerBeetle's `constants.verify`, the kernel's
//! `CONFIG_DEBUG_VM`). The switch is per thread, so parallel test threads do not disturb each
//! other; it defaults to on in debug builds and off in release builds.

use std::cell::Cell;

thread_local! {
    static VERIFY: Cell<bool> = const { Cell::new(cfg!(debug_assertions)) };
}

/// Whether O(N) validators should run.
pub fn verify() -> bool {
    VERIFY.with(Cell::get)
}

/// Sets the switch until the returned guard is dropped, then restores the previous value.
pub fn scoped(on: bool) -> VerifyGuard {
    let previous = VERIFY.with(|v| v.replace(on));
    VerifyGuard { previous }
}

/// Restores the previous `verify()` value on drop.
#[derive(Debug)]
#[must_use = "the switch is restored when the guard drops"]
pub struct VerifyGuard {
    previous: bool,
}

impl Drop for VerifyGuard {
    fn drop(&mut self) {
        VERIFY.with(|v| v.set(self.previous));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_restores() {
        let before = verify();
        {
            let _g = scoped(!before);
            assert_eq!(verify(), !before);
        }
        assert_eq!(verify(), before);
    }
}
