//! A page as it is served: rendered and gzip-compressed once per sweep, held in memory.
//! Each scrape appends its own few families (ages, up, stale) to the compressed page: the
//! page's deflate stream ends on a byte boundary without a final block, the scrape's part
//! is compressed after it, and the gzip trailer's CRC-32 continues from the page's.

use std::io::{self, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use flate2::write::DeflateEncoder;
use flate2::{Compression, Decompress, FlushDecompress};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use ibscope_topo::export::prometheus::split_families;

/// gzip's member header (RFC 1952): deflate, no name or time, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// One fabric's page of one sweep (or several fabrics' merged).
#[derive(Debug)]
pub struct Page {
    /// The gzip header and the text's deflate stream, flushed to a byte boundary.
    gzip: Bytes,
    crc: crc32fast::Hasher,
    text_len: u64,
    pub finished: Instant,
    /// Why the sweep behind it reached no port (a page kept only until a good one).
    pub failure: Option<String>,
}

/// Compresses a page as the renderer writes it, so the text is never held whole.
pub struct PageWriter {
    deflate: DeflateEncoder<Vec<u8>>,
    crc: crc32fast::Hasher,
    text_len: u64,
}

impl Default for PageWriter {
    fn default() -> Self {
        PageWriter {
            // Fast: the page is made again every sweep; speed matters more than ratio.
            deflate: DeflateEncoder::new(GZIP_HEADER.to_vec(), Compression::fast()),
            crc: crc32fast::Hasher::new(),
            text_len: 0,
        }
    }
}

impl Write for PageWriter {
    fn write(&mut self, text: &[u8]) -> io::Result<usize> {
        let n = self.deflate.write(text)?;
        self.crc.update(&text[..n]);
        self.text_len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl PageWriter {
    /// The page written so far. A sync flush ends the stream on a byte boundary (into
    /// memory: it cannot fail); the bytes are taken before the encoder, dropped, would end
    /// the stream with a final block.
    pub fn finish(mut self, failure: Option<String>) -> Page {
        let _ = self.deflate.flush();
        let gzip = std::mem::take(self.deflate.get_mut());
        Page {
            gzip: Bytes::from(gzip),
            crc: self.crc,
            text_len: self.text_len,
            finished: Instant::now(),
            failure,
        }
    }
}

impl Page {
    pub fn from_text(text: &str) -> Page {
        let mut w = PageWriter::default();
        // Into memory: cannot fail.
        let _ = w.write_all(text.as_bytes());
        w.finish(None)
    }

    /// (bytes of text, bytes of gzip).
    pub fn sizes(&self) -> (u64, usize) {
        (self.text_len, self.gzip.len())
    }

    /// The page's text (inflated again).
    pub fn text(self: &Arc<Self>) -> io::Result<String> {
        let mut text = Vec::with_capacity(self.text_len as usize);
        for chunk in self.clone().inflated() {
            text.extend_from_slice(&chunk?);
        }
        String::from_utf8(text).map_err(io::Error::other)
    }

    /// The page's text, inflated a chunk at a time; an error when the page does not
    /// inflate to the length it was made with.
    fn inflated(self: Arc<Self>) -> impl Iterator<Item = io::Result<Bytes>> + Send {
        let mut z = Decompress::new(false);
        std::iter::from_fn(move || {
            let made = z.total_out();
            if made >= self.text_len {
                return None;
            }
            let at = GZIP_HEADER.len() + z.total_in() as usize;
            let input = self.gzip.get(at..).unwrap_or_default();
            let mut out = Vec::with_capacity(TEXT_CHUNK.min((self.text_len - made) as usize));
            let inflated = z.decompress_vec(input, &mut out, FlushDecompress::Sync);
            Some(match inflated {
                Err(e) => Err(io::Error::other(e)),
                Ok(_) if out.is_empty() => Err(io::Error::other("the page ends before its length")),
                Ok(_) => Ok(Bytes::from(out)),
            })
        })
    }

    /// Several fabrics' pages as one: family by family, since a family's samples stand
    /// together under one head.
    pub fn merge(pages: &[Arc<Page>]) -> io::Result<Page> {
        let texts = pages
            .iter()
            .map(|p| p.text())
            .collect::<io::Result<Vec<_>>>()?;
        let split: Vec<_> = texts.iter().map(|t| split_families(t)).collect();
        let mut w = PageWriter::default();
        for (i, (name, head, _)) in split.first().into_iter().flatten().enumerate() {
            w.write_all(head.as_bytes())?;
            for families in &split {
                // The same families in the same order (one renderer); looked up by name
                // should that ever not hold.
                let same = families
                    .get(i)
                    .filter(|f| f.0 == *name)
                    .or_else(|| families.iter().find(|f| f.0 == *name));
                if let Some((_, _, samples)) = same {
                    w.write_all(samples.as_bytes())?;
                }
            }
        }
        Ok(w.finish(None))
    }
}

/// The body of an answer: a page with the scrape's `tail` after it (gzip as made, with
/// the tail compressed now; or the text, inflated as it is sent), or bytes.
pub struct PageBody {
    chunks: Box<dyn Iterator<Item = io::Result<Bytes>> + Send>,
    left: u64,
}

/// Text sent per chunk when inflating: small enough not to hold a worker long.
const TEXT_CHUNK: usize = 1 << 18;

impl PageBody {
    pub fn bytes(body: impl Into<Bytes>) -> PageBody {
        let body = body.into();
        PageBody {
            left: body.len() as u64,
            chunks: Box::new(std::iter::once(Ok(body))),
        }
    }

    pub fn gzip(page: &Page, tail: &str) -> PageBody {
        let mut deflate = DeflateEncoder::new(Vec::new(), Compression::fast());
        // Into memory: cannot fail.
        let _ = deflate.write_all(tail.as_bytes());
        let mut end = deflate.finish().unwrap_or_default();
        let mut crc = page.crc.clone();
        crc.update(tail.as_bytes());
        end.extend_from_slice(&crc.finalize().to_le_bytes());
        // ISIZE: the length modulo 2^32.
        let len = page.text_len + tail.len() as u64;
        end.extend_from_slice(&(len as u32).to_le_bytes());
        PageBody {
            left: (page.gzip.len() + end.len()) as u64,
            chunks: Box::new([Ok(page.gzip.clone()), Ok(Bytes::from(end))].into_iter()),
        }
    }

    pub fn text(page: Arc<Page>, tail: String) -> PageBody {
        let left = page.text_len + tail.len() as u64;
        let tail = (!tail.is_empty()).then(|| Ok(Bytes::from(tail)));
        PageBody {
            chunks: Box::new(page.inflated().chain(tail)),
            left,
        }
    }
}

impl Body for PageBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let chunk = self.chunks.next();
        if let Some(Ok(c)) = &chunk {
            self.left = self.left.saturating_sub(c.len() as u64);
        }
        Poll::Ready(chunk.map(|c| c.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn body_bytes(body: PageBody) -> Vec<u8> {
        let (mut out, exact) = (Vec::new(), body.size_hint().exact());
        for chunk in body.chunks {
            out.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(Some(out.len() as u64), exact, "the length it announced");
        out
    }

    /// The page with a scrape's tail is one gzip stream that gzip readers (one member
    /// only, as curl reads) inflate to the page's text and the tail; and the text body
    /// is the same, chunk by chunk.
    #[test]
    fn a_page_and_its_tail_are_one_gzip_stream() {
        let text: String = (0..60_000)
            .map(|i| format!("ibscope_x{{port=\"{i}\"}} {}\n", i * 7))
            .collect();
        let page = Arc::new(Page::from_text(&text));
        assert_eq!(page.sizes().0, text.len() as u64);
        let gzip = body_bytes(PageBody::gzip(&page, "tail 1\n"));
        let mut inflated = String::new();
        flate2::read::GzDecoder::new(&gzip[..])
            .read_to_string(&mut inflated)
            .unwrap();
        assert_eq!(inflated, format!("{text}tail 1\n"));
        let plain = body_bytes(PageBody::text(page.clone(), "tail 1\n".into()));
        assert_eq!(String::from_utf8(plain).unwrap(), inflated);
        assert_eq!(page.text().unwrap(), text);
        // No tail: still a whole stream.
        let gzip = body_bytes(PageBody::gzip(&page, ""));
        let mut inflated = String::new();
        flate2::read::GzDecoder::new(&gzip[..])
            .read_to_string(&mut inflated)
            .unwrap();
        assert_eq!(inflated, text);
    }

    #[test]
    fn pages_merge_family_by_family() {
        let alpha = "# HELP a A.\n# TYPE a gauge\na{fabric=\"alpha\"} 1\n\
                     # HELP b B.\n# TYPE b gauge\nb{fabric=\"alpha\"} 2\n";
        let beta = alpha.replace("alpha", "beta");
        let pages = [
            Arc::new(Page::from_text(alpha)),
            Arc::new(Page::from_text(&beta)),
        ];
        assert_eq!(
            Arc::new(Page::merge(&pages).unwrap()).text().unwrap(),
            "# HELP a A.\n# TYPE a gauge\na{fabric=\"alpha\"} 1\na{fabric=\"beta\"} 1\n\
             # HELP b B.\n# TYPE b gauge\nb{fabric=\"alpha\"} 2\nb{fabric=\"beta\"} 2\n"
        );
    }
}
