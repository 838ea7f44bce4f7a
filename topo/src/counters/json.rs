//! A sample's JSON, byte for byte what `serde_json::to_writer` (or `to_writer_pretty`) makes
//! of it, written without serde.
//!
//! A sweep's JSON is large (at 100k HCAs, 564 MiB): through serde every counter is six
//! small writes and a byte-by-byte escape check of its name, and every port reference a
//! document of its own spliced in. Here a counter name of the PMA tables (which needs no
//! escaping) and the fixed keys are copied as they are, and numbers and GUIDs go straight
//! into one buffer. A string that does need escaping (a node name, a host, an error, a name
//! read back from a file) and the caller's head fields go through serde_json, so escaping
//! cannot drift from it; the tests compare the two on awkward input, pretty and compact.

use std::io::{self, Write};

use serde::Serialize;

use ibscope_mad::attr::CounterName;
use ibscope_mad::codes::guid;

use super::sample::{CounterSet, PortSample, Sample};
use crate::model::refs::{NodeRef, PortRef};

/// The buffer is handed to the writer once it holds this much.
const FLUSH_AT: usize = 64 << 10;

/// Write `sample` as one JSON object, `head`'s fields first (a document's `schema_version`
/// and `fabric`): what `serde_json::to_writer` (or, `pretty`, `to_writer_pretty`) writes of
/// a struct holding `head`'s fields and the sample flattened. No newline after it.
pub fn write_sample<W: Write + ?Sized>(
    out: &mut W,
    head: &[(&str, serde_json::Value)],
    sample: &Sample,
    pretty: bool,
) -> io::Result<()> {
    // Every field named, so that a field added to `Sample` fails to build here.
    let Sample {
        time_ms,
        duration_ms,
        mads_sent,
        data_unit,
        ports,
    } = sample;
    let mut e = Emitter {
        buf: Vec::with_capacity(FLUSH_AT + (FLUSH_AT >> 2)),
        pretty,
        depth: 0,
        first: true,
    };
    e.open(b'{');
    for (key, value) in head {
        e.key(key)?;
        e.serde(value)?;
    }
    e.plain_key("time_ms");
    e.number(*time_ms);
    e.plain_key("duration_ms");
    e.number(*duration_ms);
    e.plain_key("mads_sent");
    e.number(*mads_sent);
    e.plain_key("data_unit");
    e.serde(data_unit)?;
    e.plain_key("ports");
    e.open(b'[');
    for port in ports {
        e.item();
        e.port(port)?;
        if e.buf.len() >= FLUSH_AT {
            out.write_all(&e.buf)?;
            e.buf.clear();
        }
    }
    e.close(b']');
    e.close(b'}');
    out.write_all(&e.buf)
}

/// JSON into a buffer the way serde_json's compact or pretty formatter lays it out (two
/// spaces a level, `": "` after a key, `{}` and `[]` when empty).
struct Emitter {
    buf: Vec<u8>,
    pretty: bool,
    /// Containers open.
    depth: usize,
    /// Nothing written yet in the innermost open container.
    first: bool,
}

impl Emitter {
    fn open(&mut self, bracket: u8) {
        self.buf.push(bracket);
        self.depth += 1;
        self.first = true;
    }

    fn close(&mut self, bracket: u8) {
        self.depth -= 1;
        if !self.first {
            self.newline(self.depth);
        }
        self.buf.push(bracket);
        self.first = false;
    }

    fn newline(&mut self, depth: usize) {
        if self.pretty {
            self.buf.push(b'\n');
            for _ in 0..depth {
                self.buf.extend_from_slice(b"  ");
            }
        }
    }

    /// The start of the next array element or object member.
    fn item(&mut self) {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
        self.newline(self.depth);
    }

    /// `"name":`, escaped as serde_json escapes it.
    fn key(&mut self, name: &str) -> io::Result<()> {
        self.item();
        self.string(name)?;
        self.buf.push(b':');
        if self.pretty {
            self.buf.push(b' ');
        }
        Ok(())
    }

    /// `"name":` for a name known to need no escaping.
    fn plain_key(&mut self, name: &str) {
        self.item();
        self.buf.push(b'"');
        self.buf.extend_from_slice(name.as_bytes());
        self.buf
            .extend_from_slice(if self.pretty { b"\": " } else { b"\":" });
    }

