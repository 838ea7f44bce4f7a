//! A sample's compact JSON, byte for byte what `serde_json::to_writer` makes of it, written
//! without serde for the counter maps.
//!
//! The maps are two thirds of a sweep's JSON (at 100k HCAs, 564 MiB): through serde every
//! counter is six small writes and a byte-by-byte escape check of its name. Here a name
//! that needs no escaping (every name of the PMA tables) is copied as it is, and numbers
//! go straight into one buffer. Everything whose form serde owns (node references, the
//! lists of strings, any name that does need escaping) still goes through serde_json, so
//! the two cannot drift apart there; the test at the end compares them on awkward input.

use std::io::{self, Write};

use super::sample::{CounterSet, PortSample, Sample};

/// The buffer is handed to the writer once it holds this much.
const FLUSH_AT: usize = 64 << 10;

/// Write `sample` as one compact JSON object, `head`'s fields first (a document's
/// `schema_version` and `fabric`), as `serde_json::to_writer` would write a struct holding
/// `head`'s fields and the sample flattened. No newline after it.
pub fn write_compact<W: Write + ?Sized>(
    out: &mut W,
    head: &[(&str, serde_json::Value)],
    sample: &Sample,
) -> io::Result<()> {
    // Every field named, so that a field added to `Sample` fails to build here.
    let Sample {
        time_ms,
        duration_ms,
        mads_sent,
        data_unit,
        ports,
    } = sample;
    let mut buf = Vec::with_capacity(FLUSH_AT + (FLUSH_AT >> 2));
    buf.push(b'{');
    for (key, value) in head {
        serde_json::to_writer(&mut buf, key)?;
        buf.push(b':');
        serde_json::to_writer(&mut buf, value)?;
        buf.push(b',');
    }
    field(&mut buf, "time_ms");
    number(&mut buf, *time_ms);
    buf.push(b',');
    field(&mut buf, "duration_ms");
    number(&mut buf, *duration_ms);
    buf.push(b',');
    field(&mut buf, "mads_sent");
    number(&mut buf, *mads_sent);
    buf.push(b',');
    field(&mut buf, "data_unit");
    serde_json::to_writer(&mut buf, data_unit)?;
    buf.push(b',');
    field(&mut buf, "ports");
    buf.push(b'[');
    for (i, port) in ports.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_port(&mut buf, port)?;
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    buf.extend_from_slice(b"]}");
    out.write_all(&buf)
}

/// One port: its own reference's fields (flattened), then the rest in declaration order.
fn write_port(buf: &mut Vec<u8>, port: &PortSample) -> io::Result<()> {
    let PortSample {
        at,
        remote,
        capability_mask,
        capability_mask2,
        counters,
        extended,
        saturated,
        details,
        errors,
    } = port;
    serde_json::to_writer(&mut *buf, at)?;
    // Flattened: the reference's object without its closing brace.
    if buf.pop() != Some(b'}') {
        return Err(io::Error::other("a port reference is not a JSON object"));
    }
    buf.extend_from_slice(b",\"remote\":");
    serde_json::to_writer(&mut *buf, remote)?;
    buf.extend_from_slice(b",\"capability_mask\":");
    match capability_mask {
        Some(mask) => number(buf, u64::from(*mask)),
        None => buf.extend_from_slice(b"null"),
    }
    if let Some(mask2) = capability_mask2 {
        buf.extend_from_slice(b",\"capability_mask2\":");
        number(buf, u64::from(*mask2));
    }
    buf.extend_from_slice(b",\"counters\":");
    optional_counters(buf, counters.as_ref())?;
    buf.extend_from_slice(b",\"extended\":");
    optional_counters(buf, extended.as_ref())?;
    buf.extend_from_slice(b",\"saturated\":");
    serde_json::to_writer(&mut *buf, saturated)?;
    if !details.is_empty() {
        buf.extend_from_slice(b",\"details\":{");
        for (i, (attribute, set)) in details.0.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            key(buf, attribute)?;
            counter_set(buf, set)?;
        }
        buf.push(b'}');
    }
    buf.extend_from_slice(b",\"errors\":");
    serde_json::to_writer(&mut *buf, errors)?;
    buf.push(b'}');
    Ok(())
}

fn optional_counters(buf: &mut Vec<u8>, set: Option<&CounterSet>) -> io::Result<()> {
    match set {
        Some(set) => counter_set(buf, set),
        None => {
            buf.extend_from_slice(b"null");
            Ok(())
        }
    }
}

/// As `CounterSet`'s `Serialize`: name to value, a saturated one as
/// `{"value":N,"saturated":true}`.
fn counter_set(buf: &mut Vec<u8>, set: &CounterSet) -> io::Result<()> {
    buf.push(b'{');
    for (i, reading) in set.0.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        key(buf, &reading.name)?;
        if reading.saturated {
            buf.extend_from_slice(b"{\"value\":");
            number(buf, reading.value);
            buf.extend_from_slice(b",\"saturated\":true}");
        } else {
            number(buf, reading.value);
        }
    }
    buf.push(b'}');
    Ok(())
}

/// `"name":`, escaped as serde_json escapes it.
fn key(buf: &mut Vec<u8>, name: &str) -> io::Result<()> {
    if needs_escape(name) {
        serde_json::to_writer(&mut *buf, name)?;
        buf.push(b':');
    } else {
        field(buf, name);
    }
    Ok(())
}

