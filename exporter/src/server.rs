//! Serving: `serve`, what `ibscope serve` does from its settings to its stop; the listener
//! and its connections (hyper on a small tokio runtime, TLS through tokio-rustls), a
//! sweeper thread per fabric, this host's page read beside them, and the orderly stop of
//! all of them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use ibscope_mad::engine::CancelToken;
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio_rustls::TlsAcceptor;

use crate::http::{self, Site};
use crate::slots::Pages;
use crate::sweeper::{self, FabricToServe, PortOpening, REOPEN_FIRST};
use crate::web::{BasicAuth, TlsConfig, WebConfig};

/// What `ibscope serve` serves, and how.
pub struct Serve {
    /// host:port; loopback only unless `allow_remote`, or TLS from `web_config`.
    pub listen: String,
    pub allow_remote: bool,
    /// TLS and basic auth (the exporter-toolkit's file).
    pub web_config: Option<PathBuf>,
    pub http_threads: u32,
    /// Between two sweeps (each fabric's own), and two readings of this host.
    pub interval: Duration,
    pub fabrics: Vec<FabricToServe>,
    /// Several fabrics were asked for: one that cannot be opened at start is tried again.
    pub multi: bool,
    /// This host's page (`--host`), read every interval beside the fabrics'.
    pub host_page: Option<HostPage>,
    /// How long the sweepers get to close their ports once asked to stop.
    pub stop_limit: Duration,
}

/// Reads this host's families (the `host` crate's Prometheus text).
pub type HostPage = Box<dyn Fn() -> Result<String> + Send>;

/// How the process is told to stop: its signals are the binary's to catch.
pub struct StopSignals<'a> {
    /// The stop signal received, if one was.
    pub received: &'a dyn Fn() -> Option<i32>,
    /// Block (true) the stop signals in the calling thread, or unblock them: threads
    /// started in between inherit the mask, so that only the main thread takes them.
    pub block_in_new_threads: &'a dyn Fn(bool),
    /// A signal's name (SIGTERM).
    pub name: fn(i32) -> &'static str,
}

/// Serve until a stop signal, then stop in order and say so on stderr: whether every
/// management port was closed in time. An error when serving could not start, or when no
/// fabric's port could be opened (with one fabric: its port).
pub fn serve(s: Serve, signals: &StopSignals) -> Result<bool> {
    let web = s.web_config.as_deref().map(WebConfig::load).transpose()?;
    let tls = web.as_ref().and_then(|w| w.tls.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    let addr = http::listen_addr(&s.listen, s.allow_remote || tls.is_some())?;
    let listen = Listen {
        addr,
        tls,
        auth: web.and_then(|w| w.auth).map(Arc::new),
        http_threads: s.http_threads,
        max_age: s.interval * 3 + Duration::from_secs(5),
    };
    let this_host_only = s.fabrics.is_empty();
    let host = s.host_page.map(|read| (read, s.interval));
    (signals.block_in_new_threads)(true);
    let started = start(s.fabrics, listen, s.multi, host);
    (signals.block_in_new_threads)(false);
    let (running, events) = started?;
    // The address bound, not the one asked for: port 0 is the one the system chose.
    let url = format!("{scheme}://{}/metrics", running.bound);
    if this_host_only {
        // No sweeper opens a port to say so.
        eprintln!("ibscope serve: listening on {url} (this host only)");
    }
    let why = wait_for_stop(&events, &running.pages, &url, signals.received);
    let stopped = running.shut_down(s.stop_limit);
    let signal = why?;
    stopped.report((signals.name)(signal), s.stop_limit);
    Ok(stopped.closed)
}

/// Where and how to listen.
pub struct Listen {
    pub addr: SocketAddr,
    pub tls: Option<Arc<TlsConfig>>,
    pub auth: Option<Arc<BasicAuth>>,
    pub http_threads: u32,
    /// A fabric whose last sweep is older is not fresh (`/healthz`, `ibscope_up`).
    pub max_age: Duration,
}

/// What runs while serving.
pub struct Running {
    pub pages: Arc<Pages>,
    /// The address the listener is bound to: the port the system chose for port 0.
    pub bound: std::net::SocketAddr,
    runtime: Runtime,
    /// Every sweeper's.
    stop: CancelToken,
}

/// How long a request's head may take to arrive, and a TLS handshake: a client that
/// stalls does not hold a connection for ever.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Listen, start the HTTP runtime, a sweeper thread per fabric and, with `host`, a thread
/// that reads this host's page every so often. `multi`: several fabrics, where one that
/// cannot be opened at start is tried again.
pub fn start(
    fabrics: Vec<FabricToServe>,
    listen: Listen,
    multi: bool,
    host: Option<(HostPage, Duration)>,
) -> Result<(Running, mpsc::Receiver<PortOpening>)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(listen.http_threads as usize)
        .thread_name("http")
        .enable_io()
        .enable_time()
        .build()?;
    let listener = (runtime.block_on(TcpListener::bind(listen.addr)))
        .with_context(|| format!("cannot listen on {}", listen.addr))?;
    let bound = listener.local_addr()?;
    let names = fabrics.iter().map(|f| f.settings.name.clone()).collect();
    let pages = Arc::new(Pages::new(names, multi));
    let site = Arc::new(Site {
        pages: pages.clone(),
        auth: listen.auth,
        max_age: listen.max_age,
    });
    runtime.spawn(accept(listener, listen.tls.map(TlsAcceptor::from), site));
    let (told, events) = mpsc::channel();
    let stop = CancelToken::new();
    for (slot, f) in fabrics.into_iter().enumerate() {
        sweeper::spawn(slot, multi, f, pages.clone(), told.clone(), stop.clone())?;
    }
    if let Some((read, interval)) = host {
        spawn_host_reader(read, interval, pages.clone(), stop.clone())?;
    }
    let running = Running {
        pages,
        bound,
        runtime,
        stop,
    };
    Ok((running, events))
}

