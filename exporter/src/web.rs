//! `serve --web-config FILE`: TLS and basic auth in the exporter-toolkit's web
//! configuration format (the `--web.config.file` of node_exporter and most exporters):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: /etc/ibscope/tls.crt
//!   key_file: /etc/ibscope/tls.key
//!   min_version: TLS12            # or TLS13
//!   client_auth_type: RequireAndVerifyClientCert   # optional, with client_ca_file
//!   client_ca_file: /etc/ibscope/clients.pem
//! basic_auth_users:
//!   prometheus: $2y$10$...        # bcrypt (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Every problem (a missing file, an unreadable key, a hash that is not bcrypt, a field
//! this exporter does not know, such as cipher_suites or http_server_config: rustls
//! chooses the suites and curves, and HTTP is 1.1) fails `serve` at start with one line
//! naming the file.

use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The TLS settings a web config makes (rustls'), as the server takes them.
pub type TlsConfig = rustls::ServerConfig;

use anyhow::{anyhow, bail, Result};
use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

use crate::locked;

/// The file as written (unknown fields are an error, as the exporter-toolkit's own
/// loader makes them).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
}

/// What serve does with the file: TLS (its rustls configuration) and the users.
pub struct WebConfig {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub auth: Option<BasicAuth>,
}

impl WebConfig {
    /// Read and check `path`; paths in it are relative to its directory.
    pub fn load(path: &Path) -> Result<WebConfig> {
        let name = ibscope_topo::input::display_name(path);
        let text = ibscope_topo::input::read_text(path, "web config")?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, dir).map_err(|e| anyhow!("web config {name}: {e:#}"))
    }

    fn parse(text: &str, dir: &Path) -> Result<WebConfig> {
        // An empty file is a valid (empty) configuration, as for the exporter-toolkit.
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| anyhow!("{e}"))?
        };
        let tls = (file.tls_server_config.as_ref())
            .map(|t| tls_config(t, dir).map(Arc::new))
            .transpose()?;
        let users = file.basic_auth_users;
        let auth = (!users.is_empty())
            .then(|| BasicAuth::new(users))
            .transpose()?;
        Ok(WebConfig { tls, auth })
    }
}

fn tls_version(text: &str, key: &str) -> Result<&'static rustls::SupportedProtocolVersion> {
    match text {
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS13" => Ok(&rustls::version::TLS13),
        "TLS10" | "TLS11" => bail!(
            "tls_server_config.{key}: {text} is not offered (TLS 1.2 and 1.3 only, as rustls)"
        ),
        _ => bail!("tls_server_config.{key}: {text:?} is not TLS12 or TLS13"),
    }
}

/// The certificates of a PEM file, at least one; `key` names the file in errors.
fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("{key} {}: {e}", path.display()))?;
    if certs.is_empty() {
        bail!("{key} {}: no certificate in it", path.display());
    }
    Ok(certs)
}

