//! The HTTP side of `serve`: the listener, the pages the sweepers fill (one per fabric),
//! and the answers to /metrics (the fabrics' pages merged family by family, gzip when
//! asked, with an HTTP Date) and /healthz.

use std::fmt::Write as _;
use std::io::{Cursor, Write as _};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use ibscope_topo::export::prometheus;

use crate::pieces::{gzip_parts, Deflated};
use crate::web::BasicAuth;

/// One family of a fabric's page: its head (HELP, TYPE) as text and compressed, and its
/// samples compressed (by the sweeper, as they were rendered). A merged page is one gzip
/// stream made of these pieces (see [`Deflated`]), so every client reads it, not only
/// those that read concatenated gzip members; a scraper that does not accept gzip gets
/// the samples inflated as they are written.
///
/// The samples are shared: a family the sweeper sends as unchanged is the last page's,
/// not a copy.
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub head: String,
    pub head_z: Deflated,
    pub body: Arc<Deflated>,
}

impl Family {
    pub fn new(name: String, head: String, body: Deflated) -> Family {
        let head_z = Deflated::new(head.as_bytes());
        Family {
            name,
            head,
            head_z,
            body: Arc::new(body),
        }
    }
}

/// What a sweeper publishes after each sweep.
#[derive(Debug)]
pub struct PublishedSweep {
    /// The exposition, family by family, except the per-scrape families (age, up).
    pub families: Vec<Family>,
    pub finished: Instant,
    /// `None` when the sweep succeeded, else why not.
    pub failure: Option<String>,
}

impl PublishedSweep {
    pub fn new(families: Vec<Family>, failure: Option<String>) -> PublishedSweep {
        PublishedSweep {
            families,
            finished: Instant::now(),
            failure,
        }
    }

    /// Bytes of text and of gzip, for the log.
    pub fn sizes(&self) -> (usize, usize) {
        self.families.iter().fold((0, 0), |(t, z), f| {
            (
                t + f.head.len() + f.body.text_len() as usize,
                z + f.head_z.bytes().len() + f.body.bytes().len(),
            )
        })
    }
}

/// One fabric's place on the page: its name, its last snapshot and whether its sweeper
/// holds the fabric. A fabric that is lost keeps its last good snapshot, served
/// marked stale, until its port is open again.
#[derive(Debug)]
pub struct Slot {
    name: Mutex<String>,
    pub page: Cache,
    link: Mutex<Link>,
}

