//! Saved module dumps into a [`ModuleMemory`]: the raw bytes of `ethtool -m DEV raw on`,
//! the text of `ethtool -m DEV hex on` (`0x0000:  03 04 ...`, one block or several, with
//! `ethtool ... page N [bank N] [i2c 0xNN]` command lines naming a page), `hexdump -C`
//! (`00000000  03 04 ...  |..|`, `*` for repeated lines) and SONiC's `sfputil show
//! eeprom-hexdump` (sections `Lower page 0h`, `Upper page 3h`, `A0h dump`, `A2h dump
//! (lower 128 bytes)`, `A2h dump (upper 128 bytes) page 0h`). Untrusted input: every
//! failure is an error naming the line.

use std::collections::BTreeMap;

use super::memory::{HalfAddr, MemoryError, ModuleMemory, ADDR_A0, ADDR_A2, HALF};

/// A dump read: the module's memory and, for text, the line where each half starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    pub memory: ModuleMemory,
    /// The line (from 1) of each half's first byte, for text dumps.
    pub lines: BTreeMap<HalfAddr, usize>,
    pub format: DumpFormat,
}

/// Which kind of dump it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DumpFormat {
    Raw,
    EthtoolHex,
    Hexdump,
    Sfputil,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    #[error("line {line}: {reason}")]
    Line { line: usize, reason: String },
    #[error("{0}")]
    Memory(#[from] MemoryError),
}

/// Where the bytes of a stretch of text go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Space {
    /// Offsets of the flat raw layout (resolved by the identifier).
    Linear,
    /// Offsets 0-255 of one page (0-127 its lower half, 128-255 its upper half).
    Page { i2c: u8, bank: u8, page: u8 },
    /// The upper half of a page whose dump numbers its lines from 0 or from 0x80.
    Upper { i2c: u8, page: u8 },
}

/// The most a saved dump can hold: every page of a CMIS module's 16 banks written as
/// `hexdump -C` text stays under 1 MiB; a reader of dumps stops there.
pub const MOST_BYTES: u64 = 1 << 20;

/// Reads a dump: text when it is text with hex lines, raw bytes otherwise.
pub fn parse(bytes: &[u8]) -> Result<Dump, DumpError> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if text.lines().any(|l| hex_line(l).is_some()) {
            return parse_text(text);
        }
    }
    Ok(Dump {
        memory: ModuleMemory::from_raw(bytes)?,
        lines: BTreeMap::new(),
        format: DumpFormat::Raw,
    })
}

/// One line of hex: its offset and bytes. `0x0010:  00 11 ...`, `00000010  00 11 ... |..|`
/// and `00000010 00 11 ... |..|` all read; a bare offset (hexdump's last line) has no bytes.
fn hex_line(line: &str) -> Option<(usize, Vec<u8>)> {
    let t = line.trim();
    let t = t.split('|').next().unwrap_or("");
    let mut words = t.split_whitespace();
    let first = words.next()?;
    let first = first.trim_end_matches(':');
    let digits = first.strip_prefix("0x").unwrap_or(first);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // A word of two hex digits alone is a byte, not an offset.
    if digits.len() < 4 && !first.starts_with("0x") {
        return None;
    }
    let offset = usize::from_str_radix(digits, 16).ok()?;
    let mut bytes = Vec::new();
    for w in words {
        if w.len() != 2 {
            return None;
        }
        bytes.push(u8::from_str_radix(w, 16).ok()?);
    }
    (bytes.len() <= 32).then_some((offset, bytes))
}

