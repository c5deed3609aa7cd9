//! Machine profile files: a [`Profile`] read from TOML, so that a machine measured by
//! `mmsim calibrate` (named after its host, `profiles/HOST.toml`) runs every scenario, trace and
//! experiment the built-in profiles run (`--profile-file PATH`).
//!
//! The file holds the machine (`name`, `cpus`, `memory`, `tlb`: the built-in profile whose TLB
//! geometry and data caches it takes, since no user-space loop measures a TLB's organisation),
//! every cost of the
//! table (a number of ns, or `{ ns = N, from = "how it was derived" }`), and, as `mmsim
//! calibrate` writes them, the figures measured (`[measured]`, each with every run and what was
//! timed) and the native-against-model loop check (`[[check]]`). Only the machine and the costs
//! set the simulation; the rest is the record a reader checks them against. Every cost must be
//! given exactly once: a file never inherits a figure silently. Errors name the file, the line
//! and what was expected (exit 2 in the CLI).

use crate::calibrate::Program;
use crate::scenario::ScenarioError;
use crate::scenario::node::{Kind, Node, parse_document};
use crate::scenario::parse::parse_size;
use mm::Profile;
use mm::sim::cost::{Cost, CostTable};
use simcore::CounterKey;

/// A figure measured on the host: the median of `runs`, ns (per operation).
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub name: String,
    pub ns: f64,
    pub runs: Vec<f64>,
    /// The loop that was timed.
    pub what: String,
}

/// A loop run natively and in the model on this profile (seed 001's, or a path's), per
/// instance.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopCheck {
    pub program: Program,
    pub instances: u32,
    /// The host's figure per second of the window (what the seed's programs report).
    pub host: f64,
    /// The host's figure per second of the instance's CPU time (other work on the host does
    /// not lower it); 0 when not measured.
    pub host_cpu: f64,
    pub model: f64,
}

impl LoopCheck {
    /// The model's figure over the host's.
    pub fn ratio(&self) -> f64 {
        self.model / self.host.max(f64::MIN_POSITIVE)
    }
}

/// A profile file: the machine, where each cost comes from, and the record of its measurement.
#[derive(Clone, Debug)]
pub struct ProfileFile {
    pub profile: Profile,
    /// The built-in profile whose TLB geometry and data caches the machine takes.
    pub tlb_of: String,
    /// The host kernel's release and the date of the measurement (free text, for the record).
    pub kernel: String,
    pub date: String,
    /// How each cost was derived, in [`Cost::ALL`] order (empty when the file gives none).
    pub sources: Vec<String>,
    pub measured: Vec<Measurement>,
    pub checks: Vec<LoopCheck>,
}

/// The top-level keys of a profile file.
const TOP_KEYS: [&str; 11] = [
    "name",
    "description",
    "cpus",
    "memory",
    "cpus_per_socket",
    "tlb",
    "kernel",
    "date",
    "costs",
    "measured",
    "check",
];

/// Reads the profile file at `path`.
pub fn load(path: &str) -> Result<ProfileFile, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.into(),
        line: 0,
        message: format!("cannot read the profile file: {e}"),
    })?;
    parse(path, &text)
}

/// Parses the text of a profile file (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<ProfileFile, ScenarioError> {
    let root = parse_document(file, text)?;
    let r = Reader { file };
    let top = r.table(&root, "the profile file", &TOP_KEYS)?;
    let name = r.string(top, "name", root.line)?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        return Err(r.err(
            line_of(top, "name", root.line),
            format!("`name` = {name:?}: expected letters, digits, `.`, `_` or `-`"),
        ));
    }
    let tlb_of = r.string(top, "tlb", root.line)?;
    let base = Profile::named(&tlb_of).map_err(|e| r.err(line_of(top, "tlb", root.line), e))?;
    let (costs, sources) = r.costs(r.node(top, "costs", root.line)?)?;
    let description = r.opt_string(top, "description")?;
    let mut profile = Profile {
        name: name.clone(),
        costs,
        cpus_per_socket: r.opt_u64(top, "cpus_per_socket")?.unwrap_or(0) as u32,
        description: description.unwrap_or_else(|| format!("{name}: a profile file")),
        ..base
    };
    let cpus = r.u64(top, "cpus", root.line)?;
    let memory = r.string(top, "memory", root.line)?;
    let line = line_of(top, "memory", root.line);
    // The model places huge pages in whole 2 MiB frames: a machine of a part frame more would
    // boot without its hugetlb pool.
    let bytes =
        parse_size(&memory).filter(|b| b.as_u64().is_multiple_of(2 << 20)).ok_or_else(|| {
            r.err(
                line,
                format!("`memory` = {memory:?}: expected a size of whole 2 MiB like \"24GiB\""),
            )
        })?;
    let cpus = u32::try_from(cpus).unwrap_or(u32::MAX);
    profile = profile
        .resized(Some(cpus), Some(bytes))
        .map_err(|e| r.err(line_of(top, "cpus", root.line), e))?;
    Ok(ProfileFile {
        profile,
        tlb_of,
        kernel: r.opt_string(top, "kernel")?.unwrap_or_default(),
        date: r.opt_string(top, "date")?.unwrap_or_default(),
        sources,
        measured: r.measured(top.iter().find(|(k, _)| k == "measured").map(|(_, n)| n))?,
        checks: r.checks(top.iter().find(|(k, _)| k == "check").map(|(_, n)| n))?,
    })
}

