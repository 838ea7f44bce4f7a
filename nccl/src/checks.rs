//! What a job's NCCL log says of its hosts: GPU-NIC affinity, GPUDirect RDMA, idle rails,
//! one NCCL version and one set of `NCCL_*` settings. Each rule emits findings of the one
//! table (`nccl-*` kinds, [`Scope::Job`](ibscope_topo::findings::Scope)).
//!
//! A GPU's own HCA is entry D of its process's `NET/IB : Using` list for CUDA device D
//! (NCCL lists HCAs in PCI order, and servers with one HCA per GPU pair them in that
//! order); the rule is applied only on servers listing at least as many HCAs as the job
//! has GPUs there. An HCA's rail is the fabric's (its leaf's rail, see `ibscope hosts`)
//! when a fabric is given, else its device index (`mlx5_3`: rail 3).

use std::collections::{BTreeMap, BTreeSet};

use ibscope_topo::findings::{Finding, FindingKind};
use ibscope_topo::hosts::name::{device_index, DeviceIndex};
use ibscope_topo::hosts::Hosts;

use crate::log::{Connection, NcclLog, ProcessId, Transport};

/// Every rule over `log`; `hosts` gives the fabric's rails where known.
pub fn check(log: &NcclLog, hosts: Option<&Hosts>) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(wrong_rail(log, hosts));
    out.extend(gdr_off(log));
    out.extend(rails_unused(log, hosts));
    out.extend(mismatch(log));
    out
}

/// The rail of HCA `device` on `host`.
pub fn rail_of(hosts: Option<&Hosts>, host: &str, device: &str) -> Option<u8> {
    if let Some(hosts) = hosts {
        if let Some(i) = hosts.find(host) {
            return hosts.hosts()[i]
                .hcas
                .iter()
                .find(|h| h.device.as_deref() == Some(device))
                .and_then(|h| h.rail);
        }
    }
    match device_index(device) {
        DeviceIndex::Index(i) => Some(i),
        _ => None,
    }
}

/// The HCAs a host has: the fabric's, else every device its processes list.
fn hcas_of(log: &NcclLog, hosts: Option<&Hosts>, host: &str) -> BTreeSet<String> {
    if let Some(h) = hosts.and_then(|all| all.find(host).map(|i| &all.hosts()[i])) {
        return h.hcas.iter().filter_map(|c| c.device.clone()).collect();
    }
    log.processes
        .iter()
        .filter(|(id, _)| id.host == host)
        .flat_map(|(_, p)| p.net_devices.iter().map(|d| d.device.clone()))
        .collect()
}

/// GPUs of the job on each host.
fn gpus_per_host(log: &NcclLog) -> BTreeMap<&str, BTreeSet<u32>> {
    let mut out: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for r in log.ranks.values() {
        out.entry(r.process.host.as_str())
            .or_default()
            .insert(r.cuda_dev);
    }
    out
}

/// The network connections of the log with their own rank's host and HCA.
fn net_ends(log: &NcclLog) -> impl Iterator<Item = (&Connection, &str, &str)> {
    log.connections.iter().filter_map(|c| {
        let dev = log.net_device(c)?;
        Some((c, c.printed_by.host.as_str(), dev.device.as_str()))
    })
}

/// The rank whose GPU memory a network connection reads or writes: its PXN proxy's when
/// proxied (the data crosses NVLink to the GPU beside the HCA), else its own.
fn gpu_rank(c: &Connection) -> u32 {
    match c.transport {
        Transport::Net { proxy: Some(p), .. } => p,
        _ => c.own_rank(),
    }
}

