//! Inter-switch links narrower than they are built: the rule the fabric's norm cannot
//! replace. When every switch-to-switch link has been cut to 1x, the norm is 1x and no link
//! is below it; this rule still flags each one.

use ibscope_mad::attr::{Speed, Width};

use crate::finding_kinds::{Finding, FindingKind};
use crate::health::{LinkAssessment, LinkClass, LinkEnd, LinkVerdict};

/// Why a switch-to-switch link is held to a width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildRule {
    /// Both ends report the widths they support (PortInfo): the widest of them, 4x at most.
    Supported(Width),
    /// A topology file (no supported sets): inter-switch links are built 4x, or 2x on
    /// ports split in two at NDR and XDR.
    Built(Width),
}

impl BuildRule {
    pub fn width(self) -> Width {
        match self {
            BuildRule::Supported(w) | BuildRule::Built(w) => w,
        }
    }

    fn text(self) -> String {
        match self {
            BuildRule::Supported(w) => format!("both ports support {w}"),
            BuildRule::Built(Width::X2) => "inter-switch links are built 4x, 2x on split \
                                             NDR/XDR ports (supported widths unknown)"
                .to_string(),
            BuildRule::Built(w) => {
                format!("inter-switch links are built {w} (supported widths unknown)")
            }
        }
    }
}

/// The width a switch-to-switch link is held to, and which rule says so.
pub fn build_rule(a: &LinkEnd, b: &LinkEnd, speed: Option<Speed>) -> BuildRule {
    if !a.width_supported.is_empty() && !b.width_supported.is_empty() {
        // Ports list 8x and 12x among what they support (ibsim's do) although switches
        // are cabled 4x: the widest width both support, but no wider than 4x.
        if let Some(w) = a.width_supported.intersect(b.width_supported).best() {
            return BuildRule::Supported(if w.lanes() > 4 { Width::X4 } else { w });
        }
    }
    // At NDR and XDR a port may be split in two: without its supported widths, 2x is the
    // least it is built with.
    let may_be_split = matches!(speed, Some(Speed::Ndr | Speed::Xdr));
    BuildRule::Built(if may_be_split { Width::X2 } else { Width::X4 })
}

/// One finding for each switch-to-switch link that runs narrower than its build rule.
/// Links another rule already reports (degraded, below the norm) are left to it: one
/// finding per fault.
pub fn narrow_inter_switch_links(links: &[LinkAssessment]) -> Vec<Finding> {
    let mut found = Vec::new();
    for l in links {
        if l.class != LinkClass::SwitchSwitch || l.loopback || l.verdict != LinkVerdict::Ok {
            continue;
        }
        let Some(active) = l.active else { continue };
        let rule = build_rule(&l.a, &l.b, Some(active.speed));
        if active.width.lanes() < rule.width().lanes() {
            found.push(
                Finding::new(
                    FindingKind::InterSwitchLinkNarrow,
                    format!(
                        "runs {active}, narrower than {}: {}",
                        rule.width(),
                        rule.text()
                    ),
                )
                .at(l.a.at.clone(), Some(l.b.at.clone())),
            );
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{assess, HealthOptions};
    use crate::ibnd;

    fn findings_of(text: &str) -> Vec<Finding> {
        let fabric = ibnd::parse(text).unwrap();
        let report = assess(&fabric, None, &HealthOptions::default());
        narrow_inter_switch_links(&report.links)
    }

    /// Two switches joined by two links; `rate` on both, a host at 4xHDR on each.
    fn two_switches(rate: &str) -> String {
        format!(
            r#"
Switch 8 "S1" # "sw-1" base port 0 lid 1 lmc 0
[1] "S2"[1] # "sw-2" lid 2 {rate}
[2] "S2"[2] # "sw-2" lid 2 {rate}
[3] "H1"[1] # "host-1" lid 3 4xHDR

Switch 8 "S2" # "sw-2" base port 0 lid 2 lmc 0
[1] "S1"[1] # "sw-1" lid 1 {rate}
[2] "S1"[2] # "sw-1" lid 1 {rate}
[3] "H2"[1] # "host-2" lid 4 4xHDR

Hca 1 "H1" # "host-1"
[1] "S1"[3] # lid 3 lmc 0 "sw-1" lid 1 4xHDR

Hca 1 "H2" # "host-2"
[1] "S2"[3] # lid 4 lmc 0 "sw-2" lid 2 4xHDR
"#
        )
    }

    #[test]
    fn every_inter_switch_link_at_1x_is_flagged_although_it_is_the_norm() {
        let found = findings_of(&two_switches("1xHDR"));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].message.contains("narrower than 4x"),
            "{}",
            found[0].message
        );
        assert!(
            found[0].message.contains("built 4x"),
            "{}",
            found[0].message
        );
        assert!(findings_of(&two_switches("4xHDR")).is_empty());
    }

    #[test]
    fn split_ndr_ports_are_built_2x() {
        assert!(findings_of(&two_switches("2xNDR")).is_empty());
        let found = findings_of(&two_switches("1xNDR"));
        assert_eq!(found.len(), 2);
        assert!(
            found[0].message.contains("split NDR/XDR"),
            "{}",
            found[0].message
        );
        // 2x at HDR is no split port: below 4x.
        assert_eq!(findings_of(&two_switches("2xHDR")).len(), 2);
    }

    #[test]
    fn what_the_ports_support_wins_where_known() {
        let fabric = ibnd::parse(&two_switches("1xHDR")).unwrap();
        let report = assess(&fabric, None, &HealthOptions::default());
        let mut links = report.links.clone();
        for l in &mut links {
            // Ports that can do no more than 1x: nothing to flag.
            l.a.width_supported = ibscope_mad::attr::WidthSet(Width::X1.bit());
            l.b.width_supported = ibscope_mad::attr::WidthSet(Width::X1.bit());
        }
        assert!(narrow_inter_switch_links(&links).is_empty());
        for l in &mut links {
            l.a.width_supported = ibscope_mad::attr::WidthSet(Width::X1.bit() | Width::X4.bit());
            l.b.width_supported = ibscope_mad::attr::WidthSet(Width::X1.bit() | Width::X4.bit());
        }
        let found = narrow_inter_switch_links(&links);
        assert_eq!(found.len(), 2);
        assert!(
            found[0].message.contains("both ports support 4x"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn a_link_another_rule_reports_is_not_reported_twice() {
        let fabric = ibnd::parse(&two_switches("1xHDR")).unwrap();
        let mut links = assess(&fabric, None, &HealthOptions::default()).links;
        for l in &mut links {
            l.verdict = LinkVerdict::BelowNorm;
        }
        assert!(narrow_inter_switch_links(&links).is_empty());
        links[0].verdict = LinkVerdict::Degraded;
        assert!(narrow_inter_switch_links(&links).is_empty());
    }
}
