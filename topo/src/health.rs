//! Link health: every link's width and speed against what its two ends could do, and
//! against the rate most links of its kind run at; ports that are physically up but not
//! Active; ports that are down, polling or disabled.
//!
//! A link runs at the lower of what its two ends report (a link whose ends disagree says
//! so). Rules mark a link degraded, each with its reason:
//! - the ends disagree on the active width or speed (a half-trained link);
//! - the spec rule: the active width (speed) is below the best width (speed) both ends
//!   support *and* enable;
//! - the fabric-norm rule: the active rate is below the expected rate, either given
//!   (`--expect 4xHDR`: always degraded) or the most common active rate among links of the
//!   same class (switch-switch, CA-switch; loopback cables do not count). Needed because a
//!   simulator (and some firmware) narrows a port by lowering its enabled set, after which
//!   the spec rule cannot see it, and because a topology file carries only active rates.
//!
//! Below a derived norm, a link is degraded only when its hardware could do better, so
//! that older cards in a newer fabric (DDR in QDR) are not called degraded:
//! - live, where each end reports what it supports: when both ends support the norm's
//!   width (speed) in which the link falls short; otherwise the link is fine and a note
//!   says what the hardware allows;
//! - from a topology file, which has active rates only: when both ends' nodes run some
//!   link at the norm's width (speed) in which this one falls short (a switch or HCA whose
//!   other ports run 4xQDR can run this one at 4xQDR). Otherwise nothing tells whether the
//!   hardware can do better: the verdict is [`LinkVerdict::BelowNorm`], "capability
//!   unknown offline", a warning of its own rather than "degraded".

pub use ibscope_mad::attr::link::Rate;
use ibscope_mad::attr::link::{Speed, SpeedSet, Width, WidthSet};
use ibscope_mad::attr::{PhysState, PortState};
use serde::{Deserialize, Serialize};

use crate::model::refs::PortRef;
use crate::model::{End, Fabric, LinkRef, Node, NodeKind, Port};
use crate::namemap::NameMap;

/// Which links are compared with each other for the fabric norm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkClass {
    SwitchSwitch,
    /// A CA or router to a switch.
    CaSwitch,
    /// Anything else (CA to CA back to back).
    Other,
}

impl LinkClass {
    fn of(a: NodeKind, b: NodeKind) -> LinkClass {
        match (a == NodeKind::Switch, b == NodeKind::Switch) {
            (true, true) => LinkClass::SwitchSwitch,
            (true, false) | (false, true) => LinkClass::CaSwitch,
            (false, false) => LinkClass::Other,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            LinkClass::SwitchSwitch => "switch-switch",
            LinkClass::CaSwitch => "ca-switch",
            LinkClass::Other => "other",
        }
    }
}

/// What the health rules conclude about one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkVerdict {
    #[default]
    Ok,
    /// A rule found the link running below what it can do (the reasons say which).
    Degraded,
    /// Below the fabric norm, but nothing says whether its hardware can do better (a
    /// topology file carries no supported rates): "capability unknown offline".
    BelowNorm,
}

impl LinkVerdict {
    /// The name JSON uses.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkVerdict::Ok => "ok",
            LinkVerdict::Degraded => "degraded",
            LinkVerdict::BelowNorm => "below-norm",
        }
    }
    /// The label text output puts before the reasons ("DEGRADED: ...").
    pub fn label(self) -> &'static str {
        match self {
            LinkVerdict::Ok => "OK",
            LinkVerdict::Degraded => "DEGRADED",
            LinkVerdict::BelowNorm => "BELOW NORM",
        }
    }
    /// Whether `check` reports the link (degraded, or below the norm).
    pub fn is_finding(self) -> bool {
        self != LinkVerdict::Ok
    }
}

/// One end of a link as read from the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkEnd {
    #[serde(flatten)]
    pub at: PortRef,
    pub state: Option<PortState>,
    pub phys_state: Option<PhysState>,
    pub width_active: Option<Width>,
    pub speed_active: Option<Speed>,
    pub width_supported: WidthSet,
    pub width_enabled: WidthSet,
    pub speed_supported: SpeedSet,
    pub speed_enabled: SpeedSet,
}

impl LinkEnd {
    fn new(node: &Node, port: u8, names: Option<&NameMap>) -> LinkEnd {
        let p = node.port(port);
        LinkEnd {
            at: PortRef::new(node, port, names),
            state: p.and_then(|p| p.state),
            phys_state: p.and_then(|p| p.phys_state),
            width_active: p.and_then(|p| p.width_active),
            speed_active: p.and_then(|p| p.speed_active),
            width_supported: p.map_or_else(WidthSet::default, |p| p.width_supported),
            width_enabled: p.map_or_else(WidthSet::default, |p| p.width_enabled),
            speed_supported: p.map_or_else(SpeedSet::default, |p| p.speed_supported),
            speed_enabled: p.map_or_else(SpeedSet::default, |p| p.speed_enabled),
        }
    }
}

