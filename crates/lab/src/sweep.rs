//! Sweeps: one scenario run at every point of a grid of overrides (`mmsim sweep`).
//!
//! A grid is a list of axes, each a key and its values: `kernel` (a kernel version), `seed`, or
//! any key `mmsim run --set` takes (a switch, `cost.NAME`, a tunable). Its points are the
//! cartesian product, the first axis varying slowest, so the order of the rows is the order of
//! the axes on the command line. Every point is checked (its machine configuration built)
//! before anything runs, so an impossible combination is bad input that names the point, not a
//! failure halfway through. A grid has at most [`MAX_POINTS`] points, refused before any is
//! built.
//!
//! Points are independent simulations: [`run`] may spread them over host threads, each building
//! its own machine, and the rows come back in grid order whatever finished first; every point
//! is as deterministic as `mmsim run` with the same overrides (the digest column shows it).
//! Points running at once share the host budget ([`crate::budget`]) equally.

use crate::budget::HostBudget;
use crate::scenario::ScenarioError;
use crate::scenario::model::Scenario;
use crate::scenario::run::{Overrides, Report, machine_config, run as run_scenario};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most points a grid may have (each is a whole simulation, and every point's
/// configuration is built before any runs).
pub const MAX_POINTS: usize = 65_536;

/// One axis of a grid: a key and the values it takes, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

impl Axis {
    /// Parses `KEY=V1,V2,...`; a `seed` axis also takes ranges `A..B` (B excluded).
    pub fn parse(text: &str) -> Result<Axis, String> {
        let (key, values) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}`: expected KEY=VALUE[,VALUE...]"))?;
        let key = key.trim().to_string();
        if key.is_empty() {
            return Err(format!("`{text}`: expected a key before `=`"));
        }
        let mut out = Vec::new();
        for v in values.split(',').map(str::trim) {
            if v.is_empty() {
                return Err(format!("`{text}`: an empty value"));
            }
            match (key.as_str(), v.split_once("..")) {
                ("seed", Some((a, b))) => {
                    let bound = |s: &str| {
                        s.trim().parse::<u64>().map_err(|_| {
                            format!("`{text}`: seed range `{v}`: expected numbers, as in 0..8")
                        })
                    };
                    let (a, b) = (bound(a)?, bound(b)?);
                    if a >= b {
                        return Err(format!("`{text}`: seed range `{v}` is empty"));
                    }
                    if b - a > MAX_POINTS as u64 {
                        return Err(format!(
                            "`{text}`: seed range `{v}` has {} seeds: a grid has at most {MAX_POINTS} points",
                            b - a
                        ));
                    }
                    out.extend((a..b).map(|s| s.to_string()));
                }
                _ => out.push(v.to_string()),
            }
        }
        Ok(Axis { key, values: out })
    }
}

/// A grid of overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grid {
    pub axes: Vec<Axis>,
}

/// One point of a grid: `(key, value)` per axis, in axis order.
pub type Point = Vec<(String, String)>;

impl Grid {
    /// Checks that no key appears twice and that the grid has at most [`MAX_POINTS`] points.
    pub fn new(axes: Vec<Axis>) -> Result<Grid, String> {
        for (i, a) in axes.iter().enumerate() {
            if axes[..i].iter().any(|b| b.key == a.key) {
                return Err(format!("axis `{}` given twice", a.key));
            }
        }
        let sizes: Vec<String> = axes.iter().map(|a| a.values.len().to_string()).collect();
        let points = axes.iter().try_fold(1usize, |n, a| n.checked_mul(a.values.len()));
        if points.is_none_or(|n| n > MAX_POINTS) {
            return Err(format!(
                "the grid has {} points ({}): a grid has at most {MAX_POINTS} points",
                points.map_or("more than 2^64".into(), |n| n.to_string()),
                sizes.join(" x "),
            ));
        }
        Ok(Grid { axes })
    }

    /// Every point, the first axis varying slowest.
    pub fn points(&self) -> Vec<Point> {
        let mut points: Vec<Point> = vec![Vec::new()];
        for axis in &self.axes {
            points = points
                .into_iter()
                .flat_map(|p| {
                    axis.values.iter().map(move |v| {
                        let mut q = p.clone();
                        q.push((axis.key.clone(), v.clone()));
                        q
                    })
                })
                .collect();
        }
        points
    }
}

/// `base` with a point's values applied: `kernel` and `seed` replace, anything else is a `--set`.
pub fn overrides(base: &Overrides, point: &Point) -> Result<Overrides, String> {
    let mut o = base.clone();
    for (key, value) in point {
        match key.as_str() {
            "kernel" => o.kernel = Some(value.parse().map_err(|e: String| format!("kernel: {e}"))?),
            "seed" => {
                o.seed =
                    Some(value.parse().map_err(|_| format!("seed `{value}`: expected a number"))?);
            }
            _ => o.sets.push((key.clone(), value.clone())),
        }
    }
    Ok(o)
}

/// The point as `key=value ...`, for messages.
pub fn describe(point: &Point) -> String {
    point.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// Runs `scenario` at every point of `grid` on `jobs` host threads (at least one); `done` is
/// called once per finished point (from any thread). The reports come back in grid order.
pub fn run(
    scenario: &Scenario,
    base: &Overrides,
    grid: &Grid,
    jobs: usize,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<(Point, Report)>, ScenarioError> {
    let bad = |point: &Point, message: String| ScenarioError {
        file: scenario.file.clone(),
        line: 0,
        message: format!("sweep point {}: {message}", describe(point)),
    };
    let points = grid.points();
    let jobs = jobs.clamp(1, points.len().max(1));
    let mut base = base.clone();
    base.host_budget = Some(base.host_budget.unwrap_or_else(HostBudget::from_host).share(jobs));
    let mut all = Vec::with_capacity(points.len());
    for p in &points {
        let o = overrides(&base, p).map_err(|e| bad(p, e))?;
        machine_config(&scenario.machine, &o, &scenario.file).map_err(|e| bad(p, e.message))?;
        all.push(o);
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Report, ScenarioError>>>> =
        Mutex::new(points.iter().map(|_| None).collect());
    let worker = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(o) = all.get(i) else { return };
            let report = run_scenario(scenario, o, &mut |_| {});
            results.lock().expect("no worker panicked")[i] = Some(report);
            done();
        }
    };
    std::thread::scope(|s| {
        for _ in 1..jobs {
            s.spawn(worker);
        }
        worker();
    });
    let results = results.into_inner().expect("no worker panicked");
    points
        .into_iter()
        .zip(results)
        .map(|(p, r)| {
            let report = r.expect("every point ran").map_err(|e| bad(&p, e.message))?;
            Ok((p, report))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_parse_values_and_seed_ranges() {
        let a = Axis::parse("cow_reuse=page_count, mapcount").unwrap();
        assert_eq!(a.values, ["page_count", "mapcount"]);
        assert_eq!(Axis::parse("seed=1,4..6").unwrap().values, ["1", "4", "5"]);
        assert!(Axis::parse("seed=3..3").unwrap_err().contains("empty"));
        assert!(Axis::parse("seed=a..3").unwrap_err().contains("expected numbers"));
        assert!(Axis::parse("kernel").unwrap_err().contains("KEY=VALUE"));
        assert!(Axis::parse("kernel=v5.8,,v6.1").unwrap_err().contains("empty value"));
    }

    #[test]
    fn points_vary_the_first_axis_slowest() {
        let grid = Grid::new(vec![
            Axis::parse("kernel=v5.8,v6.8").unwrap(),
            Axis::parse("seed=0..2").unwrap(),
        ])
        .unwrap();
        let points: Vec<String> = grid.points().iter().map(describe).collect();
        assert_eq!(
            points,
            [
                "kernel=v5.8 seed=0",
                "kernel=v5.8 seed=1",
                "kernel=v6.8 seed=0",
                "kernel=v6.8 seed=1"
            ]
        );
        assert!(
            Grid::new(vec![Axis::parse("seed=1").unwrap(), Axis::parse("seed=2").unwrap()])
                .unwrap_err()
                .contains("twice")
        );
    }
}
