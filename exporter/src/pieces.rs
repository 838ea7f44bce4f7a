//! A page held compressed, family by family. The sweeper compresses each family's samples
//! as the renderer hands them out ([`PageDeflater`]), so the page's text is never held
//! whole; `serve` keeps only the compressed pieces, writes them as one gzip stream to a
//! scraper that accepts gzip, and inflates them on the fly for one that does not.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use ibscope_topo::export::prometheus::PageSink;
use xxhash_rust::xxh3::xxh3_128;

/// A piece of a deflate stream (RFC 1951), compressed on its own and ended by a sync
/// flush, so it ends on a byte boundary with no final block: pieces written one after the
/// other are one valid stream. With the CRC-32 and length of what it holds, the gzip
/// trailer of a stream of pieces is the pieces' CRCs combined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deflated {
    bytes: Vec<u8>,
    crc: u32,
    len: u64,
}

/// Fast compression: the page is rebuilt every sweep, so speed matters more than ratio.
fn compressor() -> Compress {
    Compress::new(Compression::fast(), false)
}

/// Compress `input` into `out` (growing it as needed); with a sync flush, until the flush
/// is complete.
fn deflate(c: &mut Compress, mut input: &[u8], out: &mut Vec<u8>, flush: FlushCompress) {
    loop {
        if out.capacity() - out.len() < 4096 {
            out.reserve(4096 + (input.len() / 4).max(out.len() / 2));
        }
        let before = c.total_in();
        // Compressing into a Vec with room cannot fail.
        let _ = c.compress_vec(input, out, flush);
        input = &input[(c.total_in() - before) as usize..];
        // Done once a call leaves output room unused.
        if input.is_empty() && out.len() < out.capacity() {
            break;
        }
    }
}

impl Deflated {
    /// `data` compressed as one piece.
    pub fn new(data: &[u8]) -> Deflated {
        let mut c = compressor();
        let mut bytes = Vec::with_capacity(data.len() / 4 + 64);
        deflate(&mut c, data, &mut bytes, FlushCompress::Sync);
        Deflated {
            bytes,
            crc: zlib_rs::crc32::crc32(0, data),
            len: data.len() as u64,
        }
    }

    /// A piece made of its parts: its bytes, and the CRC-32
    /// and length of the text they hold, checked when inflated.
    pub fn from_parts(bytes: Vec<u8>, crc: u32, len: u64) -> Deflated {
        Deflated { bytes, crc, len }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn crc(&self) -> u32 {
        self.crc
    }

    /// Bytes of text it holds.
    pub fn text_len(&self) -> u64 {
        self.len
    }

    /// Inflate the piece into `w`, through `buf`; an error when the bytes are not a piece
    /// of deflate or do not hold the text its CRC and length say (part of it may have
    /// been written by then).
    pub fn inflate_into(
        &self,
        d: &mut Decompress,
        buf: &mut [u8],
        w: &mut dyn Write,
    ) -> io::Result<()> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
        if buf.is_empty() {
            return Err(bad("no room to inflate into"));
        }
        d.reset(false);
        let mut input = &self.bytes[..];
        let (mut crc, mut len) = (0u32, 0u64);
        loop {
            let (before_in, before_out) = (d.total_in(), d.total_out());
            let status = d
                .decompress(input, buf, FlushDecompress::Sync)
                .map_err(|e| bad(&format!("a compressed piece: {e}")))?;
            let used = (d.total_in() - before_in) as usize;
            let made = (d.total_out() - before_out) as usize;
            input = &input[used..];
            if made > 0 {
                len += made as u64;
                if len > self.len {
                    return Err(bad("a compressed piece holds more than its length"));
                }
                crc = zlib_rs::crc32::crc32(crc, &buf[..made]);
                w.write_all(&buf[..made])?;
            }
            if status == Status::StreamEnd {
                // A final block would end the whole stream there.
                return Err(bad("a compressed piece ends its stream"));
            }
            if input.is_empty() && made < buf.len() {
                break;
            }
            if used == 0 && made == 0 {
                return Err(bad("a compressed piece is cut short"));
            }
        }
        if len != self.len || crc != self.crc {
            return Err(bad("a compressed piece does not hold its text"));
        }
        Ok(())
    }

