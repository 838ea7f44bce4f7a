//! What a finding is: its kinds (`FindingKind`), the table that names each, says how grave
//! it is and what it means ([`FINDING_KINDS`]), and the `Finding` record a rule emits. The
//! rules are in `findings.rs`.

use serde::{Deserialize, Serialize};

use crate::counters::Details;
use crate::model::refs::PortRef;

/// How grave a finding is. Ordered: `Error` is the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
    /// For narrow columns.
    pub fn short(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warn",
            Severity::Error => "error",
        }
    }
}

/// Every kind of finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    DegradedLink,
    LinkBelowNorm,
    LoopbackCable,
    PortNotActive,
    CounterAboveThreshold,
    CounterSaturated,
    CountersUnreadable,
    DuplicateGuid,
    DuplicateLid,
    DiscoveryError,
    NoMasterSm,
    RailDown,
    RailSlow,
    RailMisaligned,
    HcasSwapped,
    HostMissing,
    PlanesDisagree,
    LinkFlapping,
    InterSwitchLinkNarrow,
    HcaPortNotActive,
    HcaRateBelowNorm,
    PcieLinkDegraded,
    PeerMemoryMissing,
    MixedFirmware,
    MixedDriver,
    VerbsUnusable,
    HostCounterRate,
    PfcStorm,
    RoceConfig,
    AcsBlocksPeerToPeer,
    DeviceFilesMissing,
    FirmwareNotExpected,
    NcclWrongRail,
    NcclGdrOff,
    NcclRailUnused,
    NcclMismatch,
    NcclGpuNicDistance,
    NcclGdrForced,
    NcclInitFailed,
    NcclNetSocket,
    NcclTestsWithoutMpi,
    NcclCurveCollapse,
    CableRxPowerLow,
    CableTxPowerLow,
    CableTxFault,
    CableLos,
    CableLol,
    CableTemperature,
    CableChecksum,
    CableRateMismatch,
}

/// What is known of one kind of finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindFacts {
    pub kind: FindingKind,
    /// The name in JSON, labels and `[brackets]` of text output.
    pub name: &'static str,
    pub severity: Severity,
    /// One line for `--help`, the TUI's help and the exporter's HELP text.
    pub meaning: &'static str,
    /// What operators do about it, in one line: shown with the finding where there is room
    /// (`check`'s text, the TUI's detail, `--help`).
    pub fix: &'static str,
    /// What the finding is about: the fabric (`check`, the TUI, `serve`), the local host
    /// (`host --check`) or a job's NCCL log (`nccl log`).
    pub scope: Scope,
}

/// What a kind of finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Fabric,
    Host,
    Job,
}

