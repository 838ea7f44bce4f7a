//! The findings policy: every kind of thing a health check reports, how grave it is, how
//! it is worded, and the evaluation that produces the list from a fabric, its link health,
//! its counters and its subnet manager. `check`, the TUI and the exporter all show this
//! one list; adding a kind of finding is a line in [`FINDING_KINDS`] (`finding_kinds.rs`,
//! with what a finding is) and the rule that emits it here (docs/ARCHITECTURE.md, "A
//! finding kind", names the schema's list too).

use ibscope_mad::attr::{SmInfo, SmState};
use ibscope_mad::engine::Request;
use ibscope_mad::smp::SmpRoute;

use crate::counters::{self, PortSample, Thresholds};
use crate::discover::SmpExecutor;
use crate::health::{self, HealthOptions, HealthReport, LinkVerdict, Rate};
use crate::hosts::planes::{self, PlaneIssue, PlaneView, PlanedPort};
use crate::hosts::{Hca, Host, Hosts, RailIssue};
use crate::model::refs::PortRef;
use crate::model::{End, Fabric};
use crate::namemap::{display_name, NameMap};

pub use crate::finding_kinds::{
    kinds_help, Evidence, Finding, FindingKind, KindFacts, Scope, Severity, FINDING_KINDS,
};
pub use crate::finding_text::PortNaming;

/// The finding kind a link verdict is reported as (`None` for a link that is fine): the
/// one mapping `check`, `links`, DOT, the TUI and the exporter share.
pub fn link_finding_kind(verdict: LinkVerdict) -> Option<FindingKind> {
    match verdict {
        LinkVerdict::Ok => None,
        LinkVerdict::Degraded => Some(FindingKind::DegradedLink),
        LinkVerdict::BelowNorm => Some(FindingKind::LinkBelowNorm),
    }
}

/// The findings that need only the fabric and the link assessment made of it: degraded
/// links and links below the norm, loopback cables, ports up but not Active, duplicate
/// GUIDs and LIDs, discovery errors.
pub fn fabric_findings(
    fabric: &Fabric,
    names: Option<&NameMap>,
    report: &HealthReport,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for l in &report.links {
        if let Some(kind) = link_finding_kind(l.verdict) {
            // Each reason names the rates it compares.
            findings.push(
                Finding::new(kind, l.reasons.join("; ")).at(l.a.at.clone(), Some(l.b.at.clone())),
            );
        }
    }
    findings.extend(crate::narrow_links::narrow_inter_switch_links(
        &report.links,
    ));
    for l in report.loopbacks() {
        findings.push(
            Finding::new(
                FindingKind::LoopbackCable,
                format!(
                    "both ends are ports of the same {}",
                    if l.a.at.node.kind == crate::model::NodeKind::Switch {
                        "switch"
                    } else {
                        "node"
                    }
                ),
            )
            .at(l.a.at.clone(), Some(l.b.at.clone())),
        );
    }
    for p in &report.up_not_active {
        let name = |s: Option<String>| s.unwrap_or_else(|| "unknown".into());
        findings.push(
            Finding::new(
                FindingKind::PortNotActive,
                format!(
                    "physically {} but {}",
                    name(p.phys_state.map(|s| s.to_string())),
                    name(p.state.map(|s| s.to_string()))
                ),
            )
            .at(p.at.clone(), p.remote.clone()),
        );
    }
    for guid in &fabric.report.duplicate_guids {
        findings.push(Finding::new(
            FindingKind::DuplicateGuid,
            format!(
                "node GUID {} is used by more than one node",
                ibscope_mad::codes::guid::text(*guid)
            ),
        ));
    }
    for lid in &fabric.report.duplicate_lids {
        let mut f = Finding::new(
            FindingKind::DuplicateLid,
            format!("LID {lid} is claimed by more than one port"),
        );
        if let Some(end) = fabric.port_by_lid(*lid) {
            f.at = Some(PortRef::new(fabric.node(end.node), end.port, names));
        }
        findings.push(f);
    }
    for e in fabric
        .report
        .errors
        .iter()
        .chain(&fabric.report.inconsistencies)
    {
        findings.push(Finding::new(FindingKind::DiscoveryError, e.clone()));
    }
    findings
}

