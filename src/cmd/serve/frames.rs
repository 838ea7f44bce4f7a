//! What the sweeper process tells `serve`, over a pipe: one JSON line per message, and for
//! a page the page's bytes right after it (its text, then its gzip).

use std::io::{self, BufRead, Write};

use serde::{Deserialize, Serialize};

/// One message of the sweeper process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The management port is open (`port`: "CA/port").
    Opened { port: String },
    /// A sweep's page; `failure` when the sweep reached no port.
    Page {
        text: String,
        gzip: Vec<u8>,
        failure: Option<String>,
    },
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
    },
    Page {
        text: usize,
        gzip: usize,
        failure: Option<String>,
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
        Frame::Opened { port } => Head::Opened { port: port.clone() },
        Frame::Page {
            text,
            gzip,
            failure,
        } => Head::Page {
            text: text.len(),
            gzip: gzip.len(),
            failure: failure.clone(),
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
    if let Frame::Page { text, gzip, .. } = frame {
        w.write_all(text.as_bytes())?;
        w.write_all(gzip)?;
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
        Head::Opened { port } => Frame::Opened { port },
        Head::Page {
            text,
            gzip,
            failure,
        } => {
            if text.saturating_add(gzip) > MAX_PAGE {
                return Err(io::Error::other(format!("a page of {text} + {gzip} bytes")));
            }
            let mut t = vec![0u8; text];
            r.read_exact(&mut t)?;
            let mut g = vec![0u8; gzip];
            r.read_exact(&mut g)?;
            Frame::Page {
                text: String::from_utf8(t).map_err(io::Error::other)?,
                gzip: g,
                failure,
            }
        }
        Head::Lost { error } => Frame::Lost { error },
        Head::Failed { error } => Frame::Failed { error },
        Head::Closed => Frame::Closed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_back_to_back() {
        let frames = vec![
            Frame::Opened {
                port: "ibsim0/1".into(),
            },
            Frame::Page {
                text: "ibscope_up 1\n# a line with \"quotes\"\n".into(),
                gzip: vec![0x1f, 0x8b, 0, b'\n', 0xff],
                failure: None,
            },
            Frame::Page {
                text: String::new(),
                gzip: Vec::new(),
                failure: Some("none of 4 ports answered".into()),
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
            text: "abc".into(),
            gzip: vec![1, 2, 3],
            failure: None,
        };
        write(&mut buf, &page).unwrap();
        buf.truncate(buf.len() - 2);
        assert!(read(&mut io::Cursor::new(buf)).is_err());
        assert!(read(&mut io::Cursor::new(b"not json\n".to_vec())).is_err());
        assert_eq!(read(&mut io::Cursor::new(Vec::new())).unwrap(), None);
    }
}