/// The table of finding kinds, in [`FindingKind`] order.
pub const FINDING_KINDS: [KindFacts; 50] = {
    use FindingKind::*;
    use Severity::*;
    const fn k(
        kind: FindingKind,
        name: &'static str,
        severity: Severity,
        meaning: &'static str,
        fix: &'static str,
    ) -> KindFacts {
        KindFacts {
            kind,
            name,
            severity,
            meaning,
            fix,
            scope: Scope::Fabric,
        }
    }
    /// A kind of the local host's preflight.
    const fn h(
        kind: FindingKind,
        name: &'static str,
        severity: Severity,
        meaning: &'static str,
        fix: &'static str,
    ) -> KindFacts {
        KindFacts {
            scope: Scope::Host,
            ..k(kind, name, severity, meaning, fix)
        }
    }
    /// A kind of a job's NCCL log.
    const fn j(
        kind: FindingKind,
        name: &'static str,
        severity: Severity,
        meaning: &'static str,
        fix: &'static str,
    ) -> KindFacts {
        KindFacts {
            scope: Scope::Job,
            ..k(kind, name, severity, meaning, fix)
        }
    }
    [
        k(
            DegradedLink,
            "degraded-link",
            Warning,
            "a link runs below what both ends support and enable, or below the fabric's norm \
             while its hardware can do better",
            "reseat or replace the cable or its transceivers, check both ports' enabled width and \
             speed, then let the link train again",
        ),
        k(
            LinkBelowNorm,
            "link-below-norm",
            Warning,
            "a link runs below the fabric's norm and a topology file cannot tell whether its \
             hardware can do better (capability unknown offline)",
            "run against the live fabric to learn what the ports support; where they can do \
             better, treat it as a degraded link",
        ),
        k(
            LoopbackCable,
            "loopback-cable",
            Warning,
            "a cable joins two ports of one switch (or one adapter): traffic cannot use it",
            "move one end of the cable to the port the cabling plan names",
        ),
        k(
            PortNotActive,
            "port-not-active",
            Warning,
            "a port is physically up but the SM has not made it Active",
            "look for the port in the SM's log; a resweep (SIGHUP to OpenSM) or a port reset \
             usually makes it Active",
        ),
        k(
            CounterAboveThreshold,
            "counter-above-threshold",
            Error,
            "an error counter is above its threshold",
            "reset the counters and watch the rate; symbol or link errors that keep rising mean a \
             cable or transceiver to replace",
        ),
        k(
            CounterSaturated,
            "counter-saturated",
            Warning,
            "a counter is at its maximum and no longer counts",
            "reset the port's counters (counters --reset) so that it counts again",
        ),
        k(
            CountersUnreadable,
            "counters-unreadable",
            Error,
            "a port's performance counters could not be read",
            "check that the port's PMA answers (perfquery); firmware that drops PerfMgt MADs needs \
             an update",
        ),
        k(
            DuplicateGuid,
            "duplicate-guid",
            Error,
            "one GUID is used by more than one node",
            "find the two nodes (a cloned firmware image, a virtual function) and give one a GUID \
             of its own",
        ),
        k(
            DuplicateLid,
            "duplicate-lid",
            Error,
            "one LID is claimed by more than one port",
            "make the SM sweep heavily so that it assigns LIDs again; look for a second SM with \
             other settings",
        ),
        k(
            DiscoveryError,
            "discovery-error",
            Error,
            "a node or port did not answer discovery, or changed while it ran",
            "sweep again; a node that keeps failing needs its link or its firmware looked at",
        ),
        k(
            NoMasterSm,
            "no-master-sm",
            Error,
            "no subnet manager answers as master",
            "start a subnet manager (opensm) or find out why the running one is not master",
        ),
        k(
            RailDown,
            "rail-down",
            Error,
            "a server lacks a rail most servers have, or that rail's HCA port is not Active",
            "bring the HCA port up: its cable, its leaf switch port, the SM",
        ),
        k(
            RailSlow,
            "rail-slow",
            Warning,
            "one of a server's rails runs slower than its other rails",
            "reseat or replace that rail's cable; check the enabled rate of the HCA port and of \
             its leaf port",
        ),
        k(
            RailMisaligned,
            "rail-misaligned",
            Warning,
            "an HCA is cabled to a leaf switch of another rail",
            "move the HCA's cable to a leaf switch of its own rail",
        ),
        k(
            HcasSwapped,
            "hcas-swapped",
            Warning,
            "two HCAs are each cabled where the other belongs: swap their cables",
            "swap the two HCAs' cables",
        ),
        k(
            HostMissing,
            "host-missing",
            Error,
            "a host of the --hosts list has no CA in the fabric",
            "check that the host is cabled, powered and its HCAs up, and its name in the --hosts \
             list",
        ),
        k(
            PlanesDisagree,
            "planes-disagree",
            Error,
            "one plane of a multi-plane HCA port is not Active, missing or slower than its \
             other planes (fabrics swept together)",
            "treat that plane's port as a link of its own: its cable, transceiver and switch port",
        ),
        k(
            LinkFlapping,
            "link-flapping",
            Error,
            "a link went down more often than the thresholds file allows in its window \
             (journal of port states and LinkDowned increases)",
            "replace the link's cable or transceiver; its symbol errors usually show which end",
        ),
        k(
            InterSwitchLinkNarrow,
            "inter-switch-link-narrow",
            Warning,
            "a switch-to-switch link runs narrower than its ports support, or than such links \
             are built (4x; 2x on split ports), even when every such link does",
            "reseat or replace the cable: a lane is dead",
        ),
        h(
            HcaPortNotActive,
            "hca-port-not-active",
            Error,
            "a local RDMA port is not Active: no link, or no SM brought it up",
            "check the cable, the switch port and, on InfiniBand, that an SM runs",
        ),
        h(
            HcaRateBelowNorm,
            "hca-rate-below-norm",
            Warning,
            "a local port runs below the host's most common rate (or --expect)",
            "reseat or replace the cable; check the port's enabled rate",
        ),
        h(
            PcieLinkDegraded,
            "pcie-link-degraded",
            Warning,
            "an HCA's PCIe link trained below capability or its port's rate",
            "reseat the card; check the slot's link speed and bifurcation in the BIOS",
        ),
        h(
            PeerMemoryMissing,
            "peer-memory-missing",
            Warning,
            "NVIDIA GPUs, but neither nvidia_peermem nor nv_peer_mem is loaded",
            "load nvidia_peermem (modprobe nvidia_peermem) and have it load at boot",
        ),
        h(
            MixedFirmware,
            "mixed-firmware",
            Warning,
            "HCAs of one model on this host run different firmware versions",
            "flash every HCA of the model with one firmware version",
        ),
        h(
            MixedDriver,
            "mixed-driver",
            Warning,
            "this host's RDMA devices run under different drivers or versions",
            "install one driver release for every RDMA device",
        ),
        h(
            VerbsUnusable,
            "verbs-unusable",
            Error,
            "libibverbs cannot list, open or query a device the kernel shows",
            "check rdma-core's provider libraries (libibverbs providers) and the device files' \
             permissions",
        ),
        h(
            HostCounterRate,
            "host-counter-rate",
            Error,
            "a local RDMA counter rises faster than its limit in the thresholds file",
            "look at the counter's port: its cable, congestion, the switch's side",
        ),
        h(
            PfcStorm,
            "pfc-storm",
            Error,
            "a RoCE port sends pause frames without a break for longer than its limit",
            "find the receiver that stopped draining (a hung host or NIC); enable the switch's PFC \
             watchdog",
        ),
        h(
            RoceConfig,
            "roce-config",
            Warning,
            "a RoCE port's lossless configuration (PFC, DSCP map, ECN, MTU) differs from the \
             [roce] profile, or its ports disagree",
            "apply the [roce] profile: PFC and trust with dcb or mlnx_qos, ECN in sysfs, the MTU",
        ),
        h(
            AcsBlocksPeerToPeer,
            "acs-blocks-p2p",
            Warning,
            "PCIe ACS redirects peer-to-peer requests on a bridge between a GPU and its HCA: \
             GPUDirect RDMA goes through the root complex or fails",
            "disable ACS on the bridge (setpci or the BIOS) or enable ATS",
        ),
        h(
            DeviceFilesMissing,
            "device-files-missing",
            Error,
            "a port is Active but its /dev/infiniband uverbs or umad file is missing: no \
             application can use it",
            "load ib_uverbs and ib_umad (modprobe); check the udev rules",
        ),
        h(
            FirmwareNotExpected,
            "firmware-not-expected",
            Warning,
            "an HCA runs firmware other than the manifest given expects for its model",
            "flash the firmware the manifest names",
        ),
        j(
            NcclWrongRail,
            "nccl-wrong-rail",
            Warning,
            "a rank's NCCL channels leave through an HCA of another rail than its GPU's \
             (GPU-NIC affinity), or one HCA serves several GPUs of a server",
            "bind each rank to its GPU's HCA: the launcher's GPU and CPU binding, NCCL_IB_HCA or \
             an NCCL topology file",
        ),
        j(
            NcclGdrOff,
            "nccl-gdr-off",
            Warning,
            "a rank's network channels run without GPUDirect RDMA where its host or the \
             job's other hosts use it",
            "load nvidia_peermem on that host; check NCCL_NET_GDR_LEVEL and ACS",
        ),
        j(
            NcclRailUnused,
            "nccl-rail-unused",
            Warning,
            "an HCA of a server carries none of the job's network channels: a rail is idle",
            "check that the idle HCA is up and in NCCL_IB_HCA",
        ),
        j(
            NcclMismatch,
            "nccl-mismatch",
            Warning,
            "ranks run different NCCL versions or NCCL_* settings",
            "run every rank with one NCCL build and one NCCL_* environment (mpirun -x, srun \
             --export)",
        ),
        j(
            NcclGpuNicDistance,
            "nccl-gpu-nic-distance",
            Warning,
            "a GPU's NIC sits across the CPU interconnect (NCCL's distance SYS), or behind the \
             CPU's host bridge (PHB) on a server whose GPUs reach NICs under their PCIe switch",
            "give the GPU the NIC under its own PCIe switch (NCCL_IB_HCA, the rank's GPU binding), \
             or move the NIC to the GPU's socket",
        ),
        j(
            NcclGdrForced,
            "nccl-gdr-forced",
            Warning,
            "NCCL_NET_GDR_LEVEL, NCCL_P2P_LEVEL or NCCL_P2P_DISABLE make GPUDirect run where NCCL \
             would refuse it, or keep it off where it would help",
            "unset the variable and let NCCL choose from the PCIe topology",
        ),
        j(
            NcclInitFailed,
            "nccl-init-failed",
            Error,
            "the job did not start: NCCL warned and failed during its init or bootstrap",
            "read the first WARN: one NCCL build on every node, a reachable NCCL_SOCKET_IFNAME, a \
             usable IB device, the net plugin installed",
        ),
        j(
            NcclNetSocket,
            "nccl-net-socket",
            Warning,
            "the job's network is TCP sockets although its hosts have HCAs",
            "make the HCAs usable to NCCL: ports up, NCCL_IB_DISABLE unset, the right net plugin \
             found",
        ),
        j(
            NcclTestsWithoutMpi,
            "nccl-tests-without-mpi",
            Warning,
            "nccl-tests ran as separate one-process jobs where one job was meant",
            "build nccl-tests with MPI=1 and launch it with mpirun or srun, one process per GPU",
        ),
        j(
            NcclCurveCollapse,
            "nccl-curve-collapse",
            Warning,
            "bus bandwidth falls by more than half between bandwidth-bound sizes and stays down",
            "look at the sizes where it falls: a protocol or algorithm switch (NCCL_PROTO, \
             NCCL_ALGO), memory registration, congestion or a link that fails under load",
        ),
        k(
            CableRxPowerLow,
            "cable-rx-power-low",
            Warning,
            "a module receives less light on a lane than its own low threshold",
            "clean the fibre and its connectors; replace the far end's transceiver or the cable",
        ),
        k(
            CableTxPowerLow,
            "cable-tx-power-low",
            Warning,
            "a module transmits less light on a lane than its own low threshold",
            "replace the transceiver",
        ),
        k(
            CableTxFault,
            "cable-tx-fault",
            Error,
            "a module reports a transmitter fault on a lane",
            "replace the transceiver",
        ),
        k(
            CableLos,
            "cable-los",
            Error,
            "an optical module reports loss of signal on a lane (not raised for passive copper)",
            "check that the far end is up; clean or replace the fibre",
        ),
        k(
            CableLol,
            "cable-lol",
            Error,
            "a module reports loss of lock on a lane (not raised for passive copper)",
            "reseat the module, then replace it if the flag stays",
        ),
        k(
            CableTemperature,
            "cable-temperature",
            Warning,
            "a module is hotter than its own high warning threshold",
            "check the switch's airflow and fans; replace a module that alone runs hot",
        ),
        k(
            CableChecksum,
            "cable-checksum",
            Warning,
            "a module's memory map fails its checksum: a corrupt read or a faulty module",
            "read it again; a checksum that keeps failing means a faulty module or firmware that \
             reads the wrong page",
        ),
        k(
            CableRateMismatch,
            "cable-rate-mismatch",
            Warning,
            "a module's compliance is below the rate of the link it carries",
            "replace it with a cable rated for the link's speed",
        ),
    ]
};