    fn number(&mut self, value: u64) {
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn null(&mut self) {
        self.buf.extend_from_slice(b"null");
    }

    /// A value whose form serde owns, at the current place.
    fn serde(&mut self, value: &impl Serialize) -> io::Result<()> {
        if !self.pretty {
            return Ok(serde_json::to_writer(&mut self.buf, value)?);
        }
        let text = serde_json::to_vec_pretty(value)?;
        self.indented(&text, self.depth);
        Ok(())
    }

    /// `text` with `depth` levels more indentation after each newline (a string's own
    /// newlines are escaped, so every newline is the layout's).
    fn indented(&mut self, text: &[u8], depth: usize) {
        let mut lines = text.split(|&b| b == b'\n');
        if let Some(line) = lines.next() {
            self.buf.extend_from_slice(line);
        }
        for line in lines {
            self.newline(depth);
            self.buf.extend_from_slice(line);
        }
    }

    /// One port: its own reference's fields (flattened), then the rest in declaration
    /// order.
    fn port(&mut self, port: &PortSample) -> io::Result<()> {
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
        self.open(b'{');
        self.port_ref_members(at)?;
        self.plain_key("remote");
        match remote {
            Some(remote) => {
                self.open(b'{');
                self.port_ref_members(remote)?;
                self.close(b'}');
            }
            None => self.null(),
        }
        self.plain_key("capability_mask");
        match capability_mask {
            Some(mask) => self.number(u64::from(*mask)),
            None => self.null(),
        }
        if let Some(mask2) = capability_mask2 {
            self.plain_key("capability_mask2");
            self.number(u64::from(*mask2));
        }
        self.plain_key("counters");
        self.optional_counters(counters.as_ref())?;
        self.plain_key("extended");
        self.optional_counters(extended.as_ref())?;
        self.plain_key("saturated");
        self.strings(saturated)?;
        if !details.is_empty() {
            self.plain_key("details");
            self.open(b'{');
            for (attribute, set) in &details.0 {
                self.key(attribute)?;
                self.counter_set(set)?;
            }
            self.close(b'}');
        }
        self.plain_key("errors");
        self.strings(errors)?;
        self.close(b'}');
        Ok(())
    }

    /// A port reference's flat record (`port_ref`), as members of the object open here:
    /// what [`PortRef`]'s `Serialize` writes, without a document per reference.
    fn port_ref_members(&mut self, port: &PortRef) -> io::Result<()> {
        // Every field named, so that a field added to `PortRef` fails to build here.
        let PortRef {
            node: NodeRef { guid, kind, name },
            port,
            lid,
            host,
            rail,
        } = port;
        self.plain_key("node");
        self.string(name)?;
        self.plain_key("node_guid");
        self.buf.push(b'"');
        let mut text = [0; 18];
        self.buf
            .extend_from_slice(guid::text_in(*guid, &mut text).as_bytes());
        self.buf.push(b'"');
        self.plain_key("kind");
        self.string(kind.as_str())?;
        self.plain_key("port");
        self.number(u64::from(*port));
        self.plain_key("lid");
        self.number(u64::from(*lid));
        if let Some(host) = host {
            self.plain_key("host");
            self.string(host)?;
        }
        if let Some(rail) = rail {
            self.plain_key("rail");
            self.number(u64::from(*rail));
        }
        Ok(())
    }

    /// A list of strings.
    fn strings(&mut self, list: &[String]) -> io::Result<()> {
        self.open(b'[');
        for text in list {
            self.item();
            self.string(text)?;
        }
        self.close(b']');
        Ok(())
    }

    /// A string value, escaped as serde_json escapes it.
    fn string(&mut self, text: &str) -> io::Result<()> {
        if needs_escape(text) {
            serde_json::to_writer(&mut self.buf, text)?;
        } else {
            self.buf.push(b'"');
            self.buf.extend_from_slice(text.as_bytes());
            self.buf.push(b'"');
        }
        Ok(())
    }

    fn optional_counters(&mut self, set: Option<&CounterSet>) -> io::Result<()> {
        match set {
            Some(set) => self.counter_set(set),
            None => {
                self.null();
                Ok(())
            }
        }
    }

    /// As `CounterSet`'s `Serialize`: name to value, a saturated one as
    /// `{"value":N,"saturated":true}`.
    fn counter_set(&mut self, set: &CounterSet) -> io::Result<()> {
        self.open(b'{');
        let keys = table_keys();
        for reading in set.readings() {
            match reading.name.table_row() {
                Some(row) => {
                    self.item();
                    self.buf.extend_from_slice(&keys[row]);
                    if self.pretty {
                        self.buf.push(b' ');
                    }
                }
                None => self.key(&reading.name)?,
            }
            if reading.saturated {
                self.open(b'{');
                self.plain_key("value");
                self.number(reading.value);
                self.plain_key("saturated");
                self.buf.extend_from_slice(b"true");
                self.close(b'}');
            } else {
                self.number(reading.value);
            }
        }
        self.close(b'}');
        Ok(())
    }
}

/// `"Name":` for every counter name of the PMA tables (which need no escaping), by
/// [`CounterName::table_row`]: one copy per counter instead of three.
fn table_keys() -> &'static [Box<[u8]>] {
    static KEYS: std::sync::OnceLock<Vec<Box<[u8]>>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        CounterName::table_names()
            .map(|name| format!("\"{name}\":").into_bytes().into_boxed_slice())
            .collect()
    })
}

/// What serde_json escapes in a string: `"`, `\` and control characters. Folded without
/// an early exit, so that it compiles to a few vector instructions for a short name.
fn needs_escape(text: &str) -> bool {
    text.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
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
        CounterSet::from_readings(
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
        let remote_on_a_host = PortSample::new(
            port_ref("sw", None, None),
            Some(port_ref("gpu \"7\"", Some("gpu\\7"), Some(7))),
        );
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
            ports: vec![full, bare, empty_sets, remote_on_a_host],
        }
    }

    fn by_serde(value: &impl Serialize, pretty: bool) -> String {
        if pretty {
            serde_json::to_string_pretty(value).unwrap()
        } else {
            serde_json::to_string(value).unwrap()
        }
    }

    fn by_writer(head: &[(&str, serde_json::Value)], sample: &Sample, pretty: bool) -> String {
        let mut out = Vec::new();
        write_sample(&mut out, head, sample, pretty).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_what_serde_json_writes() {
        let sample = awkward_sample();
        let empty = Sample {
            ports: Vec::new(),
            ..sample.clone()
        };
        for s in [&sample, &empty] {
            for pretty in [false, true] {
                assert_eq!(
                    by_writer(&[], s, pretty),
                    by_serde(s, pretty),
                    "pretty {pretty}"
                );
            }
        }
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
        let labelled = Labelled {
            schema_version: 3,
            fabric,
            sample: &sample,
        };
        for pretty in [false, true] {
            assert_eq!(
                by_writer(&head, &sample, pretty),
                by_serde(&labelled, pretty)
            );
        }
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
        write_sample(&mut out, &[], &sample, false).unwrap();
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