    /// The text the piece holds (a small one: a family's samples to patch).
    pub fn inflate(&self) -> io::Result<String> {
        let mut text = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0).min(1 << 24));
        let mut buf = vec![0u8; 1 << 16];
        self.inflate_into(&mut Decompress::new(false), &mut buf, &mut text)?;
        String::from_utf8(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// The gzip header (RFC 1952: deflate, no name, no time, unknown OS).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// An empty final deflate block (fixed Huffman, end of block): ends a stream of pieces.
const DEFLATE_END: [u8; 2] = [0x03, 0x00];

/// The gzip stream of `pieces` in order: header, pieces, end, trailer (CRC-32, length).
pub fn gzip_parts<'a>(pieces: &[&'a Deflated], trailer: &'a mut [u8; 8]) -> Vec<&'a [u8]> {
    let (crc, len) = pieces.iter().fold((0u32, 0u64), |(crc, len), p| {
        (
            zlib_rs::crc32::crc32_combine(crc, p.crc, p.len),
            len + p.len,
        )
    });
    trailer[..4].copy_from_slice(&crc.to_le_bytes());
    // ISIZE: the length modulo 2^32.
    trailer[4..].copy_from_slice(&(len as u32).to_le_bytes());
    let mut parts: Vec<&[u8]> = vec![&GZIP_HEADER];
    parts.extend(pieces.iter().map(|p| &p.bytes[..]));
    parts.push(&DEFLATE_END);
    parts.push(&trailer[..]);
    parts
}

/// Last page's compressed samples of one fabric, family by family, with the XXH3-128 of
/// each piece of their text as the renderer handed it out: a family whose text is the
/// same on the next page (error counters at 0, link states) is not compressed again. The
/// CRC-32 is no such check (one stale family in 2^32 would be served); with 128 bits a
/// collision is not a practical concern.
///
/// The text is never held. A family the renderer digests the inputs of (its ports'
/// labels and values) is, with the same inputs as on the last page, last page's piece,
/// not rendered again; with other inputs it is compressed as it comes, not hashed. Of the
/// other families, one that changed on the last page is compressed as it comes; one that
/// did not is only hashed, piece by piece against last page's, and compressed from where
/// it first differs, the part before inflated from last page's piece. Costs one page's
/// compressed samples and 16 bytes per 256 KiB of text.
#[derive(Default)]
pub struct PieceCache {
    pieces: HashMap<String, Cached>,
    /// The page being built: replaces `pieces` when it ends, so families no longer on the
    /// page are forgotten.
    next: HashMap<String, Cached>,
    /// Families of the last page compressed, and taken unchanged from the page before.
    pub compressed: u64,
    pub reused: u64,
}

struct Cached {
    /// The hash of each piece of the text, in order.
    hashes: Vec<u128>,
    piece: Deflated,
    /// Its text differed from the page before's: expect it to differ again.
    changed: bool,
    /// The digest of what its text was made of, when the renderer gave one: a family
    /// with the same is taken as it is, not rendered again.
    inputs: Option<u128>,
    /// Its head: a family is as before only with the same head too (what `serve` holds
    /// of a family sent as unchanged is the last page's, head and samples).
    head: String,
}

impl PieceCache {
    fn start_page(&mut self) {
        self.next.clear();
        self.compressed = 0;
        self.reused = 0;
    }

    fn end_page(&mut self) {
        self.pieces = std::mem::take(&mut self.next);
    }
}

/// A family being compressed: its samples as compressed so far, and the compressor.
struct Compressing {
    compress: Compress,
    body: Deflated,
}

impl Compressing {
    fn put(&mut self, data: &[u8]) {
        self.body.crc = zlib_rs::crc32::crc32(self.body.crc, data);
        self.body.len += data.len() as u64;
        deflate(
            &mut self.compress,
            data,
            &mut self.body.bytes,
            FlushCompress::None,
        );
    }

    /// The family's samples are all in: `body` is their piece.
    fn end(&mut self) {
        deflate(
            &mut self.compress,
            &[],
            &mut self.body.bytes,
            FlushCompress::Sync,
        );
    }

    /// The next family starts.
    fn start(&mut self) {
        self.compress.reset();
        self.body.bytes.clear();
        self.body.crc = 0;
        self.body.len = 0;
    }
}