/// A rank whose network channels leave through another HCA than its GPU's own (through
/// its PXN proxy's GPU when proxied).
fn wrong_rail(log: &NcclLog, hosts: Option<&Hosts>) -> Vec<Finding> {
    let gpus = gpus_per_host(log);
    let mut seen: BTreeMap<(u32, String), (String, BTreeSet<u32>)> = BTreeMap::new();
    for (c, host, device) in net_ends(log) {
        let gpu_rank = gpu_rank(c);
        let Some(gpu) = log.ranks.get(&gpu_rank) else {
            continue;
        };
        let Some(list) = log.processes.get(&c.printed_by).map(|p| &p.net_devices) else {
            continue;
        };
        if list.len() < gpus.get(host).map_or(0, BTreeSet::len) {
            continue;
        }
        let Some(own) = list.iter().find(|d| d.index == gpu.cuda_dev) else {
            continue;
        };
        let other_rail = own.device != device
            && (hosts.is_none()
                || rail_of(hosts, host, device) != rail_of(hosts, host, &own.device));
        if other_rail {
            seen.entry((gpu_rank, device.to_string()))
                .or_insert((own.device.clone(), BTreeSet::new()))
                .1
                .insert(c.channel);
        }
    }
    let rail = |host: &str, device: &str| {
        rail_of(hosts, host, device).map_or(String::new(), |r| format!(" (rail {r})"))
    };
    seen.into_iter()
        .map(|((rank, device), (own, channels))| {
            let r = &log.ranks[&rank];
            let host = r.process.host.as_str();
            let mut f = Finding::new(
                FindingKind::NcclWrongRail,
                // The host and its own HCA's rail are the finding's (said before this).
                format!(
                    "rank {rank} (GPU {}) uses {device}{} for {} channel(s) ({}): its own HCA \
                     is {own}; GPU and HCA meet over PCIe/NVLink instead of the rail \
                     (NCCL_IB_HCA, NCCL_TOPO_FILE, the PCIe layout)",
                    r.cuda_dev,
                    rail(host, &device),
                    channels.len(),
                    list(&channels),
                ),
            );
            f.host = Some(host.to_string());
            f.rail = rail_of(hosts, host, &own);
            f
        })
        .collect()
}

/// Network channels without GPUDirect RDMA where the host (an `Enabled` line, another of
/// its connections) or the job's other hosts use it.
fn gdr_off(log: &NcclLog) -> Vec<Finding> {
    let mut host_uses: BTreeSet<&str> = BTreeSet::new();
    for (id, p) in &log.processes {
        if !p.gdr_enabled.is_empty() {
            host_uses.insert(id.host.as_str());
        }
    }
    let mut without: BTreeMap<(u32, String), BTreeSet<u32>> = BTreeMap::new();
    for (c, host, device) in net_ends(log) {
        match c.transport {
            Transport::Net { gdr: true, .. } => {
                host_uses.insert(host);
            }
            Transport::Net { gdr: false, .. } => {
                without
                    .entry((gpu_rank(c), device.to_string()))
                    .or_default()
                    .insert(c.channel);
            }
            Transport::Local { .. } => {}
        }
    }
    if host_uses.is_empty() {
        return Vec::new();
    }
    without
        .into_iter()
        .filter_map(|((rank, device), channels)| {
            let r = log.ranks.get(&rank)?;
            let host = r.process.host.as_str();
            let why = log
                .processes
                .get(&r.process)
                .and_then(|p| p.gdr_disabled.get(&device))
                .map(|w| format!("; NCCL says GPUDirect RDMA is disabled for {device} ({w})"))
                .unwrap_or_default();
            let whose = if host_uses.contains(host) {
                "its host uses it on other channels"
            } else {
                "other hosts of the job use it: is nvidia-peermem loaded here?"
            };
            let mut f = Finding::new(
                FindingKind::NcclGdrOff,
                format!(
                    "rank {rank} (GPU {}) moves {} network channel(s) ({}) over \
                     {device} through host memory, without GPUDirect RDMA: {whose}{why}",
                    r.cuda_dev,
                    channels.len(),
                    list(&channels)
                ),
            );
            f.host = Some(host.to_string());
            Some(f)
        })
        .collect()
}

/// A host's HCAs that carry none of the job's network channels.
fn rails_unused(log: &NcclLog, hosts: Option<&Hosts>) -> Vec<Finding> {
    let mut used: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, host, device) in net_ends(log) {
        used.entry(host).or_default().insert(device);
    }
    let mut out = Vec::new();
    for (host, used) in used {
        for device in hcas_of(log, hosts, host) {
            if used.contains(device.as_str()) || device.contains('+') {
                continue;
            }
            let restricted = log
                .processes
                .iter()
                .find(|(id, _)| id.host == host)
                .and_then(|(_, p)| p.settings.get("NCCL_IB_HCA"))
                .map(|v| format!(" (NCCL_IB_HCA={v})"))
                .unwrap_or_default();
            let mut f = Finding::new(
                FindingKind::NcclRailUnused,
                format!(
                    "{device} carries none of the job's network channels{restricted}: \
                     its rail is idle and the others carry its share"
                ),
            );
            f.host = Some(host.to_string());
            f.rail = rail_of(hosts, host, &device);
            out.push(f);
        }
    }
    out
}

