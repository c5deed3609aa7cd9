//! `mmsim swarm --seeds N`: swarm testing of the model (`lab::swarm`): N random valid scenarios
//! run with every whole-system checker after every event; each model bug found is printed with
//! its seed and checker message, and its minimised scenario written to `--out`. Exit 0 when
//! every case held, 1 when a bug was found.

use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct SwarmArgs {
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Where to write each bug's minimised scenario (`swarm-SEED.toml`).
    #[arg(long, default_value = "swarm-bugs")]
    out: String,
    /// Runs the minimiser may take per bug.
    #[arg(long, default_value_t = 2000)]
    shrink: usize,
    /// Run the whole-system checkers after every scheduling event, not only after every step
    /// (slower; finds a broken invariant where it happens).
    #[arg(long)]
    every_event: bool,
    /// Print each seed's scenario instead of running it.
    #[arg(long)]
    print: bool,
}

pub(crate) fn run(a: &SwarmArgs) -> u8 {
    // A panic is a finding here, reported with its seed: keep the default report quiet.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (mut held, mut skipped, mut bugs) = (0u64, 0u64, 0u64);
    for seed in a.start..a.start.saturating_add(a.seeds) {
        let Some(case) = lab::swarm::generate(seed) else {
            skipped += 1;
            continue;
        };
        if a.print {
            println!("{}", case.render());
            continue;
        }
        match lab::swarm::check(&case, a.every_event) {
            lab::swarm::Verdict::Held => held += 1,
            lab::swarm::Verdict::Skipped(_) => skipped += 1,
            lab::swarm::Verdict::Bug(why) => {
                bugs += 1;
                let small = lab::swarm::minimise(&case, a.shrink, &mut |c| {
                    lab::swarm::shows(c, &why, a.every_event)
                });
                let path = std::path::Path::new(&a.out).join(format!("swarm-{seed}.toml"));
                let written = std::fs::create_dir_all(&a.out)
                    .and_then(|()| std::fs::write(&path, small.render()));
                let first = why.lines().next().unwrap_or_default();
                match written {
                    Ok(()) => println!("BUG seed {seed}: {first}\n  minimised: {}", path.display()),
                    Err(e) => println!("BUG seed {seed}: {first}\n  ({}: {e})", path.display()),
                }
            }
        }
    }
    std::panic::set_hook(hook);
    println!("{held} held, {bugs} bugs, {skipped} skipped (configuration refused or over budget)");
    u8::from(bugs > 0)
}
