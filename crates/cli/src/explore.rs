//! `mmsim explore SCENARIO`: searches the interleavings of a scenario's concurrent tasks for a
//! broken invariant, a failed expectation, a panic or a deadlock; prints the minimised schedule
//! step by step and writes it to a file that `--replay` reproduces exactly. Schedules that reach
//! the event bound are inconclusive: counted and reported apart, the first written out when no
//! violation is. `--seconds` is asked inside a schedule too, so one long schedule cannot
//! outlast it.

use clap::Args;
use explore::{Options, Outcome, Schedule, Strategy, explore, replay};
use lab::scenario::explore::factory;
use lab::scenario::race;
use lab::scenario::run::{Overrides, load, machine_config, skip_reason};
use serde_json::json;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub(crate) struct ExploreArgs {
    /// The scenario file.
    scenario: String,
    /// random, pct, pct:DEPTH, pct:DEPTH:STEPS, dfs or dfs:PREEMPTION_BOUND.
    #[arg(long, default_value = "pct:3")]
    strategy: String,
    /// Stop after this many schedules.
    #[arg(long, default_value_t = 2000)]
    budget: u64,
    /// Stop after this many seconds of wall-clock time.
    #[arg(long)]
    seconds: Option<u64>,
    /// The exploration seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Override the kernel version.
    #[arg(long)]
    kernel: Option<String>,
    /// Override a switch, cost or tunable (as `mmsim run --set`). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// The scheduling events one schedule may take; a schedule that needs more (a livelock
    /// under an unfair interleaving, or a scenario longer than that) is inconclusive: counted
    /// and reported apart, not a violation.
    #[arg(long, default_value_t = lab::scenario::explore::SCHEDULE_EVENTS, value_parser = clap::value_parser!(u64).range(1..))]
    max_events: u64,
    /// Let the exhaustive search prune at states it has seen (a heuristic for scenarios: see
    /// lab/src/scenario/explore.rs).
    #[arg(long)]
    state_cache: bool,
    /// The trials minimising a violating schedule may spend (1: report it as found, replayed
    /// once).
    #[arg(long, default_value_t = explore::Options::SHRINK_TRIALS, value_parser = clap::value_parser!(u64).range(1..))]
    shrink_trials: u64,
    /// Where to write the violating schedule (default: the scenario's name with `.schedule`).
    #[arg(long)]
    schedule_out: Option<String>,
    /// Replay a schedule file instead of exploring.
    #[arg(long)]
    replay: Option<String>,
    /// With --replay: print the memory and lock state after each step.
    #[arg(long)]
    states: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &ExploreArgs) -> u8 {
    match explore_cmd(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mmsim: {e}");
            2
        }
    }
}

fn explore_cmd(a: &ExploreArgs) -> Result<u8, String> {
    let scenario = load(&a.scenario).map_err(|e| e.to_string())?;
    let mut o = Overrides::default();
    crate::run::kernel_and_sets(&mut o, a.kernel.as_deref(), &a.sets)?;
    o.max_events = Some(a.max_events);
    let config =
        machine_config(&scenario.machine, &o, &scenario.file).map_err(|e| e.to_string())?;
    if let Some(why) = skip_reason(&scenario, &config) {
        println!("{} on {}: {why}", scenario.file, config.kernel);
        return Ok(0);
    }
    let mut trials = factory(&scenario, config, Vec::new());
    if let Some(path) = &a.replay {
        return replay_cmd(a, &mut trials, path);
    }
    let strategy =
        Strategy::from_spec(&a.strategy, a.seed).map_err(|e| format!("--strategy: {e}"))?;
    let options = Options {
        state_cache: a.state_cache,
        shrink_trials: a.shrink_trials,
        ..Options::new(strategy, a.budget)
    };
    let start = Instant::now();
    let limit = a.seconds.map(Duration::from_secs);
    let mut should_stop = |_: &explore::Progress| limit.is_some_and(|l| start.elapsed() >= l);
    let outcome = explore(&mut trials, &options, &mut should_stop).map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    let schedule_file = a.schedule_out.clone().unwrap_or_else(|| {
        let stem = std::path::Path::new(&a.scenario)
            .file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
        format!("{stem}.schedule")
    });
    // The violating schedule, or else the first inconclusive one (to replay with more events).
    let kept = outcome.violation.as_ref().map(|v| &v.schedule);
    if let Some(schedule) = kept.or(outcome.inconclusive.as_ref().map(|i| &i.first)) {
        std::fs::write(&schedule_file, schedule.to_string())
            .map_err(|e| format!("{schedule_file}: {e}"))?;
    }
    if a.json {
        print_json(&outcome, &schedule_file, secs);
    } else {
        print_text(a, &outcome, &schedule_file, secs);
    }
    Ok(if outcome.violation.is_some() { 1 } else { 0 })
}