/// A family of a [`PageDeflater::reusing`]: last page's, and how far this one is.
struct Reused {
    last: Option<Cached>,
    hashes: Vec<u128>,
    /// Compressing, or (false) only hashing: the same as `last` so far.
    compressing: bool,
    /// Its first samples could not be taken from `last`: not cached.
    broken: bool,
    /// The digest of what its text is made of, if the renderer gave one.
    inputs: Option<u128>,
}

/// How a [`PageDeflater`] compresses a family: as the samples come, or only where they
/// differ from last page's.
enum Mode<'c> {
    Streamed,
    Reusing {
        cache: &'c mut PieceCache,
        family: Reused,
    },
}

/// A [`PageSink`] that compresses each family's samples and hands every family, once
/// complete, to `done` (its name, its head as text, its samples as one piece, and whether
/// that piece is the one of the last page, as it was). Only the
/// family being compressed is held ([`PageDeflater::new`]), and last page's pieces to
/// reuse ([`PageDeflater::reusing`]).
pub struct PageDeflater<'c, F: FnMut(&str, &str, &Deflated, bool)> {
    mode: Mode<'c>,
    compressing: Compressing,
    /// The family being compressed: its name and head.
    current: Option<(String, String)>,
    done: F,
}

impl<F: FnMut(&str, &str, &Deflated, bool)> PageDeflater<'static, F> {
    /// Each family compressed as its samples come.
    pub fn new(done: F) -> Self {
        PageDeflater::with_mode(Mode::Streamed, done)
    }
}

impl<'c, F: FnMut(&str, &str, &Deflated, bool)> PageDeflater<'c, F> {
    fn with_mode(mode: Mode<'c>, done: F) -> Self {
        PageDeflater {
            mode,
            compressing: Compressing {
                compress: compressor(),
                body: Deflated::from_parts(Vec::new(), 0, 0),
            },
            current: None,
            done,
        }
    }

    /// Each family compressed only where its text differs from `cache`'s last page; the
    /// text the pieces hold is the same either way.
    pub fn reusing(cache: &'c mut PieceCache, done: F) -> Self {
        cache.start_page();
        let family = Reused {
            last: None,
            hashes: Vec::new(),
            compressing: true,
            broken: false,
            inputs: None,
        };
        PageDeflater::with_mode(Mode::Reusing { cache, family }, done)
    }

    /// The family being compressed is complete: hand it over.
    fn end_family(&mut self) {
        let Some((name, head)) = self.current.take() else {
            return;
        };
        let Mode::Reusing { cache, family } = &mut self.mode else {
            self.compressing.end();
            // Its buffer is kept for the next family.
            (self.done)(&name, &head, &self.compressing.body, false);
            return;
        };
        let hashes = std::mem::take(&mut family.hashes);
        let last = family.last.take();
        let inputs = family.inputs.take();
        let same = last.as_ref().is_some_and(|l| l.hashes == hashes);
        // A family new to the cache is expected not to change: comparing one that does
        // costs only hashing its first piece.
        let changed = last.is_some() && !same;
        let mut as_before = false;
        let cached = match last {
            Some(last) if same && !family.compressing => {
                cache.reused += 1;
                as_before = last.head == head;
                Cached {
                    changed: false,
                    inputs,
                    head: head.clone(),
                    ..last
                }
            }
            last => {
                if !family.compressing {
                    // A shorter text than last page's, the same as far as it goes.
                    let len = self.compressing.body.len;
                    family.broken |= !begin_from(&mut self.compressing, last.as_ref(), len);
                }
                cache.compressed += 1;
                self.compressing.end();
                let mut piece = std::mem::replace(
                    &mut self.compressing.body,
                    Deflated::from_parts(Vec::new(), 0, 0),
                );
                // Held until the next page: not the room reserved while compressing.
                piece.bytes.shrink_to_fit();
                Cached {
                    hashes,
                    piece,
                    changed,
                    inputs,
                    head: head.clone(),
                }
            }
        };
        (self.done)(&name, &head, &cached.piece, as_before);
        if !std::mem::take(&mut family.broken) {
            cache.next.insert(name, cached);
        }
    }

    /// The page is complete: hand over its last family.
    pub fn finish(mut self) {
        self.end_family();
        if let Mode::Reusing { cache, .. } = &mut self.mode {
            cache.end_page();
        }
    }
}

