//! Fleet consistency for `ibscope host compare`: many servers' `ibscope host --json`
//! documents, and the servers whose firmware, drivers, GPUDirect module or port settings
//! differ from the majority, field by field.
//!
//! Works over `serde_json::Value` so that documents from older or newer ibscope versions
//! (with or without the RoCE and checklist fields) compare on the fields they share.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Why a stream of documents could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: document {index}: {reason}")]
pub struct DocumentError {
    pub source_name: String,
    /// 1-based position of the document in its source.
    pub index: usize,
    pub reason: String,
}

/// One server's comparable facts: field name to its value as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFacts {
    pub server: String,
    pub facts: BTreeMap<String, String>,
}

/// A server whose value of a field differs from the majority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outlier {
    pub server: String,
    pub field: String,
    /// `None`: the field is absent on this server while the majority has it.
    pub value: Option<String>,
    pub majority: Option<String>,
    pub majority_count: usize,
    pub servers: usize,
}

impl std::fmt::Display for Outlier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "absent".into());
        write!(
            f,
            "{}: {} {} (majority {} on {} of {})",
            self.server,
            self.field,
            shown(&self.value),
            shown(&self.majority),
            self.majority_count,
            self.servers
        )
    }
}

/// Reads every document of one source: concatenated or JSON-lines `ibscope host --json`
/// output. A document that is not JSON, not an object, or truncated is an error naming the
/// source and the document's position.
pub fn read_documents(source_name: &str, text: &str) -> Result<Vec<Value>, DocumentError> {
    let mut docs = Vec::new();
    for (i, doc) in serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .enumerate()
    {
        let error = |reason: String| DocumentError {
            source_name: source_name.to_string(),
            index: i + 1,
            reason,
        };
        let doc = doc.map_err(|e| error(e.to_string()))?;
        if !doc.is_object() || doc.get("devices").is_none() {
            return Err(error(
                "not an `ibscope host --json` document (no devices)".into(),
            ));
        }
        docs.push(doc);
    }
    Ok(docs)
}

/// The comparable facts of one document; `fallback_name` names a server without hostname.
pub fn facts_of(doc: &Value, fallback_name: &str) -> ServerFacts {
    let server = doc
        .get("hostname")
        .and_then(Value::as_str)
        .map_or_else(|| fallback_name.to_string(), str::to_string);
    let mut facts = BTreeMap::new();
    let mut put = |key: String, v: Option<&Value>| {
        if let Some(text) = v.and_then(scalar_text) {
            facts.insert(key, text);
        }
    };
    let peer = doc.get("peer_memory");
    put("nvidia_peermem".into(), peer.and_then(|p| p.get("status")));
    put(
        "nvidia_peermem version".into(),
        peer.and_then(|p| p.get("version")),
    );
    // Checklist versions (driver stacks) where the document carries them.
    for section in ["checklist", "versions"] {
        if let Some(Value::Object(fields)) = doc.get(section) {
            for (k, v) in fields {
                put(k.clone(), Some(v).and_then(version_value));
            }
        }
    }
    for dev in doc
        .get("devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = dev.get("name").and_then(Value::as_str).unwrap_or("?");
        put(format!("{name} firmware"), dev.get("fw_ver"));
        put(format!("{name} board_id"), dev.get("board_id"));
        let driver = dev.get("driver");
        put(
            format!("{name} driver"),
            driver.and_then(|d| d.get("module")),
        );
        put(
            format!("{name} driver version"),
            driver.and_then(|d| d.get("version")),
        );
        for port in dev
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let number = port.get("port").and_then(scalar_text).unwrap_or_default();
            for field in PORT_FIELDS {
                put(format!("{name}/{number} {field}"), port.get(*field));
            }
        }
        for roce in dev
            .get("roce")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let number = roce.get("port").and_then(scalar_text).unwrap_or_default();
            for field in ROCE_FIELDS {
                put(format!("{name}/{number} {field}"), roce.get(*field));
            }
        }
    }
    // Error counters: whether each counts, not its value (every server's differ).
    for set in doc
        .get("counters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let device = set.get("device").and_then(Value::as_str).unwrap_or("?");
        let place = match set.get("port").and_then(scalar_text) {
            Some(p) => format!("{device}/{p}"),
            None => device.to_string(),
        };
        for c in set
            .get("counters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let group = c.get("group").and_then(Value::as_str).unwrap_or_default();
            if !COMPARED_GROUPS.contains(&group) {
                continue;
            }
            let (Some(name), Some(value)) = (
                c.get("name").and_then(Value::as_str),
                c.get("value").and_then(Value::as_u64),
            ) else {
                continue;
            };
            let counting = if value > 0 { "counting" } else { "0" };
            facts.insert(format!("{place} {name}"), counting.to_string());
        }
    }
    ServerFacts { server, facts }
}