/// `--replay FILE`: the schedule's run step by step; exit 1 when it violates.
fn replay_cmd(
    a: &ExploreArgs,
    trials: &mut explore::Factory<'_>,
    path: &str,
) -> Result<u8, String> {
    let max = lab::scenario::limits::MAX_SCENARIO_BYTES;
    let text = lab::scenario::run::read_text_or_say(path, max)?;
    let schedule: Schedule = text.parse().map_err(|e| format!("{path}: {e}"))?;
    let r = replay(trials, &schedule, a.states).map_err(|e| format!("{path}: {e}"))?;
    print_steps(&r.steps);
    println!("digest {}, {} preemption(s)", r.digest, r.preemptions);
    Ok(match (r.finding, r.inconclusive) {
        (Some(f), _) => {
            println!("VIOLATION {f}");
            1
        }
        (None, Some(why)) => {
            println!("INCONCLUSIVE {why}: the schedule reached the event bound (--max-events)");
            0
        }
        (None, None) => {
            println!("no violation on this schedule");
            0
        }
    })
}

/// The scenario and the settings a replay needs to rebuild the same machine (kernel, `--set`,
/// the event bound), as `mmsim explore` takes them.
fn replay_args(a: &ExploreArgs) -> String {
    let mut words = vec![a.scenario.clone()];
    if let Some(k) = &a.kernel {
        words.extend(["--kernel".into(), k.clone()]);
    }
    for kv in &a.sets {
        words.extend(["--set".into(), kv.clone()]);
    }
    if a.max_events != lab::scenario::explore::SCHEDULE_EVENTS {
        words.extend(["--max-events".into(), a.max_events.to_string()]);
    }
    words.join(" ")
}

fn print_text(a: &ExploreArgs, o: &Outcome, schedule_file: &str, secs: f64) {
    match &o.violation {
        Some(v) => {
            println!("VIOLATION {}", v.finding);
            println!("{}", v.summary());
            print_steps(&v.steps);
            println!(
                "found after {} schedules ({} distinct states) in {secs:.2} s",
                o.schedules, o.states
            );
            println!(
                "schedule written to {schedule_file}; replay with: mmsim explore {} --replay {schedule_file} --states",
                replay_args(a)
            );
        }
        None => {
            let why = if o.exhausted { "search exhausted" } else { "budget spent" };
            println!(
                "no violation in {} schedules ({} distinct states, {why}) in {secs:.2} s",
                o.schedules, o.states
            );
        }
    }
    if let Some(i) = &o.inconclusive {
        println!("INCONCLUSIVE {i}");
        if o.violation.is_none() {
            println!(
                "the first written to {schedule_file}; replay it with: mmsim explore {} \
                 --replay {schedule_file} --states",
                replay_args(a)
            );
        }
    }
}

/// The run in kernel terms: the interleaving by task, then every step.
fn print_steps(steps: &[explore::Step]) {
    println!("interleaving (kernel functions, one column per task, time going down):");
    for line in race::diagram(steps).lines() {
        println!("  {line}");
    }
    println!("steps:");
    for step in steps {
        println!("  {}", race::step_line(step));
    }
}

fn print_json(o: &Outcome, schedule_file: &str, secs: f64) {
    let violation = o.violation.as_ref().map(|v| {
        json!({
            "kind": v.finding.kind.to_string(),
            "message": v.finding.message,
            "preemptions": v.preemptions,
            "schedule_file": schedule_file,
            "digest": v.digest.to_string(),
            "steps": v.steps.iter().map(step_json).collect::<Vec<_>>(),
        })
    });
    let inconclusive = o.inconclusive.as_ref().map(|i| {
        json!({
            "schedules": i.schedules,
            "message": i.message,
            "choices": i.first.choices.len(),
        })
    });
    let out = json!({
        "violation": violation,
        "inconclusive": inconclusive,
        "schedules": o.schedules,
        "states": o.states,
        "exhausted": o.exhausted,
        "seconds": secs,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

/// A step in JSON, with the kernel function and race event its blocking point stands for.
fn step_json(s: &explore::Step) -> serde_json::Value {
    let site = mm::sim::sites::site(&s.at, &s.point);
    json!({
        "task": s.task,
        "point": s.point,
        "at": s.at,
        "kernel_function": site.map(|x| x.kernel),
        "event": site.and_then(|x| x.event),
        "preemption": s.preemption,
    })
}
