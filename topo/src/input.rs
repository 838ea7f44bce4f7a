//! Reading what a user hands a command (a topology, a journal, a config file, a name map,
//! thresholds, a plan, host documents, NCCL output, module dumps, `-` for standard input):
//! every such read goes through here, so that none can run without end or take the
//! machine's memory. A read is capped at [`limit`] bytes (`--max-input` raises it), text
//! with a NUL byte is refused at the first chunk that holds one (`/dev/zero`, a binary file
//! given by mistake), and a directory is refused before it is opened for reading.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The cap when none is set: larger than any topology, journal or log ibscope has met
/// (a JSON snapshot of 100,000 HCAs is about 200 MB), small enough to fail fast.
pub const DEFAULT_LIMIT: u64 = 1 << 30;

/// The flag that raises the cap, named in the error that reaches it.
pub const LIMIT_FLAG: &str = "--max-input";

static LIMIT: AtomicU64 = AtomicU64::new(DEFAULT_LIMIT);

/// How much at most any input may hold, in bytes.
pub fn limit() -> u64 {
    LIMIT.load(Ordering::Relaxed)
}

/// Sets the cap for the whole process (the binary does, from `--max-input`).
pub fn set_limit(bytes: u64) {
    LIMIT.store(bytes.max(1), Ordering::Relaxed);
}

/// Why an input could not be read. Each reads as one line naming what and which input.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{what} {name}: no such file")]
    Missing { what: String, name: String },
    #[error("{what} {name} is a directory, not a file")]
    Directory { what: String, name: String },
    #[error("{what} {name}: {source}")]
    Io {
        what: String,
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{what} {name} is larger than {} (the input limit; {LIMIT_FLAG} SIZE raises it)",
        size_text(*limit)
    )]
    TooLarge {
        what: String,
        name: String,
        limit: u64,
    },
    #[error("{what} {name} is binary data (a NUL byte at offset {offset}), not text")]
    Binary {
        what: String,
        name: String,
        offset: u64,
    },
    #[error("{what} {name} is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        what: String,
        name: String,
        offset: u64,
    },
}

/// How a path given on the command line reads in messages: `-` is standard input.
pub fn display_name(path: &Path) -> String {
    if is_stdin(path) {
        "(standard input)".to_string()
    } else {
        path.display().to_string()
    }
}

/// `-` stands for standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Reads `path` (or standard input for `-`) as UTF-8 text, refusing a directory, a NUL
/// byte and anything past the cap. `what` names the input in errors ("topology file").
pub fn read_text(path: &Path, what: &str) -> Result<String, InputError> {
    let bytes = read(path, what, true)?;
    String::from_utf8(bytes).map_err(|e| InputError::NotUtf8 {
        what: what.to_string(),
        name: display_name(path),
        offset: e.utf8_error().valid_up_to() as u64,
    })
}

/// [`read_text`] for formats whose reference tool takes any bytes (a node name map read
/// as rdma-core reads it): a NUL is still refused, bytes that are not UTF-8 are replaced.
pub fn read_text_lossy(path: &Path, what: &str) -> Result<String, InputError> {
    let bytes = read(path, what, true)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Reads `path` (or standard input for `-`) as bytes, refusing a directory and anything
/// past the cap (module dumps and other binary inputs).
pub fn read_bytes(path: &Path, what: &str) -> Result<Vec<u8>, InputError> {
    read(path, what, false)
}

/// Reads any reader as text under the same rules (a child's output, a test's bytes).
pub fn read_text_from(reader: impl Read, name: &str, what: &str) -> Result<String, InputError> {
    let bytes = read_capped(reader, name, what, true)?;
    String::from_utf8(bytes).map_err(|e| InputError::NotUtf8 {
        what: what.to_string(),
        name: name.to_string(),
        offset: e.utf8_error().valid_up_to() as u64,
    })
}

fn read(path: &Path, what: &str, text: bool) -> Result<Vec<u8>, InputError> {
    let name = display_name(path);
    if is_stdin(path) {
        return read_capped(std::io::stdin().lock(), &name, what, text);
    }
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => InputError::Missing {
            what: what.to_string(),
            name: name.clone(),
        },
        _ => InputError::Io {
            what: what.to_string(),
            name: name.clone(),
            source,
        },
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(InputError::Directory {
            what: what.to_string(),
            name,
        });
    }
    if meta.is_file() && meta.len() > limit() {
        return Err(InputError::TooLarge {
            what: what.to_string(),
            name,
            limit: limit(),
        });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    read_capped(file, &name, what, text)
}

fn read_capped(
    mut reader: impl Read,
    name: &str,
    what: &str,
    text: bool,
) -> Result<Vec<u8>, InputError> {
    let cap = limit();
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(InputError::Io {
                    what: what.to_string(),
                    name: name.to_string(),
                    source,
                })
            }
        };
        let got = &chunk[..n];
        if text {
            if let Some(at) = got.iter().position(|&b| b == 0) {
                return Err(InputError::Binary {
                    what: what.to_string(),
                    name: name.to_string(),
                    offset: (out.len() + at) as u64,
                });
            }
        }
        if (out.len() + n) as u64 > cap {
            return Err(InputError::TooLarge {
                what: what.to_string(),
                name: name.to_string(),
                limit: cap,
            });
        }
        out.extend_from_slice(got);
    }
}

/// A size as `--max-input` takes it: bytes, or with K, M, G (powers of 1024; `KiB`, `MB`
/// and the like read the same).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (bytes, or a number with K, M or G)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => {
            return Err(format!(
                "{text:?} is not a size (bytes, or a number with K, M or G)"
            ))
        }
    };
    number
        .checked_mul(1 << shift)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{text:?} is not a size between 1 byte and 16 EiB"))
}

/// A size for messages: the largest unit that divides it, else bytes.
pub fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_is_refused_at_the_first_chunk() {
        let zeros = std::io::repeat(0).take(u64::MAX);
        let err = read_text_from(zeros, "/dev/zero", "journal").unwrap_err();
        assert_eq!(
            err.to_string(),
            "journal /dev/zero is binary data (a NUL byte at offset 0), not text"
        );
    }

    #[test]
    fn text_past_the_cap_is_refused() {
        // A stream of text with no end, as a FIFO can give: the cap stops it.
        let endless = std::io::repeat(b'a');
        let err = read_capped(endless, "fifo", "topology file", true).unwrap_err();
        assert!(matches!(err, InputError::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("--max-input"), "{err}");
    }

    #[test]
    fn missing_directory_and_invalid_text_read_as_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = read_text(&missing, "plan").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("plan {}: no such file", missing.display())
        );
        let err = read_text(dir.path(), "plan").unwrap_err();
        assert!(
            err.to_string().ends_with("is a directory, not a file"),
            "{err}"
        );
        let latin1 = dir.path().join("latin1");
        std::fs::write(&latin1, b"caf\xe9\n").unwrap();
        let err = read_text(&latin1, "plan").unwrap_err();
        assert!(err.to_string().contains("offset 3"), "{err}");
        assert_eq!(read_bytes(&latin1, "dump").unwrap(), b"caf\xe9\n");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("300MiB"), Ok(300 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("1T").is_err());
        assert!(parse_size("lots").is_err());
        assert_eq!(size_text(1 << 30), "1 GiB");
        assert_eq!(size_text(1000), "1000 bytes");
    }
}
