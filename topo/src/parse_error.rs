//! What reading a text input gives: the topology and the warnings met on the way, or the
//! error with its line. The readers of topology files (`ibnd.rs`, `ibnd_ports.rs`) and of
//! node name maps (`namemap.rs`) share these.

use crate::escape;
use crate::model::Fabric;

/// A syntax or consistency error in a text input: where, and what was expected there (or,
/// when `expected` is empty, `found` is a whole sentence saying what is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The file's label (path), when known.
    pub file: Option<String>,
    /// 1-based line number.
    pub line: usize,
    pub expected: String,
    /// An excerpt of what was there, made safe for a terminal.
    pub found: String,
}

/// The first `max` characters of a line, made safe for a terminal and quoted.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let mut excerpt: String = text.trim().chars().take(max).collect();
    if text.trim().chars().count() > max {
        excerpt.push_str("...");
    }
    format!("\"{}\"", escape::for_terminal(&excerpt))
}

impl ParseError {
    pub(crate) fn new(line: usize, expected: impl Into<String>, found: &str) -> Self {
        ParseError {
            file: None,
            line,
            expected: expected.into(),
            found: excerpt(found, 80),
        }
    }
    /// An error told in one sentence (already made safe for a terminal).
    pub(crate) fn sentence(line: usize, sentence: String) -> Self {
        ParseError {
            file: None,
            line,
            expected: String::new(),
            found: sentence,
        }
    }
    /// Attach a file label.
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}: ")?;
        }
        write!(f, "line {}: ", self.line)?;
        if self.expected.is_empty() {
            f.write_str(&self.found)
        } else {
            write!(f, "expected {}, found {}", self.expected, self.found)
        }
    }
}

impl std::error::Error for ParseError {}

/// Something the parser skipped or assumed that the user should hear about (it does not
/// stop the file from loading).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseWarning {
    /// 1-based line number (0 for the file as a whole).
    pub line: usize,
    /// Made safe for a terminal.
    pub message: String,
}

impl std::fmt::Display for ParseWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

/// A parsed topology and the warnings met on the way.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub fabric: Fabric,
    pub warnings: Vec<ParseWarning>,
    /// Each node's id in the file (`"R1L001"`, `"S-0008f10500200134"`) and its GUID: the
    /// names ibsim's console and the file itself use.
    pub node_ids: Vec<(String, u64)>,
}
