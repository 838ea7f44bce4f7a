//! `serve --web-config`: TLS and basic auth checked with real clients on loopback: curl
//! (right password 200, wrong or none 401, plain HTTP to the TLS port refused) and a real
//! Prometheus scraping with its own TLS (ca_file) and basic_auth settings; and the start
//! refusing every broken file with one line.
//!
//! The test certificate is made at test time with the openssl command-line tool (Debian's
//! openssl package, which scripts/install-deps.sh installs with curl): one self-signed
//! certificate for 127.0.0.1 and localhost, no Rust dependency added for it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::net::*;
use common::*;

const USER: &str = "prometheus";
const PASSWORD: &str = "s3cret-scrape";

/// A self-signed certificate and key for 127.0.0.1 in `dir`: (cert, key).
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:prime256v1")
        .args(["-nodes", "-days", "2", "-subj", "/CN=ibscope-test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (Debian package openssl) runs");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

/// The web config: TLS with `cert`/`key` and one bcrypt-hashed user.
fn web_config(dir: &Path, cert: &Path, key: &Path, extra: &str) -> PathBuf {
    let hash = bcrypt::hash(PASSWORD, 6).unwrap();
    let path = dir.join("web.yml");
    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n{extra}\
             basic_auth_users:\n  {USER}: '{hash}'\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    path
}

/// curl's status code for `url` (0 when it got no HTTP answer) and its body.
fn curl(args: &[&str], url: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-m", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("curl (Debian package curl) runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn start_serve(sim: &Sim, log: &Path, port: u16, web: &Path) -> KillOnDrop {
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(["serve", "--interval", "1"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--web-config")
        .arg(web)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    KillOnDrop::spawn(cmd, "ibscope serve")
}

#[test]
fn tls_and_basic_auth_with_curl_and_a_real_prometheus() {
    let sim = sim("net");
    let dir = temp_dir();
    let (cert, key) = certificate(dir.path());
    let web = web_config(dir.path(), &cert, &key, "  min_version: TLS12\n");
    let log = dir.path().join("serve.log");
    let port = free_port();
    let mut serve = start_serve(&sim, &log, port, &web);
    let ca = cert.to_str().unwrap();
    let url = format!("https://127.0.0.1:{port}/metrics");
    let right = format!("{USER}:{PASSWORD}");
    let page = wait_for(
        Duration::from_secs(30),
        "an authenticated TLS scrape",
        || {
            serve.assert_running(&log);
            let (code, body) = curl(&["--cacert", ca, "-u", &right], &url);
            (code == 200).then_some(body)
        },
    );
    assert!(page.contains("ibscope_up{fabric=\"ibsim0:0\"} 1"), "{page}");
    let checked = promtool_check(&page);
    assert!(checked.passed(), "{}", checked.report);
    let started = std::fs::read_to_string(&log).unwrap();
    assert!(
        started.contains(&format!("listening on https://127.0.0.1:{port}/metrics")),
        "{started}"
    );

    // min_version TLS12: a client that speaks at most TLS 1.2 is served too.
    let (code, _) = curl(&["--cacert", ca, "-u", &right, "--tls-max", "1.2"], &url);
    assert_eq!(code, 200);

    // Wrong password, unknown user, no credentials: 401, every path.
    let wrong = format!("{USER}:not-it");
    let (code, body) = curl(&["--cacert", ca, "-u", &wrong], &url);
    assert_eq!(
        code,
        401,
        "{body}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(
        curl(&["--cacert", ca, "-u", "bob:s3cret-scrape"], &url).0,
        401
    );
    let (code, _) = curl(&["--cacert", ca], &url);
    assert_eq!(code, 401);
    let healthz = format!("https://127.0.0.1:{port}/healthz");
    assert_eq!(curl(&["--cacert", ca], &healthz).0, 401);
    assert_eq!(curl(&["--cacert", ca, "-u", &right], &healthz).0, 200);
    // gzip through TLS too.
    let (code, body) = curl(&["--cacert", ca, "-u", &right, "--compressed"], &url);
    assert_eq!(code, 200);
    assert!(body.contains("# TYPE ibscope_up gauge"));

    // Plain HTTP to the TLS port: refused with a 400 that says why, never the metrics.
    let plain = format!("http://127.0.0.1:{port}/metrics");
    let (code, body) = curl(&["-u", &right], &plain);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("HTTP request to an HTTPS server"), "{body}");
    // And a client that does not trust the certificate gets no answer at all.
    assert_eq!(curl(&["-u", &right], &url).0, 0);

    prometheus_scrapes_over_tls(dir.path(), port, &cert);
    let pid = serve.pid();
    drop(serve);
    assert_all_gone(&[pid]);
}

/// min_version TLS13: a client that offers at most TLS 1.2 gets no answer (the handshake
/// fails), one that offers 1.3 is served; max_version TLS12 is the other way round.
#[test]
fn min_and_max_version_are_held_to() {
    let sim = sim("net");
    let dir = temp_dir();
    let (cert, key) = certificate(dir.path());
    let ca = cert.to_str().unwrap();
    let right = format!("{USER}:{PASSWORD}");
    for (extra, refused, served) in [
        ("  min_version: TLS13\n", "--tls-max", "--tlsv1.3"),
        ("  max_version: TLS12\n", "--tlsv1.3", "--tls-max"),
    ] {
        let web = web_config(dir.path(), &cert, &key, extra);
        let log = dir.path().join("serve.log");
        let port = free_port();
        let mut serve = start_serve(&sim, &log, port, &web);
        let url = format!("https://127.0.0.1:{port}/metrics");
        // `--tls-max 1.2` caps the client at TLS 1.2; `--tlsv1.3` sets 1.3 as its minimum.
        let args = |flag: &'static str| -> Vec<&str> {
            let mut v = vec!["--cacert", ca, "-u", &right, flag];
            if flag == "--tls-max" {
                v.push("1.2");
            }
            v
        };
        wait_for(
            Duration::from_secs(30),
            "a scrape at the allowed version",
            || {
                serve.assert_running(&log);
                (curl(&args(served), &url).0 == 200).then_some(())
            },
        );
        let (code, body) = curl(&args(refused), &url);
        assert_eq!(code, 0, "{extra}: {refused} was answered: {body}");
        let pid = serve.pid();
        drop(serve);
        assert_all_gone(&[pid]);
    }
}

/// A real Prometheus with its own TLS (ca_file) and basic_auth settings: the target is up
/// and ibscope's series are there; with a wrong password it is down.
fn prometheus_scrapes_over_tls(dir: &Path, port: u16, cert: &Path) {
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {}\n    \
             basic_auth:\n      username: {USER}\n      password: '{password}'\n    \
             static_configs:\n      - targets: ['127.0.0.1:{port}']\n",
            cert.display()
        )
    };
    let prom_dir = dir.join("prometheus");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let configs = job("ibscope", PASSWORD) + &job("intruder", "guess");
    let mut prom = Prometheus::start_with(&prom_dir, &configs);
    let value = |doc: &serde_json::Value| -> Option<String> {
        doc["data"]["result"][0]["value"][1]
            .as_str()
            .map(String::from)
    };
    // Both jobs scraped at least once (each on its own schedule).
    wait_for(
        Duration::from_secs(60),
        "Prometheus scrapes over TLS",
        || {
            let (_, doc) = prom.try_query("up{job=\"ibscope\"}")?;
            let (_, other) = prom.try_query("up{job=\"intruder\"}")?;
            (value(&doc).as_deref() == Some("1") && value(&other).is_some()).then_some(())
        },
    );
    let (_, doc) = prom.query("ibscope_up{job=\"ibscope\"}");
    assert_eq!(value(&doc).as_deref(), Some("1"), "{doc}");
    let (_, doc) = prom.query("up{job=\"intruder\"}");
    assert_eq!(value(&doc).as_deref(), Some("0"), "{doc}");
    let (_, doc) = prom.query("count(ibscope_up{job=\"intruder\"})");
    assert!(
        doc["data"]["result"]
            .as_array()
            .is_some_and(|r| r.is_empty()),
        "{doc}"
    );
}

