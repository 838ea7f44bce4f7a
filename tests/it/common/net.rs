//! Loopback HTTP and long-running processes for the exporter tests: a child killed when
//! dropped, a free port, plain HTTP GETs, waiting, and a real Prometheus server.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills a child process by its PID when dropped (also when the test panics).
pub struct KillOnDrop {
    pub child: Child,
    pub what: &'static str,
}

impl KillOnDrop {
    pub fn spawn(mut cmd: Command, what: &'static str) -> KillOnDrop {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
        KillOnDrop { child, what }
    }
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Fail at once if the process already ended (it would never answer).
    #[track_caller]
    pub fn assert_running(&mut self, log: &Path) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited early ({status}); log:\n{}",
                self.what,
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port free now and not handed out before in this test process: a test that
/// starts several exporters asks for their ports before the first one binds its own, and
/// the kernel may offer a port twice meanwhile.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A plain HTTP/1.0 GET on loopback: (status code, body).
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    http(port, "GET", path)
}

/// [`http_get`], failing the test when the exporter does not answer.
#[track_caller]
pub fn get(port: u16, path: &str) -> (u16, String) {
    http_get(port, path).unwrap_or_else(|e| panic!("GET {path} on port {port}: {e}"))
}

/// A plain HTTP/1.0 request with `method` on loopback: (status code, body).
pub fn http(port: u16, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

/// `ibscope -C all serve` over the fabrics of `config` on `port`, its stderr in `log`.
pub fn start_serve_all(config: &Path, log: &Path, port: u16) -> KillOnDrop {
    let mut cmd = Command::new(super::ibscope_bin());
    cmd.args(["-C", "all", "serve", "--interval", "1"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env_remove("LD_PRELOAD")
        .env_remove("IBSIM_SOCKNAME")
        .env("IBSCOPE_CONFIG", config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    KillOnDrop::spawn(cmd, "ibscope serve")
}

/// Wait until `f` returns Some, or panic after `limit`.
#[track_caller]
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_-.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A real Prometheus server on loopback, scraping `targets` every second as job `job`.
pub struct Prometheus {
    pub process: KillOnDrop,
    pub port: u16,
    pub log: std::path::PathBuf,
}

impl Prometheus {
    pub fn start(dir: &Path, job: &str, targets: &[u16]) -> Prometheus {
        let list: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
        Prometheus::start_with(
            dir,
            &format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
                list.join(", ")
            ),
        )
    }

    /// Prometheus with `scrape_configs` (YAML list items, indented by two), scraping and
    /// evaluating every second.
    pub fn start_with(dir: &Path, scrape_configs: &str) -> Prometheus {
        let port = free_port();
        let yml = dir.join("prometheus.yml");
        std::fs::write(
            &yml,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n{scrape_configs}"
            ),
        )
        .unwrap();
        let log = dir.join("prometheus.log");
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", yml.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .current_dir(dir)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        Prometheus {
            process: KillOnDrop::spawn(cmd, "prometheus"),
            port,
            log,
        }
    }

    /// GET /api/v1/query for `expr` now: (HTTP status, parsed body).
    #[track_caller]
    pub fn query(&mut self, expr: &str) -> (u16, serde_json::Value) {
        self.try_query(expr)
            .unwrap_or_else(|| panic!("Prometheus did not answer the query {expr}"))
    }

    /// As `query`, `None` while Prometheus does not accept connections yet.
    pub fn try_query(&mut self, expr: &str) -> Option<(u16, serde_json::Value)> {
        self.process.assert_running(&self.log.clone());
        let path = format!("/api/v1/query?query={}", url_encode(expr));
        let (code, body) = http_get(self.port, &path).ok()?;
        let doc = serde_json::from_str(&body).unwrap_or(serde_json::Value::Null);
        Some((code, doc))
    }
}

/// Wait until `ibscope serve` on `port` says it is healthy (`serve` still running).
#[track_caller]
pub fn wait_healthy(serve: &mut KillOnDrop, port: u16, log: &Path) {
    let ok = |code: u16, body: &str| code == 200 && body.trim() == "ok";
    healthz_until(
        serve,
        port,
        log,
        Duration::from_secs(20),
        "/healthz to say ok",
        ok,
    );
}

/// The body of the first 200 from `/healthz` of `serve -C all` (every fabric healthy; the
/// body names them) within 30 s, `what` naming what that means.
#[track_caller]
pub fn wait_every_fabric_healthy(
    serve: &mut KillOnDrop,
    port: u16,
    log: &Path,
    what: &str,
) -> String {
    healthz_until(
        serve,
        port,
        log,
        Duration::from_secs(30),
        what,
        |code, _| code == 200,
    )
}

/// The body of the first `/healthz` answer `accept` takes, failing at once with `log` when
/// `serve` has ended, or after `limit`.
#[track_caller]
pub fn healthz_until(
    serve: &mut KillOnDrop,
    port: u16,
    log: &Path,
    limit: Duration,
    what: &str,
    accept: impl Fn(u16, &str) -> bool,
) -> String {
    wait_for(limit, what, || {
        serve.assert_running(log);
        match http_get(port, "/healthz") {
            Ok((code, body)) if accept(code, &body) => Some(body),
            _ => None,
        }
    })
}

/// The value of the one sample of `metric` whose labels include every `want` pair.
pub fn sample_value(page: &str, metric: &str, want: &[(&str, &str)]) -> Option<f64> {
    page.lines().find_map(|l| {
        let rest = l.strip_prefix(metric)?;
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => r.rsplit_once("} ")?,
            None => ("", rest.strip_prefix(' ')?),
        };
        let all = want
            .iter()
            .all(|(k, v)| labels.contains(&format!("{k}=\"{v}\"")));
        all.then(|| value.trim().parse().ok()).flatten()
    })
}