/// "Active/LinkUp": a port's logical and physical state, "Unknown" where not read.
pub fn state_text(state: Option<PortState>, phys: Option<PhysState>) -> String {
    format!("{}/{}", PortState::name_of(state), PhysState::name_of(phys))
}

impl LinkEnd {
    pub fn state_text(&self) -> String {
        state_text(self.state, self.phys_state)
    }
}

/// One link's assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkAssessment {
    pub class: LinkClass,
    pub a: LinkEnd,
    pub b: LinkEnd,
    /// The rate the link runs at: the lower of what its ends report (`None` if the ends
    /// do not report a width and a speed between them).
    pub active: Option<Rate>,
    /// The best rate both ends support and enable ("could be"), when both ends report
    /// their sets.
    pub could_be: Option<Rate>,
    /// The rate this link is held to: `--expect`, else its class's most common rate.
    pub expected: Option<Rate>,
    pub verdict: LinkVerdict,
    /// `verdict` is [`LinkVerdict::Degraded`].
    pub degraded: bool,
    /// Why the verdict is not ok, one line per rule that fired.
    pub reasons: Vec<String>,
    /// What the rules saw without finding fault (below the norm, but the hardware
    /// supports no more).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// A cable between two ports of one node: a finding of its own, left out of the norms.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loopback: bool,
}

/// What is wrong with a port's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortCondition {
    /// Physically LinkUp but the logical state is not Active (Init/Armed: the SM has not
    /// brought it up).
    UpNotActive,
    Down,
    Polling,
    Disabled,
    /// Any other physical state (sleep, training, error recovery, PHY test).
    Other,
}

impl PortCondition {
    /// The name JSON uses.
    pub fn as_str(self) -> &'static str {
        match self {
            PortCondition::UpNotActive => "up-not-active",
            PortCondition::Down => "down",
            PortCondition::Polling => "polling",
            PortCondition::Disabled => "disabled",
            PortCondition::Other => "other",
        }
    }
}

/// A port not Active, with its far end when the model knows one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortIssue {
    #[serde(flatten)]
    pub at: PortRef,
    pub condition: PortCondition,
    pub state: Option<PortState>,
    pub phys_state: Option<PhysState>,
    pub remote: Option<PortRef>,
}

impl PortIssue {
    pub fn state_text(&self) -> String {
        state_text(self.state, self.phys_state)
    }
}

/// Norm rates per link class, as used for the fabric-norm rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Norms {
    /// True when given with `--expect` rather than derived.
    pub given: bool,
    pub switch_switch: Option<Rate>,
    pub ca_switch: Option<Rate>,
    pub other: Option<Rate>,
}