/// A switch port as findings name it: `"leaf-01" port 5` (untrusted text).
fn switch_port(fabric: &Fabric, names: Option<&NameMap>, end: End) -> String {
    format!(
        "\"{}\" port {}",
        display_name(fabric.node(end.node), names),
        end.port
    )
}

/// A finding about one host CA port and its link's far end.
fn hca_finding(
    kind: FindingKind,
    fabric: &Fabric,
    names: Option<&NameMap>,
    host: &Host,
    hca: &Hca,
    message: String,
) -> Finding {
    let at = PortRef::new(fabric.node(hca.node), hca.port, names);
    let remote = fabric
        .peer(hca.end())
        .map(|e| PortRef::new(fabric.node(e.node), e.port, names));
    let mut f = Finding::new(kind, message).at(at, remote);
    f.host = Some(host.name.clone());
    f.rail = hca.rail;
    f
}

/// The finding of one rail issue, worded for the operator who fixes it: the host and rail
/// (the finding's), the HCA port and the switch port to go to (its ends), and what is wrong
/// with them (its message, which does not say those again).
fn rail_finding(
    fabric: &Fabric,
    names: Option<&NameMap>,
    hosts: &Hosts,
    issue: &RailIssue,
) -> Finding {
    let list = hosts.hosts();
    // Where an HCA's cable goes when its port has no link to name it by.
    let unlinked = |hca: &Hca| match &hca.leaf {
        Some(_) if fabric.peer(hca.end()).is_some() => String::new(),
        Some(l) => format!(
            "; its cable is at {}",
            switch_port(
                fabric,
                names,
                End {
                    node: l.node,
                    port: l.port,
                }
            )
        ),
        None => "; no link".to_string(),
    };
    match issue {
        RailIssue::Down(d) => {
            let host = &list[d.host];
            if let Some(i) = d.hca {
                let hca = &host.hcas[i];
                let message = format!(
                    "{}, not Active{}",
                    health::state_text(hca.state, hca.phys_state),
                    unlinked(hca)
                );
                return hca_finding(FindingKind::RailDown, fabric, names, host, hca, message);
            }
            let place = match d.expected {
                Some(_) => "this port, where its leaf-mates put it, has no link".to_string(),
                None if d.mates > 0 && d.mates_with_rail == 0 => format!(
                    "none of the {} other hosts on its leaves has rail {} up either: is \
                     their rail {} leaf in the fabric?",
                    d.mates, d.rail, d.rail
                ),
                None => "the leaf port it belongs on is not known".to_string(),
            };
            let hca = d
                .device
                .as_deref()
                .map_or("its HCA".to_string(), |dev| format!("its HCA ({dev})"));
            let mut f = Finding::new(
                FindingKind::RailDown,
                format!(
                    "Down: {hca} is not in the fabric ({} of {} rails up); {place}",
                    d.up, d.norm
                ),
            );
            if let Some(e) = d.expected {
                f.at = Some(PortRef::new(fabric.node(e.node), e.port, names));
            }
            f.host = Some(host.name.clone());
            f.rail = Some(d.rail);
            f
        }
        RailIssue::Slow { hca, reference } => {
            let host = &list[hca.0];
            let c = &host.hcas[hca.1];
            let message = format!(
                "runs at {}, the host's other rails at {reference}{}",
                Rate::text_of(c.rate),
                unlinked(c)
            );
            hca_finding(FindingKind::RailSlow, fabric, names, host, c, message)
        }
        RailIssue::Misaligned { hca } => {
            let host = &list[hca.0];
            let c = &host.hcas[hca.1];
            let leaf_rail = c.leaf.as_ref().and_then(|l| l.rail).unwrap_or_default();
            let message = format!("cabled to a leaf of rail {leaf_rail}");
            hca_finding(FindingKind::RailMisaligned, fabric, names, host, c, message)
        }
        RailIssue::Swapped { a, b } => {
            let (ha, hb) = (&list[a.0], &list[b.0]);
            let (ca, cb) = (&ha.hcas[a.1], &hb.hcas[b.1]);
            let dev = |c: &Hca| c.device.clone().unwrap_or_else(|| "its HCA".into());
            let rail = |c: &Hca| c.rail.map_or_else(|| "?".into(), |r| r.to_string());
            let cable = |c: &Hca| match &c.leaf {
                Some(l) => switch_port(
                    fabric,
                    names,
                    End {
                        node: l.node,
                        port: l.port,
                    },
                ),
                None => "no switch".to_string(),
            };
            // The finding is about the first HCA (its host, rail and link); the other is
            // named by its host too when it is on another.
            let other = if a.0 == b.0 {
                dev(cb)
            } else {
                format!("{} {}", hb.name, dev(cb))
            };
            let message = format!(
                "swapped with {other} (rail {}), which is at {}: swap their cables",
                rail(cb),
                cable(cb)
            );
            hca_finding(FindingKind::HcasSwapped, fabric, names, ha, ca, message)
        }
    }
}

