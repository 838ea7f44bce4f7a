//! `ibscope serve` on the simulated fabric: the exposition passes `promtool check metrics`,
//! an injected counter shows the value perfquery reads, and a real Prometheus server scrapes
//! the exporter and returns that value from its query API.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Kills a child process by its PID when dropped (also when the test panics).
struct KillOnDrop {
    child: Child,
    what: &'static str,
}

impl KillOnDrop {
    fn spawn(mut cmd: Command, what: &'static str) -> KillOnDrop {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
        KillOnDrop { child, what }
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Fail at once if the process already ended (it would never answer).
    #[track_caller]
    fn assert_running(&mut self, log: &Path) {
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A plain HTTP/1.0 request: (status code, body).
fn http(port: u16, method: &str, path: &str) -> std::io::Result<(u16, String)> {
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

/// GET /metrics asking for gzip: (Content-Encoding header seen, decoded body).
fn get_gzip(port: u16) -> (bool, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let mut text = String::new();
    // Concatenated gzip members, as RFC 1952 allows and Prometheus reads.
    flate2::read::MultiGzDecoder::new(&raw[split + 4..])
        .read_to_string(&mut text)
        .expect("valid gzip");
    (head.contains("content-encoding: gzip"), text)
}

fn get(port: u16, path: &str) -> (u16, String) {
    http(port, "GET", path).unwrap_or_else(|e| panic!("GET {path} on port {port}: {e}"))
}

/// Wait until `f` returns Some, or panic after `limit`.
#[track_caller]
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
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

/// The value of the one sample of `metric` whose labels include every `want` pair.
fn sample_value(text: &str, metric: &str, want: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|l| {
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

/// `Field:....value` of perfquery output.
fn perfquery_field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let v = l.strip_prefix(name)?.strip_prefix(':')?;
            v.trim_start_matches('.').trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("no {name} in perfquery output:\n{text}"))
}

fn url_encode(s: &str) -> String {
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

/// Every sample line follows its family's HELP and TYPE, and no family appears twice.
fn assert_grouped(text: &str) {
    let mut seen = std::collections::HashSet::new();
    let mut current = String::new();
    let mut helped = String::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            helped = rest.split(' ').next().unwrap().to_string();
        } else if let Some(rest) = l.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap().to_string();
            assert_eq!(name, helped, "TYPE without HELP just before: {l}");
            assert!(seen.insert(name.clone()), "family {name} appears twice");
            current = name;
        } else if !l.is_empty() {
            let name = l.split(['{', ' ']).next().unwrap();
            assert_eq!(name, current, "sample outside its family: {l}");
        }
    }
}

#[test]
fn serve_refuses_a_remote_address_without_allow_remote() {
    let out = ibscope_plain(&["serve", "--listen", "0.0.0.0:0"], &[]);
    let err = stderr(&out);
    assert_exit(&out, 2);
    assert!(err.contains("--allow-remote"), "{err}");
}

#[test]
fn serve_metrics_pass_promtool_and_prometheus_scrapes_them() {
    let sim = sim("net");
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("Hca1", 1, "PortXmitDiscards", 42).unwrap();
    let scratch = temp_dir();

    let port = free_port();
    let log = scratch.path().join("serve.log");
    let mut cmd = sim.command(ibscope_bin());
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--interval",
        "1",
    ])
    .stdout(std::fs::File::create(&log).unwrap())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut serve = KillOnDrop::spawn(cmd, "ibscope serve");
    let serve_pid = serve.pid();