/// The rustls configuration of a `tls_server_config` table.
fn tls_config(t: &TlsFile, dir: &Path) -> Result<rustls::ServerConfig> {
    let (Some(cert_file), Some(key_file)) = (&t.cert_file, &t.key_file) else {
        bail!("tls_server_config needs both cert_file and key_file");
    };
    let certs = certificates("cert_file", &dir.join(cert_file))?;
    let key_path = dir.join(key_file);
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .map_err(|e| anyhow!("key_file {}: {e}", key_path.display()))?;
    let min = tls_version(t.min_version.as_deref().unwrap_or("TLS12"), "min_version")?;
    let max = tls_version(t.max_version.as_deref().unwrap_or("TLS13"), "max_version")?;
    let rank = |v: &rustls::SupportedProtocolVersion| u16::from(v.version);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [&rustls::version::TLS12, &rustls::version::TLS13]
            .into_iter()
            .filter(|v| rank(v) >= rank(min) && rank(v) <= rank(max))
            .collect();
    if versions.is_empty() {
        bail!("tls_server_config: min_version is above max_version");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| anyhow!("tls_server_config: {e}"))?;
    let builder = match t.client_auth_type.as_deref().unwrap_or("NoClientCert") {
        "NoClientCert" => builder.with_no_client_auth(),
        kind @ ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven") => {
            let Some(ca) = &t.client_ca_file else {
                bail!("tls_server_config.client_auth_type {kind} needs client_ca_file");
            };
            let ca_path = dir.join(ca);
            let bad =
                |e: &dyn std::fmt::Display| anyhow!("client_ca_file {}: {e}", ca_path.display());
            let mut roots = rustls::RootCertStore::empty();
            for c in certificates("client_ca_file", &ca_path)? {
                roots.add(c).map_err(|e| bad(&e))?;
            }
            let mut verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            if kind == "VerifyClientCertIfGiven" {
                verifier = verifier.allow_unauthenticated();
            }
            builder.with_client_cert_verifier(verifier.build().map_err(|e| bad(&e))?)
        }
        other => bail!(
            "tls_server_config.client_auth_type {other:?}: ibscope serve offers NoClientCert, \
             VerifyClientCertIfGiven and RequireAndVerifyClientCert"
        ),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        anyhow!(
            "key_file {} does not fit cert_file: {e}",
            key_path.display()
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Users and their bcrypt hashes, and the credentials already verified (a bcrypt check
/// costs tens of milliseconds by design; Prometheus sends the same header every scrape).
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    /// Keyed hashes of Authorization headers that passed: never the header itself.
    verified: Mutex<HashSet<u64>>,
    hasher: RandomState,
    /// Compared against when the user is unknown, so a wrong name takes as long as a
    /// wrong password (no user enumeration by timing): made at start, at the highest cost
    /// of the users' hashes.
    unknown_user_hash: String,
}

/// Verified headers remembered at most (a scraper or two in practice).
const VERIFIED_MAX: usize = 64;

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> Result<BasicAuth> {
        let mut cost = 4;
        for (user, hash) in &users {
            if user.contains(':') {
                bail!("basic_auth_users: the user name {user:?} contains ':'");
            }
            let parts = hash.parse::<bcrypt::HashParts>().map_err(|e| {
                anyhow!(
                    "basic_auth_users.{user}: not a bcrypt hash ({e}); make one with \
                     `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                )
            })?;
            cost = cost.max(parts.get_cost());
        }
        let unknown_user_hash =
            bcrypt::hash("no such user", cost).map_err(|e| anyhow!("basic_auth_users: {e}"))?;
        Ok(BasicAuth {
            users,
            verified: Mutex::new(HashSet::new()),
            hasher: RandomState::new(),
            unknown_user_hash,
        })
    }

    /// Whether an `Authorization` header value names a user with the right password.
    pub fn allows(&self, header: Option<&str>) -> bool {
        let Some(header) = header else {
            return false;
        };
        let key = self.hasher.hash_one(header);
        if locked(&self.verified).contains(&key) {
            return true;
        }
        let Some((user, password)) = decode_basic(header) else {
            return false;
        };
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.as_str(), true),
            None => (self.unknown_user_hash.as_str(), false),
        };
        let ok = bcrypt::verify(&password, hash).unwrap_or(false) && known;
        if ok {
            let mut v = locked(&self.verified);
            if v.len() >= VERIFIED_MAX {
                v.clear();
            }
            v.insert(key);
        }
        ok
    }
}

/// `Basic base64(user:password)` -> (user, password).
fn decode_basic(header: &str) -> Option<(String, String)> {
    let (_, rest) = (header.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WebConfig> {
        WebConfig::parse(text, Path::new("/nonexistent"))
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse(text).err().expect("an error"))
    }

    #[test]
    fn bad_files_fail_with_what_is_wrong() {
        assert!(err("tls_server_config:\n  cert_fil: a\n").contains("unknown field `cert_fil`"));
        assert!(err("basic_auth: {}\n").contains("unknown field `basic_auth`"));
        assert!(err("basic_auth_users:\n  alice: secret\n").contains("alice: not a bcrypt hash"));
        assert!(
            err("tls_server_config:\n  cert_file: a.crt\n").contains("both cert_file and key_file")
        );
        let e = err("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n");
        assert!(e.contains("cert_file /nonexistent/a.crt"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [X]\n");
        assert!(e.contains("unknown field `cipher_suites`"), "{e}");
        let e = err("http_server_config:\n  http2: true\n");
        assert!(e.contains("unknown field `http_server_config`"), "{e}");
        assert!(err("tls_server_config: [1, 2]\n").contains("invalid type"));
    }

    #[test]
    fn empty_and_auth_only_files() {
        let c = parse("").unwrap();
        assert!(c.tls.is_none() && c.auth.is_none());
        let hash = bcrypt::hash("x", 4).unwrap();
        let c = parse(&format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap();
        assert!(c.tls.is_none());
        assert!(c.auth.is_some());
    }

    #[test]
    fn basic_auth_checks_user_and_password() {
        // Cost 4: fast enough for a test.
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = BasicAuth::new(BTreeMap::from([("alice".to_string(), hash)])).unwrap();
        let header = |user: &str, pw: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
            )
        };
        assert!(auth.allows(Some(&header("alice", "s3cret"))));
        // Twice: from the cache now.
        assert!(auth.allows(Some(&header("alice", "s3cret"))));
        assert!(!auth.allows(Some(&header("alice", "wrong"))));
        assert!(!auth.allows(Some(&header("bob", "s3cret"))));
        assert!(!auth.allows(Some("Bearer xyz")));
        assert!(!auth.allows(Some("Basic !!!")));
        assert!(!auth.allows(None));
        assert_eq!(
            decode_basic("basic YTpiOmM="),
            Some(("a".to_string(), "b:c".to_string()))
        );
        // Unknown users are checked against a hash of the users' cost.
        let parts = auth.unknown_user_hash.parse::<bcrypt::HashParts>().unwrap();
        assert_eq!(parts.get_cost(), 4);
    }
}
