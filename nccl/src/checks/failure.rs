//! A job that did not start (`nccl-init-failed`): processes that warned and failed during
//! NCCL's init or bootstrap and never built their communicator (no `Init COMPLETE`), with
//! the known causes named:
//!
//! - `connecting to address ... with family N is neither AF_INET(2) nor AF_INET6(10)`: the
//!   bootstrap read an address another build wrote: mismatched NCCL builds between nodes;
//! - ranks printing different NCCL versions;
//! - `NET/IB : No device found.` where the job needs the network: no usable IB device;
//! - a net plugin that loaded and then gave way to another network: it failed and NCCL fell
//!   back;
//! - `socketFinalizeAccept: wrong type 4 != 3`: a peer connected over the IB transport where
//!   this rank uses sockets: the nodes run with different NCCL settings.
//!
//! A warning alone is not a failure (NCCL warns of HCAs it cannot open and goes on): the
//! process must also trace a call back with an error code, print a warning of the fatal
//! kinds, or the job print an NCCL error.

use std::collections::BTreeSet;

use ibscope_topo::findings::{Finding, FindingKind};

use super::common::{finding, list, Index};
use super::network::network_of;
use crate::log::{NcclLog, Place, Process, ProcessId, Seen};

/// Warnings that end NCCL's init wherever they appear.
const FATAL: [&str; 10] = [
    "is neither AF_INET",
    "Bootstrap",
    "bootstrap",
    "socketProgress",
    "Connect to ",
    "remote process exited",
    "NCCL failure",
    "Cuda failure",
    "Error: network",
    "unhandled",
];

fn failed_init(log: &NcclLog, p: &Process) -> bool {
    !p.init_complete
        && !p.warnings.is_empty()
        && (!p.failures.is_empty()
            || !log.job_errors.is_empty()
            || p.warnings
                .iter()
                .any(|w| FATAL.iter().any(|f| w.value.contains(f))))
}

/// The job's start failed: one finding, naming the processes, the first warning and the
/// cause where it is a known one.
pub fn init_failed(log: &NcclLog, by: &Index) -> Vec<Finding> {
    let failing: Vec<(&ProcessId, &Process)> = log
        .processes
        .iter()
        .filter(|(_, p)| failed_init(log, p))
        .collect();
    let nothing_built = !log.processes.values().any(|p| p.init_complete);
    let (first, mut at): (String, Vec<Place>) = match failing.first() {
        Some((_, p)) => (
            p.warnings[0].value.clone(),
            failing
                .iter()
                .flat_map(|(_, p)| p.warnings.first().map(|w| w.at))
                .collect(),
        ),
        None if nothing_built && !log.processes.is_empty() && !log.job_errors.is_empty() => {
            (log.job_errors[0].value.clone(), vec![log.job_errors[0].at])
        }
        None => return Vec::new(),
    };
    let hosts: BTreeSet<&str> = failing.iter().map(|(id, _)| id.host.as_str()).collect();
    let (cause, cause_at) = cause(log, &failing, by);
    at.extend(cause_at);
    at.extend(log.job_errors.iter().take(2).map(|e| e.at));
    let host = (hosts.len() == 1).then(|| *hosts.iter().next().expect("one host"));
    let who = match (failing.len(), host) {
        (0, _) => "the job printed an NCCL error before any communicator was built".to_string(),
        // The finding names its one host already.
        (n, Some(_)) => format!("{n} process(es) warned and failed during NCCL's init"),
        (n, None) => format!(
            "{n} process(es) on {} warned and failed during NCCL's init",
            list(&hosts)
        ),
    };
    vec![finding(
        log,
        FindingKind::NcclInitFailed,
        format!(
            "the job did not start: {who} (first: {:?}); {cause}",
            shorten(&first)
        ),
        host,
        at,
    )]
}

/// The known cause of a failed start, in words, and the lines that show it.
fn cause(log: &NcclLog, failing: &[(&ProcessId, &Process)], by: &Index) -> (String, Vec<Place>) {
    let versions = versions(log);
    let warn_with = |text: &str| -> Option<&Seen<String>> {
        failing
            .iter()
            .flat_map(|(_, p)| &p.warnings)
            .find(|w| w.value.contains(text))
    };
    if let Some(w) = warn_with("is neither AF_INET") {
        let seen = if versions.len() > 1 {
            format!(
                " (the log shows {})",
                list(
                    versions
                        .iter()
                        .map(|v| v.value.as_str())
                        .collect::<BTreeSet<_>>()
                )
            )
        } else {
            String::new()
        };
        let mut at = vec![w.at];
        at.extend(versions.iter().map(|v| v.at));
        return (
            format!(
                "cause: the nodes run mismatched NCCL builds{seen}: NCCL's bootstrap read an \
                 address in another build's layout (one NCCL build, and one build of the \
                 libraries it loads, on every node)"
            ),
            at,
        );
    }
    if let Some(w) = warn_with("socketFinalizeAccept: wrong type") {
        // socket.h's ncclSocketType: 3 the socket transport, 4 the IB transport.
        return (
            "cause: a peer opened another kind of connection than this rank expects (the \
             socket transport and the IB transport): the ranks run with different NCCL \
             settings, a variable such as NCCL_IB_DISABLE set on some nodes only (mpirun \
             passes variables with -x, srun with --export)"
                .into(),
            vec![w.at],
        );
    }
    if versions.len() > 1 {
        return (
            format!(
                "cause: ranks run different NCCL versions ({})",
                list(
                    versions
                        .iter()
                        .map(|v| v.value.as_str())
                        .collect::<BTreeSet<_>>()
                )
            ),
            versions.iter().map(|v| v.at).collect(),
        );
    }
    if let Some(at) = failing.iter().find_map(|(_, p)| p.ib_no_device) {
        return (
            "cause: no usable IB device (NET/IB : No device found): the HCAs are not visible to \
             the process (the container's devices, rdma-core, the driver)"
                .into(),
            vec![at],
        );
    }
    if let Some(w) = warn_with("not found") {
        return (format!("cause: {}", shorten(&w.value)), vec![w.at]);
    }
    for (id, p) in failing {
        let (Some(plugin), Some(net)) = (&p.plugin_loaded, network_of(log, id, by.of(id))) else {
            continue;
        };
        if plugin.value != net.value {
            return (
                format!(
                    "cause: the net plugin {} failed and NCCL fell back to {}",
                    plugin.value, net.value
                ),
                vec![plugin.at, net.at],
            );
        }
    }
    ("read the first WARN of each process".into(), Vec::new())
}

/// Every version line of the log, one per distinct version.
fn versions(log: &NcclLog) -> Vec<&Seen<String>> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    log.processes
        .values()
        .filter_map(|p| p.version.as_ref())
        .chain(&log.bare_versions)
        .filter(|v| seen.insert(v.value.as_str()))
        .collect()
}

fn shorten(text: &str) -> String {
    text.chars().take(160).collect()
}