/// Whether a fabric's sweeper holds the fabric, as its supervisor last saw it.
#[derive(Debug, Clone)]
pub struct Link {
    /// The port is open and the last sweep reached the fabric.
    pub up: bool,
    /// Why not, once the fabric was lost (or a sweep reached nothing); `None` while
    /// starting.
    pub reason: Option<String>,
    /// When `up` last changed.
    pub since: Instant,
    /// Times the port was opened again after it was lost.
    pub reopens: u64,
    /// The port reaches a subnet another slot already sweeps: left off the page.
    pub merged: bool,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            up: false,
            reason: None,
            since: Instant::now(),
            reopens: 0,
            merged: false,
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slot {
    pub fn new(name: String) -> Slot {
        Slot {
            name: Mutex::new(name),
            page: Cache::default(),
            link: Mutex::new(Link::default()),
        }
    }

    pub fn name(&self) -> String {
        locked(&self.name).clone()
    }

    /// The name the opened fabric has (a single fabric's is known only once it is open).
    pub fn set_name(&self, name: String) {
        *locked(&self.name) = name;
    }

    pub fn link(&self) -> Link {
        locked(&self.link).clone()
    }

    /// The fabric answers (again).
    pub fn set_up(&self) {
        let mut l = locked(&self.link);
        if !l.up {
            l.since = Instant::now();
        }
        l.up = true;
        l.reason = None;
    }

    /// The fabric is unreachable: `reason` says why (the first reason of an outage is
    /// kept while it lasts, unless `replace`). Its last good page stays, served stale.
    pub fn set_down(&self, reason: String, replace: bool) {
        let mut l = locked(&self.link);
        if l.up {
            l.since = Instant::now();
        }
        l.up = false;
        if replace || l.reason.is_none() {
            l.reason = Some(reason);
        }
    }

    pub fn count_reopen(&self) {
        locked(&self.link).reopens += 1;
    }

    /// Another slot sweeps this one's subnet: this one leaves the page and /healthz.
    pub fn set_merged(&self) {
        locked(&self.link).merged = true;
        drop(self.page.clear());
    }

    /// `Ok` when the fabric answers and its last sweep succeeded and is younger than
    /// `max_age`, else why not.
    fn state(&self, max_age: Duration) -> Result<(), String> {
        state(self.page.load().as_deref(), &self.link(), max_age)
    }
}

/// A fabric's health: `Ok` when it answers and its last sweep succeeded and is fresh, else
/// why not (one line, or two while the last good page is served).
fn state(snapshot: Option<&PublishedSweep>, link: &Link, max_age: Duration) -> Result<(), String> {
    if let (false, Some(why)) = (link.up, &link.reason) {
        let mut body = format!(
            "fabric unreachable for {:.0} s: {why}",
            link.since.elapsed().as_secs_f64()
        );
        if let Some(s) = snapshot {
            let _ = write!(
                body,
                "; serving the last good sample, {:.0} s old",
                s.finished.elapsed().as_secs_f64()
            );
        }
        return Err(body);
    }
    match snapshot {
        None => Err("no sweep finished yet".to_string()),
        Some(s) => match &s.failure {
            Some(why) => Err(format!("last sweep failed: {why}")),
            None if s.finished.elapsed() > max_age => Err(format!(
                "last sweep is stale: finished {:.0} s ago (limit {:.0} s)",
                s.finished.elapsed().as_secs_f64(),
                max_age.as_secs_f64()
            )),
            None => Ok(()),
        },
    }
}

/// Every fabric's slot. `multi`: the command line named several (then /healthz has one
/// line per fabric).
#[derive(Debug)]
pub struct Pages {
    pub slots: Vec<Slot>,
    pub multi: bool,
    /// The host's own page (`serve --host`: the ibscope_host_* families), on the page of
    /// every fabric together; `None` when not asked or not read yet.
    pub host: Mutex<Option<Arc<String>>>,
}

impl Pages {
    /// Replace the host's page (a complete exposition of its own families).
    pub fn set_host_page(&self, text: String) {
        *locked(&self.host) = Some(Arc::new(text));
    }

    fn host_page(&self) -> Option<Arc<String>> {
        locked(&self.host).clone()
    }

    /// The slots on a page of one fabric (`/metrics?fabric=NAME`), or of every fabric.
    fn shown_only<'a>(&'a self, only: Option<&'a str>) -> impl Iterator<Item = (usize, &'a Slot)> {
        self.shown()
            .filter(move |(_, s)| only.map_or(true, |name| s.name() == name))
    }

    /// The slots on the page: every one but those merged into another.
    fn shown(&self) -> impl Iterator<Item = (usize, &Slot)> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.link().merged)
    }

    /// /healthz: 200 when every fabric answers and its last sweep succeeded and is fresh,
    /// else 503; the body says why (one line per fabric when there are several).
    fn health(&self, max_age: Duration) -> (u16, String) {
        if self.slots.is_empty() {
            return match self.host_page() {
                Some(_) => (200, "ok (this host only)\n".to_string()),
                None => (503, "this host not read yet\n".to_string()),
            };
        }
        if !self.multi {
            return match self.slots.first().map(|s| s.state(max_age)) {
                Some(Ok(())) => (200, "ok\n".to_string()),
                Some(Err(why)) => (503, format!("{why}\n")),
                None => (503, "no fabric\n".to_string()),
            };
        }
        let mut all_ok = true;
        let mut body = String::new();
        for (_, slot) in self.shown() {
            let state = slot.state(max_age);
            all_ok &= state.is_ok();
            let _ = writeln!(
                body,
                "{}: {}",
                slot.name(),
                state.err().unwrap_or_else(|| "ok".to_string())
            );
        }
        (if all_ok { 200 } else { 503 }, body)
    }
}