/// Ranks on other NCCL versions or `NCCL_*` settings than the rest.
fn mismatch(log: &NcclLog) -> Vec<Finding> {
    let mut out = Vec::new();
    let versions: Vec<(&ProcessId, String)> = log
        .processes
        .iter()
        .filter_map(|(id, p)| Some((id, p.version.clone()?)))
        .collect();
    out.extend(differ("NCCL version", &versions));
    let keys: BTreeSet<&String> = log
        .processes
        .values()
        .flat_map(|p| p.settings.keys())
        .collect();
    // A process that printed no setting at all (a trimmed log) cannot tell its settings.
    let talking: Vec<(&ProcessId, &crate::log::Process)> = log
        .processes
        .iter()
        .filter(|(_, p)| !p.settings.is_empty())
        .collect();
    for key in keys {
        let values: Vec<(&ProcessId, String)> = talking
            .iter()
            .map(|(id, p)| {
                let v = p.settings.get(key).cloned();
                (*id, v.unwrap_or_else(|| "unset (not printed)".into()))
            })
            .collect();
        out.extend(differ(key, &values));
    }
    out
}

/// One finding when `values` differ: the most common value, and who has another.
fn differ(what: &str, values: &[(&ProcessId, String)]) -> Option<Finding> {
    let mut by_value: BTreeMap<&str, Vec<&ProcessId>> = BTreeMap::new();
    for (id, v) in values {
        by_value.entry(v.as_str()).or_default().push(id);
    }
    if by_value.len() < 2 {
        return None;
    }
    let (common, _) = by_value.iter().max_by_key(|(_, ids)| ids.len())?;
    let others: Vec<String> = by_value
        .iter()
        .filter(|(v, _)| *v != common)
        .map(|(v, ids)| {
            let names: BTreeSet<String> = ids
                .iter()
                .map(|i| format!("{}:{}", i.host, i.pid))
                .collect();
            format!(
                "{v} on {}",
                names.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    let mut f = Finding::new(
        FindingKind::NcclMismatch,
        format!(
            "{what} differs between ranks: {common} on most processes, {}",
            others.join("; ")
        ),
    );
    f.counter = Some(what.to_string());
    Some(f)
}

/// `1, 3, 5` (at most 8, then `...`).
fn list(numbers: &BTreeSet<u32>) -> String {
    let mut s: Vec<String> = numbers.iter().take(8).map(u32::to_string).collect();
    if numbers.len() > 8 {
        s.push("...".into());
    }
    s.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{self, Job};

    fn kinds(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.kind.name()).collect()
    }

    #[test]
    fn a_healthy_job_has_no_findings() {
        let log = synthetic::log(&Job::new(4, 8));
        assert_eq!(kinds(&check(&log, None)), Vec::<&str>::new());
    }

    #[test]
    fn a_gpu_on_another_rails_hca_is_wrong_rail_and_idles_a_rail() {
        let mut job = Job::new(4, 8);
        job.hca_of_gpu = Some((2, 5, 4));
        let found = check(&synthetic::log(&job), None);
        assert_eq!(
            kinds(&found),
            ["nccl-wrong-rail", "nccl-rail-unused"],
            "{found:#?}"
        );
        assert!(found[0].text_line().starts_with(
            "[nccl-wrong-rail] gpu-0003 rail 5: rank 21 (GPU 5) uses mlx5_4 (rail 4) for"
        ));
        assert!(
            found[0].message.contains("its own HCA is mlx5_5;"),
            "{}",
            found[0].message
        );
        assert!(found[1]
            .text_line()
            .starts_with("[nccl-rail-unused] gpu-0003 rail 5: mlx5_5 carries none"));
        assert_eq!(found[1].rail, Some(5));
    }

    #[test]
    fn a_host_without_gpudirect_is_gdr_off() {
        let mut job = Job::new(4, 2);
        job.no_gdr_host = Some(1);
        let found = check(&synthetic::log(&job), None);
        assert_eq!(
            kinds(&found),
            ["nccl-gdr-off", "nccl-gdr-off"],
            "{found:#?}"
        );
        assert!(found[0].message.contains("nvidia-peermem"));
        assert!(found[0].message.contains("(no module)"));
        // Nobody uses it: nothing to compare with, nothing said.
        let mut none = Job::new(4, 2);
        none.gdr = false;
        assert!(check(&synthetic::log(&none), None).is_empty());
    }

    #[test]
    fn another_version_or_setting_is_a_mismatch() {
        let mut job = Job::new(3, 2);
        job.odd_version_host = Some(2);
        let found = check(&synthetic::log(&job), None);
        assert_eq!(
            kinds(&found),
            ["nccl-mismatch", "nccl-mismatch"],
            "{found:#?}"
        );
        assert!(found[0].message.contains("2.18.3+cuda12.2 on gpu-0003"));
        assert!(found[1].message.contains("NCCL_IB_GID_INDEX"));
    }
}
