//! The report page rendered by a real browser: headless Chromium loads `report.html` made from
//! every experiment at test scale, and the DOM it built has every figure (an SVG inside each
//! `<figure>`, its published figures and bands named in its legend) and a summary table of the
//! five seed changes, each naming the row that decided its verdict; a screenshot is taken too.
//!
//! Chromium comes from Debian's packages (`apt-get install -y chromium`; `.ci/run` installs it).
//! Where no browser is found the test prints a SKIPPED line past the test harness's capture and
//! passes, unless `MMSIM_REQUIRE_BROWSER` is set (CI sets it), when it fails.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::reproduce::report::{Provenance, html_page};
use lab::reproduce::{EXPERIMENTS, NoProgress, Scale};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `$MMSIM_CHROMIUM`, or the first of Chromium's usual names on `PATH`.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MMSIM_CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

fn headless(browser: &Path, args: &[&str], page: &Path) -> String {
    let url = format!("file://{}", page.display());
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .args(args)
        .arg(&url)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", browser.display()));
    assert!(
        out.status.success(),
        "{}: {}",
        browser.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_report_page_renders_in_a_browser() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("MMSIM_REQUIRE_BROWSER").is_none(),
            "MMSIM_REQUIRE_BROWSER is set but no Chromium was found"
        );
        let why = "no Chromium on PATH (apt-get install -y chromium, or set MMSIM_CHROMIUM)";
        trace::skip::skipped("the_report_page_renders_in_a_browser", why);
        return;
    };
    let mut reports: Vec<_> =
        EXPERIMENTS.iter().map(|e| e.run(1, Scale::Quick, &mut NoProgress).unwrap()).collect();
    // One experiment with its sensitivity (the cheapest): its section has a tornado figure.
    let dax = EXPERIMENTS.iter().position(|e| e.name == "dax-zero-page").unwrap();
    let progress = |_: &lab::reproduce::Experiment, _: &str| -> Box<dyn lab::reproduce::Progress> {
        Box::new(NoProgress)
    };
    let with_sensitivity = lab::reproduce::run_seeds(
        &[&EXPERIMENTS[dax]],
        &[1],
        Scale::Quick,
        &[],
        true,
        2,
        &progress,
    );
    reports[dax] = with_sensitivity.unwrap().remove(0);
    let provenance = Provenance {
        commit: "test".into(),
        date: "test".into(),
        host: "test".into(),
        runtime_s: 0.0,
        threads: 1,
        scale: "quick (test)".into(),
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    std::fs::write(&page, html_page(&provenance, &reports).unwrap()).unwrap();

    let dom = headless(&browser, &["--dump-dom"], &page);
    assert!(dom.contains("<h1>mmsim reproduce: published vs simulated</h1>"), "{dom}");
    for (r, e) in reports.iter().zip(EXPERIMENTS) {
        assert!(!r.figures.is_empty(), "{}", e.name);
        for (i, f) in r.figures.iter().enumerate() {
            let id = format!("<figure id=\"{}-figure-{i}\">", e.name);
            let at = dom.find(&id).unwrap_or_else(|| panic!("{id} missing from the DOM"));
            assert!(dom[at..].starts_with(&format!("{id}<svg")), "{id} has no SVG");
            let svg = &dom[at..at + dom[at..].find("</svg>").expect("a closed SVG")];
            // Every experiment publishes figures, so every figure draws them with their bands,
            // each named in the legend.
            let bands = f.published_labels();
            assert!(!bands.is_empty(), "{id} draws no published figure or band");
            for label in bands {
                let shown = label.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
                assert!(svg.contains(&shown), "{id}: the legend lacks `{label}`");
            }
        }
    }
    // The tornado: a bar per declared parameter, the published band named in its legend, and
    // the robustness line beside the verdict.
    let s = reports[dax].sensitivity.as_ref().unwrap();
    let id = "<figure id=\"dax-zero-page-tornado\">";
    let at = dom.find(id).unwrap_or_else(|| panic!("{id} missing from the DOM"));
    assert!(dom[at..].starts_with(&format!("{id}<svg")), "{id} has no SVG");
    let svg = &dom[at..at + dom[at..].find("</svg>").expect("a closed SVG")];
    for p in &s.params {
        assert!(svg.contains(&format!(">{}</text>", p.param.key)), "{id} lacks {}", p.param.key);
    }
    assert!(svg.contains(&format!("published {} x, band", s.published.text())), "{svg}");
    assert!(
        dom.contains("<p class=\"robustness\">Robustness: verdict holds"),
        "no robustness line"
    );
    let summary = &dom[dom.find("<table id=\"summary\">").expect("a summary table")..];
    let body = &summary[summary.find("<tbody>").unwrap()..summary.find("</tbody>").unwrap()];
    assert_eq!(body.matches("<tr>").count(), 5, "{body}");
    assert_eq!(body.matches("not yet modelled").count(), 0, "{body}");
    // Each summary row names the row that decided its verdict, with that row's band, and cites
    // its change by a commit or a list archive link, not by a file the repository lacks.
    for line in body.split("<tr>").skip(1) {
        let cell =
            |r: &&lab::reproduce::Report| line.contains(&format!("<td>{}</td>", r.experiment));
        let r = reports.iter().find(cell).unwrap_or_else(|| panic!("no experiment in {line}"));
        let deciding = r.deciding_row().expect("every experiment has a headline row");
        assert!(line.contains(&format!("{}: published", deciding.name)), "{line}");
        assert!(line.contains("(band "), "{line}");
        assert!(line.contains("https://lkml.kernel.org/r/"), "{line}");
        assert!(!line.contains(".txt"), "{line}");
        let verdict = r.verdict().0;
        assert_eq!(r.row_verdict(deciding), Some(verdict), "{}", r.experiment);
    }

    let shot = dir.join("report.png");
    let arg = format!("--screenshot={}", shot.display());
    headless(&browser, &[&arg, "--window-size=1100,3000"], &page);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a blank screenshot");
}
