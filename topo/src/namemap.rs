//! Node name maps (the `--node-name-map` file of infiniband-diags and OpenSM): friendly
//! names by node GUID.
//!
//! ```text
//! # comment
//! 0x0008f104003f125c "IB1 (Rack 11 slot 1) ISR9288 sLB-24D"
//! 0x0008f104003f125d  leaf-2   # bare names work too
//! ```
//!
//! Read as rdma-core's parser reads it: the GUID is a C integer literal (`0x` hex, a
//! leading `0` octal, else decimal) followed by whitespace, `#` or the end; the name is the
//! first run of characters that are neither `"` nor `#` after it (so quotes are optional
//! and a `#` ends the name even inside quotes). A GUID without a name is skipped, and the
//! first entry for a GUID wins. Differences: a bare name loses trailing whitespace (rdma-core
//! keeps it, CR included), and a GUID that overflows 64 bits is an error.

use std::collections::HashMap;
use std::path::Path;

use crate::model::Node;
use crate::parse_error::ParseError;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameMap {
    names: HashMap<u64, String>,
    /// Other names a node answers to without being shown by them (a simulator's node ids):
    /// name -> node GUID.
    aliases: HashMap<String, u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum NameMapError {
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    #[error(transparent)]
    Parse(#[from] ParseError),
}

/// strtoull(…, 0)-style integer; returns the value and the rest. `None` when no digits;
/// `Some(Err)` on overflow.
fn c_integer(text: &str) -> Option<(Result<u64, ()>, &str)> {
    let (radix, body) = if let Some(b) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        (16, b)
    } else if text.starts_with('0') {
        (8, text)
    } else {
        (10, text)
    };
    let end = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if end == 0 {
        // "0x" with no hex digits: strtoull reads the "0" alone.
        if radix == 16 {
            return Some((Ok(0), &text[1..]));
        }
        return None;
    }
    Some((
        u64::from_str_radix(&body[..end], radix).map_err(|_| ()),
        &body[end..],
    ))
}

impl NameMap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse map text; `file_label` names the file in errors.
    pub fn parse(text: &str, file_label: &str) -> Result<NameMap, ParseError> {
        let mut names = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let lineno = index + 1;
            let line = raw.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |expected: &str| ParseError::new(lineno, expected, raw).in_file(file_label);
            let Some((guid, rest)) = c_integer(line) else {
                return Err(err(
                    "a node GUID (0x hex or decimal) at the start of the line",
                ));
            };
            if !(rest.is_empty() || rest.starts_with(|c: char| c.is_whitespace() || c == '#')) {
                return Err(err("whitespace after the GUID, then \"name\""));
            }
            let guid = guid.map_err(|_| err("a GUID that fits in 64 bits"))?;
            let rest = rest.trim_start();
            if rest.starts_with('#') {
                // A comment where the name should be (rdma-core would take the comment
                // text as the name).
                continue;
            }
            let (quoted, rest) = match rest.strip_prefix('"') {
                Some(r) => (true, r.trim_start_matches('"')),
                None => (false, rest),
            };
            let end = rest.find(['"', '#']).unwrap_or(rest.len());
            let name = if quoted {
                &rest[..end]
            } else {
                rest[..end].trim_end()
            };
            if name.is_empty() {
                continue;
            }
            names.entry(guid).or_insert_with(|| name.to_string());
        }
        Ok(NameMap {
            names,
            ..NameMap::default()
        })
    }

    /// Read (through [`crate::input`]: bounded, NUL refused; other bytes that are not UTF-8
    /// taken as rdma-core takes them) and parse a map file.
    pub fn load(path: impl AsRef<Path>) -> Result<NameMap, NameMapError> {
        let path = path.as_ref();
        let text = crate::input::read_text_lossy(path, "node name map")?;
        Ok(NameMap::parse(&text, &crate::input::display_name(path))?)
    }

    pub fn get(&self, guid: u64) -> Option<&str> {
        self.names.get(&guid).map(String::as_str)
    }

    pub fn insert(&mut self, guid: u64, name: impl Into<String>) {
        self.names.insert(guid, name.into());
    }

    /// Let `alias` name the node with GUID `guid` in what users type, without showing it
    /// anywhere; the first alias given for a name wins.
    pub fn insert_alias(&mut self, alias: impl Into<String>, guid: u64) {
        self.aliases.entry(alias.into()).or_insert(guid);
    }

    /// The node GUID an alias names.
    pub fn alias(&self, alias: &str) -> Option<u64> {
        self.aliases.get(alias).copied()
    }

    /// How many names the map shows (aliases are not counted).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// No name to show (aliases are not counted).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &str)> {
        self.names.iter().map(|(g, n)| (*g, n.as_str()))
    }
}

/// The name to show for a node: the map's name for its GUID, else its NodeDescription.
/// Untrusted either way: escape before display.
pub fn display_name<'a>(node: &'a Node, names: Option<&'a NameMap>) -> &'a str {
    names
        .and_then(|m| m.get(node.guid))
        .unwrap_or(&node.description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_man_page_format() {
        let text = "# IB1\n# Line cards\n\
0x0008f104003f125c \"IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D\"\n\
  0x0008f104003f125d   leaf-2   # trailing comment\n\
\n\
1234 \"decimal\"\n\
0x10 \"first\"\n\
0x10 \"second\"\n\
0x20\n\
0x21 # just a comment\n\
0x30 \"a#b\"\n\
0x40\t\"tab separated\"\r\n\
010 octal\n";
        let m = NameMap::parse(text, "map.txt").unwrap();
        assert_eq!(
            m.get(0x0008f104003f125c),
            Some("IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D")
        );
        assert_eq!(m.get(0x0008f104003f125d), Some("leaf-2"));
        assert_eq!(m.get(1234), Some("decimal"));
        assert_eq!(m.get(0x10), Some("first"));
        assert_eq!(m.get(0x20), None);
        assert_eq!(m.get(0x30), Some("a"));
        assert_eq!(m.get(0x40), Some("tab separated"));
        assert_eq!(m.get(8), Some("octal"));
        assert_eq!(m.len(), 7);
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = NameMap::parse("0x1 \"ok\"\nnode-a \"x\"\n", "/etc/names").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.file.as_deref(), Some("/etc/names"));
        let s = e.to_string();
        assert!(
            s.starts_with("/etc/names: line 2: expected a node GUID"),
            "{s}"
        );
        let e = NameMap::parse("0x12zz \"x\"\n", "m").unwrap_err();
        assert!(e.expected.contains("whitespace after the GUID"));
        let e = NameMap::parse("0x1ffffffffffffffff x\n", "m").unwrap_err();
        assert!(e.expected.contains("64 bits"));
    }

    #[test]
    fn load_and_display_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map");
        std::fs::write(&path, "0x200000 \"core-1\"\n").unwrap();
        let m = NameMap::load(&path).unwrap();
        let mut node = Node {
            guid: 0x200000,
            description: "Switch1".into(),
            ..Default::default()
        };
        assert_eq!(display_name(&node, Some(&m)), "core-1");
        assert_eq!(display_name(&node, None), "Switch1");
        node.guid = 1;
        assert_eq!(display_name(&node, Some(&m)), "Switch1");
        assert!(matches!(
            NameMap::load(dir.path().join("missing")),
            Err(NameMapError::Input(
                crate::input::InputError::Missing { .. }
            ))
        ));
    }
}