/// The counter groups whose counting sets a server apart (errors, not traffic).
const COMPARED_GROUPS: [&str; 3] = ["link-errors", "transport", "receive-resources"];

/// Port fields compared when present; the RoCE fields may be absent. Counter values are
/// left out: they differ between any two servers by nature.
const PORT_FIELDS: &[&str] = &[
    "state",
    "rate",
    "mtu",
    "active_mtu",
    "pfc_mask",
    "pfc",
    "dscp_map",
    "trust",
];

/// A RoCE port's lossless configuration, compared when read (`host --json`'s `roce`).
const ROCE_FIELDS: &[&str] = &[
    "netdev_mtu",
    "pfc",
    "dscp_to_priority",
    "ecn_np",
    "ecn_rp",
    "default_roce_tos",
];

/// A checklist entry may be a plain value or `{ "version": .., "note": .. }`.
fn version_value(v: &Value) -> Option<&Value> {
    match v {
        Value::Object(o) => o.get("version").or_else(|| o.get("status")),
        other => Some(other),
    }
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(_) | Value::Number(_) => Some(v.to_string()),
        // Maps and lists (a DSCP map, counters) compare as their canonical JSON text.
        Value::Array(_) | Value::Object(_) => Some(v.to_string()),
    }
}

/// Each field that some server has and the servers do not all agree on, with how many
/// servers hold each value (absent: `None`).
fn disagreements(servers: &[ServerFacts]) -> Vec<(&String, BTreeMap<Option<&String>, usize>)> {
    let fields: std::collections::BTreeSet<&String> =
        servers.iter().flat_map(|s| s.facts.keys()).collect();
    fields
        .into_iter()
        .map(|field| {
            let mut counts: BTreeMap<Option<&String>, usize> = BTreeMap::new();
            for s in servers {
                *counts.entry(s.facts.get(field)).or_default() += 1;
            }
            (field, counts)
        })
        .filter(|(_, counts)| counts.len() >= 2)
        .collect()
}

/// The value more than half of the servers hold, and how many do: `None` when none does
/// (two servers that differ, a three-way split), so that nobody is blamed at random.
fn majority<'a>(
    counts: &BTreeMap<Option<&'a String>, usize>,
    servers: usize,
) -> Option<(Option<&'a String>, usize)> {
    counts
        .iter()
        .find(|(_, n)| **n * 2 > servers)
        .map(|(v, n)| (*v, *n))
}

/// The servers differing from the majority, per field, in field then server order: only
/// where more than half of the servers agree (see [`splits`] for the other fields). A
/// field absent on some servers is reported on those lacking it only when the majority
/// has it.
pub fn outliers(servers: &[ServerFacts]) -> Vec<Outlier> {
    let mut found = Vec::new();
    for (field, counts) in disagreements(servers) {
        let Some((majority, majority_count)) = majority(&counts, servers.len()) else {
            continue;
        };
        for s in servers {
            let value = s.facts.get(field);
            if value != majority {
                found.push(Outlier {
                    server: s.server.clone(),
                    field: field.clone(),
                    value: value.cloned(),
                    majority: majority.cloned(),
                    majority_count,
                    servers: servers.len(),
                });
            }
        }
    }
    found
}

/// A field the servers differ on where no value is held by more than half of them: every
/// value with the servers that hold it, and no server blamed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Split {
    pub field: String,
    pub values: Vec<SplitValue>,
}