    wait_for(Duration::from_secs(15), "/healthz to say ok", || {
        serve.assert_running(&log);
        match http(port, "GET", "/healthz") {
            Ok((200, body)) if body.trim() == "ok" => Some(()),
            _ => None,
        }
    });
    let (code, metrics) = get(port, "/metrics");
    assert_eq!(code, 200, "{metrics}");
    // The gzip page says the same, apart from the per-scrape age and a newer sweep.
    let (encoded, unzipped) = get_gzip(port);
    assert!(encoded, "Content-Encoding: gzip expected");
    let families = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("# TYPE"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(families(&unzipped), families(&metrics));
    assert!(unzipped.contains("ibscope_sweep_age_seconds "));
    assert_eq!(get(port, "/nothing").0, 404);
    assert_eq!(http(port, "POST", "/metrics").unwrap().0, 405);

    // promtool reads the exposition on stdin; lint problems fail it too.
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert_grouped(&metrics);

    // The injected counters equal what perfquery reads at the same port.
    let lid_of = |name: &str| {
        let line = metrics
            .lines()
            .find(|l| {
                l.starts_with("ibscope_node_info{") && l.contains(&format!("node_name=\"{name}\""))
            })
            .unwrap_or_else(|| panic!("no node_info for {name}"));
        let lid = line.split("lid=\"").nth(1).unwrap();
        lid[..lid.find('"').unwrap()].to_string()
    };
    let checks = [
        (
            "Switch1",
            "1",
            "SymbolErrorCounter",
            "ibscope_port_symbol_error_total",
            17,
        ),
        (
            "Hca1",
            "1",
            "PortXmitDiscards",
            "ibscope_port_xmit_discards_total",
            42,
        ),
    ];
    for (node, p, field, metric, injected) in checks {
        let lid = lid_of(node);
        let pq = assert_success(&reference(&sim, "perfquery", &[&lid, p]));
        let theirs = perfquery_field(&pq, field);
        assert_eq!(theirs, injected, "perfquery {node}[{p}] {field}");
        let ours = sample_value(&metrics, metric, &[("node_name", node), ("port", p)])
            .unwrap_or_else(|| panic!("no {metric} for {node}[{p}]"));
        assert_eq!(ours, theirs as f64, "{metric} of {node}[{p}]");
    }
    // Healthy ports are there too, with their link facts and remote end.
    assert_eq!(
        sample_value(
            &metrics,
            "ibscope_port_degraded",
            &[
                ("node_name", "Switch1"),
                ("port", "1"),
                ("remote_name", "Hca1")
            ]
        ),
        Some(0.0)
    );
    assert_eq!(
        sample_value(
            &metrics,
            "ibscope_port_state",
            &[("node_name", "Switch1"), ("port", "1")]
        ),
        Some(4.0)
    );
    assert!(metrics.contains("\nibscope_sweep_timestamp_seconds "));
    assert!(metrics.contains("\nibscope_sweep_duration_seconds "));

    // A real Prometheus scrapes the exporter; its query API returns the same value.
    let prom_port = free_port();
    let yml = scratch.path().join("prometheus.yml");
    std::fs::write(
        &yml,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: ibscope\n    static_configs:\n      \
             - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let prom_log = scratch.path().join("prometheus.log");
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", yml.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            scratch.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .current_dir(scratch.path())
        .stdout(std::fs::File::create(&prom_log).unwrap())
        .stderr(std::fs::File::create(&prom_log).unwrap());
    let mut prom = KillOnDrop::spawn(cmd, "prometheus");
    let prom_pid = prom.pid();

    let query = "ibscope_port_symbol_error_total{node_name=\"Switch1\",port=\"1\"}";
    let path = format!("/api/v1/query?query={}", url_encode(query));
    let value: f64 = wait_for(
        Duration::from_secs(25),
        "Prometheus to have the sample",
        || {
            prom.assert_running(&prom_log);
            let (code, body) = http(prom_port, "GET", &path).ok()?;
            if code != 200 {
                return None;
            }
            let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
            let result = doc["data"]["result"].as_array()?;
            let first = result.first()?;
            assert_eq!(result.len(), 1, "{body}");
            first["value"][1].as_str()?.parse().ok()
        },
    );
    let lid = lid_of("Switch1");
    let pq = assert_success(&reference(&sim, "perfquery", &[&lid, "1"]));
    assert_eq!(value, perfquery_field(&pq, "SymbolErrorCounter") as f64);

    // The target is up in Prometheus' own view.
    let (_, up) = get(
        prom_port,
        &format!("/api/v1/query?query={}", url_encode("up")),
    );
    assert!(up.contains("\"job\":\"ibscope\""), "{up}");
    assert!(up.contains(",\"1\"]"), "target not up: {up}");

    drop(prom);

    // A link goes down: a sweep sees its LinkDownedCounter move, the exporter rediscovers,
    // and the port's state follows without waiting for the periodic rediscovery.
    let before = sample_value(&get(port, "/metrics").1, "ibscope_discoveries_total", &[]);
    sim.unlink("Switch1", 3).unwrap();
    let state = wait_for(Duration::from_secs(8), "the port state to change", || {
        let (_, m) = get(port, "/metrics");
        let s = sample_value(
            &m,
            "ibscope_port_state",
            &[("node_name", "Switch1"), ("port", "3")],
        )?;
        (s != 4.0).then_some((s, m))
    });
    assert_eq!(state.0, 1.0, "Switch1[3] should be Down");
    let after = sample_value(&state.1, "ibscope_discoveries_total", &[]);
    assert!(after > before, "discoveries {before:?} -> {after:?}");

    drop(serve);
    assert_all_gone(&[serve_pid, prom_pid]);
}
