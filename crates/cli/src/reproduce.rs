//! `mmsim reproduce [EXPERIMENT...]`: runs the published experiments, prints the table
//! "published vs simulated" for each, and writes `report.html` (with the figures) and
//! `report.json` to the output directory.

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lab::reproduce::{EXPERIMENTS, Experiment, Progress, Report, Scale, find, report::html_page};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(crate) struct ReproduceArgs {
    /// Experiments to run (all when none is named): see `--list`.
    experiments: Vec<String>,
    /// The run seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the reports as JSON (one object per experiment, or an array for several).
    #[arg(long)]
    json: bool,
    /// Where to write report.html and report.json.
    #[arg(long, default_value = "mmsim-report")]
    out: PathBuf,
    /// Small sizes: the same mechanisms, coarser figures (used by the test suite).
    #[arg(long)]
    quick: bool,
    /// List the experiments and exit.
    #[arg(long)]
    list: bool,
}

/// An indicatif bar per phase; hidden when stderr is not a terminal.
struct Bar(Option<ProgressBar>);

impl Progress for Bar {
    fn phase(&mut self, name: &str, total: u64) {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template("{msg:40} {bar:30} {pos}/{len} [{elapsed}<{eta}]")
                .expect("valid template"),
        );
        b.set_message(name.to_string());
        self.0 = Some(b);
    }

    fn advance(&mut self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }
}

pub(crate) fn run(args: &ReproduceArgs) -> Result<(), String> {
    if args.list {
        for e in EXPERIMENTS {
            println!("{:16} {} ({})", e.name, e.title, e.source);
        }
        return Ok(());
    }
    let chosen: Vec<&Experiment> = if args.experiments.is_empty() {
        EXPERIMENTS.iter().collect()
    } else {
        args.experiments.iter().map(|n| find(n)).collect::<Result<_, _>>()?
    };
    let scale = if args.quick { Scale::Quick } else { Scale::Full };
    let mut reports: Vec<Report> = Vec::new();
    for e in chosen {
        let mut bar = Bar(None);
        let report =
            (e.run)(args.seed, scale, &mut bar).map_err(|err| format!("{}: {err}", e.name))?;
        if let Some(b) = bar.0.take() {
            b.finish_and_clear();
        }
        if !args.json {
            println!("{}", report.table());
        }
        reports.push(report);
    }
    let json = match &reports[..] {
        [one] => one.json(),
        many => serde_json::Value::Array(many.iter().map(Report::json).collect()),
    };
    let text = serde_json::to_string_pretty(&json).expect("JSON values print");
    if args.json {
        println!("{text}");
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let html = html_page(&reports)?;
    for (name, body) in [("report.html", html), ("report.json", text + "\n")] {
        let path = args.out.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if !args.json {
        println!("report: {}", args.out.join("report.html").display());
    }
    Ok(())
}
