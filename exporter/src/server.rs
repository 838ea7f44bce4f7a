//! The HTTP side of serving: the server (plain, or behind the TLS front), its worker
//! threads, and the orderly stop of everything that runs while serving.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use crate::http::{self, Pages, Slot};
use crate::supervisor::{self, Event, Supervisor, REOPEN_FIRST};
use crate::sweeper::{OpenFabric, SweepSettings};
use crate::web::{BasicAuth, TlsConfig};
use crate::{plane_counts, tls, web};

/// What runs while serving: the HTTP front, its workers and a supervisor per fabric.
pub struct Running {
    pub pages: Arc<Pages>,
    pub supervisors: Vec<Supervisor>,
    pub sweeps: Arc<AtomicU64>,
    pub server: Arc<tiny_http::Server>,
    pub workers: Vec<JoinHandle<()>>,
    /// The TLS accept loop, when there is TLS, and what stops it.
    pub front: Option<JoinHandle<()>>,
    pub front_stop: Arc<AtomicBool>,
}

impl Running {
    /// Stop: no new requests; every sweeper sends no new MAD, lets what is in
    /// flight finish and closes its port.
    /// `limit`: how long the sweepers get to close their ports.
    pub fn shut_down(self, limit: Duration) -> Stopped {
        let started = Instant::now();
        let tls = self.front.is_some();
        // All at once: one fabric's slow stop does not delay another's.
        for s in &self.supervisors {
            s.ask_to_stop();
        }
        self.front_stop.store(true, Ordering::SeqCst);
        if let Some(front) = self.front {
            if finished_within(&front, Duration::from_secs(1)) {
                let _ = front.join();
            }
        }
        stop_http_workers(self.server, self.workers, tls);
        let deadline = Instant::now() + limit;
        let mut closed = true;
        for s in &self.supervisors {
            closed &= s.stop(deadline.saturating_duration_since(Instant::now()));
        }
        let took = started.elapsed();
        let sweeps = self.sweeps.load(Ordering::SeqCst);
        drop(self.pages);
        Stopped {
            sweeps,
            closed,
            took,
            supervisors: self.supervisors,
        }
    }
}