#[test]
fn broken_web_configs_fail_at_start_with_one_line() {
    let dir = temp_dir();
    let (cert, key) = certificate(dir.path());
    let d = dir.path();
    let write = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let hash = bcrypt::hash("x", 4).unwrap();
    let tls = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        cert.display(),
        key.display()
    );
    let cases: Vec<(PathBuf, &str)> = vec![
        (d.join("missing.yml"), "no such file"),
        (
            write("hash.yml", "basic_auth_users:\n  alice: plaintext\n"),
            "basic_auth_users.alice: not a bcrypt hash",
        ),
        (
            write(
                "key.yml",
                &format!(
                    "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
                    cert.display(),
                    d.join("nokey.pem").display()
                ),
            ),
            "key_file",
        ),
        (
            write(
                "garbage-key.yml",
                &tls.replace(key.to_str().unwrap(), cert.to_str().unwrap()),
            ),
            "key_file",
        ),
        (
            write("field.yml", &format!("{tls}  min_versoin: TLS13\n")),
            "unknown field `min_versoin`",
        ),
        (
            write("version.yml", &format!("{tls}  min_version: TLS11\n")),
            "TLS 1.2 and 1.3 only",
        ),
        (
            write("top.yml", &format!("basic_auth_user:\n  a: '{hash}'\n")),
            "unknown field `basic_auth_user`",
        ),
    ];
    for (path, want) in cases {
        let p = path.to_str().unwrap();
        let out = ibscope_plain(&["serve", "--web-config", p], &[]);
        let err = stderr(&out);
        assert_exit(&out, 2);
        assert_eq!(err.lines().count(), 1, "{p}: {err}");
        assert!(
            err.starts_with(&format!("ibscope: error: web config {p}: ")) && err.contains(want),
            "{p}: {err}"
        );
    }

    // Basic auth alone is still plain HTTP: off loopback it needs --allow-remote.
    let auth_only = write("auth.yml", &format!("basic_auth_users:\n  a: '{hash}'\n"));
    let out = ibscope_plain(
        &[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--web-config",
            auth_only.to_str().unwrap(),
        ],
        &[],
    );
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--allow-remote"), "{}", stderr(&out));

    // With TLS the same address passes that check: serve goes on to open the fabric (a CA
    // that does not exist here, so it stops there, whatever the machine has).
    let with_tls = write("tls.yml", &tls);
    let out = ibscope_plain(
        &[
            "-C",
            "no-such-ca",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--web-config",
            with_tls.to_str().unwrap(),
        ],
        &[],
    );
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        !err.contains("--allow-remote") && err.contains("\"no-such-ca\" not found"),
        "{err}"
    );
}