impl FindingKind {
    pub fn facts(self) -> &'static KindFacts {
        &FINDING_KINDS[self as usize]
    }
    pub fn name(self) -> &'static str {
        self.facts().name
    }
    pub fn severity(self) -> Severity {
        self.facts().severity
    }
    pub fn parse(text: &str) -> Option<FindingKind> {
        FINDING_KINDS
            .iter()
            .find(|f| f.name == text)
            .map(|f| f.kind)
    }
}

/// The kinds of one scope as a `--help` section: a heading, then per kind its name and
/// severity, its meaning and its fix, wrapped under it (help is read at 80 columns).
pub fn kinds_help(heading: &str, scope: Scope) -> String {
    let mut text = format!("{heading}:\n");
    for facts in FINDING_KINDS.iter().filter(|k| k.scope == scope) {
        text.push_str(&format!("  {} ({})\n", facts.name, facts.severity.as_str()));
        wrap_into(&mut text, facts.meaning, "      ", "      ");
        wrap_into(
            &mut text,
            &format!("fix: {}", facts.fix),
            "      ",
            "           ",
        );
    }
    text
}

/// `words` wrapped at 80 columns, the first line after `first`, the others after `rest`.
fn wrap_into(out: &mut String, words: &str, first: &str, rest: &str) {
    let mut line = first.to_string();
    let mut empty = true;
    for word in words.split_whitespace() {
        if !empty && line.len() + 1 + word.len() > 80 {
            out.push_str(&line);
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for FindingKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FindingKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FindingKind, D::Error> {
        let text = String::deserialize(d)?;
        FindingKind::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not a finding kind")))
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    /// The port concerned (absent for fabric-wide findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<PortRef>,
    /// The far end of its link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<PortRef>,
    /// Plain text; may quote fabric strings: escape before display.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
    /// The host the finding is about (its own, or that of the CA port it names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The rail concerned, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<u8>,
    /// The counter stopped at its maximum: `value` is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saturated: bool,
    /// The breakdown of the counter by cause, where its PMA answered it
    /// (PortRcvErrorDetails of PortRcvErrors, PortXmitDiscardDetails of PortXmitDiscards).
    #[serde(default, skip_serializing_if = "Details::is_empty")]
    pub details: Details,
    /// The fabric it was found on, when a command looks at several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<crate::model::FabricId>,
    /// The lines of the files given that show it (an NCCL log, nccl-tests output, a module
    /// dump), where the finding comes from a file rather than from the fabric.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

/// A line of an input file that shows a finding: `file:line` in text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Evidence {
    /// The file as the user named it.
    pub file: String,
    /// Its line, from 1.
    pub line: usize,
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

impl Finding {
    pub fn new(kind: FindingKind, message: String) -> Finding {
        Finding {
            kind,
            severity: kind.severity(),
            at: None,
            remote: None,
            message,
            counter: None,
            value: None,
            threshold: None,
            host: None,
            rail: None,
            saturated: false,
            details: Details::default(),
            fabric: None,
            evidence: Vec::new(),
        }
    }
    /// The name of the fabric it was found on, when a command looks at several.
    pub fn fabric_name(&self) -> Option<&str> {
        self.fabric.as_ref().map(|f| f.name.as_str())
    }
    pub fn at(mut self, at: PortRef, remote: Option<PortRef>) -> Finding {
        self.at = Some(at);
        self.remote = remote;
        self
    }
}
