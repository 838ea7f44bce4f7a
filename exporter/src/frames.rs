//! What a sweeper process tells `serve`, over a pipe: one JSON line per message, and for
//! a family of a page its compressed samples right after it, for a fabric its snapshot.
//! A page is its families one frame each, then a frame that ends it: the page's text is
//! never held whole on either side.

use std::io::{self, BufRead, Write};

use ibscope_topo::FabricId;
use serde::{Deserialize, Serialize};

use crate::pieces::Deflated;

/// One message of the sweeper process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The management port is open (`port`: "CA/port", or the relay's command); `id` is
    /// the fabric's name and, with several fabrics, its subnet identity.
    Opened { port: String, id: FabricId },
    /// A family of a sweep's page: its name, head (HELP and TYPE lines) and samples.
    Family {
        name: String,
        head: String,
        samples: Deflated,
    },
    /// A family of a sweep's page exactly as on the last page this process sent: its
    /// head and samples are not sent again.
    Unchanged { name: String },
    /// The families sent since the last page are a sweep's page; `failure` when the sweep
    /// reached no port.
    Page { failure: Option<String> },
    /// With several fabrics, after each discovery: the fabric as discovered (the JSON
    /// snapshot), for the findings only fabrics seen together show (planes).
    Fabric { snapshot: String },
    /// The transport was lost: the process ends.
    Lost { error: String },
    /// The port could not be opened: the process ends.
    Failed { error: String },
    /// Asked to stop, the process has closed the port and is about to exit.
    Closed,
}

/// The JSON line before each frame's bytes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Head {
    Opened {
        port: String,
        id: FabricId,
    },
    Family {
        name: String,
        head: String,
        /// Bytes of deflate that follow, and the CRC-32 and length of their text.
        samples: usize,
        crc: u32,
        len: u64,
    },
    Unchanged {
        name: String,
    },
    Page {
        failure: Option<String>,
    },
    Fabric {
        snapshot: usize,
    },
    Lost {
        error: String,
    },
    Failed {
        error: String,
    },
    Closed,
}

/// A text or a family's compressed samples larger than this is refused: the largest
/// family of a 100,000-HCA fabric's page is about 100 MB of text, 7 MB compressed.
const MAX_BYTES: usize = 1 << 32;

/// Deflate makes at most about 1,032 bytes of text of one byte: a family whose length says
/// more is not what a sweeper sends.
const MAX_INFLATION: u64 = 1032;

/// Write a family of a page as a [`Frame::Family`] would be, without owning it.
pub fn write_family(
    w: &mut impl Write,
    name: &str,
    head: &str,
    samples: &Deflated,
) -> io::Result<()> {
    let frame_head = Head::Family {
        name: name.to_string(),
        head: head.to_string(),
        samples: samples.bytes().len(),
        crc: samples.crc(),
        len: samples.text_len(),
    };
    serde_json::to_writer(&mut *w, &frame_head)?;
    w.write_all(b"\n")?;
    w.write_all(samples.bytes())?;
    w.flush()
}

/// Write a family of a page as a sweeper sends it: by its name when its piece is the one
/// of the last page (`as_before`, `serve` holds it), else whole.
pub fn write_page_family(
    w: &mut impl Write,
    name: &str,
    head: &str,
    samples: &Deflated,
    as_before: bool,
) -> io::Result<()> {
    match as_before {
        true => write(
            w,
            &Frame::Unchanged {
                name: name.to_string(),
            },
        ),
        false => write_family(w, name, head, samples),
    }
}

pub fn write(w: &mut impl Write, frame: &Frame) -> io::Result<()> {
    let head = match frame {
        Frame::Opened { port, id } => Head::Opened {
            port: port.clone(),
            id: id.clone(),
        },
        Frame::Family {
            name,
            head,
            samples,
        } => return write_family(w, name, head, samples),
        Frame::Unchanged { name } => Head::Unchanged { name: name.clone() },
        Frame::Page { failure } => Head::Page {
            failure: failure.clone(),
        },
        Frame::Fabric { snapshot } => Head::Fabric {
            snapshot: snapshot.len(),
        },
        Frame::Lost { error } => Head::Lost {
            error: error.clone(),
        },
        Frame::Failed { error } => Head::Failed {
            error: error.clone(),
        },
        Frame::Closed => Head::Closed,
    };
    serde_json::to_writer(&mut *w, &head)?;
    w.write_all(b"\n")?;
    if let Frame::Fabric { snapshot } = frame {
        w.write_all(snapshot.as_bytes())?;
    }
    w.flush()
}