/// Start compressing a family whose first `len` bytes of text are `last`'s: those
/// inflated from its piece into the compressor. False when its piece does not inflate
/// to them (it was compressed here, so it does): then the family lacks its first
/// samples on this page, and is not cached, so the next page has it whole.
fn begin_from(c: &mut Compressing, last: Option<&Cached>, len: u64) -> bool {
    c.body.crc = 0;
    c.body.len = 0;
    let Some(last) = last else {
        return len == 0;
    };
    let mut d = Decompress::new(false);
    let mut buf = vec![0u8; 1 << 16];
    let mut input = last.piece.bytes();
    let mut left = len;
    while left > 0 {
        let (before_in, before_out) = (d.total_in(), d.total_out());
        if d.decompress(input, &mut buf, FlushDecompress::Sync)
            .is_err()
        {
            tracing::warn!("a piece of the last page does not inflate");
            return false;
        }
        let used = (d.total_in() - before_in) as usize;
        let made = (d.total_out() - before_out) as usize;
        input = &input[used..];
        let take = made.min(usize::try_from(left).unwrap_or(usize::MAX));
        c.put(&buf[..take]);
        left -= take as u64;
        if used == 0 && made == 0 {
            tracing::warn!("a piece of the last page is shorter than its text");
            return false;
        }
    }
    true
}

