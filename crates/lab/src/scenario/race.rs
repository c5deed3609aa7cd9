//! An explored run in kernel terms, for `mmsim explore`'s report: each step named by the kernel
//! function its blocking point stands for (`mm::sim::sites`), the race's key events marked (a
//! pin, a write-protect, a copy, a DMA completion...), and the interleaving drawn as the seed
//! texts draw races: one column per task, time going down, a row each time a task enters
//! another kernel function.

use explore::Step;
use mm::sim::sites::{Site, site};
use std::fmt::Write as _;

/// A step's kernel site, if it is in the model.
fn step_site(s: &Step) -> Option<Site> {
    site(&s.at, &s.point)
}

/// `at` without its column, and the model's source directory left out.
fn short_location(at: &str) -> &str {
    let at = at.strip_prefix("crates/mm/src/").unwrap_or(at);
    at.rsplit_once(':').map_or(at, |(file_line, _)| file_line)
}

/// One step: `#12   app/0   charge   wp_page_copy [copy]   (fault.rs:470)`.
pub fn step_line(s: &Step) -> String {
    let what = step_site(s).map_or_else(|| "-".to_string(), |site| site.to_string());
    let mark = if s.preemption { "  <- preemption" } else { "" };
    let mut line = format!(
        "#{:<4} {:<12} {:<24} {:<44} ({}){mark}",
        s.choice,
        s.task,
        s.point,
        what,
        short_location(&s.at)
    );
    if let Some(state) = &s.state {
        for l in state.lines() {
            let _ = write!(line, "\n        | {l}");
        }
    }
    line
}

/// The interleaving as columns, one per task in order of first appearance: a row each time a
/// task enters a kernel function other than the one it was in (its event, if any, marked); steps
/// outside the model (the scenario's own) are left out.
pub fn diagram(steps: &[Step]) -> String {
    const WIDTH: usize = 34;
    let mut tasks: Vec<&str> = Vec::new();
    let mut rows: Vec<(usize, String)> = Vec::new();
    let mut last: Vec<Option<&'static str>> = Vec::new();
    for s in steps {
        let Some(site) = step_site(s) else { continue };
        let col = match tasks.iter().position(|t| *t == s.task) {
            Some(c) => c,
            None => {
                tasks.push(&s.task);
                last.push(None);
                tasks.len() - 1
            }
        };
        if last[col] == Some(site.kernel) {
            continue;
        }
        last[col] = Some(site.kernel);
        let mut cell = site.to_string();
        if s.preemption {
            cell.push_str(" <-");
        }
        rows.push((col, cell));
    }
    let mut out = String::new();
    for t in &tasks {
        let _ = write!(out, "{:<WIDTH$}", t);
    }
    out = out.trim_end().to_string();
    out.push('\n');
    for (col, cell) in rows {
        let line = format!("{}{cell}", " ".repeat(col * WIDTH));
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use simcore::SimTime;

    fn step(choice: usize, task: &str, point: &str, at: &str) -> Step {
        Step {
            choice,
            time: SimTime::ZERO,
            task: task.into(),
            point: point.into(),
            at: at.into(),
            preemption: false,
            state: None,
        }
    }

    /// The location of the first line inside model function `name`.
    fn inside(name: &str) -> String {
        (1..4000)
            .map(|line| format!("crates/mm/src/fault.rs:{line}:1"))
            .find(|at| mm::sim::sites::model_function(at) == Some(name))
            .unwrap()
    }

    #[test]
    fn the_diagram_puts_each_task_in_its_column_and_marks_events() {
        let steps = [
            step(0, "scenario", "spawn", "crates/lab/src/scenario/run.rs:222:22"),
            step(1, "app/0", "charge", &inside("do_wp_page")),
            step(2, "app/0", "charge", &inside("do_wp_page")),
            step(3, "app/1", "charge", &inside("wp_page_copy")),
        ];
        let d = diagram(&steps);
        let lines: Vec<&str> = d.lines().collect();
        assert_eq!(lines.len(), 3, "{d}");
        assert!(lines[0].starts_with("app/0") && lines[0].contains("app/1"), "{d}");
        assert_eq!(lines[1], "do_wp_page");
        assert_eq!(lines[2], format!("{}wp_page_copy [copy]", " ".repeat(34)));
        let line = step_line(&steps[3]);
        assert!(line.contains("wp_page_copy [copy]") && line.contains("(fault.rs:"), "{line}");
        assert!(step_line(&steps[0]).contains(" - "), "{}", step_line(&steps[0]));
    }
}