/// One fabric to serve: its name until its port is open, how that port is opened (every
/// time), how it is swept.
pub struct FabricToServe {
    pub name: String,
    pub open: OpenFabric,
    pub settings: SweepSettings,
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

/// Listen, start a supervisor (and so a sweeper) per fabric, and the HTTP workers.
/// `multi`: several fabrics, where one that cannot be opened at start is tried again.
pub fn start(
    fabrics: Vec<FabricToServe>,
    listen: Listen,
    multi: bool,
) -> Result<(Running, mpsc::Receiver<Event>)> {
    let front_stop = Arc::new(AtomicBool::new(false));
    let (server, front) = http_server(listen.addr, listen.tls.as_ref(), &front_stop)?;
    let server = Arc::new(server);
    let pages = Arc::new(Pages {
        host: Mutex::new(None),
        slots: fabrics.iter().map(|f| Slot::new(f.name.clone())).collect(),
        multi,
    });
    let sweeps = Arc::new(AtomicU64::new(0));
    let (events_tx, events) = mpsc::channel::<Event>();
    let names = fabrics.first().and_then(|f| f.settings.names.clone());
    let shared = supervisor::Shared {
        pages: pages.clone(),
        sweeps: sweeps.clone(),
        subnets: Arc::new(Mutex::new(vec![None; fabrics.len()])),
        planes: plane_counts::Planes::new(fabrics.len(), names),
        events: events_tx,
    };
    let mut supervisors = Vec::new();
    for (slot, f) in fabrics.into_iter().enumerate() {
        let plan = supervisor::FabricPlan {
            slot,
            settings: f.settings,
            open: f.open,
            multi,
        };
        supervisors.push(Supervisor::spawn(plan, shared.clone())?);
    }
    let workers = spawn_http_workers(
        &server,
        &pages,
        listen.auth,
        listen.max_age,
        listen.http_threads,
    )?;
    let running = Running {
        pages,
        supervisors,
        sweeps,
        server,
        workers,
        front,
        front_stop,
    };
    Ok((running, events))
}

/// Wait until `stop_requested` names a signal, announcing `url` once a sweeper opened
/// its port. An
/// error when the one fabric's port could not be opened at start, or with several, when
/// none of them could.
pub fn wait_for_stop(
    events: &mpsc::Receiver<Event>,
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
        match events.recv_timeout(STOP_POLL) {
            Ok(Event::Opened { slot, port }) => {
                tracing::info!(slot, "management port {port} open");
                if !announced {
                    eprintln!("ibscope serve: listening on {url}");
                    announced = true;
                }
            }
            Ok(Event::NotOpened { error, .. }) if !pages.multi => return Err(error),
            Ok(Event::NotOpened { slot, error }) => {
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
            // The supervisors end only after a stop: wait for the signal.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(STOP_POLL),
        }
    }
}

/// How often the main thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// How a stop went. The supervisors are joined by [`Stopped::join`], after the caller has
/// said how it went: a sweeper may take a moment more to end.
pub struct Stopped {
    pub sweeps: u64,
    /// Every sweeper closed its management port in time.
    pub closed: bool,
    pub took: Duration,
    supervisors: Vec<Supervisor>,
}

impl Stopped {
    pub fn join(self) {
        for s in self.supervisors {
            s.join();
        }
    }
}

/// The HTTP server: on `addr`, or with TLS on a private socket behind the TLS front
/// (which `front_stop` ends).
pub fn http_server(
    addr: std::net::SocketAddr,
    tls_config: Option<&Arc<rustls::ServerConfig>>,
    front_stop: &Arc<AtomicBool>,
) -> Result<(tiny_http::Server, Option<JoinHandle<()>>)> {
    match tls_config {
        Some(config) => {
            let (inner, inner_addr) = tls::inner_listener()?;
            let server = tiny_http::Server::from_listener(inner, None)
                .map_err(|e| anyhow!("cannot serve on a private socket: {e}"))?;
            let front = tls::spawn(
                http::listener(addr)?,
                config.clone(),
                inner_addr,
                front_stop.clone(),
            )?;
            Ok((server, Some(front)))
        }
        None => Ok((
            tiny_http::Server::from_listener(http::listener(addr)?, None)
                .map_err(|e| anyhow!("cannot serve on {addr}: {e}"))?,
            None,
        )),
    }
}

pub fn spawn_http_workers(
    server: &Arc<tiny_http::Server>,
    pages: &Arc<Pages>,
    auth: Option<Arc<web::BasicAuth>>,
    max_age: Duration,
    threads: u32,
) -> Result<Vec<JoinHandle<()>>> {
    let mut workers = Vec::new();
    for i in 0..threads {
        let server = server.clone();
        let pages = pages.clone();
        let auth = auth.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("http-{i}"))
                .spawn(move || {
                    while let Ok(req) = server.recv() {
                        http::serve_one(req, &pages, auth.as_deref(), max_age);
                    }
                })?,
        );
    }
    Ok(workers)
}

/// Stop accepting and let the workers finish what they are writing, for a moment.
/// `behind_tls`: the server listens on the TLS front's private abstract socket, which
/// tiny_http cannot close on drop (it panics looking for the socket's path): it is left
/// to the process's exit, and the TCP port closes with the front.
fn stop_http_workers(
    server: Arc<tiny_http::Server>,
    workers: Vec<JoinHandle<()>>,
    behind_tls: bool,
) {
    for _ in &workers {
        server.unblock();
    }
    // A worker still writing a page to a slow client gets a moment, not forever.
    let deadline = Instant::now() + Duration::from_secs(2);
    let workers_done = workers
        .iter()
        .all(|w| finished_within(w, deadline.saturating_duration_since(Instant::now())));
    if workers_done {
        for w in workers {
            let _ = w.join();
        }
    }
    if behind_tls {
        std::mem::forget(server);
    } else {
        // The last reference: closes the listening socket.
        drop(server);
    }
}

/// Wait until `handle`'s thread ends or `limit` passes; true if it ended.
pub fn finished_within<T>(handle: &JoinHandle<T>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !handle.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}