/// `"name":` for a name known to need no escaping.
fn field(buf: &mut Vec<u8>, name: &str) {
    buf.push(b'"');
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\":");
}

/// What serde_json escapes in a string: `"`, `\` and control characters. Folded without
/// an early exit, so that it compiles to a few vector instructions for a short name.
fn needs_escape(text: &str) -> bool {
    text.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

fn number(buf: &mut Vec<u8>, value: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::sample::{Details, Reading};
    use crate::model::refs::{NodeRef, PortRef};
    use crate::model::NodeKind;
    use ibscope_mad::attr::CounterName;

    fn port_ref(name: &str, host: Option<&str>, rail: Option<u8>) -> PortRef {
        PortRef {
            node: NodeRef {
                guid: 0x0002_c903_00ab_cdef,
                kind: NodeKind::Ca,
                name: name.into(),
            },
            port: 1,
            lid: 0xbfff,
            host: host.map(Into::into),
            rail,
        }
    }

    fn set(readings: &[(&str, u64, bool)]) -> CounterSet {
        CounterSet(
            readings
                .iter()
                .map(|&(name, value, saturated)| Reading {
                    name: CounterName::intern(name),
                    value,
                    saturated,
                })
                .collect(),
        )
    }

    /// Every shape a port takes, with names that need escaping where names come from the
    /// fabric or from files.
    fn awkward_sample() -> Sample {
        let full = PortSample {
            capability_mask: Some(0x1300),
            capability_mask2: Some(0x2),
            counters: Some(set(&[
                ("SymbolErrorCounter", 65535, true),
                ("PortXmitData", u64::from(u32::MAX) * 4, false),
                ("VL15Dropped", 0, false),
            ])),
            extended: Some(set(&[("PortXmitData", u64::MAX, false)])),
            saturated: vec!["SymbolErrorCounter".into(), "a \"quoted\"\nname".into()],
            details: Details(vec![
                (
                    "PortRcvErrorDetails".into(),
                    set(&[("PortLocalPhysicalErrors", 3, false)]),
                ),
                (
                    "Odd\u{1b}[31m\"attr\\".into(),
                    set(&[("odd\tname\u{7f}é", 1, true), ("back\\slash", 2, false)]),
                ),
            ]),
            errors: vec!["PortCounters: timeout after 4 attempts".into()],
            ..PortSample::new(
                port_ref(
                    "gpu-node-07 mlx5_0 \"HCA\"\u{1b}[2J\\",
                    Some("gpu-node-07"),
                    Some(3),
                ),
                Some(port_ref("leaf\u{0}01 ☃", None, None)),
            )
        };
        let bare = PortSample::new(port_ref("", None, None), None);
        let empty_sets = PortSample {
            counters: Some(CounterSet::default()),
            extended: None,
            capability_mask: None,
            ..PortSample::new(port_ref("x", None, Some(0)), None)
        };
        Sample {
            time_ms: 1_764_806_400_123,
            duration_ms: 0,
            mads_sent: 31_548,
            data_unit: "bytes".into(),
            ports: vec![full, bare, empty_sets],
        }
    }

    #[test]
    fn writes_what_serde_json_writes() {
        let sample = awkward_sample();
        let mut fast = Vec::new();
        write_compact(&mut fast, &[], &sample).unwrap();
        let serde = serde_json::to_vec(&sample).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&serde)
        );
    }

    #[test]
    fn head_fields_come_first_as_a_flattened_struct_writes_them() {
        #[derive(serde::Serialize)]
        struct Labelled<'a> {
            schema_version: u32,
            fabric: &'a str,
            #[serde(flatten)]
            sample: &'a Sample,
        }
        let sample = awkward_sample();
        let fabric = "plane \"a\"";
        let head = [
            ("schema_version", serde_json::json!(3)),
            ("fabric", serde_json::json!(fabric)),
        ];
        let mut fast = Vec::new();
        write_compact(&mut fast, &head, &sample).unwrap();
        let serde = serde_json::to_vec(&Labelled {
            schema_version: 3,
            fabric,
            sample: &sample,
        })
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&serde)
        );
    }

    #[test]
    fn a_long_sample_reaches_the_writer_in_pieces_that_add_up() {
        // Enough ports to pass the flush size several times.
        let mut sample = awkward_sample();
        let port = sample.ports[0].clone();
        sample.ports = vec![port; 2000];
        struct Pieces(Vec<u8>, usize);
        impl Write for Pieces {
            fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
                self.0.extend_from_slice(bytes);
                self.1 += 1;
                Ok(bytes.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = Pieces(Vec::new(), 0);
        write_compact(&mut out, &[], &sample).unwrap();
        assert!(out.1 > 3, "{} writes", out.1);
        assert_eq!(out.0, serde_json::to_vec(&sample).unwrap());
    }

    #[test]
    fn escaping_is_judged_as_serde_json_judges_it() {
        for text in [
            "PortXmitData",
            "",
            "é☃\u{7f}",
            "a\"b",
            "a\\b",
            "a\u{1f}b",
            "\u{0}",
        ] {
            let plain = serde_json::to_string(text).unwrap() == format!("\"{text}\"");
            assert_eq!(needs_escape(text), !plain, "{text:?}");
        }
    }
}
