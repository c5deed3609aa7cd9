//! A TOML document as a tree whose every value knows its source line, so that each error can
//! point at the line a user wrote.

use super::ScenarioError;
use toml_edit::{ImDocument, Item, Value};

/// A TOML value with its line.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub line: usize,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Node>),
    Table(Vec<(String, Node)>),
}

impl Kind {
    /// What a user would call this kind of value, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Kind::Str(_) => "a string",
            Kind::Int(_) => "an integer",
            Kind::Float(_) => "a float",
            Kind::Bool(_) => "a boolean",
            Kind::Array(_) => "an array",
            Kind::Table(_) => "a table",
        }
    }
}

/// Parses `text` (the contents of `file`) into a tree of nodes.
pub fn parse_document(file: &str, text: &str) -> Result<Node, ScenarioError> {
    let doc = ImDocument::parse(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        let message = e.message().trim().to_string();
        ScenarioError { file: file.into(), line, message: format!("malformed TOML: {message}") }
    })?;
    let lines = LineIndex::new(text);
    Ok(table(&lines, doc.as_table(), 1))
}

struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    LineIndex::new(text).line(offset)
}

fn table(lines: &LineIndex, t: &toml_edit::Table, line: usize) -> Node {
    let entries = t
        .iter()
        .filter_map(|(k, item)| item_node(lines, item, line).map(|n| (k.to_string(), n)))
        .collect();
    Node { line: t.span().map_or(line, |s| lines.line(s.start)), kind: Kind::Table(entries) }
}

fn item_node(lines: &LineIndex, item: &Item, parent: usize) -> Option<Node> {
    match item {
        Item::None => None,
        Item::Value(v) => Some(value(lines, v, parent)),
        Item::Table(t) => Some(table(lines, t, parent)),
        Item::ArrayOfTables(a) => {
            let line = a.span().map_or(parent, |s| lines.line(s.start));
            let items = a.iter().map(|t| table(lines, t, line)).collect();
            Some(Node { line, kind: Kind::Array(items) })
        }
    }
}

fn value(lines: &LineIndex, v: &Value, parent: usize) -> Node {
    let line = v.span().map_or(parent, |s| lines.line(s.start));
    let kind = match v {
        Value::String(s) => Kind::Str(s.value().clone()),
        Value::Integer(i) => Kind::Int(*i.value()),
        Value::Float(f) => Kind::Float(*f.value()),
        Value::Boolean(b) => Kind::Bool(*b.value()),
        Value::Datetime(d) => Kind::Str(d.value().to_string()),
        Value::Array(a) => Kind::Array(a.iter().map(|x| value(lines, x, line)).collect()),
        Value::InlineTable(t) => {
            Kind::Table(t.iter().map(|(k, x)| (k.to_string(), value(lines, x, line))).collect())
        }
    };
    Node { line, kind }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_know_their_lines() {
        let text = "a = 1\n[machine]\nseed = 7\n\n[[step]]\nops = [\n  { op = \"x\" },\n  { op = \"y\" },\n]\n";
        let root = parse_document("t.toml", text).unwrap();
        let Kind::Table(top) = &root.kind else { panic!() };
        let step = &top.iter().find(|(k, _)| k == "step").unwrap().1;
        let Kind::Array(steps) = &step.kind else { panic!() };
        let Kind::Table(fields) = &steps[0].kind else { panic!() };
        let Kind::Array(ops) = &fields[0].1.kind else { panic!() };
        assert_eq!((ops[0].line, ops[1].line), (7, 8));
        let machine = &top.iter().find(|(k, _)| k == "machine").unwrap().1;
        let Kind::Table(m) = &machine.kind else { panic!() };
        assert_eq!(m[0].1.line, 3);
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let err = parse_document("bad.toml", "a = 1\nb = [1,\nc = \n").unwrap_err();
        assert_eq!(err.file, "bad.toml");
        assert!(err.line >= 2, "{err}");
        assert!(err.message.starts_with("malformed TOML"), "{err}");
    }
}
