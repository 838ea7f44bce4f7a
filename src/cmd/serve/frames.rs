//! What a sweeper process tells `serve`, over a pipe: one JSON line per message, and for
//! a page the page's text right after it (`serve` cuts it into families and compresses
//! them).

use std::io::{self, BufRead, Write};

use ibscope_topo::FabricId;
use serde::{Deserialize, Serialize};

/// One message of the sweeper process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The management port is open (`port`: "CA/port", or the relay's command); `id` is
    /// the fabric's name and, with several fabrics, its subnet identity.
    Opened { port: String, id: FabricId },
    /// A sweep's page; `failure` when the sweep reached no port.
    Page {
        text: String,
        failure: Option<String>,
    },
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
    Page {
        text: usize,
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

/// A page larger than this is refused: the 2,048-host benchmark fabric's is 92 MB.
const MAX_PAGE: usize = 1 << 32;

pub fn write(w: &mut impl Write, frame: &Frame) -> io::Result<()> {
    let head = match frame {
        Frame::Opened { port, id } => Head::Opened {
            port: port.clone(),
            id: id.clone(),
        },
        Frame::Page { text, failure } => Head::Page {
            text: text.len(),
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
    match frame {
        Frame::Page { text, .. } | Frame::Fabric { snapshot: text } => {
            w.write_all(text.as_bytes())?
        }
        _ => {}
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
        Head::Page { text, failure } => Frame::Page {
            text: read_text(r, text)?,
            failure,
        },
        Head::Fabric { snapshot } => Frame::Fabric {
            snapshot: read_text(r, snapshot)?,
        },
        Head::Lost { error } => Frame::Lost { error },
        Head::Failed { error } => Frame::Failed { error },
        Head::Closed => Frame::Closed,
    }))
}

/// The `len` bytes of text after a head.
fn read_text(r: &mut impl BufRead, len: usize) -> io::Result<String> {
    if len > MAX_PAGE {
        return Err(io::Error::other(format!("a text of {len} bytes")));
    }
    let mut t = vec![0u8; len];
    r.read_exact(&mut t)?;
    String::from_utf8(t).map_err(io::Error::other)
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
            Frame::Page {
                text: "ibscope_up 1\n# a line with \"quotes\"\n\u{1f}\u{8b}\n".into(),
                failure: None,
            },
            Frame::Page {
                text: String::new(),
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
        let page = Frame::Page {
            text: "abcdef".into(),
            failure: None,
        };
        write(&mut buf, &page).unwrap();
        buf.truncate(buf.len() - 2);
        assert!(read(&mut io::Cursor::new(buf)).is_err());
        assert!(read(&mut io::Cursor::new(b"not json\n".to_vec())).is_err());
        assert_eq!(read(&mut io::Cursor::new(Vec::new())).unwrap(), None);
    }
}
