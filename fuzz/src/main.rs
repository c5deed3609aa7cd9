//! `mmsim-fuzz TARGET`: one of mmsim's fuzz targets (`mmsim_cli::fuzz::TARGETS`) under AFL++;
//! `mmsim-fuzz seed TARGET DIR`: writes that target's seed corpus into DIR. Run through
//! `cargo xtask fuzz --minutes N`.

use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = |name: &str| {
        let found = mmsim_cli::fuzz::TARGETS.iter().find(|(n, _)| *n == name);
        found.map(|(_, f)| *f).unwrap_or_else(|| {
            eprintln!("mmsim-fuzz: no target `{name}`");
            std::process::exit(2)
        })
    };
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["seed", name, dir] => {
            target(name);
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let seeds = mmsim_cli::fuzz::seeds(name, &root).expect("the seed files are readable");
            std::fs::create_dir_all(dir).expect("the corpus directory can be made");
            for (file, bytes) in seeds {
                std::fs::write(Path::new(dir).join(file), bytes).expect("a seed can be written");
            }
        }
        [name] => {
            let f = target(name);
            afl::fuzz!(|data: &[u8]| f(data));
        }
        _ => {
            eprintln!("usage: mmsim-fuzz TARGET | mmsim-fuzz seed TARGET DIR");
            std::process::exit(2)
        }
    }
}