/// The line of `key` in `entries`, else `fallback`.
fn line_of(entries: &[(String, Node)], key: &str, fallback: usize) -> usize {
    entries.iter().find(|(k, _)| k == key).map_or(fallback, |(_, n)| n.line)
}

struct Reader<'a> {
    file: &'a str,
}

impl Reader<'_> {
    fn err(&self, line: usize, message: impl Into<String>) -> ScenarioError {
        ScenarioError { file: self.file.into(), line, message: message.into() }
    }

    /// The entries of table `node` (`what` in messages), refusing keys not in `known`.
    fn table<'n>(
        &self,
        node: &'n Node,
        what: &str,
        known: &[&str],
    ) -> Result<&'n [(String, Node)], ScenarioError> {
        let Kind::Table(entries) = &node.kind else {
            return Err(self.err(
                node.line,
                format!("{what}: expected a table, found {}", node.kind.describe()),
            ));
        };
        if let Some((k, n)) = entries.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(self.err(
                n.line,
                format!("unknown key `{k}` in {what}: expected one of {}", known.join(", ")),
            ));
        }
        Ok(entries)
    }

    fn node<'n>(
        &self,
        entries: &'n [(String, Node)],
        key: &str,
        line: usize,
    ) -> Result<&'n Node, ScenarioError> {
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, n)| n)
            .ok_or_else(|| self.err(line, format!("missing `{key}`")))
    }

    fn opt_string(
        &self,
        entries: &[(String, Node)],
        key: &str,
    ) -> Result<Option<String>, ScenarioError> {
        match entries.iter().find(|(k, _)| k == key).map(|(_, n)| n) {
            None => Ok(None),
            Some(Node { kind: Kind::Str(s), .. }) => Ok(Some(s.clone())),
            Some(n) => Err(self
                .err(n.line, format!("`{key}`: expected a string, found {}", n.kind.describe()))),
        }
    }

    fn string(
        &self,
        entries: &[(String, Node)],
        key: &str,
        line: usize,
    ) -> Result<String, ScenarioError> {
        self.opt_string(entries, key)?.ok_or_else(|| self.err(line, format!("missing `{key}`")))
    }

    fn opt_u64(&self, entries: &[(String, Node)], key: &str) -> Result<Option<u64>, ScenarioError> {
        match entries.iter().find(|(k, _)| k == key).map(|(_, n)| n) {
            None => Ok(None),
            Some(Node { kind: Kind::Int(i), .. }) if *i >= 0 => Ok(Some(*i as u64)),
            Some(n) => Err(self.err(
                n.line,
                format!("`{key}`: expected a non-negative integer, found {}", n.kind.describe()),
            )),
        }
    }

    fn u64(
        &self,
        entries: &[(String, Node)],
        key: &str,
        line: usize,
    ) -> Result<u64, ScenarioError> {
        self.opt_u64(entries, key)?.ok_or_else(|| self.err(line, format!("missing `{key}`")))
    }

    fn number(&self, n: &Node, what: &str) -> Result<f64, ScenarioError> {
        match n.kind {
            Kind::Int(i) if i >= 0 => Ok(i as f64),
            Kind::Float(f) if f.is_finite() && f >= 0.0 => Ok(f),
            _ => Err(self.err(
                n.line,
                format!("{what}: expected a non-negative number, found {}", n.kind.describe()),
            )),
        }
    }

    /// `[costs]`: every cost once, each `NAME = ns` or `NAME = { ns = N, from = "..." }`.
    fn costs(&self, node: &Node) -> Result<(CostTable, Vec<String>), ScenarioError> {
        let names: Vec<&str> = Cost::ALL.iter().map(|c| c.name()).collect();
        let entries = self.table(node, "[costs]", &names)?;
        let mut values = Vec::new();
        let mut sources = Vec::new();
        for c in Cost::ALL {
            let Some((_, n)) = entries.iter().find(|(k, _)| k == c.name()) else {
                return Err(self.err(
                    node.line,
                    format!("[costs] needs `{}` (a profile file gives every cost)", c.name()),
                ));
            };
            let (ns, from) = self.cost(n, c.name())?;
            values.push((*c, ns));
            sources.push(from);
        }
        let mut table = CostTable::new(&values);
        for (c, ns) in &values {
            // `set` refuses a cost above the table's bound.
            let line = line_of(entries, c.name(), node.line);
            table.set(c.name(), *ns).map_err(|e| self.err(line, e))?;
        }
        Ok((table, sources))
    }

    /// One cost: its ns and where it comes from.
    fn cost(&self, n: &Node, name: &str) -> Result<(u64, String), ScenarioError> {
        let what = format!("cost `{name}`");
        match &n.kind {
            Kind::Int(i) if *i >= 0 => Ok((*i as u64, String::new())),
            Kind::Table(_) => {
                let entries = self.table(n, &what, &["ns", "from"])?;
                let ns = self.u64(entries, "ns", n.line)?;
                Ok((ns, self.opt_string(entries, "from")?.unwrap_or_default()))
            }
            _ => Err(self.err(
                n.line,
                format!(
                    "{what}: expected ns (a non-negative integer) or {{ ns = N, from = \"...\" }}, found {}",
                    n.kind.describe()
                ),
            )),
        }
    }

    /// `[measured]`: `NAME = { ns = X, runs = [...], what = "..." }`.
    fn measured(&self, node: Option<&Node>) -> Result<Vec<Measurement>, ScenarioError> {
        let Some(node) = node else { return Ok(Vec::new()) };
        let Kind::Table(entries) = &node.kind else {
            return Err(self.err(node.line, "[measured]: expected a table"));
        };
        let mut out = Vec::new();
        for (name, n) in entries {
            let what = format!("measured `{name}`");
            let fields = self.table(n, &what, &["ns", "runs", "what"])?;
            let runs = match &self.node(fields, "runs", n.line)?.kind {
                Kind::Array(items) => {
                    items.iter().map(|x| self.number(x, &what)).collect::<Result<_, _>>()?
                }
                k => {
                    return Err(self.err(
                        n.line,
                        format!("{what}: `runs` expected an array, found {}", k.describe()),
                    ));
                }
            };
            out.push(Measurement {
                name: name.clone(),
                ns: self.number(self.node(fields, "ns", n.line)?, &what)?,
                runs,
                what: self.opt_string(fields, "what")?.unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// `[[check]]`: `program`, `instances`, `host`, `model`.
    fn checks(&self, node: Option<&Node>) -> Result<Vec<LoopCheck>, ScenarioError> {
        let Some(node) = node else { return Ok(Vec::new()) };
        let Kind::Array(items) = &node.kind else {
            return Err(self.err(node.line, "`check`: expected an array of tables ([[check]])"));
        };
        let keys = ["program", "instances", "host", "host_cpu", "model", "unit", "ratio"];
        items
            .iter()
            .map(|n| {
                let f = self.table(n, "[[check]]", &keys)?;
                let name = self.string(f, "program", n.line)?;
                let Some(program) = Program::parse(&name) else {
                    let names: Vec<_> = Program::ALL.iter().map(|p| p.name()).collect();
                    return Err(self.err(
                        line_of(f, "program", n.line),
                        format!("[[check]] program {name:?}: expected one of {}", names.join(", ")),
                    ));
                };
                Ok(LoopCheck {
                    program,
                    instances: self.u64(f, "instances", n.line)?.min(4096) as u32,
                    host: self.number(self.node(f, "host", n.line)?, "[[check]] host")?,
                    host_cpu: match f.iter().find(|(k, _)| k == "host_cpu") {
                        Some((_, x)) => self.number(x, "[[check]] host_cpu")?,
                        None => 0.0,
                    },
                    model: self.number(self.node(f, "model", n.line)?, "[[check]] model")?,
                })
            })
            .collect()
    }
}

/// `s` as a TOML basic string.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl ProfileFile {
    /// The file's text, which [`parse`] reads back to the same profile.
    pub fn to_toml(&self) -> String {
        let p = &self.profile;
        let mut out = format!(
            "# A machine profile (docs/profiles.md). Only the machine and [costs] set the simulation;\n\
             # [measured] and [[check]] record how the costs were obtained.\n\
             name = {}\ndescription = {}\ncpus = {}\nmemory = {}\ncpus_per_socket = {}\n\
             # The TLB geometry and data caches of this built-in profile (not measured).\ntlb = {}\n\
             kernel = {}\ndate = {}\n",
            quoted(&p.name),
            quoted(&p.description),
            p.cpus,
            quoted(&p.memory.to_string()),
            p.cpus_per_socket,
            quoted(&self.tlb_of),
            quoted(&self.kernel),
            quoted(&self.date),
        );
        out.push_str("\n[costs]\n");
        for (i, (name, ns)) in p.costs.iter().enumerate() {
            match self.sources.get(i).filter(|s| !s.is_empty()) {
                Some(from) => {
                    out.push_str(&format!("{name} = {{ ns = {ns}, from = {} }}\n", quoted(from)))
                }
                None => out.push_str(&format!("{name} = {ns}\n")),
            }
        }
        if !self.measured.is_empty() {
            out.push_str("\n# Medians of several runs, ns per operation.\n[measured]\n");
        }
        for m in &self.measured {
            let runs: Vec<String> = m.runs.iter().map(|r| format!("{r:.1}")).collect();
            out.push_str(&format!(
                "{} = {{ ns = {:.1}, runs = [{}], what = {} }}\n",
                m.name,
                m.ns,
                runs.join(", "),
                quoted(&m.what)
            ));
        }
        for c in &self.checks {
            out.push_str(&format!(
                "\n[[check]]\nprogram = {}\ninstances = {}\nunit = {}\nhost = {:.1}\nhost_cpu = {:.1}\nmodel = {:.1}\nratio = {:.3}\n",
                quoted(c.program.name()),
                c.instances,
                quoted(c.program.unit()),
                c.host,
                c.host_cpu,
                c.model,
                c.ratio()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file with every cost at `epyc-vm`'s figure, `extra` appended to `[costs]`'s lines.
    fn file_text(top: &str, costs_but: Option<&str>) -> String {
        let p = Profile::named("epyc-vm").unwrap();
        let costs: Vec<String> = p
            .costs
            .iter()
            .filter(|(n, _)| Some(*n) != costs_but)
            .map(|(n, ns)| format!("{n} = {ns}"))
            .collect();
        format!("{top}\n[costs]\n{}\n", costs.join("\n"))
    }

    const TOP: &str = "name = \"box\"\ncpus = 2\nmemory = \"4GiB\"\ntlb = \"epyc-vm\"";

    #[test]
    fn a_written_file_reads_back_to_the_same_profile() {
        let mut f = parse("p.toml", &file_text(TOP, None)).unwrap();
        assert_eq!(f.profile.name, "box");
        assert_eq!((f.profile.cpus, f.profile.memory), (2, simcore::Bytes::gib(4)));
        assert_eq!(f.profile.costs, Profile::named("epyc-vm").unwrap().costs);
        f.profile.costs.set("wakeup_latency", 2_500).unwrap();
        f.sources[Cost::WakeupLatency.index()] = "wakeup \"futex\"".into();
        f.measured.push(Measurement {
            name: "wakeup".into(),
            ns: 2500.0,
            runs: vec![2400.0, 2500.0, 2600.0],
            what: "a futex wake-up".into(),
        });
        f.checks.push(LoopCheck {
            program: Program::ThpFaults,
            instances: 2,
            host: 4000.0,
            host_cpu: 4100.0,
            model: 4400.0,
        });
        let again = parse("p.toml", &f.to_toml()).unwrap();
        assert_eq!(again.profile.costs, f.profile.costs);
        assert_eq!(again.profile.description, f.profile.description);
        assert_eq!(
            (again.sources, again.measured, again.checks),
            (f.sources, f.measured, f.checks)
        );
    }

    #[test]
    fn bad_files_name_the_line_and_what_was_expected() {
        let cases: [(String, usize, &str); 8] = [
            (file_text(TOP, Some("fault_entry")), 5, "[costs] needs `fault_entry`"),
            (file_text(&format!("{TOP}\ncolour = 1"), None), 5, "unknown key `colour`"),
            (file_text(&TOP.replace("\"4GiB\"", "\"lots\""), None), 3, "expected a size"),
            (file_text(&TOP.replace("\"4GiB\"", "\"4097MiB\""), None), 3, "whole 2 MiB"),
            (file_text(&TOP.replace("cpus = 2", "cpus = 0"), None), 2, "1 to 4096 CPUs"),
            (file_text(&TOP.replace("epyc-vm", "vax"), None), 4, "expected one of epyc-vm"),
            (
                file_text(TOP, None).replace("syscall = 140", "syscall = \"fast\""),
                6,
                "cost `syscall`",
            ),
            (file_text(TOP, None).replace("syscall = 140", "syscall = 99999999999"), 6, "at most"),
        ];
        for (text, line, what) in cases {
            let e = parse("p.toml", &text).unwrap_err();
            assert_eq!((e.line, e.file.as_str()), (line, "p.toml"), "{e}\n{text}");
            assert!(e.message.contains(what), "{e}");
        }
        let e = parse("p.toml", "name = ").unwrap_err();
        assert!(e.to_string().starts_with("p.toml:1: malformed TOML"), "{e}");
        assert!(load("/nonexistent/p.toml").unwrap_err().to_string().contains("cannot read"));
    }
}
