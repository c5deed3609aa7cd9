//! Catching panics of trials quietly.
//!
//! A task that breaks an `assert!` panics; the engine re-raises it with its seed, and the explorer
//! catches it (`std::panic::catch_unwind`) as a violation. Exploring may catch thousands of them,
//! and the default panic hook would print each to stderr. While an exploration runs, a forwarding
//! hook is installed: it drops the reports of panics raised inside a trial on the exploring thread
//! and forwards every other panic (another thread's, or a bug outside a trial) to the hook that
//! was there before. The previous hook is restored when the last exploration ends.
//!
//! The hook is process-wide state while trials are per thread, hence a count of active
//! explorations under a mutex and a thread-local "inside a trial" flag: explorations on several
//! test threads neither silence each other's failures nor lose the original hook.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::sync::{Arc, Mutex, PoisonError};

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

struct Installed {
    explorations: usize,
    previous: Option<Arc<Hook>>,
}

static INSTALLED: Mutex<Installed> = Mutex::new(Installed { explorations: 0, previous: None });

thread_local! {
    static IN_TRIAL: Cell<bool> = const { Cell::new(false) };
}

/// Keeps the forwarding hook installed while alive.
#[derive(Debug)]
pub(crate) struct QuietPanics(());

impl QuietPanics {
    pub(crate) fn install() -> QuietPanics {
        let mut inst = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
        if inst.explorations == 0 {
            let previous = Arc::new(panic::take_hook());
            let forward = previous.clone();
            panic::set_hook(Box::new(move |info| {
                if !IN_TRIAL.with(Cell::get) {
                    forward(info);
                }
            }));
            inst.previous = Some(previous);
        }
        inst.explorations += 1;
        QuietPanics(())
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        let mut inst = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
        inst.explorations -= 1;
        // The hook cannot be changed while this thread unwinds; the forwarding hook then stays,
        // and still forwards everything outside trials.
        if inst.explorations > 0 || std::thread::panicking() {
            return;
        }
        drop(panic::take_hook());
        if let Some(previous) = inst.previous.take() {
            match Arc::try_unwrap(previous) {
                Ok(hook) => panic::set_hook(hook),
                Err(shared) => panic::set_hook(Box::new(move |info| shared(info))),
            }
        }
    }
}

/// Runs `f`, turning a panic into `Err(message)`; the panic is not reported by the hook.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let was = IN_TRIAL.with(|t| t.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    IN_TRIAL.with(|t| t.set(was));
    result.map_err(|payload| payload_text(payload.as_ref()))
}

fn payload_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a text message)".into())
}
