//! A prediction without a fabric: what the job's HCAs' line rate lets a ring-shaped
//! collective reach (all_reduce, all_gather, reduce_scatter, broadcast, reduce).
//!
//! NCCL gives each HCA of a server its own rings, so a ring's bus bandwidth between
//! servers is the HCAs' rate added up per server, the slowest server's sum, times the
//! share of line rate a healthy job reaches. That share, [`EFFICIENCY`], is taken from
//! healthy published runs (the captures in tests/data/nccl/real, SOURCES.md there):
//!
//! | run | HCAs per server | busbw at its largest size | of line rate |
//! |---|---|---|---|
//! | 2 DGX A100, all_reduce (NVIDIA deepops, network-operator) | 8 x 200 Gb/s HDR | 188.53 GB/s | 0.943 |
//! | 4 DGX A100, all_reduce (NVIDIA deepops, Slurm) | 8 x 200 Gb/s HDR | 191.05 GB/s | 0.955 |
//! | p5en.48xlarge, all_reduce (aws-samples) | 16 x 200 Gb/s EFA | 369.86 GB/s | 0.925 |
//!
//! and NVIDIA's statement in nccl-tests issue 290 that NDR at 400 Gb/s gives "46-48GB/s per
//! NIC" (0.92-0.96). Their middle, 0.94, is the share used: a healthy run lands near 100%
//! of the prediction, and the verdicts' 80% and 50% stand as they do against the routes.
//!
//! The rate comes from `--rate` with `--nics` (the same for every server), or from each
//! server's `ibscope host --json` document (its active ports' rates: the HCAs the job's
//! log says it uses, else its InfiniBand ports).

use serde::Serialize;
use serde_json::Value;

use ibscope_mad::attr::link::Rate;

/// The share of the HCAs' line rate a healthy run's busbw reaches (see the module's table).
pub const EFFICIENCY: f64 = 0.94;

/// An HCA's rate as a user gives it, in Gb/s: `4xHDR` (width x speed, as ibstat and
/// ibnetdiscover print it), `400G`, `400Gb/s` or `400`.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    if let Some(r) = Rate::parse(text) {
        return Ok(r.nominal_gbps());
    }
    let t = text.trim();
    let t = t
        .strip_suffix("Gb/s")
        .or_else(|| t.strip_suffix("Gbps"))
        .or_else(|| t.strip_suffix(['G', 'g']))
        .unwrap_or(t);
    match t.trim().parse::<f64>() {
        Ok(g) if g.is_finite() && g > 0.0 && g <= 100_000.0 => Ok(g),
        _ => Err(format!(
            "{text:?} is not an HCA rate: WIDTHxSPEED (4xHDR, 4xNDR) or Gb/s (400G)"
        )),
    }
}

/// One server's HCAs as its host document gives them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerLinks {
    pub host: String,
    /// Active ports: (device, link layer, Gb/s).
    pub ports: Vec<(String, String, f64)>,
}

impl ServerLinks {
    /// The Gb/s of the HCAs the job uses: those named (the log's), else `count` of its
    /// fastest InfiniBand ports (all of them without a count), else of any ports.
    pub fn gbps(&self, named: &[String], count: Option<usize>) -> Option<(usize, f64)> {
        let pick = |ports: Vec<f64>| -> Option<(usize, f64)> {
            let mut ports = ports;
            ports.sort_by(|a, b| b.total_cmp(a));
            if let Some(n) = count {
                ports.truncate(n);
            }
            (!ports.is_empty()).then(|| (ports.len(), ports.iter().sum()))
        };
        if !named.is_empty() {
            let used: Vec<f64> = self
                .ports
                .iter()
                .filter(|(d, _, _)| named.contains(d))
                .map(|(_, _, g)| *g)
                .collect();
            if !used.is_empty() {
                return pick(used);
            }
        }
        let ib: Vec<f64> = self
            .ports
            .iter()
            .filter(|(_, l, _)| l == "InfiniBand")
            .map(|(_, _, g)| *g)
            .collect();
        if !ib.is_empty() {
            return pick(ib);
        }
        pick(self.ports.iter().map(|(_, _, g)| *g).collect())
    }
}

/// A server's active ports from its `ibscope host --json` document; `None` when the
/// document names no host.
pub fn server_links(doc: &Value) -> Option<ServerLinks> {
    let host = doc.get("hostname")?.as_str()?.to_string();
    let mut ports = Vec::new();
    for d in doc.get("devices")?.as_array()? {
        let Some(name) = d.get("name").and_then(Value::as_str) else {
            continue;
        };
        for p in d
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let active = p.get("state").and_then(Value::as_str) == Some("Active");
            let gbps = p.get("gbps").and_then(Value::as_f64);
            let layer = p.get("link_layer").and_then(Value::as_str).unwrap_or("");
            if let (true, Some(g)) = (active, gbps) {
                ports.push((name.to_string(), layer.to_string(), g));
            }
        }
    }
    Some(ServerLinks { host, ports })
}

/// Whether a document's host is the run's `server` (the same name, or one is the other's
/// first label: `node005` and `node005.cluster`).
pub fn same_host(doc_host: &str, server: &str) -> bool {
    let short = |h: &str| h.split('.').next().unwrap_or(h).to_string();
    doc_host == server || short(doc_host) == short(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_as_users_write_them() {
        assert_eq!(parse_rate("4xHDR"), Ok(200.0));
        assert_eq!(parse_rate("4xNDR"), Ok(400.0));
        assert_eq!(parse_rate("400G"), Ok(400.0));
        assert_eq!(parse_rate("200Gb/s"), Ok(200.0));
        assert_eq!(parse_rate(" 100 "), Ok(100.0));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-5G").is_err());
    }
}
