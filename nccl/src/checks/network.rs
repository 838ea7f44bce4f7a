//! The network a process uses, and the rule on it (`nccl-net-socket`): a multi-node job
//! whose data moves over TCP sockets on a host where HCAs exist, as the log or the fabric
//! shows them (other hosts of the job on IB, NCCL_IB_HCA set, NCCL's warnings about an
//! HCA, the fabric's HCAs of that host).

use std::collections::{BTreeMap, BTreeSet};

use ibscope_topo::findings::{Finding, FindingKind};
use ibscope_topo::hosts::Hosts;

use super::common::{finding, hosts, list, Index};
use crate::log::{Connection, NcclLog, Place, Process, ProcessId, Seen, Transport};

/// The network process `id` uses: `Using network X` where printed, else its connections'
/// transport (`NET/Socket/0`), else the device list it printed (`NET/Socket : Using`,
/// `NET/IB : Using`).
pub fn network_of(log: &NcclLog, id: &ProcessId, own: &[&Connection]) -> Option<Seen<String>> {
    let p = log.processes.get(id)?;
    if let Some(n) = &p.network {
        return Some(n.clone());
    }
    let mut plugins: BTreeMap<&str, (usize, Place)> = BTreeMap::new();
    for c in own {
        if let Transport::Net { plugin, .. } = &c.transport {
            plugins.entry(plugin.as_str()).or_insert((0, c.at)).0 += 1;
        }
    }
    if let Some((plugin, (_, at))) = plugins.into_iter().max_by_key(|(_, (n, _))| *n) {
        return Some(Seen {
            value: plugin.to_string(),
            at,
        });
    }
    if let Some(at) = p.socket_devices {
        return Some(Seen {
            value: "Socket".into(),
            at,
        });
    }
    p.net_devices_at.map(|at| Seen {
        value: "IB".into(),
        at,
    })
}

/// Hosts of a multi-node job whose processes use TCP sockets although HCAs exist.
pub fn net_socket(log: &NcclLog, by: &Index, fabric: Option<&Hosts>) -> Vec<Finding> {
    let all_hosts = hosts(log);
    let networks: BTreeMap<&ProcessId, Seen<String>> = log
        .processes
        .keys()
        .filter_map(|id| Some((id, network_of(log, id, by.of(id))?)))
        .collect();
    let multi_node = all_hosts.len() > 1
        || log
            .nranks()
            .is_some_and(|n| n as usize > log.ranks.len().max(1))
        || log
            .connections
            .iter()
            .any(|c| matches!(&c.transport, Transport::Net { plugin, .. } if plugin == "Socket"));
    if !multi_node {
        return Vec::new();
    }
    let elsewhere: BTreeSet<&str> = networks
        .values()
        .filter(|n| n.value != "Socket")
        .map(|n| n.value.as_str())
        .collect();
    let mut out = Vec::new();
    for host in all_hosts {
        let procs: Vec<&Process> = by.on(host).iter().map(|(_, p)| *p).collect();
        let on_socket: Vec<&Seen<String>> = by
            .on(host)
            .iter()
            .filter_map(|(id, _)| networks.get(id))
            .filter(|n| n.value == "Socket")
            .collect();
        let Some(first) = on_socket.first() else {
            continue;
        };
        let mut signs: Vec<String> = Vec::new();
        let mut at: Vec<Place> = vec![first.at];
        if !elsewhere.is_empty() {
            signs.push(format!(
                "other processes of the job use {}",
                list(&elsewhere)
            ));
        }
        if let Some(s) = procs.iter().find_map(|p| p.settings.get("NCCL_IB_HCA")) {
            signs.push(format!("NCCL_IB_HCA is set ({})", s.value));
            at.push(s.at);
        }
        let hca_warning = procs.iter().flat_map(|p| &p.warnings).find(|w| {
            w.value.contains("mlx") || w.value.contains("ibv_") || w.value.contains("NET/IB")
        });
        if let Some(w) = hca_warning {
            signs.push(format!("NCCL warned about its HCAs ({:?})", w.value));
            at.push(w.at);
        }
        if let Some(h) = fabric.and_then(|f| f.find(host).map(|i| &f.hosts()[i])) {
            if !h.hcas.is_empty() {
                signs.push(format!("the fabric shows {} HCA(s) on it", h.hcas.len()));
            }
        }
        if signs.is_empty() {
            continue;
        }
        let mut why = String::new();
        if let Some(s) = procs
            .iter()
            .find_map(|p| p.settings.get("NCCL_IB_DISABLE"))
            .filter(|s| s.value == "1")
        {
            why = "; NCCL_IB_DISABLE=1 turns them off".into();
            at.push(s.at);
        } else if let Some(place) = procs.iter().find_map(|p| p.ib_no_device) {
            why = "; NET/IB found no device: the HCAs are not visible to NCCL (the container's \
                   /dev/infiniband, rdma-core, the driver)"
                .into();
            at.push(place);
        }
        out.push(finding(
            log,
            FindingKind::NcclNetSocket,
            format!(
                "{} process(es) move the job's data over TCP sockets (network Socket) although \
                 HCAs exist: {}{why}",
                on_socket.len(),
                signs.join("; ")
            ),
            Some(host),
            at,
        ));
    }
    out
}
