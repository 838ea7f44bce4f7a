//! How the Prometheus pages are written: a family's HELP and TYPE, a sample line, and the
//! page being written piece by piece ([`PageText`]) that every family writer of
//! `prometheus.rs` and `prometheus_cables.rs` writes into.

use std::fmt::Write;
use std::io;

/// HELP and TYPE of a family; its samples follow at once.
pub(super) fn family_head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// One sample line.
pub(super) fn sample_line(out: &mut String, name: &str, labels: &str, value: &str) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        out.push_str(labels);
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

/// Pieces of samples handed to a writer: big enough that a write costs little, small
/// enough to stay in the CPU's cache while it is written and compressed.
const PIECE_BYTES: usize = 1 << 18;

/// The page being written: the piece not yet handed to the writer (a 100,000-HCA
/// fabric's page is gigabytes of text; a writer that compresses each piece as it comes
/// need not hold it whole).
pub(super) struct PageText<'w> {
    text: String,
    out: &'w mut dyn io::Write,
    /// The writer's first error: nothing more is written after it.
    error: Option<io::Error>,
}

impl<'w> PageText<'w> {
    pub(super) fn new(out: &'w mut dyn io::Write) -> PageText<'w> {
        PageText {
            text: String::with_capacity(PIECE_BYTES + 4096),
            out,
            error: None,
        }
    }

    /// HELP and TYPE of a family; its samples follow at once.
    pub(super) fn head(&mut self, name: &str, kind: &str, help: &str) {
        family_head(&mut self.text, name, kind, help);
    }

    /// A sample of a count: integers without going through `fmt` (a page of 100,000 ports
    /// has millions of lines).
    pub(super) fn sample(&mut self, name: &str, labels: &str, value: u64) {
        self.sample_text(name, labels, itoa::Buffer::new().format(value));
    }

    pub(super) fn sample_text(&mut self, name: &str, labels: &str, value: &str) {
        sample_line(&mut self.text, name, labels, value);
        if self.text.len() >= PIECE_BYTES {
            self.hand_over();
        }
    }

    /// Writes the text not yet written, and empties it.
    fn hand_over(&mut self) {
        if self.error.is_none() {
            self.error = self.out.write_all(self.text.as_bytes()).err();
        }
        self.text.clear();
    }

    pub(super) fn finish(mut self) -> io::Result<()> {
        self.hand_over();
        self.error.map_or(Ok(()), Err)
    }
}
