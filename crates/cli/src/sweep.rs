//! `mmsim sweep SCENARIO --grid KEY=V1,V2 ...`: a scenario run at every point of a grid of
//! kernels, seeds, switches, costs and tunables, one row per point (a table, CSV or JSON).
//! Exit 0 when every point's expectations hold, 1 when one fails (its row says which), 2 on bad
//! input (an impossible point is named before anything runs).

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lab::scenario::run::{Report, load};
use lab::sweep::{Axis, Grid, Point};
use serde_json::{Value, json};

#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    /// The scenario file (TOML; see docs/scenarios.md).
    scenario: String,
    /// An axis of the grid: `kernel=v5.8,v6.8`, `seed=0..8`, or any `--set` key with its values
    /// (`cow_reuse=page_count,mapcount`, `cost.zero_page_4k=300,600`). Repeatable; the first
    /// varies slowest.
    #[arg(long = "grid", value_name = "KEY=V1,V2,...", required = true)]
    grid: Vec<String>,
    #[command(flatten)]
    machine: crate::run::OverrideArgs,
    /// A /proc/vmstat counter to report per point (`pswpin`, `pgreuse`, ...). Repeatable.
    #[arg(long = "counter", value_name = "NAME")]
    counters: Vec<String>,
    /// Points run at once, each a separate simulation on its own host thread.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Print CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Print the rows as JSON (with every vmstat counter).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &SweepArgs) -> u8 {
    match sweep(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mmsim: {e}");
            2
        }
    }
}

fn sweep(a: &SweepArgs) -> Result<u8, String> {
    let axes = a
        .grid
        .iter()
        .map(|g| Axis::parse(g).map_err(|e| format!("--grid {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let grid = Grid::new(axes).map_err(|e| format!("--grid: {e}"))?;
    for c in &a.counters {
        if mm::vmstat::vmstat_key(c).is_none() {
            return Err(format!("--counter {c}: not a /proc/vmstat counter"));
        }
    }
    let base = a.machine.overrides()?;
    let scenario = load(&a.scenario).map_err(|e| e.to_string())?;
    let bar = ProgressBar::with_draw_target(
        Some(grid.points().len() as u64),
        ProgressDrawTarget::stderr(), // hidden by indicatif when stderr is not a terminal
    );
    bar.set_style(
        ProgressStyle::with_template("sweep {bar:30} {pos}/{len} points [{elapsed}<{eta}]")
            .expect("valid template"),
    );
    let rows = lab::sweep::run(&scenario, &base, &grid, a.jobs, &|| bar.inc(1));
    bar.finish_and_clear();
    let rows = rows.map_err(|e| e.to_string())?;
    if let Some((p, why)) = rows.iter().find_map(|(p, r)| Some((p, r.refused.as_ref()?))) {
        return Err(format!("{}: point {}: refused: {why}", a.scenario, lab::sweep::describe(p)));
    }
    if a.json {
        let out: Vec<Value> = rows.iter().map(|(p, r)| row_json(p, r)).collect();
        println!("{}", serde_json::to_string_pretty(&out).expect("rows serialise"));
    } else {
        print_rows(&grid, &rows, &a.counters, a.csv);
    }
    Ok(if rows.iter().all(|(_, r)| r.passed()) { 0 } else { 1 })
}

fn row_json(point: &Point, r: &Report) -> Value {
    json!({
        "point": point.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect::<serde_json::Map<_, _>>(),
        "passed": r.passed(),
        "failures": r.failures.len(),
        "stopped": r.stopped,
        "virtual_time_ns": r.virtual_time_ns,
        "events": r.events,
        "digest": r.digest,
        "vmstat": r.vmstat,
    })
}

fn print_rows(grid: &Grid, rows: &[(Point, Report)], counters: &[String], csv: bool) {
    let mut header: Vec<String> = grid.axes.iter().map(|a| a.key.clone()).collect();
    header.extend(["passed", "virtual_ms", "events"].map(String::from));
    header.extend(counters.iter().cloned());
    header.push("digest".into());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(point, r)| {
            let mut cells: Vec<String> = point.iter().map(|(_, v)| v.clone()).collect();
            let verdict = match (&r.stopped, r.failures.len()) {
                (Some(_), _) => "stopped".to_string(),
                (None, 0) => "yes".to_string(),
                (None, n) => format!("no ({n})"),
            };
            cells.push(verdict);
            cells.push(format!("{:.3}", r.virtual_time_ns as f64 / 1e6));
            cells.push(r.events.to_string());
            for c in counters {
                cells.push(r.vmstat.get(c).copied().unwrap_or(0).to_string());
            }
            cells.push(r.digest.clone());
            cells
        })
        .collect();
    if csv {
        println!("{}", header.join(","));
        for cells in &table {
            println!("{}", cells.join(","));
        }
        return;
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| table.iter().map(|c| c[i].len()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> =
            cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect();
        println!("{}", padded.join("  "));
    };
    line(&header);
    for cells in &table {
        line(cells);
    }
}
