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
pub const FINDING_KINDS: [KindFacts; 36] = {
    use FindingKind::*;
    use Severity::*;
    const fn k(
        kind: FindingKind,
        name: &'static str,
        severity: Severity,
        meaning: &'static str,
    ) -> KindFacts {
        KindFacts {
            kind,
            name,
            severity,
            meaning,
            scope: Scope::Fabric,
        }
    }
    /// A kind of the local host's preflight.
    const fn h(
        kind: FindingKind,
        name: &'static str,
        severity: Severity,
        meaning: &'static str,
    ) -> KindFacts {
        KindFacts {
            scope: Scope::Host,
            ..k(kind, name, severity, meaning)
        }
    }
    /// A kind of a job's NCCL log.
    const fn j(
        kind: FindingKind,
        name: &'static str,
        severity: Severity,
        meaning: &'static str,
    ) -> KindFacts {
        KindFacts {
            scope: Scope::Job,
            ..k(kind, name, severity, meaning)
        }
    }
    [
        k(
            DegradedLink,
            "degraded-link",
            Warning,
            "a link runs below what both ends support and enable, or below the fabric's norm \
             while its hardware can do better",
        ),
        k(
            LinkBelowNorm,
            "link-below-norm",
            Warning,
            "a link runs below the fabric's norm and a topology file cannot tell whether its \
             hardware can do better (capability unknown offline)",
        ),
        k(
            LoopbackCable,
            "loopback-cable",
            Warning,
            "a cable joins two ports of one switch (or one adapter): traffic cannot use it",
        ),
        k(
            PortNotActive,
            "port-not-active",
            Warning,
            "a port is physically up but the SM has not made it Active",
        ),
        k(
            CounterAboveThreshold,
            "counter-above-threshold",
            Error,
            "an error counter is above its threshold",
        ),
        k(
            CounterSaturated,
            "counter-saturated",
            Warning,
            "a counter is at its maximum and no longer counts",
        ),
        k(
            CountersUnreadable,
            "counters-unreadable",
            Error,
            "a port's performance counters could not be read",
        ),
        k(
            DuplicateGuid,
            "duplicate-guid",
            Error,
            "one GUID is used by more than one node",
        ),
        k(
            DuplicateLid,
            "duplicate-lid",
            Error,
            "one LID is claimed by more than one port",
        ),
        k(
            DiscoveryError,
            "discovery-error",
            Error,
            "a node or port did not answer discovery, or changed while it ran",
        ),
        k(
            NoMasterSm,
            "no-master-sm",
            Error,
            "no subnet manager answers as master",
        ),
        k(
            RailDown,
            "rail-down",
            Error,
            "a server lacks a rail most servers have, or that rail's HCA port is not Active",
        ),
        k(
            RailSlow,
            "rail-slow",
            Warning,
            "one of a server's rails runs slower than its other rails",
        ),
        k(
            RailMisaligned,
            "rail-misaligned",
            Warning,
            "an HCA is cabled to a leaf switch of another rail",
        ),
        k(
            HcasSwapped,
            "hcas-swapped",
            Warning,
            "two HCAs are each cabled where the other belongs: swap their cables",
        ),
        k(
            HostMissing,
            "host-missing",
            Error,
            "a host of the --hosts list has no CA in the fabric",
        ),
        k(
            PlanesDisagree,
            "planes-disagree",
            Error,
            "one plane of a multi-plane HCA port is not Active, missing or slower than its \
             other planes (fabrics swept together)",
        ),
        k(
            LinkFlapping,
            "link-flapping",
            Error,
            "a link went down more often than the thresholds file allows in its window \
             (journal of port states and LinkDowned increases)",
        ),
        k(
            InterSwitchLinkNarrow,
            "inter-switch-link-narrow",
            Warning,
            "a switch-to-switch link runs narrower than its ports support, or than such links \
             are built (4x; 2x on split ports), even when every such link does",
        ),
        h(
            HcaPortNotActive,
            "hca-port-not-active",
            Error,
            "a local RDMA port is not Active: no link, or no SM brought it up",
        ),
        h(
            HcaRateBelowNorm,
            "hca-rate-below-norm",
            Warning,
            "a local port runs below the host's most common rate (or --expect)",
        ),
        h(
            PcieLinkDegraded,
            "pcie-link-degraded",
            Warning,
            "an HCA's PCIe link trained below capability or its port's rate",
        ),
        h(
            PeerMemoryMissing,
            "peer-memory-missing",
            Warning,
            "NVIDIA GPUs, but neither nvidia_peermem nor nv_peer_mem is loaded",
        ),
        h(
            MixedFirmware,
            "mixed-firmware",
            Warning,
            "HCAs of one model on this host run different firmware versions",
        ),
        h(
            MixedDriver,
            "mixed-driver",
            Warning,
            "this host's RDMA devices run under different drivers or versions",
        ),
        h(
            VerbsUnusable,
            "verbs-unusable",
            Error,
            "libibverbs cannot list, open or query a device the kernel shows",
        ),
        h(
            HostCounterRate,
            "host-counter-rate",
            Error,
            "a local RDMA counter rises faster than its limit in the thresholds file",
        ),
        h(
            PfcStorm,
            "pfc-storm",
            Error,
            "a RoCE port sends pause frames without a break for longer than its limit",
        ),
        h(
            RoceConfig,
            "roce-config",
            Warning,
            "a RoCE port's lossless configuration (PFC, DSCP map, ECN, MTU) differs from the \
             [roce] profile, or its ports disagree",
        ),
        h(
            AcsBlocksPeerToPeer,
            "acs-blocks-p2p",
            Warning,
            "PCIe ACS redirects peer-to-peer requests on a bridge between a GPU and its HCA: \
             GPUDirect RDMA goes through the root complex or fails",
        ),
        h(
            DeviceFilesMissing,
            "device-files-missing",
            Error,
            "a port is Active but its /dev/infiniband uverbs or umad file is missing: no \
             application can use it",
        ),
        h(
            FirmwareNotExpected,
            "firmware-not-expected",
            Warning,
            "an HCA runs firmware other than the manifest given expects for its model",
        ),
        j(
            NcclWrongRail,
            "nccl-wrong-rail",
            Warning,
            "a rank's NCCL channels leave through an HCA of another rail than its GPU's \
             (GPU-NIC affinity), or one HCA serves several GPUs of a server",
        ),
        j(
            NcclGdrOff,
            "nccl-gdr-off",
            Warning,
            "a rank's network channels run without GPUDirect RDMA where its host or the \
             job's other hosts use it",
        ),
        j(
            NcclRailUnused,
            "nccl-rail-unused",
            Warning,
            "an HCA of a server carries none of the job's network channels: a rail is idle",
        ),
        j(
            NcclMismatch,
            "nccl-mismatch",
            Warning,
            "ranks run different NCCL versions or NCCL_* settings",
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
    /// The fabric it was found on, when a command looks at several (its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<String>,
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
        }
    }
    pub fn at(mut self, at: PortRef, remote: Option<PortRef>) -> Finding {
        self.at = Some(at);
        self.remote = remote;
        self
    }
    /// `[kind] "node" (0x…) port N (lid L) <-> "peer" (0x…) port M: message`, escaped for
    /// a terminal: the line `check` prints.
    pub fn text_line(&self) -> String {
        let mut line = format!("[{}]", self.kind);
        if let Some(at) = &self.at {
            line.push_str(&format!(" {}", at.report_text()));
            if at.lid != 0 {
                line.push_str(&format!(" (lid {})", at.lid));
            }
        }
        if let Some(remote) = &self.remote {
            line.push_str(&format!(" <-> {}", remote.report_text()));
        }
        line.push_str(&format!(": {}", crate::escape::for_terminal(&self.message)));
        line
    }
}