/// A section header or an ethtool command line that says where the next bytes go.
fn section(line: &str) -> Option<(Space, DumpFormat)> {
    let l = line.trim().to_ascii_lowercase();
    let hex_page = |s: &str| -> Option<u8> {
        let n = s.trim_end_matches('h');
        u8::from_str_radix(n, 16).ok()
    };
    let words: Vec<&str> = l.split_whitespace().collect();
    let after = |key: &str| -> Option<&str> {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1).copied())
    };
    if l.starts_with("lower page") {
        return Some((
            Space::Page {
                i2c: ADDR_A0,
                bank: 0,
                page: 0,
            },
            DumpFormat::Sfputil,
        ));
    }
    if l.starts_with("upper page") {
        let page = after("page").and_then(hex_page)?;
        return Some((Space::Upper { i2c: ADDR_A0, page }, DumpFormat::Sfputil));
    }
    if l.starts_with("a0h dump") {
        return Some((
            Space::Page {
                i2c: ADDR_A0,
                bank: 0,
                page: 0,
            },
            DumpFormat::Sfputil,
        ));
    }
    if l.starts_with("a2h dump") {
        if l.contains("upper") {
            let page = after("page").and_then(hex_page).unwrap_or(0);
            return Some((Space::Upper { i2c: ADDR_A2, page }, DumpFormat::Sfputil));
        }
        return Some((
            Space::Page {
                i2c: ADDR_A2,
                bank: 0,
                page: 0,
            },
            DumpFormat::Sfputil,
        ));
    }
    let is_command = words.iter().any(|w| w.ends_with("ethtool"))
        && words
            .iter()
            .any(|w| matches!(*w, "-m" | "--module-info" | "--dump-module-eeprom"));
    if !is_command {
        return None;
    }
    let number = |s: &str| -> Option<u8> {
        match s.strip_prefix("0x") {
            Some(h) => u8::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        }
    };
    let page = after("page").and_then(number);
    let bank = after("bank").and_then(number).unwrap_or(0);
    let i2c = after("i2c").and_then(number).unwrap_or(ADDR_A0);
    let space = match page {
        Some(page) => Space::Page { i2c, bank, page },
        None if i2c != ADDR_A0 => Space::Page { i2c, bank, page: 0 },
        None => Space::Linear,
    };
    Some((space, DumpFormat::EthtoolHex))
}

/// Bytes read so far, by space, with the line each came from.
#[derive(Default)]
struct Collected {
    bytes: BTreeMap<Space, BTreeMap<usize, (u8, usize)>>,
}

impl Collected {
    fn put(
        &mut self,
        space: Space,
        offset: usize,
        bytes: &[u8],
        line: usize,
    ) -> Result<(), DumpError> {
        let (space, base) = match space {
            Space::Upper { i2c, page } => {
                let base = if offset < HALF { HALF } else { 0 };
                (Space::Page { i2c, bank: 0, page }, base)
            }
            other => (other, 0),
        };
        let limit = if space == Space::Linear {
            6 * HALF
        } else {
            2 * HALF
        };
        let map = self.bytes.entry(space).or_default();
        for (i, b) in bytes.iter().enumerate() {
            let at = base + offset + i;
            if at >= limit {
                return Err(DumpError::Line {
                    line,
                    reason: format!("offset 0x{at:x} is past the end of a module's memory"),
                });
            }
            map.insert(at, (*b, line));
        }
        Ok(())
    }
}

fn parse_text(text: &str) -> Result<Dump, DumpError> {
    let mut collected = Collected::default();
    let mut space = Space::Linear;
    let mut format = DumpFormat::Hexdump;
    let mut previous: Option<(usize, Vec<u8>)> = None;
    let mut repeat = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some((s, f)) = section(line) {
            space = s;
            format = f;
            previous = None;
            continue;
        }
        if line.trim() == "*" {
            repeat = true;
            continue;
        }
        if line.trim_start().starts_with("0x") && format == DumpFormat::Hexdump {
            format = DumpFormat::EthtoolHex;
        }
        let Some((offset, bytes)) = hex_line(line) else {
            continue;
        };
        if repeat {
            // hexdump's `*`: the previous line again at every 16 bytes up to this offset.
            if let Some((start, ref prev)) = previous {
                let step = prev.len().max(1);
                let mut at = start + step;
                while at < offset {
                    collected.put(space, at, prev, n)?;
                    at += step;
                }
            }
            repeat = false;
        }
        collected.put(space, offset, &bytes, n)?;
        previous = Some((offset, bytes));
    }
    assemble(collected, format)
}

