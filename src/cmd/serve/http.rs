//! The HTTP side of `serve`: the listener, the page cache the sweeper fills, and the
//! answers to /metrics (gzip when asked, with an HTTP Date) and /healthz.

use std::fmt::Write as _;
use std::io::{Cursor, Write as _};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use ibscope_topo::export::prometheus;

/// What the sweeper publishes after each sweep.
#[derive(Debug)]
pub struct Snapshot {
    /// The whole exposition except the age family (computed per scrape).
    pub text: String,
    /// `text` gzip-compressed once per sweep, for scrapers that accept gzip.
    pub gzip: Vec<u8>,
    pub finished: Instant,
    /// `None` when the sweep succeeded, else why not.
    pub failure: Option<String>,
}

/// The last snapshot and the state of the fabric link, shared between the supervisor of
/// the sweeper process and the HTTP threads. The locks only guard a pointer and a few
/// fields: a scrape clones the `Arc`, the supervisor swaps in a new one; nothing renders,
/// compresses or frees a page while holding them.
#[derive(Debug, Default)]
pub struct Cache {
    page: Mutex<Option<Arc<Snapshot>>>,
    link: Mutex<Link>,
}

/// Whether the sweeper process holds the fabric, as the supervisor last saw it.
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
}

impl Default for Link {
    fn default() -> Self {
        Link {
            up: false,
            reason: None,
            since: Instant::now(),
            reopens: 0,
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Cache {
    pub fn load(&self) -> Option<Arc<Snapshot>> {
        locked(&self.page).clone()
    }

    /// Publish `snap`; returns the previous snapshot, for the caller to drop outside the
    /// lock.
    pub fn store(&self, snap: Arc<Snapshot>) -> Option<Arc<Snapshot>> {
        locked(&self.page).replace(snap)
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
    /// kept while it lasts, unless `replace`).
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
}

/// Check --listen: resolvable, and loopback unless remote access is allowed.
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
             fabric and are served without authentication: add --allow-remote to expose them",
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

/// Fast gzip: the page is rebuilt every sweep, so speed matters more than ratio.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
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
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What one request got, for the debug log.
struct Served {
    status: u16,
    bytes: usize,
    gzip: bool,
}

/// Answer one request and log how long it took on this side (at debug level).
pub fn serve_one(req: tiny_http::Request, cache: &Cache, max_age: Duration) {
    let started = Instant::now();
    let path = req.url().split('?').next().unwrap_or("").to_string();
    match answer(req, &path, cache, max_age) {
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
    cache: &Cache,
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
    let snapshot = cache.load();
    let link = cache.link();
    match path {
        "/metrics" => match snapshot {
            None => respond_text(
                req,
                503,
                match &link.reason {
                    Some(why) => {
                        format!("no sweep finished yet; the fabric is unreachable: {why}\n")
                    }
                    None => "no sweep finished yet (discovery in progress)\n".into(),
                },
            ),
            Some(snap) => write_metrics(req, &snap, &link, max_age),
        },
        "/healthz" => {
            let (status, body) = health(snapshot.as_deref(), &link, max_age);
            respond_text(req, status, body)
        }
        _ => respond_text(req, 404, "not found: try /metrics or /healthz\n".into()),
    }
}

/// /healthz: 200 "ok" when the fabric answers and the last sweep succeeded and is fresh,
/// else 503 and why.
fn health(snapshot: Option<&Snapshot>, link: &Link, max_age: Duration) -> (u16, String) {
    if let (false, Some(why)) = (link.up, &link.reason) {
        let mut body = format!(
            "fabric unreachable for {:.0} s: {why}\n",
            link.since.elapsed().as_secs_f64()
        );
        if let Some(s) = snapshot {
            let _ = writeln!(
                body,
                "serving the last good sample, {:.0} s old",
                s.finished.elapsed().as_secs_f64()
            );
        }
        return (503, body);
    }
    match snapshot {
        None => (503, "no sweep finished yet\n".to_string()),
        Some(s) => match &s.failure {
            Some(why) => (503, format!("last sweep failed: {why}\n")),
            None if s.finished.elapsed() > max_age => (
                503,
                format!(
                    "last sweep is stale: finished {:.0} s ago (limit {:.0} s)\n",
                    s.finished.elapsed().as_secs_f64(),
                    max_age.as_secs_f64()
                ),
            ),
            None => (200, "ok\n".to_string()),
        },
    }
}

/// The page: the cached text (or its gzip) and the per-scrape status families (age, up,
/// stale), written straight to the socket with a Content-Length. (tiny_http's own writer
/// would copy it through an 8 KiB buffer in chunked encoding: one write per 8 KiB.)
fn write_metrics(
    req: tiny_http::Request,
    snap: &Snapshot,
    link: &Link,
    max_age: Duration,
) -> std::io::Result<Served> {
    let age = snap.finished.elapsed();
    let tail = prometheus::status_families(&prometheus::ServeStatus {
        up: link.up,
        stale: !link.up || age > max_age,
        age_seconds: age.as_secs_f64(),
        reopens: link.reopens,
    });
    let zipped = accepts_gzip(&req);
    // The cached page is compressed once per sweep; the small age family is a second
    // gzip member (RFC 1952 allows concatenated members).
    let (body, tail) = if zipped {
        (&snap.gzip[..], gzip(tail.as_bytes()))
    } else {
        (snap.text.as_bytes(), tail.into_bytes())
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
    let len = body.len() + tail.len();
    let _ = write!(head, "Content-Length: {len}\r\n\r\n");
    let mut w = req.into_writer();
    w.write_all(head.as_bytes())?;
    w.write_all(body)?;
    w.write_all(&tail)?;
    w.flush()?;
    Ok(Served {
        status: 200,
        bytes: len,
        gzip: zipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_by_default() {
        assert!(listen_addr("127.0.0.1:9315", false).is_ok());
        assert!(listen_addr("[::1]:9315", false).is_ok());
        let e = listen_addr("0.0.0.0:9315", false).unwrap_err().to_string();
        assert!(e.contains("--allow-remote"), "{e}");
        assert!(listen_addr("0.0.0.0:9315", true).is_ok());
        assert!(listen_addr("nonsense", false).is_err());
    }

    fn snapshot(age: Duration, failure: Option<&str>) -> Snapshot {
        Snapshot {
            text: String::new(),
            gzip: Vec::new(),
            finished: Instant::now() - age,
            failure: failure.map(str::to_string),
        }
    }

    #[test]
    fn health_says_why_not() {
        let limit = Duration::from_secs(35);
        let cache = Cache::default();
        let fresh = snapshot(Duration::from_secs(1), None);
        assert_eq!(health(None, &cache.link(), limit).0, 503);
        cache.set_up();
        assert_eq!(
            health(Some(&fresh), &cache.link(), limit),
            (200, "ok\n".into())
        );
        let old = snapshot(Duration::from_secs(40), None);
        let (code, body) = health(Some(&old), &cache.link(), limit);
        assert!(
            code == 503 && body.starts_with("last sweep is stale"),
            "{body}"
        );
        let failed = snapshot(Duration::ZERO, Some("none of 4 ports answered"));
        let (code, body) = health(Some(&failed), &cache.link(), limit);
        assert_eq!(
            (code, body.as_str()),
            (503, "last sweep failed: none of 4 ports answered\n")
        );

        cache.set_down("lost the connection".into(), false);
        cache.set_down("the sweeper process exited".into(), false);
        let (code, body) = health(Some(&fresh), &cache.link(), limit);
        assert_eq!(code, 503);
        assert!(
            body.starts_with("fabric unreachable for 0 s: lost the connection\n"),
            "{body}"
        );
        assert!(
            body.contains("serving the last good sample, 1 s old"),
            "{body}"
        );
        cache.set_up();
        assert_eq!(health(Some(&fresh), &cache.link(), limit).0, 200);
        assert!(cache.link().reason.is_none());
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
