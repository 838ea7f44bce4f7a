//! One NCCL build and one `NCCL_*` environment for the whole job (`nccl-mismatch`).
//!
//! A value differs where two processes print different ones: a process that printed no
//! value printed nothing (NCCL prints a variable where it reads it, and an excerpt may not
//! hold that line). A variable is missing on a host only where the log holds every rank
//! of the job and that host's processes print their other settings and get as far as the
//! ones that print it: the `mpirun` without `-x`.

use std::collections::{BTreeMap, BTreeSet};

use ibscope_topo::findings::{Finding, FindingKind};

use super::common::{finding, hosts, list, Index};
use crate::log::{NcclLog, Place, ProcessId};

/// Every difference of version or setting.
pub fn mismatch(log: &NcclLog, by: &Index) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut versions: Vec<(String, String, Place)> = log
        .processes
        .iter()
        .filter_map(|(id, p)| {
            let v = p.version.as_ref()?;
            Some((who(id), v.value.clone(), v.at))
        })
        .collect();
    for v in &log.bare_versions {
        let e = log.evidence(v.at);
        versions.push((format!("{}:{}", e.file, e.line), v.value.clone(), v.at));
    }
    out.extend(differ(log, "NCCL version", &versions));
    let keys: BTreeSet<&String> = log
        .processes
        .values()
        .flat_map(|p| p.settings.keys())
        .collect();
    for key in keys {
        let values: Vec<(String, String, Place)> = log
            .processes
            .iter()
            .filter_map(|(id, p)| {
                let s = p.settings.get(key)?;
                Some((who(id), s.value.clone(), s.at))
            })
            .collect();
        out.extend(differ(log, key, &values));
        out.extend(missing(log, key, by));
    }
    out
}

fn who(id: &ProcessId) -> String {
    format!("{}:{}", id.host, id.pid)
}

/// One finding when `values` (who, value, where) differ: the most common value, and who
/// has another.
fn differ(log: &NcclLog, what: &str, values: &[(String, String, Place)]) -> Option<Finding> {
    let mut by_value: BTreeMap<&str, Vec<(&str, Place)>> = BTreeMap::new();
    for (who, v, at) in values {
        by_value.entry(v.as_str()).or_default().push((who, *at));
    }
    if by_value.len() < 2 {
        return None;
    }
    let (common, _) = by_value.iter().max_by_key(|(_, w)| w.len())?;
    let others: Vec<String> = by_value
        .iter()
        .filter(|(v, _)| *v != common)
        .map(|(v, w)| {
            let names: BTreeSet<&str> = w.iter().map(|(n, _)| *n).collect();
            format!("{v} on {}", list(names))
        })
        .collect();
    let mut f = finding(
        log,
        FindingKind::NcclMismatch,
        format!(
            "{what} differs between ranks: {common} on most processes, {}",
            others.join("; ")
        ),
        None,
        by_value
            .values()
            .filter_map(|w| w.first().map(|(_, at)| *at)),
    );
    f.counter = Some(what.to_string());
    Some(f)
}

/// `key` printed on some hosts of the job and not on others that print their settings.
fn missing(log: &NcclLog, key: &str, by: &Index) -> Option<Finding> {
    let complete = log
        .nranks()
        .is_some_and(|n| log.ranks.len() as u32 == n && n > 0);
    let all_hosts = hosts(log);
    if !complete || all_hosts.len() < 2 {
        return None;
    }
    let printers: Vec<(&ProcessId, Place, &str)> = log
        .processes
        .iter()
        .filter_map(|(id, p)| {
            let s = p.settings.get(key)?;
            Some((id, s.at, s.value.as_str()))
        })
        .collect();
    let with: BTreeSet<&str> = printers.iter().map(|(id, _, _)| id.host.as_str()).collect();
    let printed_elsewhere: BTreeSet<&str> = log
        .processes
        .iter()
        .filter(|(id, _)| with.contains(id.host.as_str()))
        .flat_map(|(_, p)| p.settings.keys().map(String::as_str))
        .filter(|k| *k != key)
        .collect();
    let without: Vec<&str> = all_hosts
        .iter()
        .copied()
        .filter(|h| !with.contains(h))
        .collect();
    if without.is_empty() {
        return None;
    }
    let printers_net = printers.iter().all(|(id, _, _)| by.has_net(id));
    // Each host without it prints settings the others print, got through init and did
    // the work that reads it.
    let comparable = without.iter().all(|h| {
        by.on(h).iter().any(|(id, p)| {
            p.init_complete
                && p.settings
                    .keys()
                    .any(|k| printed_elsewhere.contains(k.as_str()))
                && (!printers_net || by.has_net(id))
        })
    });
    if !comparable {
        return None;
    }
    let values: BTreeSet<&str> = printers.iter().map(|(_, _, v)| *v).collect();
    let mut f = finding(
        log,
        FindingKind::NcclMismatch,
        format!(
            "{key} is set on {} ({}) and not printed on {}, whose processes print their other \
             NCCL_* settings: the variable did not reach {} (mpirun passes it with -x, srun \
             with --export)",
            list(&with),
            list(values),
            list(&without),
            if without.len() == 1 {
                "that host"
            } else {
                "those hosts"
            }
        ),
        None,
        printers.iter().map(|(_, at, _)| *at),
    );
    f.counter = Some(key.to_string());
    Some(f)
}
