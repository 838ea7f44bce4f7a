//! Serving: the listener and its connections (hyper on a small tokio runtime, TLS through
//! tokio-rustls), a sweeper thread per fabric, and the orderly stop of both.

use std::net::SocketAddr;
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
use crate::web::{BasicAuth, TlsConfig};

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

/// Listen, start the HTTP runtime and a sweeper thread per fabric. `multi`: several
/// fabrics, where one that cannot be opened at start is tried again.
pub fn start(
    fabrics: Vec<FabricToServe>,
    listen: Listen,
    multi: bool,
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

/// How a stop went.
pub struct Stopped {
    pub sweeps: u64,
    /// Every port that was open was closed in time.
    pub closed: bool,
    pub took: Duration,
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