impl Norms {
    pub fn get(&self, class: LinkClass) -> Option<Rate> {
        match class {
            LinkClass::SwitchSwitch => self.switch_switch,
            LinkClass::CaSwitch => self.ca_switch,
            LinkClass::Other => self.other,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthOptions {
    /// Every link is expected to run at this rate (overrides the derived norm).
    pub expect: Option<Rate>,
    /// Hosts the fabric should have (`check --hosts`): each one no CA names is a
    /// `host-missing` finding.
    pub expected_hosts: Option<Vec<String>>,
    /// Leave out the host and rail findings (`check --no-hosts`).
    pub skip_hosts: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthReport {
    pub norms: Norms,
    /// Every link, in graph order.
    pub links: Vec<LinkAssessment>,
    /// Ports physically up but not Active: a finding.
    pub up_not_active: Vec<PortIssue>,
    /// Switch and CA ports that are down, polling or disabled (unused ports included):
    /// listed for information.
    pub down: Vec<PortIssue>,
}

impl HealthReport {
    /// Links whose verdict is [`LinkVerdict::Degraded`].
    pub fn degraded(&self) -> impl Iterator<Item = &LinkAssessment> {
        self.links.iter().filter(|l| l.degraded)
    }
    /// Links `check` reports: degraded, or below the norm with capability unknown.
    pub fn with_findings(&self) -> impl Iterator<Item = &LinkAssessment> {
        self.links.iter().filter(|l| l.verdict.is_finding())
    }
    /// Links cabled between two ports of one node.
    pub fn loopbacks(&self) -> impl Iterator<Item = &LinkAssessment> {
        self.links.iter().filter(|l| l.loopback)
    }
}

/// The best width and the best speed both ends support and enable; `None` for either one
/// an end does not report.
fn best_both_can(a: &Port, b: &Port) -> (Option<Width>, Option<Speed>) {
    /// What all of `sets` hold, if each says something.
    fn common<S: Copy>(sets: [S; 4], is_empty: fn(S) -> bool, meet: fn(S, S) -> S) -> Option<S> {
        if sets.iter().any(|s| is_empty(*s)) {
            return None;
        }
        sets.into_iter().reduce(meet)
    }
    let widths = [
        a.width_supported,
        a.width_enabled,
        b.width_supported,
        b.width_enabled,
    ];
    let speeds = [
        a.speed_supported,
        a.speed_enabled,
        b.speed_supported,
        b.speed_enabled,
    ];
    (
        common(widths, WidthSet::is_empty, WidthSet::intersect).and_then(WidthSet::best),
        common(speeds, SpeedSet::is_empty, SpeedSet::intersect).and_then(SpeedSet::best),
    )
}

/// Whether a port reports the widths and speeds it supports (a live discovery does; a
/// topology file does not).
fn capability_known(port: Option<&Port>) -> bool {
    port.is_some_and(|p| !p.width_supported.is_empty() && !p.speed_supported.is_empty())
}

/// The lower of what two ends report, or whichever reports.
fn lower<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// The active rate of a link: the lower width and the lower speed of what its two ends
/// report (a link cannot run faster than either end), or what one end reports alone.
fn active_rate(a: Option<&Port>, b: Option<&Port>) -> Option<Rate> {
    let width = lower(
        a.and_then(|p| p.width_active),
        b.and_then(|p| p.width_active),
    )?;
    let speed = lower(
        a.and_then(|p| p.speed_active),
        b.and_then(|p| p.speed_active),
    )?;
    Some(Rate { width, speed })
}

/// Most common rate; ties go to the faster one (a fabric half at 1x is not "normal" at 1x).
fn most_common(rates: &[Rate]) -> Option<Rate> {
    let mut counts: foldhash::HashMap<Rate, usize> = foldhash::HashMap::default();
    for r in rates {
        *counts.entry(*r).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|(ra, ca), (rb, cb)| {
            ca.cmp(cb)
                .then(ra.data_gbps().total_cmp(&rb.data_gbps()))
                .then(ra.cmp(rb))
        })
        .map(|(r, _)| r)
}

fn condition(port: &Port) -> Option<PortCondition> {
    if port.is_active() {
        return None;
    }
    Some(match port.phys_state {
        Some(PhysState::LinkUp) => PortCondition::UpNotActive,
        Some(PhysState::Polling) => PortCondition::Polling,
        Some(PhysState::Disabled) => PortCondition::Disabled,
        // Unknown physical state: go by the logical one.
        None if port.state == Some(PortState::Down) => PortCondition::Down,
        None if port.state.is_none() => return None,
        None => PortCondition::UpNotActive,
        Some(PhysState::Sleep) => PortCondition::Down,
        Some(_) => PortCondition::Other,
    })
}

/// Assess every link and port of `fabric`.
pub fn assess(fabric: &Fabric, names: Option<&NameMap>, options: &HealthOptions) -> HealthReport {
    let pending: Vec<Pending> = fabric.links().map(|l| Pending::spec_rule(&l)).collect();
    let norms = match options.expect {
        Some(r) => Norms {
            given: true,
            switch_switch: Some(r),
            ca_switch: Some(r),
            other: Some(r),
        },
        None => Norms::of(&pending),
    };
    let links = pending
        .into_iter()
        .map(|p| p.norm_rule(&norms, fabric, names))
        .collect();
    let (up_not_active, down) = port_issues(fabric, names);
    HealthReport {
        norms,
        links,
        up_not_active,
        down,
    }
}

/// The fastest width and speed a node runs its links at, the link at `end` left out: what
/// a topology file shows the node's hardware can do.
fn runs_elsewhere(fabric: &Fabric, end: End) -> (Option<Width>, Option<Speed>) {
    fabric
        .node(end.node)
        .ports
        .iter()
        .filter(|p| p.number != end.port)
        .filter(|p| {
            let other = End {
                node: end.node,
                port: p.number,
            };
            fabric.peer(other).is_some_and(|peer| peer != end)
        })
        .fold((None, None), |(w, s), p| {
            (w.max(p.width_active), s.max(p.speed_active))
        })
}

/// Where a link falls short of its norm: the norm's width and speed where it does.
#[derive(Clone, Copy)]
struct Shortfall {
    width: Option<Width>,
    speed: Option<Speed>,
}

impl Shortfall {
    fn of(act: Rate, norm: Rate) -> Shortfall {
        Shortfall {
            width: (act.width < norm.width).then_some(norm.width),
            speed: (act.speed < norm.speed).then_some(norm.speed),
        }
    }
    /// The parts of the shortfall both ends could run (`width`, `speed` say which), as
    /// text ("4x", "QDR", "4x and QDR"); `None` when neither.
    fn reachable(
        self,
        width: impl Fn(Width) -> bool,
        speed: impl Fn(Speed) -> bool,
    ) -> Option<String> {
        let parts: Vec<String> = [
            self.width.filter(|w| width(*w)).map(|w| w.to_string()),
            self.speed.filter(|s| speed(*s)).map(|s| s.to_string()),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join(" and "))
    }
}

/// A link judged by the spec rule, waiting for the fabric norm.
struct Pending {
    class: LinkClass,
    a: End,
    b: End,
    active: Option<Rate>,
    could_be: Option<Rate>,
    /// What both ends support, when both report it.
    supported: Option<(WidthSet, SpeedSet)>,
    loopback: bool,
    reasons: Vec<String>,
}

impl Pending {
    /// The spec rule: the active width (speed) below the best both ends support and
    /// enable; and ends that disagree on what is active (a half-trained link).
    fn spec_rule(link: &LinkRef<'_>) -> Pending {
        let (pa, pb) = (link.a_port(), link.b_port());
        let active = active_rate(pa, pb);
        let mut reasons = Vec::new();
        let mut could_be = None;
        let mut supported = None;
        if let (Some(pa), Some(pb)) = (pa, pb) {
            let (w, s) = best_both_can(pa, pb);
            if let (Some(width), Some(speed)) = (w, s) {
                could_be = Some(Rate { width, speed });
            }
            if capability_known(Some(pa)) && capability_known(Some(pb)) {
                supported = Some((
                    pa.width_supported.intersect(pb.width_supported),
                    pa.speed_supported.intersect(pb.speed_supported),
                ));
            }
            if let (Some(x), Some(y)) = (pa.width_active, pb.width_active) {
                if x != y {
                    reasons.push(format!(
                        "the ends report different widths ({x} and {y}): the link runs at {}",
                        x.min(y)
                    ));
                }
            }
            if let (Some(x), Some(y)) = (pa.speed_active, pb.speed_active) {
                if x != y {
                    reasons.push(format!(
                        "the ends report different speeds ({x} and {y}): the link runs at {}",
                        x.min(y)
                    ));
                }
            }
            if let (Some(best), Some(act)) = (w, active.map(|r| r.width)) {
                if act < best {
                    reasons.push(format!(
                        "width {act} below {best}, which both ends support and enable"
                    ));
                }
            }
            if let (Some(best), Some(act)) = (s, active.map(|r| r.speed)) {
                if act < best {
                    reasons.push(format!(
                        "speed {act} below {best}, which both ends support and enable"
                    ));
                }
            }
        }
        Pending {
            class: LinkClass::of(link.a_node.kind, link.b_node.kind),
            a: link.a,
            b: link.b,
            active,
            could_be,
            supported,
            loopback: link.a.node == link.b.node,
            reasons,
        }
    }

    /// The fabric-norm rule (see the module docs), then the verdict.
    fn norm_rule(
        mut self,
        norms: &Norms,
        fabric: &Fabric,
        names: Option<&NameMap>,
    ) -> LinkAssessment {
        let expected = norms.get(self.class);
        let mut notes = Vec::new();
        let mut below_unknown = false;
        if let (Some(act), Some(norm)) = (self.active, expected) {
            if act.is_below(norm) {
                let short = Shortfall::of(act, norm);
                if norms.given {
                    self.reasons
                        .push(format!("{act} below expected rate {norm}"));
                } else if let Some((widths, speeds)) = self.supported {
                    let width = |w| widths.best().is_some_and(|b| b >= w);
                    let speed = |s| speeds.best().is_some_and(|b| b >= s);
                    if short.reachable(width, speed).is_some() {
                        self.reasons.push(format!("{act} below fabric norm {norm}"));
                    } else {
                        notes.push(format!(
                            "{act} below fabric norm {norm}: both ends support at most {}",
                            Rate::text(widths.best(), speeds.best())
                        ));
                    }
                } else {
                    let (a, b) = (
                        runs_elsewhere(fabric, self.a),
                        runs_elsewhere(fabric, self.b),
                    );
                    let width = |w| a.0 >= Some(w) && b.0 >= Some(w);
                    let speed = |s| a.1 >= Some(s) && b.1 >= Some(s);
                    match short.reachable(width, speed) {
                        Some(parts) => self.reasons.push(format!(
                            "{act} below fabric norm {norm}; both ends run other links at {parts}"
                        )),
                        None => {
                            below_unknown = true;
                            self.reasons.push(format!(
                                "{act} below fabric norm {norm} (capability unknown offline)"
                            ));
                        }
                    }
                }
            }
        }
        let verdict = match (self.reasons.is_empty(), below_unknown) {
            (true, _) => LinkVerdict::Ok,
            (false, true) if self.reasons.len() == 1 => LinkVerdict::BelowNorm,
            (false, _) => LinkVerdict::Degraded,
        };
        LinkAssessment {
            class: self.class,
            a: LinkEnd::new(fabric.node(self.a.node), self.a.port, names),
            b: LinkEnd::new(fabric.node(self.b.node), self.b.port, names),
            active: self.active,
            could_be: self.could_be,
            expected,
            verdict,
            degraded: verdict == LinkVerdict::Degraded,
            reasons: self.reasons,
            notes,
            loopback: self.loopback,
        }
    }
}

impl Norms {
    /// The most common active rate of each link class; loopback cables do not count.
    fn of(pending: &[Pending]) -> Norms {
        let of = |class: LinkClass| {
            let rates: Vec<Rate> = pending
                .iter()
                .filter(|p| p.class == class && !p.loopback)
                .filter_map(|p| p.active)
                .collect();
            most_common(&rates)
        };
        Norms {
            given: false,
            switch_switch: of(LinkClass::SwitchSwitch),
            ca_switch: of(LinkClass::CaSwitch),
            other: of(LinkClass::Other),
        }
    }
}

/// Ports that are not Active: (physically up but not Active, down or disabled or polling).
fn port_issues(fabric: &Fabric, names: Option<&NameMap>) -> (Vec<PortIssue>, Vec<PortIssue>) {
    let mut up_not_active = Vec::new();
    let mut down = Vec::new();
    for (id, node) in fabric.nodes() {
        for port in &node.ports {
            // Switch port 0 is the management port: it has no link and no physical state.
            if node.is_switch() && port.number == 0 {
                continue;
            }
            let Some(cond) = condition(port) else {
                continue;
            };
            let remote = fabric
                .peer(End {
                    node: id,
                    port: port.number,
                })
                .map(|e| PortRef::new(fabric.node(e.node), e.port, names));
            let issue = PortIssue {
                at: PortRef::new(node, port.number, names),
                condition: cond,
                state: port.state,
                phys_state: port.phys_state,
                remote,
            };
            if cond == PortCondition::UpNotActive {
                up_not_active.push(issue);
            } else {
                down.push(issue);
            }
        }
    }
    (up_not_active, down)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NodeKind, Port};

    fn port(n: u8, w: Width, s: Speed, wen: u8) -> Port {
        Port {
            number: n,
            lid: 0,
            state: Some(PortState::Active),
            phys_state: Some(PhysState::LinkUp),
            width_active: Some(w),
            // Everything supported, as ibsim reports it.
            width_supported: WidthSet(0x1f),
            width_enabled: WidthSet(wen),
            speed_active: Some(s),
            speed_supported: SpeedSet::from_masks(7, 0, 7, 0),
            speed_enabled: SpeedSet::from_masks(7, 0, 4, 0),
            ..Port::new(n)
        }
    }

    fn node(guid: u64, kind: NodeKind, ports: Vec<Port>) -> Node {
        Node {
            guid,
            kind,
            description: format!("n{guid:x}"),
            num_ports: ports.iter().map(|p| p.number).max().unwrap_or(0),
            ports,
            ..Default::default()
        }
    }

    /// sw1 with hosts h1 (4xHDR), h2 (1xHDR, enabled narrowed on both ends as ibsim does),
    /// h3 (4xHDR but only 1x enabled on the switch side: the spec rule's case is the reverse)
    fn fabric() -> Fabric {
        let mut f = Fabric::new();
        let mut sw_ports = vec![Port {
            lid: 1,
            ..Port::new(0)
        }];
        sw_ports.push(port(1, Width::X4, Speed::Hdr, 2));
        sw_ports.push(port(2, Width::X1, Speed::Hdr, 1));
        sw_ports.push(port(3, Width::X4, Speed::Hdr, 2));
        // Port 4: LinkUp but Init; port 5: Polling (unused).
        let mut p4 = port(4, Width::X4, Speed::Hdr, 2);
        p4.state = Some(PortState::Init);
        sw_ports.push(p4);
        sw_ports.push(Port {
            state: Some(PortState::Down),
            phys_state: Some(PhysState::Polling),
            ..Port::new(5)
        });
        let sw = f.add_node(node(0x10, NodeKind::Switch, sw_ports)).unwrap();
        // h3's end enables 4x and 1x while active at 1x: the spec rule fires.
        let mut h3p = port(1, Width::X1, Speed::Hdr, 3);
        h3p.width_enabled = WidthSet(3);
        let hosts = [
            (0x21, port(1, Width::X4, Speed::Hdr, 2)),
            (0x22, port(1, Width::X1, Speed::Hdr, 1)),
            (0x23, h3p),
            (0x24, port(1, Width::X4, Speed::Hdr, 2)),
        ];
        for (i, (guid, p)) in hosts.into_iter().enumerate() {
            let h = f.add_node(node(guid, NodeKind::Ca, vec![p])).unwrap();
            f.connect(
                End {
                    node: sw,
                    port: i as u8 + 1,
                },
                End { node: h, port: 1 },
            )
            .unwrap();
        }
        // Make sw port 3 enable 1x and 4x too so its spec rule can see the 1x on h3's side.
        let swn = f.node_mut(sw);
        let p3 = swn.port_mut(3).unwrap();
        p3.width_active = Some(Width::X1);
        p3.width_enabled = WidthSet(3);
        f
    }

    #[test]
    fn spec_rule_and_norm_rule() {
        let f = fabric();
        let report = assess(&f, None, &HealthOptions::default());
        assert_eq!(report.norms.ca_switch, Rate::parse("4xHDR"));
        let degraded: Vec<(u64, Vec<String>)> = report
            .degraded()
            .map(|l| (l.b.at.node.guid, l.reasons.clone()))
            .collect();
        assert_eq!(degraded.len(), 2, "{degraded:?}");
        // h2: narrowed on both ends' enabled sets: only the norm sees it.
        assert_eq!(degraded[0].0, 0x22);
        assert_eq!(degraded[0].1, vec!["1xHDR below fabric norm 4xHDR"]);
        // h3: both rules.
        assert_eq!(degraded[1].0, 0x23);
        assert_eq!(
            degraded[1].1,
            vec![
                "width 1x below 4x, which both ends support and enable",
                "1xHDR below fabric norm 4xHDR"
            ]
        );
        let h3 = report.links.iter().find(|l| l.b.at.node.guid == 0x23);
        assert_eq!(h3.unwrap().could_be, Rate::parse("4xHDR"));
        // Ports: 4 is up but Init, 5 is polling.
        assert_eq!(report.up_not_active.len(), 1);
        assert_eq!(report.up_not_active[0].at.port, 4);
        assert_eq!(
            report.up_not_active[0].remote.as_ref().map(|r| r.node.guid),
            Some(0x24)
        );
        assert_eq!(report.down.len(), 1);
        assert_eq!(report.down[0].condition, PortCondition::Polling);
        assert_eq!(report.down[0].remote, None);
    }

    #[test]
    fn expected_rate_overrides_the_norm() {
        let f = fabric();
        let opts = HealthOptions {
            expect: Rate::parse("4xNDR"),
            ..Default::default()
        };
        let report = assess(&f, None, &opts);
        assert_eq!(report.degraded().count(), 4);
        assert!(report.links[0]
            .reasons
            .contains(&"4xHDR below expected rate 4xNDR".to_string()));
        let opts = HealthOptions {
            expect: Rate::parse("1xHDR"),
            ..Default::default()
        };
        // Only the spec rule remains.
        let report = assess(&f, None, &opts);
        assert_eq!(report.degraded().count(), 1);
    }

    #[test]
    fn ties_prefer_the_faster_rate() {
        let a = Rate::parse("1xHDR").unwrap();
        let b = Rate::parse("4xHDR").unwrap();
        assert_eq!(most_common(&[a, b]), Some(b));
        assert_eq!(most_common(&[a, a, b]), Some(a));
        assert_eq!(most_common(&[]), None);
    }

    #[test]
    fn topology_file_links_use_only_active_rates() {
        let text = "Switch 8 \"sw1\"\n[1] \"h1\"[1] # \"h1\" lid 2 4xHDR\n\
[2] \"h2\"[1] # \"h2\" lid 3 1xHDR\n[3] \"h3\"[1] # \"h3\" lid 4 4xHDR\n\n\
Hca 1 \"h1\"\n[1] \"sw1\"[1]\n\nHca 1 \"h2\"\n[1] \"sw1\"[2]\n\nHca 1 \"h3\"\n[1] \"sw1\"[3]\n";
        let f = crate::ibnd::parse(text).unwrap();
        let report = assess(&f, None, &HealthOptions::default());
        // h2 runs no other link, so nothing says its card can do 4x: below the norm,
        // capability unknown, not degraded.
        assert_eq!(report.degraded().count(), 0);
        let bad: Vec<&LinkAssessment> = report.with_findings().collect();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].active, Rate::parse("1xHDR"));
        assert_eq!(bad[0].verdict, LinkVerdict::BelowNorm);
        assert_eq!(
            bad[0].reasons,
            vec!["1xHDR below fabric norm 4xHDR (capability unknown offline)"]
        );
        let json = serde_json::to_value(bad[0]).unwrap();
        assert_eq!(json["verdict"], "below-norm");
        assert_eq!(json["degraded"], false);
    }

    /// A link whose ends report different rates runs at the lower of the two, and says so.
    #[test]
    fn ends_that_disagree_run_at_the_lower_rate() {
        let mut f = fabric();
        let sw = f.node_by_guid(0x10).unwrap();
        // Switch side of h1's link says 4xNDR, h1 says 4xHDR; switch side of h4's says
        // 4xHDR, h4 1xHDR.
        f.node_mut(sw).port_mut(1).unwrap().speed_active = Some(Speed::Ndr);
        let h4 = f.node_by_guid(0x24).unwrap();
        f.node_mut(h4).port_mut(1).unwrap().width_active = Some(Width::X1);
        let report = assess(&f, None, &HealthOptions::default());
        let link = |guid| {
            report
                .links
                .iter()
                .find(|l| l.b.at.node.guid == guid)
                .unwrap()
        };
        assert_eq!(link(0x21).active, Rate::parse("4xHDR"));
        assert_eq!(link(0x21).verdict, LinkVerdict::Degraded);
        assert_eq!(
            link(0x21).reasons,
            vec!["the ends report different speeds (NDR and HDR): the link runs at HDR"]
        );
        assert_eq!(link(0x24).active, Rate::parse("1xHDR"));
        assert!(link(0x24).reasons[0]
            .starts_with("the ends report different widths (4x and 1x): the link runs at 1x"));
    }

    fn qdr_port(n: u8, w: Width, s: Speed, supported: u8) -> Port {
        Port {
            width_supported: WidthSet(3),
            width_enabled: WidthSet(3),
            speed_supported: SpeedSet::from_masks(supported, 0, 0, 0),
            speed_enabled: SpeedSet::from_masks(supported, 0, 0, 0),
            ..port(n, w, s, 3)
        }
    }

    /// DDR cards in a QDR fabric, live (each end reports what it supports): a card that
    /// supports no more than DDR is fine (a note says why it is below the norm); a
    /// QDR-capable card held at DDR by its enabled set is degraded.
    #[test]
    fn older_cards_below_the_norm_are_not_degraded_live() {
        let mut f = Fabric::new();
        let mut sw_ports = vec![Port {
            lid: 1,
            ..Port::new(0)
        }];
        for n in 1..=5 {
            let speed = if n <= 3 { Speed::Qdr } else { Speed::Ddr };
            sw_ports.push(qdr_port(n, Width::X4, speed, 7));
        }
        let sw = f.add_node(node(0x10, NodeKind::Switch, sw_ports)).unwrap();
        let mut narrowed = qdr_port(1, Width::X4, Speed::Ddr, 7);
        narrowed.speed_enabled = SpeedSet::from_masks(3, 0, 0, 0);
        let hosts = [
            qdr_port(1, Width::X4, Speed::Qdr, 7),
            qdr_port(1, Width::X4, Speed::Qdr, 7),
            qdr_port(1, Width::X4, Speed::Qdr, 7),
            qdr_port(1, Width::X4, Speed::Ddr, 3),
            narrowed,
        ];
        for (i, p) in hosts.into_iter().enumerate() {
            let h = f
                .add_node(node(0x21 + i as u64, NodeKind::Ca, vec![p]))
                .unwrap();
            let port = i as u8 + 1;
            f.connect(End { node: sw, port }, End { node: h, port: 1 })
                .unwrap();
        }
        let report = assess(&f, None, &HealthOptions::default());
        assert_eq!(report.norms.ca_switch, Rate::parse("4xQDR"));
        let link = |guid| {
            report
                .links
                .iter()
                .find(|l| l.b.at.node.guid == guid)
                .unwrap()
        };
        let ddr_card = link(0x24);
        assert_eq!(ddr_card.verdict, LinkVerdict::Ok);
        assert!(ddr_card.reasons.is_empty());
        assert_eq!(
            ddr_card.notes,
            vec!["4xDDR below fabric norm 4xQDR: both ends support at most 4xDDR"]
        );
        let held_back = link(0x25);
        assert_eq!(held_back.verdict, LinkVerdict::Degraded);
        assert_eq!(held_back.reasons, vec!["4xDDR below fabric norm 4xQDR"]);
        // --expect is the operator's word: every link below it is degraded.
        let opts = HealthOptions {
            expect: Rate::parse("4xQDR"),
            ..Default::default()
        };
        let report = assess(&f, None, &opts);
        assert_eq!(report.degraded().count(), 2);
    }

    /// A topology file (active rates only): below the norm is degraded where both ends'
    /// nodes run some other link at the width (speed) this one lacks, else "capability
    /// unknown offline". Loopback cables do not set the norm.
    #[test]
    fn offline_verdicts_go_by_what_each_node_runs_elsewhere() {
        let text = "Switch 16 \"sw1\"\n\
[1] \"sw2\"[1] # lid 0 4xQDR\n[2] \"sw2\"[2] # lid 0 4xQDR\n[3] \"sw2\"[3] # lid 0 1xQDR\n\
[4] \"h1\"[1] # lid 0 4xQDR\n[5] \"h2\"[1] # lid 0 4xQDR\n[6] \"h3\"[1] # lid 0 4xDDR\n\n\
Switch 16 \"sw2\"\n\
[1] \"sw1\"[1] # lid 0 4xQDR\n[2] \"sw1\"[2] # lid 0 4xQDR\n[3] \"sw1\"[3] # lid 0 1xQDR\n\
[4] \"h4\"[1] # lid 0 4xQDR\n[5] \"h4\"[2] # lid 0 4xDDR\n\
[6] \"sw2\"[7] # lid 0 4xEDR\n[7] \"sw2\"[6] # lid 0 4xEDR\n\
[8] \"sw2\"[9] # lid 0 4xEDR\n[9] \"sw2\"[8] # lid 0 4xEDR\n\
[10] \"sw2\"[11] # lid 0 4xEDR\n[11] \"sw2\"[10] # lid 0 4xEDR\n\n\
Hca 1 \"h1\"\n[1] \"sw1\"[4]\n\nHca 1 \"h2\"\n[1] \"sw1\"[5]\n\nHca 1 \"h3\"\n[1] \"sw1\"[6]\n\n\
Hca 2 \"h4\"\n[1] \"sw2\"[4]\n[2] \"sw2\"[5]\n";
        let f = crate::ibnd::parse(text).unwrap();
        let report = assess(&f, None, &HealthOptions::default());
        // Three EDR loopbacks against two 4xQDR switch links: without them the norm is QDR.
        assert_eq!(report.norms.switch_switch, Rate::parse("4xQDR"));
        assert_eq!(report.loopbacks().count(), 3);
        assert!(report.loopbacks().all(|l| l.verdict == LinkVerdict::Ok));
        let by_port = |name: &str, port: u8| {
            report
                .links
                .iter()
                .find(|l| {
                    [&l.a, &l.b]
                        .iter()
                        .any(|e| &*e.at.node.name == name && e.at.port == port)
                })
                .unwrap()
        };
        let narrow = by_port("sw1", 3);
        assert_eq!(narrow.verdict, LinkVerdict::Degraded);
        assert_eq!(
            narrow.reasons,
            vec!["1xQDR below fabric norm 4xQDR; both ends run other links at 4x"]
        );
        // h3 runs one link, at DDR: its card may be a DDR card.
        let h3 = by_port("h3", 1);
        assert_eq!(h3.verdict, LinkVerdict::BelowNorm);
        assert_eq!(
            h3.reasons,
            vec!["4xDDR below fabric norm 4xQDR (capability unknown offline)"]
        );
        // h4 runs its other port at QDR: its DDR port is degraded.
        let h4 = by_port("h4", 2);
        assert_eq!(h4.verdict, LinkVerdict::Degraded);
        assert_eq!(
            h4.reasons,
            vec!["4xDDR below fabric norm 4xQDR; both ends run other links at QDR"]
        );
        let verdicts: Vec<LinkVerdict> = report.links.iter().map(|l| l.verdict).collect();
        assert_eq!(
            verdicts.iter().filter(|v| **v != LinkVerdict::Ok).count(),
            3,
            "{verdicts:?}"
        );
    }

    /// PortInfo bytes of an active 4x port, written from IBA 14.2.5.6's offsets: extended
    /// speeds (CapabilityMask bits 14, 15) active at NDR, supporting FDR..NDR; with
    /// `xdr`, also CapabilityMask2 IsExtendedSpeeds2Supported and IsLinkSpeedXDRSupported
    /// with LinkSpeedExtSupported2 = LinkSpeedExtEnabled2 = XDR, LinkSpeedExtActive2 0.
    fn ndr_port_info(xdr: bool) -> ibscope_mad::attr::PortInfo {
        let mut b = [0u8; 64];
        b[20..24].copy_from_slice(&0x0000_c000u32.to_be_bytes()); // CapabilityMask
        b[29] = 3; // LinkWidthEnabled 1x|4x
        b[30] = 3; // LinkWidthSupported 1x|4x
        b[31] = 2; // LinkWidthActive 4x
        b[32] = (7 << 4) | 4; // LinkSpeedSupported SDR..QDR, PortState Active
        b[33] = (5 << 4) | 2; // PortPhysicalState LinkUp, LinkDownDefaultState Polling
        b[35] = 7; // LinkSpeedActive 0 (see the extended fields), LinkSpeedEnabled SDR..QDR
        if xdr {
            b[56] = 0b0000_1001; // LinkSpeedExtActive2 0, Supported2 1, Enabled2 1
            b[60..62].copy_from_slice(&((1u16 << 11) | (1 << 12)).to_be_bytes());
        }
        b[62] = (8 << 4) | 0xf; // LinkSpeedExtActive NDR, LinkSpeedExtSupported FDR..NDR
        b[63] = 0xf; // LinkSpeedExtEnabled FDR..NDR
        ibscope_mad::attr::PortInfo::decode(&b).unwrap()
    }

    /// Two ports as discovery records them from their PortInfo, cabled together.
    fn pair_from_port_infos(
        a: &ibscope_mad::attr::PortInfo,
        b: &ibscope_mad::attr::PortInfo,
    ) -> Fabric {
        let mut f = Fabric::new();
        let mut ids = Vec::new();
        for (guid, info) in [(0x10, a), (0x20, b)] {
            let mut p = Port::new(1);
            crate::discover::apply_port_info(&mut p, info, None);
            ids.push(f.add_node(node(guid, NodeKind::Ca, vec![p])).unwrap());
        }
        let end = |node| End { node, port: 1 };
        f.connect(end(ids[0]), end(ids[1])).unwrap();
        f
    }

    /// An XDR-capable pair trained at NDR is degraded by the spec rule (XDR lives in
    /// LinkSpeedExt*2); an NDR-only end makes NDR the best the pair can do.
    #[test]
    fn xdr_capable_pair_at_ndr_is_degraded() {
        let (xdr, ndr) = (ndr_port_info(true), ndr_port_info(false));
        let report = assess(
            &pair_from_port_infos(&xdr, &xdr),
            None,
            &HealthOptions::default(),
        );
        let link = &report.links[0];
        assert_eq!(link.active, Rate::parse("4xNDR"));
        assert_eq!(link.could_be, Rate::parse("4xXDR"));
        assert_eq!(link.verdict, LinkVerdict::Degraded);
        assert_eq!(
            link.reasons,
            vec!["speed NDR below XDR, which both ends support and enable"]
        );
        let report = assess(
            &pair_from_port_infos(&xdr, &ndr),
            None,
            &HealthOptions::default(),
        );
        assert_eq!(report.links[0].could_be, Rate::parse("4xNDR"));
        assert_eq!(report.links[0].verdict, LinkVerdict::Ok);
    }
}