fn assemble(collected: Collected, format: DumpFormat) -> Result<Dump, DumpError> {
    let mut memory = ModuleMemory::new();
    let mut lines = BTreeMap::new();
    for (space, bytes) in &collected.bytes {
        let values: BTreeMap<usize, u8> = bytes.iter().map(|(o, (b, _))| (*o, *b)).collect();
        let first_line = |start: usize| {
            bytes
                .range(start..start + HALF)
                .next()
                .map(|(_, (_, l))| *l)
        };
        match *space {
            Space::Linear => {
                let linear = ModuleMemory::from_linear(&values)?;
                for (i, (at, half)) in linear.halves().enumerate() {
                    memory.insert(at, *half);
                    if let Some(l) = first_line(i * HALF) {
                        lines.insert(at, l);
                    }
                }
            }
            Space::Page { i2c, bank, page } => {
                memory.insert_page_bytes(i2c, bank, page, &values)?;
                for (start, upper) in [(0, false), (HALF, true)] {
                    if let Some(l) = first_line(start) {
                        let at = HalfAddr {
                            i2c,
                            bank: if upper { bank } else { 0 },
                            page: if upper { page } else { 0 },
                            upper,
                        };
                        lines.insert(at, l);
                    }
                }
            }
            // `Collected::put` files an upper half under its page.
            Space::Upper { .. } => {}
        }
    }
    if memory.is_empty() {
        return Err(MemoryError::Empty.into());
    }
    Ok(Dump {
        memory,
        lines,
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ethtool_text(bytes: &[u8]) -> String {
        let mut out = String::from("Offset\t\tValues\n------\t\t------\n");
        for (i, chunk) in bytes.chunks(16).enumerate() {
            out.push_str(&format!("0x{:04x}:\t\t", i * 16));
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            out.push_str(&hex.join(" "));
            out.push('\n');
        }
        out
    }

    #[test]
    fn ethtool_hex_and_raw_agree() {
        let mut raw = vec![0u8; 256];
        raw[0] = 0x11;
        raw[148] = b'X';
        let text = parse(ethtool_text(&raw).as_bytes()).unwrap();
        let bin = parse(&raw).unwrap();
        assert_eq!(text.memory, bin.memory);
        assert_eq!(text.format, DumpFormat::EthtoolHex);
        assert_eq!(bin.format, DumpFormat::Raw);
        assert_eq!(text.lines[&HalfAddr::page(ADDR_A0, 0)], 11);
    }

    #[test]
    fn hexdump_repeats_star_lines() {
        let text = "00000000  11 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n\
                    00000010  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n\
                    *\n\
                    00000100\n";
        let dump = parse(text.as_bytes()).unwrap();
        assert_eq!(dump.format, DumpFormat::Hexdump);
        assert!(dump.memory.half(HalfAddr::page(ADDR_A0, 0)).is_some());
    }

    #[test]
    fn a_page_named_on_the_command_line() {
        let mut text = ethtool_text(&{
            let mut b = vec![0u8; 256];
            b[0] = 0x11;
            b
        });
        text.push_str("# ethtool -m eth0 page 3 offset 128 length 128 hex on\n");
        for i in 0..8 {
            text.push_str(&format!(
                "0x{:04x}:\t\t{}\n",
                128 + i * 16,
                ["4b"; 16].join(" ")
            ));
        }
        let dump = parse(text.as_bytes()).unwrap();
        assert_eq!(
            dump.memory.half(HalfAddr::page(ADDR_A0, 3)).unwrap()[0],
            0x4b
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(parse(b"").is_err());
        assert!(parse(b"0x9999: 00 11\n").is_err());
        assert!(parse(b"hello\nworld\n").is_err());
    }
}