impl<F: FnMut(&str, &str, &Deflated, bool)> PageSink for PageDeflater<'_, F> {
    fn family(&mut self, name: &str, head: &str) {
        self.end_family();
        // Each family's samples are a piece of their own (a merged page puts other
        // fabrics' pieces between them): no back-references into the one before.
        self.compressing.start();
        if let Mode::Reusing { cache, family } = &mut self.mode {
            family.last = cache.pieces.remove(name);
            family.broken = false;
            family.inputs = None;
            // One that changed last time is compressed as it comes; one that did not
            // is compared first.
            family.compressing = family.last.as_ref().map_or(true, |l| l.changed);
        }
        self.current = Some((name.to_string(), head.to_string()));
    }

    fn samples(&mut self, lines: &str) {
        if self.current.is_none() {
            // Samples before any head: not a page the renderer writes; kept anyway,
            // under no name, so nothing of the text is lost.
            self.family("", "");
        }
        let data = lines.as_bytes();
        // A family with inputs is not hashed: they say whether it changed.
        let hashed = match &mut self.mode {
            Mode::Reusing { family, .. } if family.inputs.is_none() => Some(family),
            _ => None,
        };
        if let Some(family) = hashed {
            let hash = xxh3_128(data);
            let at = family.hashes.len();
            family.hashes.push(hash);
            if !family.compressing {
                if family.last.as_ref().and_then(|l| l.hashes.get(at)) == Some(&hash) {
                    // The same so far: counted, to know where it starts to differ.
                    self.compressing.body.len += data.len() as u64;
                    return;
                }
                family.compressing = true;
                let len = self.compressing.body.len;
                family.broken |= !begin_from(&mut self.compressing, family.last.as_ref(), len);
            }
        }
        self.compressing.put(data);
    }

    fn keeps_last_page(&self) -> bool {
        matches!(self.mode, Mode::Reusing { .. })
    }

    fn family_as_before(&mut self, name: &str, head: &str, inputs: u128) -> bool {
        self.end_family();
        if let Mode::Reusing { cache, .. } = &mut self.mode {
            let same = |c: &Cached| c.inputs == Some(inputs) && c.head == head;
            let same = cache.pieces.get(name).is_some_and(same);
            if let Some(last) = same.then(|| cache.pieces.remove(name)).flatten() {
                // Made of the same as last page's: the same text, not rendered again.
                cache.reused += 1;
                (self.done)(name, head, &last.piece, true);
                let last = Cached {
                    changed: false,
                    ..last
                };
                cache.next.insert(name.to_string(), last);
                return true;
            }
        }
        self.family(name, head);
        if let Mode::Reusing { family, .. } = &mut self.mode {
            // Compressed afresh as it comes: with other inputs its text is another.
            family.inputs = Some(inputs);
            family.last = None;
            family.compressing = true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn pieces_make_one_gzip_stream() {
        let texts = [
            "# HELP a A.\n",
            "",
            "a{x=\"1\"} 2\n".repeat(5000).as_str(),
            "tail\n",
        ]
        .map(String::from);
        let pieces: Vec<Deflated> = texts.iter().map(|t| Deflated::new(t.as_bytes())).collect();
        let refs: Vec<&Deflated> = pieces.iter().collect();
        let mut trailer = [0u8; 8];
        let stream: Vec<u8> = gzip_parts(&refs, &mut trailer).concat();
        // One member: a decoder that stops after the first member reads it all.
        let mut out = String::new();
        flate2::read::GzDecoder::new(&stream[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, texts.concat());
        assert!(stream.len() < texts.concat().len() / 10, "compressed");
    }

    /// A page as the renderer hands it out: heads, then samples in several pieces.
    fn deflated_page(families: &[(&str, &str, &[&str])]) -> Vec<(String, String, Deflated)> {
        let mut out = Vec::new();
        let mut sink = PageDeflater::new(|name: &str, head: &str, body: &Deflated, _| {
            out.push((name.to_string(), head.to_string(), body.clone()))
        });
        feed(&mut sink, families);
        sink.finish();
        out
    }

    /// Hand `families` to `sink` as the renderer does: each head, then its samples in pieces.
    fn feed(sink: &mut impl PageSink, families: &[(&str, &str, &[&str])]) {
        for (name, head, pieces) in families {
            sink.family(name, head);
            for p in *pieces {
                sink.samples(p);
            }
        }
    }

    #[test]
    fn a_family_streamed_in_pieces_inflates_to_its_samples_and_gzips_out_of_order() {
        let many = "b{port=\"1\"} 12345\n".repeat(20_000);
        let page = deflated_page(&[
            (
                "a",
                "# HELP a A.\n# TYPE a gauge\n",
                &["a 1\n", "a{x=\"y\"} 2\n"],
            ),
            (
                "b",
                "# HELP b B.\n# TYPE b counter\n",
                &[&many, &many, "b 3\n"],
            ),
            ("c", "# HELP c C.\n# TYPE c gauge\n", &[]),
        ]);
        let names: Vec<&str> = page.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(page[0].2.inflate().unwrap(), "a 1\na{x=\"y\"} 2\n");
        assert_eq!(page[1].2.inflate().unwrap(), format!("{many}{many}b 3\n"));
        assert_eq!(page[2].2.inflate().unwrap(), "");
        // Through a buffer smaller than the text, as a scrape inflates it.
        let mut small = [0u8; 100];
        let mut text = Vec::new();
        page[1]
            .2
            .inflate_into(&mut Decompress::new(false), &mut small, &mut text)
            .unwrap();
        assert_eq!(text, format!("{many}{many}b 3\n").as_bytes());
        // Each piece stands alone: in another order they are still one stream.
        let heads: Vec<Deflated> = page
            .iter()
            .map(|(_, h, _)| Deflated::new(h.as_bytes()))
            .collect();
        let order = [&page[2].2, &heads[1], &page[1].2, &heads[0], &page[0].2];
        let out = gunzip(&order);
        let expected = format!(
            "# HELP b B.\n# TYPE b counter\n{many}{many}b 3\n# HELP a A.\n# TYPE a gauge\na 1\na{{x=\"y\"}} 2\n"
        );
        assert_eq!(out, expected);
    }

    /// A page rendered through `cache`, as `(name, head, samples)` in order.
    fn reused_page(
        cache: &mut PieceCache,
        families: &[(&str, &str, &[&str])],
    ) -> Vec<(String, String, Deflated)> {
        let mut out = Vec::new();
        let mut sink =
            PageDeflater::reusing(cache, |name: &str, head: &str, body: &Deflated, _| {
                out.push((name.to_string(), head.to_string(), body.clone()))
            });
        feed(&mut sink, families);
        sink.finish();
        out
    }

    /// The gzip stream a scrape gets of a page: each head, then its samples.
    fn gunzipped(page: &[(String, String, Deflated)]) -> String {
        let heads: Vec<Deflated> = page
            .iter()
            .map(|(_, h, _)| Deflated::new(h.as_bytes()))
            .collect();
        let pieces: Vec<&Deflated> = heads
            .iter()
            .zip(page)
            .flat_map(|(h, (_, _, body))| [h, body])
            .collect();
        gunzip(&pieces)
    }

    /// `pieces` written as one gzip stream, read back.
    fn gunzip(pieces: &[&Deflated]) -> String {
        let mut trailer = [0u8; 8];
        let stream = gzip_parts(pieces, &mut trailer).concat();
        let mut out = String::new();
        flate2::read::GzDecoder::new(&stream[..])
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn an_unchanged_family_is_reused_and_a_changed_one_compressed_again() {
        let errors = "errors{port=\"1\"} 0\n".repeat(10_000);
        let data = "data{port=\"1\"} 1234567\n".repeat(10_000);
        let moved = data.replacen("1234567", "1234568", 1);
        let (head_e, head_d) = ("# HELP errors E.\n", "# HELP data D.\n");
        let (head_l, head_s) = ("# HELP late L.\n", "# HELP short S.\n");
        let mut cache = PieceCache::default();
        reused_page(
            &mut cache,
            &[
                ("errors", head_e, &[&errors[..100], &errors[100..]]),
                ("data", head_d, &[&data]),
                ("late", head_l, &[&errors, &data, "late 1\n"]),
                ("short", head_s, &[&errors, &data]),
                ("gone", "# HELP gone G.\n", &["gone 1\n"]),
            ],
        );
        assert_eq!((cache.compressed, cache.reused), (5, 0));
        // One byte of `data` changed, the last piece of `late`, the end of `short` cut;
        // `gone` gone.
        let second_families: [(&str, &str, &[&str]); 4] = [
            ("errors", head_e, &[&errors[..100], &errors[100..]]),
            ("data", head_d, &[&moved]),
            ("late", head_l, &[&errors, &data, "late 2\n"]),
            ("short", head_s, &[&errors]),
        ];
        let second = reused_page(&mut cache, &second_families);
        assert_eq!(
            (cache.compressed, cache.reused),
            (3, 1),
            "only errors reused"
        );
        assert_eq!(
            cache.pieces.len(),
            4,
            "a family not on the page is forgotten"
        );
        let text = format!(
            "{head_e}{errors}{head_d}{moved}{head_l}{errors}{data}late 2\n{head_s}{errors}"
        );
        assert_eq!(gunzipped(&second), text);
        // The same text as when every family is compressed afresh.
        let fresh = reused_page(&mut PieceCache::default(), &second_families);
        assert_eq!(gunzipped(&fresh), text);
        assert_eq!(second[0].2, fresh[0].2);
        // Next time alike: all reused, also those that changed last time (compressed as
        // they came, then found unchanged, they are compared again after).
        let third = reused_page(&mut cache, &second_families);
        assert_eq!((cache.compressed, cache.reused), (3, 1));
        assert_eq!(gunzipped(&third), text);
        let fourth = reused_page(&mut cache, &second_families);
        assert_eq!((cache.compressed, cache.reused), (0, 4));
        assert_eq!(gunzipped(&fourth), text);
        // A different piece in the same place and a text that grew: compressed again.
        let grown: [(&str, &str, &[&str]); 2] = [
            ("errors", head_e, &[&errors[..100], &data]),
            ("short", head_s, &[&errors, "more 1\n"]),
        ];
        let fifth = reused_page(&mut cache, &grown);
        assert_eq!((cache.compressed, cache.reused), (2, 0));
        let grown_text = format!("{head_e}{}{data}{head_s}{errors}more 1\n", &errors[..100]);
        assert_eq!(gunzipped(&fifth), grown_text);
    }

    /// A family the renderer says is made of the same as on the last page is taken from
    /// there without its samples; with other inputs it is written and compressed again.
    #[test]
    fn a_family_of_the_same_inputs_is_taken_without_its_samples() {
        let data = "data{port=\"1\"} 1234567\n".repeat(1000);
        let moved = data.replacen("1234567", "1234568", 1);
        let head = "# HELP data D.\n";
        let page = |cache: &mut PieceCache, inputs: u128, text: &str| {
            let (mut out, mut as_before) = (Vec::new(), Vec::new());
            let mut sink =
                PageDeflater::reusing(cache, |name: &str, head: &str, b: &Deflated, same| {
                    out.push((name.to_string(), head.to_string(), b.clone()));
                    as_before.push(same);
                });
            sink.family("first", "# HELP first F.\n");
            sink.samples("first 1\n");
            let taken = sink.family_as_before("data", head, inputs);
            if !taken {
                sink.samples(text);
            }
            sink.finish();
            (taken, out, as_before)
        };
        let mut cache = PieceCache::default();
        let (taken, first, as_before) = page(&mut cache, 7, &data);
        assert!(!taken);
        assert_eq!((cache.compressed, cache.reused), (2, 0));
        assert_eq!(as_before, [false, false]);
        let (taken, second, as_before) = page(&mut cache, 7, "");
        assert!(taken, "same inputs");
        // `first` by its text's hashes, `data` by its inputs: both said to be as before.
        assert_eq!((cache.compressed, cache.reused), (0, 2));
        assert_eq!(as_before, [true, true]);
        assert_eq!(second[1], first[1], "last page's piece, as it was");
        let text = format!("# HELP first F.\nfirst 1\n{head}{data}");
        assert_eq!(gunzipped(&second), text);
        // Other inputs: its samples are written and compressed.
        let (taken, third, as_before) = page(&mut cache, 8, &moved);
        assert!(!taken);
        assert_eq!(as_before, [true, false]);
        assert_eq!(
            gunzipped(&third),
            format!("# HELP first F.\nfirst 1\n{head}{moved}")
        );
        // Back to the first inputs: the page before is what counts, not an older one.
        let (taken, _, _) = page(&mut cache, 7, &data);
        assert!(!taken);
        // A new head over the same samples: their piece is reused, but the family is not
        // as before (`serve` would keep the old head).
        let mut as_before = Vec::new();
        let mut sink = PageDeflater::reusing(&mut cache, |_: &str, _: &str, _: &Deflated, same| {
            as_before.push(same)
        });
        sink.family("first", "# HELP first Renamed.\n");
        sink.samples("first 1\n");
        assert!(!sink.family_as_before("data", "# HELP data Renamed.\n", 7));
        sink.samples(&data);
        sink.finish();
        assert_eq!(as_before, [false, false]);
        assert_eq!(cache.reused, 1, "the first family's piece, by its text");
        // A sink that keeps no page takes nothing.
        let mut streamed = PageDeflater::new(|_: &str, _: &str, _: &Deflated, _| {});
        assert!(!streamed.family_as_before("data", head, 7));
        streamed.finish();
    }

    #[test]
    fn a_cached_piece_that_does_not_inflate_is_not_kept_and_no_panic() {
        let x = "x 1\n".repeat(1000);
        let mut cache = PieceCache::default();
        reused_page(&mut cache, &[("a", "", &[&x, "y 1\n"])]);
        let kept = cache.pieces.get_mut("a").unwrap();
        kept.piece.bytes.truncate(1);
        // Differs after `x`, which the broken piece cannot give back.
        let page: [(&str, &str, &[&str]); 1] = [("a", "", &[&x, "y 2\n"])];
        reused_page(&mut cache, &page);
        assert!(cache.pieces.is_empty(), "not kept");
        let whole = reused_page(&mut cache, &page);
        assert_eq!(gunzipped(&whole), format!("{x}y 2\n"));
    }

    #[test]
    fn a_piece_that_does_not_hold_its_text_is_an_error_not_a_panic() {
        let good = Deflated::new("x 1\n".repeat(1000).as_bytes());
        let cut = Deflated::from_parts(
            good.bytes[..good.bytes.len() / 2].to_vec(),
            good.crc,
            good.len,
        );
        assert!(cut.inflate().is_err());
        let garbage = Deflated::from_parts(vec![0xff; 64], 0, 10);
        assert!(garbage.inflate().is_err());
        let wrong_crc = Deflated::from_parts(good.bytes.clone(), good.crc ^ 1, good.len);
        assert!(wrong_crc.inflate().is_err());
        let longer = Deflated::from_parts(good.bytes.clone(), good.crc, good.len + 1);
        assert!(longer.inflate().is_err());
        let shorter = Deflated::from_parts(good.bytes.clone(), good.crc, good.len - 1);
        assert!(shorter.inflate().is_err());
        // A whole stream (with its final block) is no piece.
        let mut whole = Vec::new();
        let mut c = compressor();
        deflate(&mut c, b"x 1\n", &mut whole, FlushCompress::Finish);
        let crc = zlib_rs::crc32::crc32(0, b"x 1\n");
        assert!(Deflated::from_parts(whole, crc, 4).inflate().is_err());
        assert_eq!(good.inflate().unwrap(), "x 1\n".repeat(1000));
    }
}