/// Accept connections until the runtime stops; each served on a task of its own.
async fn accept(listener: TcpListener, tls: Option<TlsAcceptor>, site: Arc<Site>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: not the listener's end.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Pages go out in one piece, not as the kernel sees fit to batch them.
        let _ = stream.set_nodelay(true);
        let (tls, site) = (tls.clone(), site.clone());
        tokio::spawn(async move {
            let Some(tls) = tls else {
                return serve_connection(stream, site, false).await;
            };
            // Plain HTTP on the TLS port: told so (as Go's exporters do), never served.
            let mut first = [0u8; 1];
            if matches!(stream.peek(&mut first).await, Ok(1) if first[0] != TLS_HANDSHAKE) {
                return serve_connection(stream, site, true).await;
            }
            match tokio::time::timeout(CLIENT_TIMEOUT, tls.accept(stream)).await {
                Ok(Ok(stream)) => serve_connection(stream, site, false).await,
                Ok(Err(e)) => tracing::debug!("TLS handshake: {e}"),
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        });
    }
}

/// The first byte of a TLS connection: a handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// Answer the requests of one connection; `plain_on_tls`: with a 400 each.
async fn serve_connection<S>(stream: S, site: Arc<Site>, plain_on_tls: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let response = match plain_on_tls {
            false => http::answer(&req, &site),
            true => http::plain_on_tls(),
        };
        async move { Ok::<_, std::convert::Infallible>(response) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(CLIENT_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!("connection: {e}");
    }
}

/// Wait until `stop_requested` names a signal, announcing `url` once a port is open. An
/// error when the one fabric's port could not be opened at start, or with several, when
/// none of them could.
pub fn wait_for_stop(
    events: &mpsc::Receiver<PortOpening>,
    pages: &Pages,
    url: &str,
    stop_requested: &dyn Fn() -> Option<i32>,
) -> Result<i32> {
    let mut announced = false;
    let mut not_opened: Vec<String> = Vec::new();
    loop {
        if let Some(signal) = stop_requested() {
            return Ok(signal);
        }
        match events.recv_timeout(Duration::from_millis(50)) {
            Ok(PortOpening::Opened) if !announced => {
                eprintln!("ibscope serve: listening on {url}");
                announced = true;
            }
            Ok(PortOpening::Opened) => {}
            Ok(PortOpening::NotOpened { error, .. }) if !pages.multi => return Err(error),
            Ok(PortOpening::NotOpened { slot, error }) => {
                let line = format!("fabric {}: {error:#}", pages.slots[slot].name());
                eprintln!(
                    "ibscope serve: {line}; trying again in {} s, then less often",
                    REOPEN_FIRST.as_secs()
                );
                not_opened.push(line);
                if !announced && not_opened.len() == pages.slots.len() {
                    bail!("no fabric could be opened: {}", not_opened.join("; "));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The sweepers end only after a stop: wait for the signal.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Read this host's page every `interval` into `pages` until `stop`.
fn spawn_host_reader(
    read: HostPage,
    interval: Duration,
    pages: Arc<Pages>,
    stop: CancelToken,
) -> Result<()> {
    std::thread::Builder::new()
        .name("host".into())
        .spawn(move || {
            while !stop.is_cancelled() {
                match read() {
                    Ok(page) => pages.set_host_page(page),
                    Err(e) => tracing::warn!("cannot read this host: {e:#}"),
                }
                let until = Instant::now() + interval;
                while Instant::now() < until && !stop.is_cancelled() {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        })?;
    Ok(())
}

/// How a stop went.
pub struct Stopped {
    pub sweeps: u64,
    /// Every port that was open was closed in time.
    pub closed: bool,
    pub took: Duration,
}

impl Stopped {
    /// The one line on stderr after the stop signal `signal`; `limit`: what the sweepers
    /// were given.
    fn report(&self, signal: &str, limit: Duration) {
        let sweeps = self.sweeps;
        let word = if sweeps == 1 { "sweep" } else { "sweeps" };
        if self.closed {
            eprintln!(
                "ibscope serve: {signal} received; stopped after {sweeps} {word} in {:.2} s, management port closed",
                self.took.as_secs_f64()
            );
        } else {
            eprintln!(
                "ibscope serve: {signal} received; stopped after {sweeps} {word}, but the sweeper did not \
                 finish within {:.1} s: exiting without closing the management port",
                limit.as_secs_f64()
            );
        }
    }
}

impl Running {
    /// Stop: every sweeper sends no new MAD, lets what is in flight get its timeout and
    /// closes its port; connections end. `limit`: how long the ports get to close.
    pub fn shut_down(self, limit: Duration) -> Stopped {
        let started = Instant::now();
        self.stop.cancel();
        // A page still being written to a slow client gets a moment, not for ever.
        self.runtime.shutdown_timeout(Duration::from_millis(500));
        let deadline = started + limit;
        while self.pages.any_port_open() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        Stopped {
            sweeps: self.pages.sweeps.load(Ordering::SeqCst),
            closed: !self.pages.any_port_open(),
            took: started.elapsed(),
        }
    }
}