/// The findings about hosts and rails (see [`crate::hosts`]): rails down or missing,
/// slower than the host's others, cabled to another rail's leaf, swapped; with
/// `expected` (a job's or a site's host list), each host of it not in the fabric.
pub fn host_findings(
    fabric: &Fabric,
    names: Option<&NameMap>,
    hosts: &Hosts,
    expected: Option<&[String]>,
) -> Vec<Finding> {
    let mut findings: Vec<Finding> = crate::hosts::check(fabric, hosts)
        .iter()
        .map(|issue| rail_finding(fabric, names, hosts, issue))
        .collect();
    for name in expected.unwrap_or_default() {
        if hosts.find(name).is_none() {
            let mut f = Finding::new(
                FindingKind::HostMissing,
                "in the --hosts list, but no CA in the fabric names it".to_string(),
            );
            f.host = Some(name.clone());
            findings.push(f);
        }
    }
    findings
}

/// Each of the fabrics swept together's host and rail findings, annotated with hosts and
/// rails and carrying its fabric's name (`hosts` over several fabrics).
pub fn host_findings_of_each(views: &[PlaneView], names: Option<&NameMap>) -> Vec<Finding> {
    let mut found = Vec::new();
    for v in views {
        let mut own = host_findings(v.fabric, names, v.hosts, None);
        annotate(&mut own, v.hosts);
        for f in &mut own {
            f.fabric = Some(v.id());
        }
        found.extend(own);
    }
    found
}

/// The fabrics swept together, seen as planes: every HCA port found in more than one of
/// them, and the planes-disagree findings among those.
#[derive(Debug, Default)]
pub struct PlanesFound {
    pub ports: Vec<PlanedPort>,
    pub findings: Vec<Finding>,
}

/// The planes of the fabrics swept together and their planes-disagree findings: the one
/// place `check`, `hosts`, the TUI and the exporter get them from. Nothing with fewer than
/// two fabrics.
pub fn planes_disagree(views: &[PlaneView], names: Option<&NameMap>) -> PlanesFound {
    if views.len() < 2 {
        return PlanesFound::default();
    }
    let ports = planes::group(views);
    let findings = plane_findings(views, &ports, names);
    PlanesFound { ports, findings }
}