/// One value of a [`Split`] field (`None`: the field is absent) and its servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SplitValue {
    pub value: Option<String>,
    pub servers: Vec<String>,
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: usize = self.values.iter().map(|v| v.servers.len()).sum();
        let values: Vec<String> = self
            .values
            .iter()
            .map(|v| {
                let value = v.value.as_deref().unwrap_or("absent");
                format!("{value} on {}", v.servers.join(", "))
            })
            .collect();
        write!(
            f,
            "{}: no majority among {total} servers: {}",
            self.field,
            values.join("; ")
        )
    }
}

/// The fields the servers differ on without a majority, in field order.
pub fn splits(servers: &[ServerFacts]) -> Vec<Split> {
    disagreements(servers)
        .into_iter()
        .filter(|(_, counts)| majority(counts, servers.len()).is_none())
        .map(|(field, counts)| Split {
            field: field.clone(),
            values: counts
                .keys()
                .map(|value| SplitValue {
                    value: value.cloned(),
                    servers: servers
                        .iter()
                        .filter(|s| s.facts.get(field) == *value)
                        .map(|s| s.server.clone())
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(host: &str, fw: &str, rate: &str) -> Value {
        json!({
            "schema_version": 1,
            "hostname": host,
            "peer_memory": {"status": "loaded", "module": "nvidia_peermem", "version": "1.0"},
            "devices": [{
                "name": "mlx5_0", "fw_ver": fw, "board_id": "MT_0000000838",
                "driver": {"module": "mlx5_core", "version": "24.10"},
                "ports": [{"port": 1, "state": "active", "rate": rate, "gids": []}]
            }]
        })
    }

    fn fleet(n: usize) -> Vec<Value> {
        (1..=n)
            .map(|i| doc(&format!("gpu-{i:04}"), "28.40.1000", "4xNDR"))
            .collect()
    }

    fn facts(docs: &[Value]) -> Vec<ServerFacts> {
        docs.iter()
            .enumerate()
            .map(|(i, d)| facts_of(d, &format!("doc{i}")))
            .collect()
    }

    #[test]
    fn planted_firmware_outlier_is_named_with_the_majority() {
        let mut docs = fleet(64);
        docs[6] = doc("gpu-0007", "28.39.1002", "4xNDR");
        let found = outliers(&facts(&docs));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].to_string(),
            "gpu-0007: mlx5_0 firmware 28.39.1002 (majority 28.40.1000 on 63 of 64)"
        );
    }

    #[test]
    fn rate_peermem_and_roce_fields_are_compared_and_absence_counts() {
        let mut docs = fleet(5);
        docs[1] = doc("gpu-0002", "28.40.1000", "4xHDR");
        docs[2]["peer_memory"] = json!({"status": "missing"});
        for d in &mut docs {
            d["devices"][0]["ports"][0]["pfc_mask"] = json!("0x08");
        }
        docs[3]["devices"][0]["ports"][0]["pfc_mask"] = json!("0x00");
        let found = outliers(&facts(&docs));
        let named: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert!(named.contains(&"gpu-0002: mlx5_0/1 rate 4xHDR (majority 4xNDR on 4 of 5)".into()));
        assert!(
            named.contains(&"gpu-0003: nvidia_peermem missing (majority loaded on 4 of 5)".into())
        );
        assert!(named
            .contains(&"gpu-0003: nvidia_peermem version absent (majority 1.0 on 4 of 5)".into()));
        assert!(
            named.contains(&"gpu-0004: mlx5_0/1 pfc_mask 0x00 (majority 0x08 on 4 of 5)".into())
        );
        assert_eq!(found.len(), 4, "{named:?}");
    }

    /// Two servers that differ: neither is the odd one out.
    #[test]
    fn without_a_majority_nobody_is_blamed() {
        let docs = [
            doc("gpu-0001", "28.40.1000", "4xNDR"),
            doc("gpu-0002", "28.39.1002", "4xNDR"),
        ];
        let servers = facts(&docs);
        assert!(outliers(&servers).is_empty());
        let split = splits(&servers);
        assert_eq!(split.len(), 1, "{split:?}");
        assert_eq!(
            split[0].to_string(),
            "mlx5_0 firmware: no majority among 2 servers: 28.39.1002 on gpu-0002; \
             28.40.1000 on gpu-0001"
        );
        // Two against one is a majority.
        let mut three = docs.to_vec();
        three.push(doc("gpu-0003", "28.40.1000", "4xNDR"));
        let servers = facts(&three);
        assert!(splits(&servers).is_empty());
        assert_eq!(outliers(&servers).len(), 1);
    }

    #[test]
    fn a_consistent_fleet_has_no_outliers() {
        assert!(outliers(&facts(&fleet(8))).is_empty());
    }

    #[test]
    fn json_lines_and_concatenated_documents_are_read() {
        let docs = fleet(3);
        let lines: String = docs.iter().map(|d| format!("{d}\n")).collect();
        assert_eq!(read_documents("f", &lines).unwrap().len(), 3);
        let pretty: String = docs
            .iter()
            .map(|d| serde_json::to_string_pretty(d).unwrap())
            .collect();
        assert_eq!(read_documents("f", &pretty).unwrap().len(), 3);
    }

    #[test]
    fn garbage_and_truncated_documents_name_source_and_index() {
        let good = fleet(1)[0].to_string();
        let truncated = format!("{good}\n{}", &good[..good.len() / 2]);
        let e = read_documents("fleet.jsonl", &truncated).unwrap_err();
        assert_eq!((e.source_name.as_str(), e.index), ("fleet.jsonl", 2));
        assert!(
            e.to_string().starts_with("fleet.jsonl: document 2: "),
            "{e}"
        );
        let e = read_documents("-", &format!("{good} [1,2]")).unwrap_err();
        assert_eq!(e.index, 2);
        assert!(e
            .to_string()
            .contains("not an `ibscope host --json` document"));
        assert!(read_documents("x", "\u{0}garbage").is_err());
    }

    /// What `host --json` writes of a RoCE port and of the stack differs on one server.
    #[test]
    fn roce_configuration_and_stack_versions_are_compared() {
        let mut docs = fleet(4);
        for d in &mut docs {
            d["versions"] =
                json!({"rdma_core": "50.0", "nvidia_driver": "550.54.15", "cuda_driver": "12.4"});
            d["devices"][0]["roce"] = json!([{
                "port": 1, "netdev": "ens1", "netdev_mtu": 9000, "pfc": [3],
                "dscp_to_priority": {"26": 3}, "ecn_np": [3], "ecn_rp": [3],
                "default_roce_tos": 106, "rocev2_gids": 2
            }]);
        }
        docs[2]["devices"][0]["roce"][0]["pfc"] = json!([]);
        docs[3]["versions"]["cuda_driver"] = json!("12.2");
        let found = outliers(&facts(&docs));
        let seen: Vec<(String, String)> = found
            .iter()
            .map(|o| (o.server.clone(), o.field.clone()))
            .collect();
        assert_eq!(
            seen,
            [
                ("gpu-0004".to_string(), "cuda_driver".to_string()),
                ("gpu-0003".to_string(), "mlx5_0/1 pfc".to_string()),
            ],
            "{found:#?}"
        );
    }

    /// One server's error counter counts where the fleet's are at 0.
    #[test]
    fn an_error_counter_counting_on_one_server_is_an_outlier() {
        let mut docs = fleet(3);
        for (i, d) in docs.iter_mut().enumerate() {
            let symbol = if i == 1 { 120 } else { 0 };
            d["counters"] = json!([{
                "device": "mlx5_0", "port": 1, "counters": [
                    {"name": "symbol_error", "group": "link-errors", "source": "port", "value": symbol},
                    {"name": "port_xmit_data", "group": "data", "source": "port", "value": 1000 * i, "unit": "bytes"}
                ]
            }]);
        }
        let found = outliers(&facts(&docs));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].server, "gpu-0002");
        assert_eq!(found[0].field, "mlx5_0/1 symbol_error");
        assert_eq!(found[0].value.as_deref(), Some("counting"));
    }
}