/// The last snapshot, shared between the sweeper and the HTTP threads. The lock only
/// guards the pointer: a scrape clones the `Arc`, the sweeper swaps in a new one; nothing
/// renders, compresses or frees a page while holding it.
#[derive(Debug, Default)]
pub struct Cache(Mutex<Option<Arc<PublishedSweep>>>);

impl Cache {
    pub fn load(&self) -> Option<Arc<PublishedSweep>> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Publish `snap`; returns the previous snapshot, for the caller to drop outside the
    /// lock.
    pub fn store(&self, snap: Arc<PublishedSweep>) -> Option<Arc<PublishedSweep>> {
        let mut g = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.replace(snap)
    }

    /// Forget the page; returns it, for the caller to drop outside the lock.
    pub fn clear(&self) -> Option<Arc<PublishedSweep>> {
        let mut g = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.take()
    }
}

/// Check --listen: resolvable, and loopback unless remote access is allowed (by
/// --allow-remote, or by TLS from --web-config).
pub fn listen_addr(text: &str, allow_remote: bool) -> Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .with_context(|| format!("--listen {text:?}: not a host:port address"))?
        .collect();
    let first = *addrs
        .first()
        .ok_or_else(|| anyhow!("--listen {text:?} resolves to no address"))?;
    if !allow_remote && !first.ip().is_loopback() {
        bail!(
            "--listen {text}: {} is not a loopback address; the metrics describe the whole \
             fabric and would be served over plain HTTP: give a --web-config with TLS (and \
             basic_auth_users), or add --allow-remote to expose them anyway",
            first.ip()
        );
    }
    Ok(first)
}

/// A listener whose connections send at once (TCP_NODELAY is inherited by accepted
/// sockets on Linux): the end of a page is not held back waiting for an ACK.
pub fn listener(addr: SocketAddr) -> Result<TcpListener> {
    use std::os::fd::AsRawFd;
    let l = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!("TCP_NODELAY not set on the listener");
    }
    Ok(l)
}

/// Whether the request's Accept-Encoding allows gzip.
fn accepts_gzip(req: &tiny_http::Request) -> bool {
    req.headers().iter().any(|h| {
        h.field.equiv("Accept-Encoding")
            && h.value
                .as_str()
                .split(',')
                .any(|e| e.trim().split(';').next() == Some("gzip"))
    })
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("static header names and ASCII values")
}

fn text_response(status: u16, body: String) -> tiny_http::Response<Cursor<Vec<u8>>> {
    tiny_http::Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
}