/// The findings of one HCA port's planes that disagree (see [`crate::hosts::planes`]):
/// each names the host, rail, HCA, the plane (its fabric, also in `fabric`) and the switch
/// port to go to, and belongs to that plane's fabric.
fn plane_findings(
    views: &[PlaneView],
    ports: &[PlanedPort],
    names: Option<&NameMap>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for issue in planes::check(ports) {
        let (port, view) = match &issue {
            PlaneIssue::NotActive { port, plane } | PlaneIssue::Slower { port, plane, .. } => {
                (&ports[*port], ports[*port].planes[*plane].view)
            }
            PlaneIssue::Missing { port, view } => (&ports[*port], *view),
        };
        let v = &views[view];
        let up: Vec<&str> = port
            .planes
            .iter()
            .filter(|p| p.up && p.view != view)
            .map(|p| p.fabric.name.as_str())
            .collect();
        let device = port.planes.iter().find_map(|p| p.device.as_deref());
        let this_plane = format!(
            "plane {} (port GUID {})",
            v.name,
            ibscope_mad::codes::guid::text(port.port_guid)
        );
        let mut f = match &issue {
            PlaneIssue::NotActive { plane, .. } | PlaneIssue::Slower { plane, .. } => {
                let p = &port.planes[*plane];
                let host = &v.hosts.hosts()[p.hca.0];
                let hca = &host.hcas[p.hca.1];
                let unlinked = match &p.leaf {
                    Some(_) if v.fabric.peer(hca.end()).is_some() => String::new(),
                    Some(l) => format!(
                        "; its cable is at {}",
                        switch_port(
                            v.fabric,
                            names,
                            End {
                                node: l.node,
                                port: l.port,
                            },
                        )
                    ),
                    None => "; no link".to_string(),
                };
                let state = match &issue {
                    PlaneIssue::Slower { reference, .. } => format!(
                        "runs at {}, its other planes at {reference}",
                        Rate::text_of(p.rate)
                    ),
                    _ => format!(
                        "is {}, not Active, while {} {} Active",
                        health::state_text(p.state, p.phys_state),
                        up.join(", "),
                        if up.len() == 1 { "is" } else { "are" }
                    ),
                };
                let message = format!("{this_plane} {state}{unlinked}");
                hca_finding(
                    FindingKind::PlanesDisagree,
                    v.fabric,
                    names,
                    host,
                    hca,
                    message,
                )
            }
            PlaneIssue::Missing { .. } => {
                // The plane's own rail check knows where its leaf-mates put it.
                let expected = v.hosts.find(&port.host).and_then(|h| {
                    crate::hosts::check(v.fabric, v.hosts)
                        .into_iter()
                        .find_map(|i| match i {
                            RailIssue::Down(d) if d.host == h && Some(d.rail) == port.rail => {
                                d.expected
                            }
                            _ => None,
                        })
                });
                let place = match expected {
                    Some(_) => "this port, where its leaf-mates put it, has no link",
                    None => "the leaf port it belongs on is not known",
                };
                let mut f = Finding::new(
                    FindingKind::PlanesDisagree,
                    format!(
                        "{} is missing from {this_plane}: its port is in {} but not in this \
                         plane; \
                         {place}",
                        device.unwrap_or("its HCA"),
                        up.join(", ")
                    ),
                );
                if let Some(e) = expected {
                    f.at = Some(PortRef::new(v.fabric.node(e.node), e.port, names));
                }
                f.host = Some(port.host.clone());
                f.rail = port.rail;
                f
            }
        };
        f.fabric = Some(v.id());
        out.push(f);
    }
    out
}

/// Give every finding that names a host CA port that port's host and rail, on the port
/// references and on the finding itself.
pub fn annotate(findings: &mut [Finding], hosts: &Hosts) {
    for f in findings {
        for at in f.at.iter_mut().chain(f.remote.iter_mut()) {
            hosts.annotate(at);
        }
        if f.host.is_none() {
            let from = f.at.iter().chain(&f.remote).find(|p| p.host.is_some());
            if let Some(p) = from {
                f.host = p.host.clone();
                f.rail = p.rail;
            }
        }
    }
}

/// "= 17", or "≥ 65535" for a counter that stopped at its maximum.
pub fn counter_value_text(value: u64, saturated: bool) -> String {
    if saturated {
        format!("≥ {value}")
    } else {
        format!("= {value}")
    }
}

/// A finding about counter `name` of port `p`: its value, whether it saturated, and its
/// breakdown by cause where one was read ("; PortRcvErrorDetails: PortMalformedPktErrors
/// 7, PortVLMappingErrors 2").
fn counter_finding(kind: FindingKind, p: &PortSample, name: &str, message: String) -> Finding {
    let mut f = Finding::new(kind, message).at(p.at.clone(), p.remote.clone());
    f.counter = Some(name.to_string());
    f.value = p.value(name);
    f.saturated = p.is_saturated(name);
    let breakdown = ibscope_mad::attr::perf_attrs::breakdown_of(name)
        .and_then(|b| Some((b.attribute, p.details.get(b.attribute)?)));
    if let Some((attribute, causes)) = breakdown {
        let counted: Vec<String> = causes
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(cause, v)| {
                let sat = if causes.is_saturated(cause) {
                    "≥ "
                } else {
                    ""
                };
                format!("{cause} {sat}{v}")
            })
            .collect();
        let said = if counted.is_empty() {
            "no cause counted".to_string()
        } else {
            counted.join(", ")
        };
        f.message.push_str(&format!("; {attribute}: {said}"));
        f.details.insert(attribute, causes.clone());
    }
    f
}

