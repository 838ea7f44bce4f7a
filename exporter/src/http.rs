//! The answers: /metrics (every fabric's series, or one fabric's with `?fabric=NAME`),
//! /healthz, and a landing page at `/`; basic auth when configured, gzip when asked.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use ibscope_topo::export::prometheus::{self, FabricStatus};

use crate::page::{Page, PageBody};
use crate::slots::{FabricSlot, Pages, SlotState};
use crate::web::BasicAuth;

/// What every answer reads.
pub struct Site {
    pub pages: Arc<Pages>,
    pub auth: Option<Arc<BasicAuth>>,
    /// A fabric whose last sweep is older is not fresh (`/healthz`, `ibscope_up`).
    pub max_age: Duration,
}

/// The address `--listen` names: loopback unless `allow_remote`.
pub fn listen_addr(text: &str, allow_remote: bool) -> Result<SocketAddr> {
    // `:PORT` is every interface, as Prometheus' exporters read it.
    let every = format!("0.0.0.0{text}");
    let address = if text.starts_with(':') { &every } else { text };
    let first = address
        .to_socket_addrs()
        .with_context(|| format!("--listen {text:?}: not a host:port address"))?
        .next()
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

fn respond(
    status: u16,
    kind: &'static str,
    body: impl Into<hyper::body::Bytes>,
) -> Response<PageBody> {
    let mut r = Response::new(PageBody::bytes(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

fn text(status: u16, body: String) -> Response<PageBody> {
    respond(status, "text/plain; charset=utf-8", body)
}

/// The answer to one request.
pub fn answer<B>(req: &Request<B>, site: &Site) -> Response<PageBody> {
    let started = Instant::now();
    let path = req.uri().path();
    let allowed = site.auth.as_ref().map_or(true, |a| {
        let given = req.headers().get(header::AUTHORIZATION);
        // bcrypt takes a while: let the runtime move other connections elsewhere.
        tokio::task::block_in_place(|| a.allows(given.and_then(|v| v.to_str().ok())))
    });
    let r = if !allowed {
        let mut r = text(401, "unauthorized\n".into());
        let realm = HeaderValue::from_static("Basic realm=\"ibscope\"");
        r.headers_mut().insert(header::WWW_AUTHENTICATE, realm);
        r
    } else if req.method() != Method::GET {
        let mut r = text(405, "only GET is served\n".into());
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        r
    } else {
        match path {
            "/metrics" => metrics(req, site),
            "/" => respond(200, "text/html; charset=utf-8", landing_page(site)),
            "/healthz" => {
                let (status, body) = site.pages.health(site.max_age);
                text(status, body)
            }
            _ => text(404, "not found: try /, /metrics or /healthz\n".into()),
        }
    };
    tracing::debug!(
        path,
        status = r.status().as_u16(),
        gzip = r.headers().contains_key(header::CONTENT_ENCODING),
        us = started.elapsed().as_micros() as u64,
        "served"
    );
    r
}

/// What a plain-HTTP request on the TLS port gets.
pub fn plain_on_tls() -> Response<PageBody> {
    let mut r = text(
        400,
        "Client sent an HTTP request to an HTTPS server.\n".into(),
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn accepts_gzip<B>(req: &Request<B>) -> bool {
    req.headers()
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| e.trim().split(';').next() == Some("gzip"))
}

fn metrics<B>(req: &Request<B>, site: &Site) -> Response<PageBody> {
    let pages = &site.pages;
    let only = fabric_asked(req.uri().query().unwrap_or(""));
    // Each page loaded once: the page served and its age are of the same sweep.
    let shown: Vec<(&FabricSlot, Option<Arc<Page>>)> = pages
        .shown()
        .filter(|s| only.as_ref().map_or(true, |name| s.name() == *name))
        .map(|s| (s, s.page.load_full()))
        .collect();
    if let (Some(name), true) = (&only, shown.is_empty()) {
        let known: Vec<String> = pages.shown().map(FabricSlot::name).collect();
        let body = format!("no fabric {name:?} here; fabrics: {}\n", known.join(", "));
        return text(404, body);
    }
    let with_page: Vec<Arc<Page>> = shown.iter().filter_map(|(_, p)| p.clone()).collect();
    let host = only.is_none().then(|| pages.host.load_full()).flatten();
    let page = match with_page.len() {
        // A page of the host alone (`serve --host --no-fabric`) needs no sweep.
        0 if pages.slots.is_empty() && host.is_some() => Arc::new(Page::from_text("")),
        // Why not, as /healthz says it (of the one fabric asked for, or of all).
        0 => {
            let why = match (&only, shown.first()) {
                (Some(_), Some((slot, _))) => slot.health(site.max_age).err(),
                _ => None,
            };
            let why = why.map_or_else(|| pages.health(site.max_age).1, |w| format!("{w}\n"));
            return text(503, why);
        }
        1 => with_page[0].clone(),
        _ => match tokio::task::block_in_place(|| pages.merged(with_page)) {
            Ok(page) => page,
            Err(e) => return text(500, format!("the page does not inflate: {e}\n")),
        },
    };
    let states: Vec<SlotState> = shown.iter().map(|(s, _)| s.state_now()).collect();
    let statuses: Vec<FabricStatus<'_>> = shown
        .iter()
        .zip(&states)
        .map(|((s, page), state)| {
            let age = page.as_ref().map(|p| p.finished.elapsed());
            FabricStatus {
                name: &state.name,
                up: s.health(site.max_age).is_ok(),
                stale: !state.up || age.map_or(true, |a| a > site.max_age),
                age_seconds: age.map(|a| a.as_secs_f64()),
                reopens: state.reopens,
            }
        })
        .collect();
    let scrape = prometheus::scrape_families(&statuses);
    let tail = format!("{}{scrape}", host.as_deref().map_or("", String::as_str));
    let kind = "text/plain; version=0.0.4; charset=utf-8";
    if !accepts_gzip(req) {
        return respond(200, kind, "").map(|_| PageBody::text(page, tail));
    }
    let mut r = respond(200, kind, "").map(|_| PageBody::gzip(&page, &tail));
    r.headers_mut()
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    r
}

/// `/`: the fabrics, their state, a link to each one's page.
fn landing_page(site: &Site) -> String {
    let mut rows = String::new();
    for slot in site.pages.shown() {
        let name = slot.name();
        let state = match slot.health(site.max_age) {
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

/// A fabric's name (untrusted: from the fabric or the config) as HTML text: markup and
/// control characters as numeric character references.
fn html_escape(text: &str) -> String {
    let escaped = |c: char| matches!(c, '&' | '<' | '>' | '"' | '\'') || c.is_control();
    (text.chars())
        .map(|c| match escaped(c) {
            true => format!("&#{};", u32::from(c)),
            false => c.to_string(),
        })
        .collect()
}

/// A fabric's name as a URL query value, form-encoded as [`fabric_asked`] reads it back.
fn query_escape(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The fabric `fabric=NAME` in a query names, decoded as a form is (`+` a space; a
/// malformed escape is kept as it is and names no fabric).
fn fabric_asked(query: &str) -> Option<String> {
    (form_urlencoded::parse(query.as_bytes()))
        .find(|(key, _)| key == "fabric")
        .map(|(_, name)| name.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fabric_names_are_escaped_on_the_landing_page_and_in_its_links() {
        let name = "<b>\"x\" & y/1";
        assert_eq!(html_escape(name), "&#60;b&#62;&#34;x&#34; &#38; y/1");
        assert_eq!(html_escape("a\u{1b}[31m"), "a&#27;[31m");
        assert_eq!(query_escape(name), "%3Cb%3E%22x%22+%26+y%2F1");
        assert_eq!(query_escape("plane-a.b_c"), "plane-a.b_c");
        let asked = format!("fabric={}", query_escape(name));
        assert_eq!(fabric_asked(&asked), Some(name.into()));
    }

    #[test]
    fn a_metrics_query_names_one_fabric_or_none() {
        assert_eq!(fabric_asked(""), None);
        assert_eq!(fabric_asked("debug=1"), None);
        assert_eq!(fabric_asked("fabric=plane-a"), Some("plane-a".into()));
        let asked = fabric_asked("x=1&fabric=mlx5_0%2F1");
        assert_eq!(asked, Some("mlx5_0/1".into()));
        assert_eq!(fabric_asked("fabric=a+b"), Some("a b".into()));
        // Malformed: kept as it is (or replaced, for bytes that are not UTF-8).
        assert_eq!(fabric_asked("fabric=%zz"), Some("%zz".into()));
        assert_eq!(fabric_asked("fabric=%ff"), Some("\u{fffd}".into()));
    }

    #[test]
    fn loopback_only_by_default() {
        assert!(listen_addr("127.0.0.1:9315", false).is_ok());
        assert!(listen_addr("[::1]:9315", false).is_ok());
        let e = listen_addr("0.0.0.0:9315", false).unwrap_err().to_string();
        assert!(e.contains("--allow-remote"), "{e}");
        assert!(listen_addr("0.0.0.0:9315", true).is_ok());
        assert!(listen_addr("nonsense", false).is_err());
        assert_eq!(
            listen_addr(":9315", true).unwrap(),
            "0.0.0.0:9315".parse().unwrap()
        );
        assert!(listen_addr(":9315", false).is_err());
    }
}