/// An IMF-fixdate (RFC 9110 5.6.7) for the Date header.
fn http_date(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// What one request got, for the debug log.
struct Served {
    status: u16,
    bytes: usize,
    gzip: bool,
}

/// Answer one request and log how long it took on this side (at debug level).
pub fn serve_one(
    req: tiny_http::Request,
    pages: &Pages,
    auth: Option<&BasicAuth>,
    max_age: Duration,
) {
    let started = Instant::now();
    let (path, query) = match req.url().split_once('?') {
        Some((path, query)) => (path.to_string(), query.to_string()),
        None => (req.url().to_string(), String::new()),
    };
    let allowed = auth.map_or(true, |a| {
        let header = req
            .headers()
            .iter()
            .find(|h| h.field.equiv("Authorization"))
            .map(|h| h.value.as_str());
        a.allows(header)
    });
    let result = if allowed {
        answer(req, &path, &query, pages, max_age)
    } else {
        let r = text_response(401, "unauthorized\n".into())
            .with_header(header("WWW-Authenticate", "Basic realm=\"ibscope\""));
        req.respond(r).map(|()| Served {
            status: 401,
            bytes: 0,
            gzip: false,
        })
    };
    match result {
        Ok(s) => tracing::debug!(
            path,
            status = s.status,
            bytes = s.bytes,
            gzip = s.gzip,
            us = started.elapsed().as_micros() as u64,
            "served"
        ),
        Err(e) => tracing::debug!(
            path,
            error = %e,
            us = started.elapsed().as_micros() as u64,
            "not served"
        ),
    }
}

fn respond_text(req: tiny_http::Request, status: u16, body: String) -> std::io::Result<Served> {
    let bytes = body.len();
    req.respond(text_response(status, body))?;
    Ok(Served {
        status,
        bytes,
        gzip: false,
    })
}

fn answer(
    req: tiny_http::Request,
    path: &str,
    query: &str,
    pages: &Pages,
    max_age: Duration,
) -> std::io::Result<Served> {
    if *req.method() != tiny_http::Method::Get {
        let r =
            text_response(405, "only GET is served\n".into()).with_header(header("Allow", "GET"));
        req.respond(r)?;
        return Ok(Served {
            status: 405,
            bytes: 0,
            gzip: false,
        });
    }
    match path {
        "/metrics" => {
            let only = match fabric_asked(query) {
                Ok(only) => only,
                Err(why) => return respond_text(req, 400, why),
            };
            if let Some(name) = &only {
                if !pages.shown().any(|(_, s)| s.name() == *name) {
                    let known: Vec<String> = pages.shown().map(|(_, s)| s.name()).collect();
                    let body = format!("no fabric {name:?} here; fabrics: {}\n", known.join(", "));
                    return respond_text(req, 404, body);
                }
            }
            let shown = || pages.shown_only(only.as_deref());
            let snaps: Vec<(usize, Arc<PublishedSweep>)> = shown()
                .filter_map(|(i, s)| s.page.load().map(|p| (i, p)))
                .collect();
            // A page of the host alone (`serve --host --no-fabric`) needs no sweep.
            let host_only = pages.slots.is_empty() && pages.host_page().is_some();
            if snaps.is_empty() && !host_only {
                let unreachable: Vec<String> = shown()
                    .filter_map(|(_, s)| {
                        let link = s.link();
                        let why = link.reason.filter(|_| !link.up)?;
                        Some(if pages.multi {
                            format!("{}: {why}", s.name())
                        } else {
                            why
                        })
                    })
                    .collect();
                let body = if unreachable.is_empty() {
                    "no sweep finished yet (discovery in progress)\n".to_string()
                } else {
                    format!(
                        "no sweep finished yet; the fabric is unreachable: {}\n",
                        unreachable.join("; ")
                    )
                };
                return respond_text(req, 503, body);
            }
            write_metrics(req, pages, only.as_deref(), &snaps, max_age)
        }
        "/" => {
            let body = landing_page(pages, max_age);
            let bytes = body.len();
            let r = tiny_http::Response::from_string(body)
                .with_header(header("Content-Type", "text/html; charset=utf-8"));
            req.respond(r)?;
            Ok(Served {
                status: 200,
                bytes,
                gzip: false,
            })
        }
        "/healthz" => {
            let (status, body) = pages.health(max_age);
            respond_text(req, status, body)
        }
        _ => respond_text(req, 404, "not found: try /, /metrics or /healthz\n".into()),
    }
}

/// The landing page at `/`, as node_exporter has one: each fabric, its state, and links
/// to its page and to the health check. Fabric names are the operator's (config, CA
/// names) or the subnet's: escaped for HTML and for the query all the same.
fn landing_page(pages: &Pages, max_age: Duration) -> String {
    let mut rows = String::new();
    for (_, slot) in pages.shown() {
        let name = slot.name();
        let state = match slot.state(max_age) {
            Ok(()) => "up".to_string(),
            Err(why) => why.lines().next().unwrap_or("down").to_string(),
        };
        rows.push_str(&format!(
            "<tr><td><a href=\"/metrics?fabric={}\">{}</a></td><td>{}</td></tr>\n",
            query_escape(&name),
            html_escape(&name),
            html_escape(&state)
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html><head><title>ibscope exporter</title></head><body>\n\
         <h1>ibscope exporter</h1>\n\
         <p><a href=\"/metrics\">/metrics</a> (every fabric) &middot; \
         <a href=\"/healthz\">/healthz</a></p>\n\
         <table>\n<tr><th>fabric</th><th>state</th></tr>\n{rows}</table>\n</body></html>\n"
    )
}

fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push_str(&format!("&#{};", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encoding of a query value: every byte but unreserved ones (RFC 3986 2.3).
fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The fabric a `/metrics` query asks for (`fabric=NAME`, the multi-target pattern of
/// the blackbox and snmp exporters), percent-decoded; `None` for every fabric. Other
/// parameters are ignored; a name that does not decode is a client error.
fn fabric_asked(query: &str) -> Result<Option<String>, String> {
    let Some(value) = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("fabric="))
    else {
        return Ok(None);
    };
    let bad = || format!("fabric={value}: not a percent-encoded UTF-8 name\n");
    let mut bytes = Vec::with_capacity(value.len());
    let mut rest = value.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        match b {
            b'%' => {
                let hex = tail.get(..2).ok_or_else(bad)?;
                let text = std::str::from_utf8(hex).map_err(|_| bad())?;
                bytes.push(u8::from_str_radix(text, 16).map_err(|_| bad())?);
                rest = &tail[2..];
            }
            b'+' => {
                bytes.push(b' ');
                rest = tail;
            }
            _ => {
                bytes.push(b);
                rest = tail;
            }
        }
    }
    String::from_utf8(bytes).map(Some).map_err(|_| bad())
}

/// A part of a merged page: a family's head, or one fabric's samples of it.
#[derive(Clone, Copy)]
enum Part<'a> {
    Head(&'a Family),
    Samples(&'a Deflated),
}

impl Part<'_> {
    fn deflated(&self) -> &Deflated {
        match self {
            Part::Head(f) => &f.head_z,
            Part::Samples(z) => z,
        }
    }
}

/// The families of a merged page in order: each family's head once, then every fabric's
/// samples of it.
fn merged(snaps: &[(usize, Arc<PublishedSweep>)]) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let Some((_, first)) = snaps.first() else {
        return parts;
    };
    for (i, family) in first.families.iter().enumerate() {
        parts.push(Part::Head(family));
        for (_, snap) in snaps {
            // Every page has the same families in the same order (one renderer); look
            // the name up should that ever not hold.
            let same = snap
                .families
                .get(i)
                .filter(|f| f.name == family.name)
                .or_else(|| snap.families.iter().find(|f| f.name == family.name));
            if let Some(f) = same {
                parts.push(Part::Samples(&f.body));
            }
        }
    }
    parts
}

/// Bytes of a page's body: its parts and the per-scrape `tail`, as gzip or as text.
fn page_len(parts: &[Part<'_>], tail: &str, gzip: Option<&[&[u8]]>) -> u64 {
    match gzip {
        Some(stream) => stream.iter().map(|p| p.len() as u64).sum(),
        None => {
            parts
                .iter()
                .map(|p| match p {
                    Part::Head(f) => f.head.len() as u64,
                    Part::Samples(z) => z.text_len(),
                })
                .sum::<u64>()
                + tail.len() as u64
        }
    }
}

/// The page's body as text: heads as they are, samples inflated as they are written.
fn write_text(w: &mut dyn std::io::Write, parts: &[Part<'_>], tail: &str) -> std::io::Result<()> {
    let mut inflate = flate2::Decompress::new(false);
    let mut buf = vec![0u8; INFLATE_BUF];
    for part in parts {
        match part {
            Part::Head(f) => w.write_all(f.head.as_bytes())?,
            Part::Samples(z) => z.inflate_into(&mut inflate, &mut buf, w)?,
        }
    }
    w.write_all(tail.as_bytes())
}

/// Text inflated at a time for a scraper without gzip: what a socket takes in a write or
/// two, small enough to stay in the CPU's cache.
const INFLATE_BUF: usize = 1 << 18;

/// The page: the fabrics' cached families (their compressed pieces in one gzip stream, or
/// inflated to text) and the per-scrape families (age, up), written straight to the
/// socket with a Content-Length. (tiny_http's own writer would copy it through an 8 KiB
/// buffer in chunked encoding.)
fn write_metrics(
    req: tiny_http::Request,
    pages: &Pages,
    only: Option<&str>,
    snaps: &[(usize, Arc<PublishedSweep>)],
    max_age: Duration,
) -> std::io::Result<Served> {
    let states: Vec<(String, Link, bool, Option<Duration>)> = pages
        .shown_only(only)
        .map(|(i, slot)| {
            let age = snaps
                .iter()
                .find(|(j, _)| *j == i)
                .map(|(_, s)| s.finished.elapsed());
            (slot.name(), slot.link(), slot.state(max_age).is_ok(), age)
        })
        .collect();
    let statuses: Vec<prometheus::FabricStatus<'_>> = states
        .iter()
        .map(|(name, link, ok, age)| prometheus::FabricStatus {
            name,
            up: *ok,
            stale: !link.up || age.map_or(true, |a| a > max_age),
            age_seconds: age.map(|a| a.as_secs_f64()),
            reopens: link.reopens,
        })
        .collect();
    let scrape = prometheus::scrape_families(&statuses);
    // The host's families go on the page of every fabric together, before the per-scrape
    // ones: one small piece compressed per scrape.
    let tail = match (only, pages.host_page()) {
        (None, Some(host)) => format!("{host}{scrape}"),
        _ => scrape,
    };
    let zipped = accepts_gzip(&req);
    let parts = merged(snaps);
    let tail_z;
    let mut trailer = [0u8; 8];
    let stream: Option<Vec<&[u8]>> = if zipped {
        tail_z = Deflated::new(tail.as_bytes());
        let mut pieces: Vec<&Deflated> = parts.iter().map(Part::deflated).collect();
        pieces.push(&tail_z);
        Some(gzip_parts(&pieces, &mut trailer))
    } else {
        None
    };
    let version = req.http_version();
    let (major, minor) = (version.0, version.1);
    let mut head = format!(
        "HTTP/{major}.{minor} 200 OK\r\nServer: ibscope\r\nDate: {}\r\n\
         Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
        http_date(SystemTime::now())
    );
    if zipped {
        head.push_str("Content-Encoding: gzip\r\n");
    }
    let len = page_len(&parts, &tail, stream.as_deref());
    let _ = write!(head, "Content-Length: {len}\r\n\r\n");
    let mut w = req.into_writer();
    w.write_all(head.as_bytes())?;
    match &stream {
        Some(stream) => {
            for piece in stream {
                w.write_all(piece)?;
            }
        }
        // A piece that does not inflate cuts the answer short of its Content-Length.
        None => write_text(&mut w, &parts, &tail)?,
    }
    w.flush()?;
    Ok(Served {
        status: 200,
        bytes: len as usize,
        gzip: zipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn fabric_names_are_escaped_on_the_landing_page_and_in_its_links() {
        let name = "<b>\"x\" & y/1";
        assert_eq!(html_escape(name), "&lt;b&gt;&quot;x&quot; &amp; y/1");
        assert_eq!(html_escape("a\u{1b}[31m"), "a&#27;[31m");
        assert_eq!(query_escape(name), "%3Cb%3E%22x%22%20%26%20y%2F1");
        assert_eq!(
            fabric_asked(&format!("fabric={}", query_escape(name))),
            Ok(Some(name.into()))
        );
    }

    #[test]
    fn a_metrics_query_names_one_fabric_or_none() {
        assert_eq!(fabric_asked(""), Ok(None));
        assert_eq!(fabric_asked("debug=1"), Ok(None));
        assert_eq!(fabric_asked("fabric=plane-a"), Ok(Some("plane-a".into())));
        assert_eq!(
            fabric_asked("x=1&fabric=mlx5_0%2F1"),
            Ok(Some("mlx5_0/1".into()))
        );
        assert_eq!(fabric_asked("fabric=a+b"), Ok(Some("a b".into())));
        assert!(fabric_asked("fabric=%4").is_err());
        assert!(fabric_asked("fabric=%zz").is_err());
        assert!(fabric_asked("fabric=%ff").is_err());
    }
    use crate::pieces::PageDeflater;
    use ibscope_topo::export::prometheus::PageSink;

    /// A rendered page's families as a sweeper sends them: its samples handed to
    /// the deflater in pieces, as the renderer hands them out.
    fn families(page: &str) -> Vec<Family> {
        let mut out = Vec::new();
        let mut sink = PageDeflater::new(|name: &str, head: &str, body: &Deflated, _| {
            out.push(Family::new(name.into(), head.into(), body.clone()))
        });
        for (name, head, body) in prometheus::split_families(page) {
            sink.family(name, head);
            for lines in body.split_inclusive('\n') {
                sink.samples(lines);
            }
        }
        sink.finish();
        out
    }

    #[test]
    fn a_merged_page_is_the_same_text_inflated_or_gzipped() {
        use std::io::Read;
        let page = |fabric: &str, n: usize| {
            let mut p = String::from("# HELP a A.\n# TYPE a gauge\n");
            for i in 0..n {
                p += &format!("a{{fabric=\"{fabric}\",port=\"{i}\"}} {i}\n");
            }
            p += "# HELP b B.\n# TYPE b counter\n";
            p += &format!("b{{fabric=\"{fabric}\"}} 7\n");
            p
        };
        let (alpha, beta) = (page("alpha", 50_000), page("beta", 3));
        let snaps = vec![
            (0, Arc::new(PublishedSweep::new(families(&alpha), None))),
            (1, Arc::new(PublishedSweep::new(families(&beta), None))),
        ];
        let tail = "# HELP up Up.\n# TYPE up gauge\nup 1\n";
        // Family by family: each head once, then every fabric's samples.
        let [a_alpha, b_alpha] = [
            &prometheus::split_families(&alpha)[0],
            &prometheus::split_families(&alpha)[1],
        ]
        .map(|(_, h, b)| (h.to_string(), b.to_string()));
        let [a_beta, b_beta] = [
            &prometheus::split_families(&beta)[0],
            &prometheus::split_families(&beta)[1],
        ]
        .map(|(_, _, b)| b.to_string());
        let expected = format!(
            "{}{}{a_beta}{}{}{b_beta}{tail}",
            a_alpha.0, a_alpha.1, b_alpha.0, b_alpha.1
        );
        let parts = merged(&snaps);

        let mut text = Vec::new();
        write_text(&mut text, &parts, tail).unwrap();
        assert_eq!(String::from_utf8(text).unwrap(), expected);
        assert_eq!(page_len(&parts, tail, None), expected.len() as u64);

        let tail_z = Deflated::new(tail.as_bytes());
        let mut pieces: Vec<&Deflated> = parts.iter().map(Part::deflated).collect();
        pieces.push(&tail_z);
        let mut trailer = [0u8; 8];
        let stream = gzip_parts(&pieces, &mut trailer);
        let len = page_len(&parts, tail, Some(&stream));
        let stream = stream.concat();
        assert_eq!(len, stream.len() as u64);
        let mut out = String::new();
        flate2::read::GzDecoder::new(&stream[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, expected);
    }

    #[test]
    fn a_piece_that_does_not_inflate_cuts_the_text_short_without_a_panic() {
        let mut snap = PublishedSweep::new(families("# HELP a A.\n# TYPE a gauge\na 1\n"), None);
        let body = &snap.families[0].body;
        snap.families[0].body = Arc::new(Deflated::from_parts(
            body.bytes()[..1].to_vec(),
            body.crc(),
            body.text_len(),
        ));
        let snaps = vec![(0, Arc::new(snap))];
        let mut text = Vec::new();
        assert!(write_text(&mut text, &merged(&snaps), "").is_err());
    }

    #[test]
    fn loopback_only_by_default() {
        assert!(listen_addr("127.0.0.1:9315", false).is_ok());
        assert!(listen_addr("[::1]:9315", false).is_ok());
        let e = listen_addr("0.0.0.0:9315", false).unwrap_err().to_string();
        assert!(e.contains("--allow-remote"), "{e}");
        assert!(listen_addr("0.0.0.0:9315", true).is_ok());
        assert!(listen_addr("nonsense", false).is_err());
    }

    #[test]
    fn health_says_why_not_and_keeps_the_last_good_page() {
        let limit = Duration::from_secs(35);
        let slot = Slot::new("alpha".into());
        let page = |age: Duration, failure: Option<&str>| {
            let mut s = PublishedSweep::new(
                families("# HELP a A.\n# TYPE a gauge\na 1\n"),
                failure.map(String::from),
            );
            s.finished = Instant::now() - age;
            Arc::new(s)
        };
        assert_eq!(slot.state(limit), Err("no sweep finished yet".into()));
        slot.set_up();
        drop(slot.page.store(page(Duration::from_secs(1), None)));
        assert_eq!(slot.state(limit), Ok(()));
        drop(slot.page.store(page(Duration::from_secs(40), None)));
        let why = slot.state(limit).unwrap_err();
        assert!(why.starts_with("last sweep is stale"), "{why}");
        drop(
            slot.page
                .store(page(Duration::ZERO, Some("none of 4 ports answered"))),
        );
        assert_eq!(
            slot.state(limit),
            Err("last sweep failed: none of 4 ports answered".into())
        );

        drop(slot.page.store(page(Duration::from_secs(1), None)));
        slot.set_down("lost the connection".into(), false);
        slot.set_down("the sweeper ended".into(), false);
        let why = slot.state(limit).unwrap_err();
        assert!(
            why.starts_with("fabric unreachable for 0 s: lost the connection; ")
                && why.ends_with("serving the last good sample, 1 s old"),
            "{why}"
        );
        assert!(slot.page.load().is_some(), "the last good page stays");
        slot.set_up();
        assert_eq!(slot.state(limit), Ok(()));
        assert!(slot.link().reason.is_none());

        let pages = Pages {
            host: Mutex::new(None),
            slots: vec![slot, Slot::new("beta".into())],
            multi: true,
        };
        pages.slots[1].set_down("no device".into(), false);
        let (code, body) = pages.health(limit);
        assert_eq!(code, 503);
        assert!(
            body.starts_with("alpha: ok\nbeta: fabric unreachable for 0 s: no device\n"),
            "{body}"
        );
        pages.slots[1].set_merged();
        assert_eq!(pages.health(limit), (200, "alpha: ok\n".into()));
    }

    #[test]
    fn http_dates_are_imf_fixdates() {
        let at = |s: u64| http_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        // RFC 9110's own example.
        assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(at(4_102_444_799), "Thu, 31 Dec 2099 23:59:59 GMT");
    }
}