/// The findings of one counter sample: unreadable ports, counters above their threshold,
/// saturated counters with no 64-bit replacement. A finding about PortRcvErrors or
/// PortXmitDiscards says which causes counted where the sweep read their breakdown.
pub fn counter_findings(sample: &counters::Sample, thresholds: &Thresholds) -> Vec<Finding> {
    let mut findings = Vec::new();
    for p in &sample.ports {
        if p.counters.is_none() {
            findings.push(
                Finding::new(FindingKind::CountersUnreadable, p.errors.join("; "))
                    .at(p.at.clone(), p.remote.clone()),
            );
            continue;
        }
        for (name, value, limit) in thresholds.exceeded(p) {
            let shown = counter_value_text(value, p.is_saturated(&name));
            let message = format!(
                "{name} {shown} (threshold {limit}){}",
                counted(&name, value, p.is_saturated(&name))
            );
            let mut f = counter_finding(FindingKind::CounterAboveThreshold, p, &name, message);
            f.threshold = Some(limit);
            findings.push(f);
        }
        for name in &p.saturated {
            if !p.is_saturated(name) {
                continue;
            }
            let value = p.value(name).unwrap_or(0);
            let message = format!("{name} ≥ {value}: at its maximum, it no longer counts");
            findings.push(counter_finding(
                FindingKind::CounterSaturated,
                p,
                name,
                message,
            ));
        }
    }
    findings
}

/// What a counter's value means where its name alone does not say it: LinkDownedCounter
/// counts the times the link went down and trained again, its flaps.
fn counted(name: &str, value: u64, saturated: bool) -> String {
    let least = if saturated { "at least " } else { "" };
    match (name, value) {
        ("LinkDownedCounter", 1) if !saturated => {
            ": the link flapped once since its counters were cleared".to_string()
        }
        ("LinkDownedCounter", n) => {
            format!(": the link flapped {least}{n} times since its counters were cleared")
        }
        _ => String::new(),
    }
}

/// What asking the SM the local port names for its SMInfo gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmStatus {
    /// The local port knows no SM (SMLID 0).
    NoSmLid,
    NoAnswer {
        lid: u16,
        error: String,
    },
    Malformed {
        lid: u16,
        error: String,
    },
    Answered {
        lid: u16,
        info: SmInfo,
    },
}

/// Read SMInfo from the SM at `sm_lid` (the local port's SMLID).
pub fn read_sm<E: SmpExecutor>(exec: &mut E, sm_lid: u16) -> SmStatus {
    if sm_lid == 0 {
        return SmStatus::NoSmLid;
    }
    let request = Request::get::<SmInfo>(&SmpRoute::Lid(sm_lid), 0);
    let mut outcome = None;
    exec.execute(vec![((), request)], &mut |(), r, _| outcome = Some(r));
    match outcome {
        None => SmStatus::NoAnswer {
            lid: sm_lid,
            error: "no reply".into(),
        },
        Some(Err(e)) => SmStatus::NoAnswer {
            lid: sm_lid,
            error: e.to_string(),
        },
        Some(Ok(r)) => match r.decode::<SmInfo>() {
            Err(e) => SmStatus::Malformed {
                lid: sm_lid,
                error: e.to_string(),
            },
            Ok(info) => SmStatus::Answered { lid: sm_lid, info },
        },
    }
}