/// The next frame; `None` at the end of the stream.
pub fn read(r: &mut impl BufRead) -> io::Result<Option<Frame>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let head: Head = serde_json::from_str(line.trim_end()).map_err(io::Error::other)?;
    Ok(Some(match head {
        Head::Opened { port, id } => Frame::Opened { port, id },
        Head::Family {
            name,
            head,
            samples,
            crc,
            len,
        } => {
            if len
                > (samples as u64)
                    .saturating_mul(MAX_INFLATION)
                    .saturating_add(64)
            {
                return Err(io::Error::other(format!(
                    "a family of {len} bytes of text in {samples} bytes of deflate"
                )));
            }
            Frame::Family {
                name,
                head,
                samples: Deflated::from_parts(read_bytes(r, samples)?, crc, len),
            }
        }
        Head::Unchanged { name } => Frame::Unchanged { name },
        Head::Page { failure } => Frame::Page { failure },
        Head::Fabric { snapshot } => Frame::Fabric {
            snapshot: read_text(r, snapshot)?,
        },
        Head::Lost { error } => Frame::Lost { error },
        Head::Failed { error } => Frame::Failed { error },
        Head::Closed => Frame::Closed,
    }))
}

/// The `len` bytes after a head.
fn read_bytes(r: &mut impl BufRead, len: usize) -> io::Result<Vec<u8>> {
    if len > MAX_BYTES {
        return Err(io::Error::other(format!("a frame of {len} bytes")));
    }
    let mut t = vec![0u8; len];
    r.read_exact(&mut t)?;
    Ok(t)
}

/// The `len` bytes of text after a head.
fn read_text(r: &mut impl BufRead, len: usize) -> io::Result<String> {
    String::from_utf8(read_bytes(r, len)?).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_back_to_back() {
        let frames = vec![
            Frame::Opened {
                port: "ibsim0/1".into(),
                id: FabricId {
                    name: "alpha".into(),
                    subnet_prefix: Some(0xfe80 << 48),
                    sm_guid: Some(0x0002_c903_0000_0001),
                },
            },
            Frame::Family {
                name: "ibscope_up".into(),
                head: "# HELP ibscope_up Up, \"quoted\".\n# TYPE ibscope_up gauge\n".into(),
                samples: Deflated::new(b"ibscope_up 1\n\x1f\x8b\n"),
            },
            Frame::Family {
                name: "empty".into(),
                head: String::new(),
                samples: Deflated::new(b""),
            },
            Frame::Unchanged {
                name: "ibscope_port_state".into(),
            },
            Frame::Page { failure: None },
            Frame::Page {
                failure: Some("none of 4 ports answered".into()),
            },
            Frame::Fabric {
                snapshot: "{\"nodes\": []}\n".into(),
            },
            Frame::Lost {
                error: "lost the connection\nto the fabric".into(),
            },
            Frame::Failed {
                error: "no InfiniBand device found".into(),
            },
            Frame::Closed,
        ];
        let mut buf = Vec::new();
        for f in &frames {
            write(&mut buf, f).unwrap();
        }
        let mut r = io::Cursor::new(buf);
        let mut back = Vec::new();
        while let Some(f) = read(&mut r).unwrap() {
            back.push(f);
        }
        assert_eq!(back, frames);
    }

    #[test]
    fn a_cut_or_garbled_stream_is_an_error() {
        let mut buf = Vec::new();
        let family = Frame::Family {
            name: "a".into(),
            head: "# HELP a A.\n# TYPE a gauge\n".into(),
            samples: Deflated::new("a 1\n".repeat(100).as_bytes()),
        };
        write(&mut buf, &family).unwrap();
        // Cut anywhere: in the JSON line or in the compressed samples.
        for cut in [1, buf.len() / 2, buf.len() - 2, buf.len() - 1] {
            let r = read(&mut io::Cursor::new(buf[..cut].to_vec()));
            assert!(r.is_err(), "cut at {cut}: {r:?}");
        }
        assert!(read(&mut io::Cursor::new(b"not json\n".to_vec())).is_err());
        assert_eq!(read(&mut io::Cursor::new(Vec::new())).unwrap(), None);
        let heads = [
            // Not a kind of frame, fields missing or of the wrong type.
            r#"{"kind":"text","text":3}"#,
            r#"{"kind":"family","name":"a","head":"","samples":3}"#,
            r#"{"kind":"family","name":"a","head":"","samples":-1,"crc":0,"len":0}"#,
            r#"{"kind":"family","name":"a","head":"","samples":3,"crc":0,"len":"x"}"#,
            r#"{"kind":"page"}garbage"#,
            r#"{"kind":"unchanged"}"#,
            // Larger than any frame, or more text than three bytes of deflate can hold.
            r#"{"kind":"family","name":"a","head":"","samples":99999999999,"crc":0,"len":0}"#,
            r#"{"kind":"family","name":"a","head":"","samples":3,"crc":0,"len":99999999}"#,
        ];
        for head in heads {
            let bytes = format!("{head}\nabc").into_bytes();
            let r = read(&mut io::Cursor::new(bytes));
            assert!(r.is_err(), "{head}: {r:?}");
        }
        // A family whose compressed samples are garbage is read as it is: they are
        // checked (CRC, length) when inflated, where a bad piece is an error.
        let garbage = br#"{"kind":"family","name":"a","head":"","samples":3,"crc":0,"len":5}"#;
        let mut bytes = garbage.to_vec();
        bytes.extend_from_slice(b"\nabc");
        match read(&mut io::Cursor::new(bytes)).unwrap() {
            Some(Frame::Family { samples, .. }) => assert!(samples.inflate().is_err()),
            other => panic!("{other:?}"),
        }
    }
}
