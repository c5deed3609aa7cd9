//! Schedules explored per second on the locked lost-update toy (three tasks, two increments
//! each, random strategy): the body of `mmsim bench explore`, timed here because the explore crate
//! reads no clock. Usage: `cargo run --release -p explore --example bench_explore [SECONDS]`.
//! The figure is printed, never asserted.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::time::{Duration, Instant};

fn main() {
    let arg = std::env::args().nth(1);
    let seconds: f64 = match arg.as_deref().map(str::parse) {
        None => 2.0,
        Some(Ok(s)) if s > 0.0 => s,
        Some(_) => {
            eprintln!("usage: bench_explore [SECONDS]  (a positive number, default 2)");
            std::process::exit(2);
        }
    };
    let limit = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let outcome = explore::bench(&mut |_| start.elapsed() >= limit).unwrap_or_else(|e| {
        eprintln!("bench_explore: {e}");
        std::process::exit(1);
    });
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "explore (random, locked lost-update toy, 3 tasks x 2 increments): {} schedules, {} \
         states in {elapsed:.2} s = {:.0} schedules/s",
        outcome.schedules,
        outcome.states,
        outcome.schedules as f64 / elapsed
    );
}
