//! User memory accesses that survive their fault: the scenario's `touch`, `read_bytes`,
//! `write_bytes` and `increment` run as real loads and stores in the agent's own address space,
//! and a SIGSEGV or SIGBUS they raise is the operation's result, not the agent's end.
//!
//! The mechanism is the kernel's own exception table in miniature: each access is one
//! instruction at a known place in a small `asm!` block that first loads the address of its
//! fix-up label into `rsi` and clears `eax`; the agent's SIGSEGV/SIGBUS handler, finding the
//! probe armed, sets the interrupted context's `rip` to that label and `eax` to the signal
//! number, and returns. The access is therefore the same single instruction a program's would
//! be, with the same page-fault error code: a load reads, a store writes, and a touch for write
//! is `lock or byte [p], 0` (a write access that keeps the byte, as mmsim's `touch` keeps the
//! data). x86-64 only; an unarmed fault (a bug of the executor) restores the default action and
//! lets the agent die with the signal.

#![allow(unsafe_code)]

use mm::Signal;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set while a probe runs: only then may the handler redirect a fault.
static ARMED: AtomicBool = AtomicBool::new(false);

/// The handler: an armed probe's fault resumes at the probe's fix-up label with the signal
/// number in `eax`; any other fault takes the default action.
extern "C" fn on_fault(sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if !ARMED.load(Ordering::Relaxed) {
        // SAFETY: resetting the disposition is async-signal-safe; returning re-runs the access,
        // which now takes the default action.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        return;
    }
    // SAFETY: the kernel passes a valid ucontext_t for an SA_SIGINFO handler.
    let uc = unsafe { &mut *ctx.cast::<libc::ucontext_t>() };
    let regs = &mut uc.uc_mcontext.gregs;
    regs[libc::REG_RIP as usize] = regs[libc::REG_RSI as usize];
    regs[libc::REG_RAX as usize] = i64::from(sig);
}

/// Writes the probe's flag, so that after a fork its page is copied before any operation (the
/// copy-on-write fault of the executor's own data would count as the operation's).
pub(crate) fn own_page_written() {
    ARMED.store(false, Ordering::Relaxed);
}

/// Installs the handler for SIGSEGV and SIGBUS (each agent, once).
pub(crate) fn install() {
    for sig in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: a zeroed sigaction with a handler, flags and an empty mask is valid.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal a probe's `eax` names.
fn signal_of(code: u32) -> Result<(), Signal> {
    match code as i32 {
        0 => Ok(()),
        libc::SIGBUS => Err(Signal::SIGBUS),
        _ => Err(Signal::SIGSEGV),
    }
}

/// One byte loaded from `addr`.
fn load(addr: u64) -> Result<u8, Signal> {
    let (code, value): (u32, u8);
    ARMED.store(true, Ordering::Relaxed);
    // SAFETY: the load may fault; the handler then resumes at label 2 with eax set. No memory
    // of the executor's is written.
    unsafe {
        std::arch::asm!(
            "lea rsi, [rip + 2f]",
            "xor eax, eax",
            "mov cl, byte ptr [rdi]",
            "2:",
            in("rdi") addr, out("rsi") _, out("eax") code, out("cl") value,
            options(nostack),
        );
    }
    ARMED.store(false, Ordering::Relaxed);
    signal_of(code).map(|()| value)
}

/// One byte stored at `addr`; with `keep`, the write access `lock or byte [addr], 0` instead,
/// which leaves the byte as it was.
fn store(addr: u64, value: u8, keep: bool) -> Result<(), Signal> {
    let code: u32;
    ARMED.store(true, Ordering::Relaxed);
    // SAFETY: as in `load`; the store writes only the scenario's memory at `addr`.
    unsafe {
        if keep {
            std::arch::asm!(
                "lea rsi, [rip + 2f]",
                "xor eax, eax",
                "lock or byte ptr [rdi], 0",
                "2:",
                in("rdi") addr, out("rsi") _, out("eax") code,
                options(nostack),
            );
        } else {
            std::arch::asm!(
                "lea rsi, [rip + 2f]",
                "xor eax, eax",
                "mov byte ptr [rdi], cl",
                "2:",
                in("rdi") addr, in("cl") value, out("rsi") _, out("eax") code,
                options(nostack),
            );
        }
    }
    ARMED.store(false, Ordering::Relaxed);
    signal_of(code)
}

/// One access per page of `[addr, addr + len)`, at `addr` and then at each page's start, as
/// mmsim's `touch` makes them.
pub(crate) fn touch(addr: u64, len: u64, write: bool) -> Result<(), Signal> {
    let end = addr.checked_add(len).ok_or(Signal::SIGSEGV)?;
    let mut a = addr;
    while a < end {
        if write {
            store(a, 0, true)?;
        } else {
            load(a)?;
        }
        a = (a + 4096) & !4095;
    }
    Ok(())
}

/// `out.len()` bytes loaded from `addr`, one at a time (a fault stops at its byte, as a copy
/// in a program would).
pub(crate) fn read(addr: u64, out: &mut [u8]) -> Result<(), Signal> {
    for (i, b) in out.iter_mut().enumerate() {
        *b = load(addr + i as u64)?;
    }
    Ok(())
}

/// `data` stored at `addr`, one byte at a time.
pub(crate) fn write(addr: u64, data: &[u8]) -> Result<(), Signal> {
    for (i, &b) in data.iter().enumerate() {
        store(addr + i as u64, b, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_a_result_and_a_good_access_works() {
        install();
        assert_eq!(load(8), Err(Signal::SIGSEGV));
        assert_eq!(store(8, 1, false), Err(Signal::SIGSEGV));
        let mut cell = [7u8; 2];
        let p = cell.as_mut_ptr() as u64;
        assert_eq!(load(p), Ok(7));
        write(p, &[1, 2]).unwrap();
        store(p, 0, true).unwrap();
        let mut out = [0u8; 2];
        read(p, &mut out).unwrap();
        assert_eq!(out, [1, 2]);
    }
}