/// The master SM's LID as the local port's PortInfo gives it now. An engine's own copy is
/// from when it opened; a long-running reader (the exporter) asks again, since the LID
/// changes when a standby SM takes over. `None` when PortInfo cannot be read.
pub fn local_master_sm_lid<E: SmpExecutor>(exec: &mut E, local_port: u8) -> Option<u16> {
    let route = SmpRoute::Directed(ibscope_mad::smp::DrPath::local());
    let request = Request::get::<ibscope_mad::attr::PortInfo>(&route, u32::from(local_port));
    let mut lid = None;
    exec.execute(vec![((), request)], &mut |(), r, _| {
        if let Ok(Ok(info)) = r.map(|r| r.decode::<ibscope_mad::attr::PortInfo>()) {
            lid = Some(info.master_sm_lid);
        }
    });
    lid
}

/// The finding an SM status calls for, if any: the SM must answer in state Master.
pub fn sm_finding(status: &SmStatus) -> Option<Finding> {
    let message = match status {
        SmStatus::NoSmLid => "the local port knows no SM (its SMLID is 0)".to_string(),
        SmStatus::NoAnswer { lid, error } => {
            format!("the SM at LID {lid} does not answer SMInfo: {error}")
        }
        SmStatus::Malformed { lid, error } => {
            format!("the SM at LID {lid} sent a malformed SMInfo: {error}")
        }
        SmStatus::Answered { info, .. } if info.state() == SmState::Master => return None,
        SmStatus::Answered { lid, info } => format!(
            "the SM at LID {lid} (GUID {}) is {}, not Master",
            ibscope_mad::codes::guid::text(info.guid),
            info.state()
        ),
    };
    Some(Finding::new(FindingKind::NoMasterSm, message))
}

/// How [`evaluate`] reads the counters of a live fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterReads {
    /// Every port one by one: the sample has every port's values.
    PerPort,
    /// Switches with AllPortSelect through their all-ports sum first, as ibqueryerrors
    /// does (see [`counters::sweep_screened`]): the same findings, fewer MADs.
    Screened,
}

/// The live part of an evaluation: a transport, how to read counters, and the SM's LID.
pub struct Live<'a, E> {
    pub exec: &'a mut E,
    pub reads: CounterReads,
    /// The local port's SMLID.
    pub sm_lid: u16,
}

/// What an evaluation found, and what it read on the way.
pub struct Evaluation {
    pub findings: Vec<Finding>,
    /// The ports read one by one: every port with [`CounterReads::PerPort`]; `mads_sent`
    /// covers the whole counter phase. `None` without a live fabric.
    pub sample: Option<counters::Sample>,
    /// Switches cleared by their all-ports sum ([`CounterReads::Screened`] only): their
    /// ports are not in `sample`.
    pub screened: Vec<counters::ScreenedSwitch>,
    /// Switches with AllPortSelect whose ports were read one by one, and why.
    pub drilled: Vec<counters::DrilledSwitch>,
    /// The SM's answer (live only).
    pub sm: Option<SmStatus>,
    /// The link and port assessment the findings came from (callers reuse it rather than
    /// assessing the fabric again).
    pub health: HealthReport,
    /// The fabric's hosts and rails (empty with `skip_hosts`).
    pub hosts: Hosts,
    /// How long grouping the hosts and checking their rails took.
    pub hosts_duration: std::time::Duration,
}

