//! A machine driven one call at a time: each call runs a simulated thread to completion and
//! returns its result. This is the model of the Python API (`mmsim.Machine`), where every method
//! of a process is a syscall that returns before the next line of Python runs.

use crate::scenario::ScenarioError;
use crate::scenario::model::MachineSpec;
use crate::scenario::run::{Overrides, machine_config};
use engine::SimError;
use mm::{Machine, Pid, Thread};
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

/// A machine and the calls made on it.
#[derive(Debug)]
pub struct Session {
    machine: Machine,
}

impl Session {
    /// A machine as a `[machine]` section would describe it.
    pub fn new(spec: &MachineSpec, overrides: &Overrides) -> Result<Session, ScenarioError> {
        let config = machine_config(spec, overrides, "<machine>")?;
        let machine = Machine::new(config).map_err(|message| ScenarioError {
            file: "<machine>".into(),
            line: 0,
            message,
        })?;
        Ok(Session { machine })
    }

    /// A session on a machine built by the caller (for settings a `[machine]` section does not
    /// have, such as the event bound).
    pub fn from_machine(machine: Machine) -> Session {
        Session { machine }
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    pub fn machine_mut(&mut self) -> &mut Machine {
        &mut self.machine
    }

    /// Runs `f` as a thread of `pid` on `cpu` until it returns.
    pub fn call<T, F, Fut>(&mut self, pid: Pid, cpu: u32, f: F) -> Result<T, CallError>
    where
        T: 'static,
        F: FnOnce(Thread) -> Fut + 'static,
        Fut: Future<Output = T> + 'static,
    {
        let out = Rc::new(RefCell::new(None));
        let o = out.clone();
        self.machine
            .spawn_thread(pid, cpu, "call", move |t| async move {
                let v = f(t).await;
                *o.borrow_mut() = Some(v);
            })
            .map_err(CallError::Config)?;
        self.machine.run().map_err(CallError::Stopped)?;
        let v = out.borrow_mut().take();
        Ok(v.expect("a finished thread stored its result"))
    }
}

/// Why a call could not complete.
#[derive(Debug)]
pub enum CallError {
    /// The call was impossible (no such CPU, an exited process).
    Config(String),
    /// The simulation stopped (every task blocked, or the event bound).
    Stopped(SimError),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Config(e) => f.write_str(e),
            CallError::Stopped(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CallError {}
