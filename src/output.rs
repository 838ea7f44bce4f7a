//! Output helpers shared by commands: number parsing, generic field printing, and the
//! one place where fabric strings are made safe for a terminal.

use std::sync::atomic::{AtomicU8, Ordering};

use anyhow::{bail, Result};
use serde_json::Value;

/// The worst exit code the command has reached so far (see [`verdict`]).
static VERDICT: AtomicU8 = AtomicU8::new(crate::cli::exit::OK);

/// Records `code`, the exit code a command has reached, before it prints what led to it:
/// when the reader of stdout goes away while it prints (`ibscope diff a b | head -1`),
/// the process still ends with the worst code recorded, not 0. Returns `code`.
pub fn verdict(code: u8) -> u8 {
    VERDICT.fetch_max(code, Ordering::Relaxed);
    code
}

/// The worst code [`verdict`] recorded: the exit code of a command whose stdout was
/// closed under it.
pub fn verdict_so_far() -> u8 {
    VERDICT.load(Ordering::Relaxed)
}

/// A reader that stopped reading (`ibscope links | head -1`) is not an error: the command
/// has nothing left to say to it. Rust ignores SIGPIPE, so a write to a closed pipe fails
/// with EPIPE; `println!` turns that into a panic. This hook ends the process quietly
/// there, with the exit code the command had reached ([`verdict`]), and leaves every
/// other panic to the previous hook.
pub fn exit_quietly_on_closed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(i32::from(verdict_so_far()));
        }
        previous(info);
    }));
}

/// A text table: columns padded to their widest cell, two spaces apart. A row with fewer
/// cells than the widest (`host`'s GID and error lines) runs free after its first.
pub fn write_columns<R: AsRef<[String]>>(
    out: &mut impl std::io::Write,
    rows: &[R],
) -> std::io::Result<()> {
    let columns = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    for row in rows
        .iter()
        .map(AsRef::as_ref)
        .filter(|r| r.len() == columns)
    {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows.iter().map(AsRef::as_ref) {
        let line: Vec<String> = if row.len() == columns {
            row.iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect()
        } else {
            vec![format!("{:<w$}", row[0], w = widths[0]), row[1..].join(" ")]
        };
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}

/// Whether an error (anywhere in its chain) is a write to a closed pipe.
pub fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// A command's JSON output: `value` (an object) with `schema_version` first, the version
/// every ibscope JSON document shares (the snapshot's; schemas in docs/json/).
pub fn json_document<T: serde::Serialize>(value: &T) -> Result<Value> {
    let Value::Object(fields) = serde_json::to_value(value)? else {
        bail!("internal error: a JSON output must be an object");
    };
    let mut doc = serde_json::Map::with_capacity(fields.len() + 1);
    doc.insert(
        "schema_version".into(),
        Value::from(ibscope_topo::model::SCHEMA_VERSION),
    );
    doc.extend(fields.into_iter().filter(|(k, _)| k != "schema_version"));
    Ok(Value::Object(doc))
}

/// Print [`json_document`] of `value`, pretty.
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(&json_document(value)?)?);
    Ok(())
}

/// Print the document of a command about one fabric: [`json_document`] of `value` with
/// the fabric, when it is known by a name, second, in the shape every document gives it
/// (common.schema.json's fabric_id).
pub fn print_fabric_json<T: serde::Serialize>(
    fabric: Option<&ibscope_topo::FabricId>,
    value: &T,
) -> Result<()> {
    let Value::Object(fields) = json_document(value)? else {
        bail!("internal error: a JSON output must be an object");
    };
    let mut doc = serde_json::Map::with_capacity(fields.len() + 1);
    let mut fields = fields.into_iter();
    doc.extend(fields.next());
    if let Some(fabric) = fabric {
        doc.insert("fabric".into(), serde_json::to_value(fabric)?);
    }
    doc.extend(fields.filter(|(k, _)| k != "fabric"));
    println!("{}", serde_json::to_string_pretty(&Value::Object(doc))?);
    Ok(())
}

/// Parse a LID in decimal or 0x-hex; unicast LIDs are 1..=0xbfff.
pub fn parse_lid(text: &str) -> Result<u16> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u16::from_str_radix(hex, 16),
        None => t.parse::<u16>(),
    };
    match parsed {
        Ok(l) if (1..=0xbfff).contains(&l) => Ok(l),
        Ok(l) => bail!("LID {l} is not a unicast LID (1-49151)"),
        Err(_) => {
            bail!("{text:?} is not a LID (decimal or 0x-hex) or a directed route (e.g. 0,1,3)")
        }
    }
}

/// Parse a GUID in 0x-hex (or bare hex).
pub fn parse_guid(text: &str) -> Option<u64> {
    let t = text.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(hex, 16).ok()
}

/// Print a JSON object as aligned `name: value` lines; nested objects are indented.
/// Strings pass through the terminal sanitizer: they may come from the fabric.
pub fn print_fields(value: &Value, indent: usize) {
    let Value::Object(map) = value else {
        println!("{:indent$}{}", "", scalar(value));
        return;
    };
    let width = map.keys().map(|k| k.len()).max().unwrap_or(0) + 1;
    for (k, v) in map {
        match v {
            Value::Object(_) => {
                println!("{:indent$}{k}:", "");
                print_fields(v, indent + 2);
            }
            _ => println!("{:indent$}{:width$} {}", "", format!("{k}:"), scalar(v)),
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => ibscope_topo::escape::for_terminal(s),
        Value::Null => "-".into(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Number(n) => match n.as_u64() {
            Some(u) if u > 0xffff_ffff => format!("{u:#018x}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lids() {
        assert_eq!(parse_lid("5").unwrap(), 5);
        assert_eq!(parse_lid("0x1f").unwrap(), 31);
        assert!(parse_lid("0").is_err());
        assert!(parse_lid("0xc000").is_err());
        assert!(parse_lid("abc").is_err());
    }

    #[test]
    fn guids() {
        assert_eq!(parse_guid("0x0002c903000e0b72"), Some(0x0002c903000e0b72));
        assert_eq!(parse_guid("zz"), None);
    }
}