/// Every finding of a fabric; with a live transport also its counters and its SM.
pub fn evaluate<E: SmpExecutor>(
    fabric: &Fabric,
    names: Option<&NameMap>,
    health_options: &HealthOptions,
    thresholds: &Thresholds,
    live: Option<Live<'_, E>>,
) -> Evaluation {
    let report = health::assess(fabric, names, health_options);
    let mut findings = fabric_findings(fabric, names, &report);
    let started = std::time::Instant::now();
    let hosts = if health_options.skip_hosts {
        Hosts::default()
    } else {
        let hosts = Hosts::group(fabric, names);
        findings.extend(host_findings(
            fabric,
            names,
            &hosts,
            health_options.expected_hosts.as_deref(),
        ));
        hosts
    };
    let mut hosts_duration = started.elapsed();
    let mut eval = Evaluation {
        findings: Vec::new(),
        sample: None,
        screened: Vec::new(),
        drilled: Vec::new(),
        sm: None,
        health: report,
        hosts,
        hosts_duration,
    };
    if let Some(live) = live {
        let targets = counters::targets(fabric, None, None);
        // The breakdown of the errors that counted, so their findings can say why.
        let options = counters::SweepOptions {
            details: counters::DetailReads::Explaining,
        };
        let sample = match live.reads {
            CounterReads::PerPort => {
                counters::sweep_with(live.exec, fabric, &targets, names, options)
            }
            CounterReads::Screened => {
                let s = counters::sweep_screened_with(
                    live.exec, fabric, &targets, names, thresholds, options,
                );
                eval.screened = s.screened;
                eval.drilled = s.drilled;
                s.sample
            }
        };
        findings.extend(counter_findings(&sample, thresholds));
        let sm = read_sm(live.exec, live.sm_lid);
        findings.extend(sm_finding(&sm));
        eval.sm = Some(sm);
        eval.sample = Some(sample);
    }
    let started = std::time::Instant::now();
    annotate(&mut findings, &eval.hosts);
    hosts_duration += started.elapsed();
    eval.hosts_duration = hosts_duration;
    eval.findings = findings;
    eval
}

/// [`evaluate`] of a fabric without a transport (a file, or a snapshot's fabric alone).
pub fn evaluate_offline(
    fabric: &Fabric,
    names: Option<&NameMap>,
    health_options: &HealthOptions,
) -> Evaluation {
    evaluate::<crate::discover::NoTransport>(
        fabric,
        names,
        health_options,
        &Thresholds::default(),
        None,
    )
}

