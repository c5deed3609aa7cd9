//! The context-switch figures, lmbench's `lat_ctx` method (`tools/calibrate.c` does the same in
//! C): two tasks pinned to CPU 0 pass a byte back and forth over two pipes, each blocking in
//! `read` until the other writes, so every round trip is two switches, two writes and two reads.
//! What the writes and reads cost without a switch is timed within one thread (it writes and
//! reads each pipe itself); `lab::calibrate` takes the difference per round trip, halved, as a
//! switch. The tasks are two processes (`context_switch`: a switch between address spaces) or
//! two threads of this process (`thread_switch`). Each run is timed by the two tasks' CPU time,
//! which other work on the host's CPU 0 does not inflate (the switch runs on the CPU time of
//! the task leaving or the one arriving, and the CPU never idles in between).

use super::{Plan, cpu_ns, figure, pin};
use crate::sys;
use lab::profile_file::Measurement;

/// The two pipes of a ping-pong: the token goes out on `a` and comes back on `b`.
struct Pipes {
    a: (i32, i32),
    b: (i32, i32),
}

impl Pipes {
    fn new() -> Result<Pipes, String> {
        let pipe = || sys::pipe().map_err(|e| format!("pipe: {e:?}"));
        Ok(Pipes { a: pipe()?, b: pipe()? })
    }
}

impl Drop for Pipes {
    fn drop(&mut self) {
        for fd in [self.a.0, self.a.1, self.b.0, self.b.1] {
            let _ = sys::close(fd);
        }
    }
}

/// Writes one byte to pipe end `w`. No allocation (it runs in a forked child).
fn send(w: i32) -> bool {
    sys::write_from(w, &[1], None).is_ok()
}

/// Reads one byte from pipe end `r`, blocking until there is one.
fn recv(r: i32) -> bool {
    let mut byte = 0u8;
    sys::read_to(r, &raw mut byte as u64, 1, None).is_ok()
}

/// The echo side: `rounds` times, a byte from `a` back on `b`; its CPU time, ns.
fn echo(p: &Pipes, rounds: u64) -> u64 {
    let t = cpu_ns();
    for _ in 0..rounds {
        if !(recv(p.a.0) && send(p.b.1)) {
            return u64::MAX;
        }
    }
    cpu_ns() - t
}

/// The sending side: `rounds` round trips; its CPU time, ns.
fn ping(p: &Pipes, rounds: u64) -> Result<u64, String> {
    let t = cpu_ns();
    for _ in 0..rounds {
        if !(send(p.a.1) && recv(p.b.0)) {
            return Err(format!("the ping-pong's pipes failed: {:?}", sys::last_err()));
        }
    }
    Ok(cpu_ns() - t)
}

/// One thread writing and reading both pipes itself: ns per round trip of the same work.
fn pipe_once(rounds: u64) -> Result<f64, String> {
    let p = Pipes::new()?;
    let t = cpu_ns();
    for _ in 0..rounds {
        if !(send(p.a.1) && recv(p.a.0) && send(p.b.1) && recv(p.b.0)) {
            return Err(format!("the pipes failed: {:?}", sys::last_err()));
        }
    }
    Ok((cpu_ns() - t) as f64 / rounds as f64)
}

/// Two processes on CPU 0: ns of their CPU time per round trip (the child reports its own
/// through a third pipe).
fn processes_once(rounds: u64) -> Result<f64, String> {
    let p = Pipes::new()?;
    let report = Pipes::new()?;
    let child = sys::fork().map_err(|e| format!("fork: {e:?}"))?;
    if child == 0 {
        let ns = echo(&p, rounds);
        let _ = sys::write_from(report.a.1, &ns.to_ne_bytes(), None);
        sys::exit_now(0);
    }
    let mine = ping(&p, rounds);
    let mut theirs = [0u8; 8];
    let got = sys::read_to(report.a.0, theirs.as_mut_ptr() as u64, 8, None);
    sys::wait_for(child);
    let theirs = u64::from_ne_bytes(theirs);
    if got != Ok(8) || theirs == u64::MAX {
        return Err("the ping-pong's child process failed".into());
    }
    Ok((mine? + theirs) as f64 / rounds as f64)
}

/// Two threads of this process on CPU 0: ns of their CPU time per round trip.
fn threads_once(rounds: u64) -> Result<f64, String> {
    let p = std::sync::Arc::new(Pipes::new()?);
    let q = p.clone();
    let echoer = std::thread::spawn(move || {
        let _ = pin(0);
        echo(&q, rounds)
    });
    let mine = ping(&p, rounds);
    let theirs = echoer.join().map_err(|_| "the echo thread panicked".to_string())?;
    if theirs == u64::MAX {
        return Err("the ping-pong's echo thread failed".into());
    }
    Ok((mine? + theirs) as f64 / rounds as f64)
}

/// The three round trips `lab::calibrate` turns into `context_switch` and `thread_switch`, the
/// calling thread pinned to CPU 0 (the caller unpins it).
pub fn figures(plan: &Plan) -> Result<Vec<Measurement>, String> {
    pin(0)?;
    let rounds = plan.ops(100_000);
    let what = "a byte written to and read from each of two pipes by one thread: per round trip";
    let pipe = figure(plan, "pipe_round_trip", what, || pipe_once(rounds))?;
    let what = "two processes on CPU 0 passing a byte back and forth over two pipes: their CPU \
                time per round trip (two context switches)";
    let processes = figure(plan, "pipe_ping_pong_processes", what, || processes_once(rounds))?;
    let what = "the same between two threads of one process";
    let threads = figure(plan, "pipe_ping_pong_threads", what, || threads_once(rounds))?;
    Ok(vec![pipe, processes, threads])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round trip between two tasks holds two switches more than one within a thread.
    #[test]
    fn a_ping_pong_takes_longer_than_its_pipes() {
        let plan = Plan { runs: 1, divisor: 64, realtime: false };
        let f = figures(&plan).unwrap();
        let names: Vec<&str> = f.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["pipe_round_trip", "pipe_ping_pong_processes", "pipe_ping_pong_threads"]
        );
        assert!(f[0].ns > 0.0, "{f:?}");
        assert!(f[1].ns > f[0].ns && f[2].ns > f[0].ns, "{f:?}");
    }
}