/// Findings counted by kind, in table order, kinds with none included (for the exporter
/// and summaries).
pub fn count_by_kind(findings: &[Finding], scope: Scope) -> Vec<(FindingKind, usize)> {
    FINDING_KINDS
        .iter()
        .filter(|k| k.scope == scope)
        .map(|k| (k.kind, findings.iter().filter(|f| f.kind == k.kind).count()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_kind_order_and_names_are_unique() {
        for (i, k) in FINDING_KINDS.iter().enumerate() {
            assert_eq!(k.kind as usize, i, "{}", k.name);
            assert_eq!(FindingKind::parse(k.name), Some(k.kind));
            assert_eq!(FINDING_KINDS.iter().filter(|o| o.name == k.name).count(), 1);
        }
    }

    #[test]
    fn severity_comes_from_the_table() {
        let f = Finding::new(FindingKind::DuplicateLid, "x".into());
        assert_eq!(f.severity, Severity::Error);
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["kind"], "duplicate-lid");
        assert_eq!(json["severity"], "error");
        let back: Finding = serde_json::from_value(json).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn sm_states() {
        let master = SmInfo {
            sm_state: SmState::Master.code(),
            ..Default::default()
        };
        assert_eq!(
            sm_finding(&SmStatus::Answered {
                lid: 1,
                info: master
            }),
            None
        );
        let standby = SmInfo {
            guid: 0x2c9,
            sm_state: SmState::Standby.code(),
            ..Default::default()
        };
        let f = sm_finding(&SmStatus::Answered {
            lid: 1,
            info: standby,
        })
        .unwrap();
        assert_eq!(f.kind, FindingKind::NoMasterSm);
        assert_eq!(
            f.message,
            "the SM at LID 1 (GUID 0x00000000000002c9) is Standby, not Master"
        );
        assert!(sm_finding(&SmStatus::NoSmLid).is_some());
    }

    /// A 16-bit counter at 65535 reads "≥ 65535", says saturated in JSON; a finding about
    /// PortRcvErrors names the causes its breakdown counted.
    #[test]
    fn counter_findings_say_saturated_and_why() {
        use crate::counters::sample::test_support::{port_sample, wrap};
        use crate::counters::CounterSet;
        let mut p = port_sample(
            &[("SymbolErrorCounter", 65535), ("PortRcvErrors", 9)],
            None,
            &["SymbolErrorCounter"],
        );
        p.details.insert(
            "PortRcvErrorDetails",
            CounterSet::from_pairs([
                ("PortLocalPhysicalErrors", 0),
                ("PortMalformedPktErrors", 7),
                ("PortVLMappingErrors", 2),
            ]),
        );
        let found = counter_findings(&wrap(p), &Thresholds::default());
        let messages: Vec<(&str, &str)> = found
            .iter()
            .map(|f| (f.kind.name(), f.message.as_str()))
            .collect();
        assert_eq!(
            messages,
            [
                (
                    "counter-above-threshold",
                    "SymbolErrorCounter ≥ 65535 (threshold 0)"
                ),
                (
                    "counter-above-threshold",
                    "PortRcvErrors = 9 (threshold 0); PortRcvErrorDetails: \
                     PortMalformedPktErrors 7, PortVLMappingErrors 2"
                ),
                (
                    "counter-saturated",
                    "SymbolErrorCounter ≥ 65535: at its maximum, it no longer counts"
                ),
            ]
        );
        let json = serde_json::to_value(&found[0]).unwrap();
        assert_eq!(json["saturated"], true);
        assert_eq!(json["value"], 65535);
        let json = serde_json::to_value(&found[1]).unwrap();
        assert!(json.get("saturated").is_none());
        assert_eq!(
            json["details"]["PortRcvErrorDetails"]["PortMalformedPktErrors"],
            7
        );
        // A breakdown where nothing counted says so.
        let mut q = port_sample(&[("PortXmitDiscards", 3)], None, &[]);
        q.details.insert(
            "PortXmitDiscardDetails",
            CounterSet::from_pairs([("PortInactiveDiscards", 0)]),
        );
        let found = counter_findings(&wrap(q), &Thresholds::default());
        assert_eq!(
            found[0].message,
            "PortXmitDiscards = 3 (threshold 0); PortXmitDiscardDetails: no cause counted"
        );
    }

    /// LinkDownedCounter counts the link's flaps: its finding says so (a flapping link is
    /// what `demo --once` plants), at least as many when the 8-bit counter stopped.
    #[test]
    fn link_downed_reads_as_flaps() {
        use crate::counters::sample::test_support::{port_sample, wrap};
        let message = |value: u64, saturated: &[&str]| {
            let p = port_sample(&[("LinkDownedCounter", value)], None, saturated);
            counter_findings(&wrap(p), &Thresholds::default())[0]
                .message
                .clone()
        };
        assert_eq!(
            message(7, &[]),
            "LinkDownedCounter = 7 (threshold 0): the link flapped 7 times since its \
             counters were cleared"
        );
        assert!(
            message(1, &[]).ends_with(": the link flapped once since its counters were cleared")
        );
        assert!(message(255, &["LinkDownedCounter"])
            .starts_with("LinkDownedCounter ≥ 255 (threshold 0): the link flapped at least 255"));
    }

    #[test]
    fn offline_findings_of_a_topology_file() {
        let text = "Switch 8 \"sw1\"\n[1] \"h1\"[1] # \"h1\" lid 2 4xHDR\n\
[2] \"h2\"[1] # \"h2\" lid 3 1xHDR\n[3] \"h3\"[1] # \"h3\" lid 4 4xHDR\n\n\
Hca 1 \"h1\"\n[1] \"sw1\"[1]\n\nHca 1 \"h2\"\n[1] \"sw1\"[2]\n\nHca 1 \"h3\"\n[1] \"sw1\"[3]\n";
        let f = crate::ibnd::parse(text).unwrap();
        let eval = evaluate_offline(&f, None, &HealthOptions::default());
        assert_eq!(eval.findings.len(), 1);
        let finding = &eval.findings[0];
        // A topology file has no supported rates, and h2 runs no other link: its 1x link
        // may be all its hardware can do. A warning of its own kind says so.
        assert_eq!(finding.kind, FindingKind::LinkBelowNorm);
        assert_eq!(finding.severity, Severity::Warning);
        assert_eq!(
            finding.message,
            "1xHDR below fabric norm 4xHDR (capability unknown offline)"
        );
        assert!(finding.text_line().starts_with("[link-below-norm] \"sw1\""));
        let counts = count_by_kind(&eval.findings, Scope::Fabric);
        assert_eq!(counts[0], (FindingKind::DegradedLink, 0));
        assert_eq!(counts[1], (FindingKind::LinkBelowNorm, 1));
    }
}
