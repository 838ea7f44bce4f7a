//! Graphviz DOT rendering: switches as boxes, CAs as ellipses, routers as diamonds,
//! aggregation nodes as hexagons; edges labelled with the active rate ("4xHDR") and port
//! numbers at each end; the links `check` calls degraded red, and those below the fabric
//! norm whose capability a topology file cannot tell ("link-below-norm") orange and dashed.

use std::fmt::Write;

use ibscope_mad::attr::link::Rate;

use crate::escape;
use crate::health::{HealthReport, LinkVerdict};
use crate::model::{Fabric, Node, NodeKind};
use crate::namemap::{display_name, NameMap};

fn dot_id(node: &Node) -> String {
    format!("n{:016x}", node.guid)
}

/// Render the fabric as an undirected DOT graph. Names (node-name-map, else
/// NodeDescription) are escaped for DOT labels; `health` is [`crate::health::assess`]'s
/// report on the same fabric: its verdict colours each link, and its active rate (the
/// lower of what the two ends report) labels it.
pub fn write(fabric: &Fabric, names: Option<&NameMap>, health: &HealthReport) -> String {
    let mut out = String::new();
    out.push_str("graph fabric {\n");
    out.push_str("  graph [overlap=false, splines=true];\n");
    out.push_str("  node [fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=8];\n");
    for (_, node) in fabric.nodes() {
        let shape = match node.kind {
            NodeKind::Switch => "box",
            NodeKind::Ca => "ellipse",
            NodeKind::Router => "diamond",
            NodeKind::AggregationNode => "hexagon",
        };
        let lid = node.lid().map(|l| format!(" lid {l}")).unwrap_or_default();
        // "\n" in a DOT label is a line break; the name itself cannot produce one.
        let _ = writeln!(
            out,
            "  {} [shape={shape}, label=\"{}\\n{:#018x}{lid}\"];",
            dot_id(node),
            escape::for_dot_label(display_name(node, names)),
            node.guid
        );
    }
    // The report lists every link in graph order, as `links()` yields them.
    for (link, assessment) in fabric.links().zip(&health.links) {
        let mut attrs = vec![
            format!("taillabel=\"{}\"", link.a.port),
            format!("headlabel=\"{}\"", link.b.port),
        ];
        let label = match assessment.active {
            Some(rate) => Some(rate.to_string()),
            None => {
                // What one end or the other knows (a width without a speed, say).
                let (pa, pb) = (link.a_port(), link.b_port());
                let width = pa.and_then(|p| p.width_active);
                let speed = pa.and_then(|p| p.speed_active);
                let width = width.or_else(|| pb.and_then(|p| p.width_active));
                let speed = speed.or_else(|| pb.and_then(|p| p.speed_active));
                (width.is_some() || speed.is_some()).then(|| Rate::text(width, speed))
            }
        };
        if let Some(label) = label {
            attrs.push(format!("label=\"{label}\""));
        }
        match assessment.verdict {
            LinkVerdict::Ok => {}
            LinkVerdict::Degraded => {
                attrs.push("color=red".into());
                attrs.push("fontcolor=red".into());
                attrs.push("penwidth=3".into());
            }
            LinkVerdict::BelowNorm => {
                attrs.push("color=orange".into());
                attrs.push("fontcolor=orange".into());
                attrs.push("style=dashed".into());
            }
        }
        let _ = writeln!(
            out,
            "  {} -- {} [{}];",
            dot_id(link.a_node),
            dot_id(link.b_node),
            attrs.join(", ")
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{assess, HealthOptions};
    use crate::ibnd;
    use crate::model::Port;
    use ibscope_mad::attr::link::{Speed, SpeedSet, Width, WidthSet};

    fn render(f: &Fabric) -> String {
        write(f, None, &assess(f, None, &HealthOptions::default()))
    }

    const FABRIC: &str = "Switch 8 \"sw1\"\n[1] \"h1\"[1] # \"h1\" lid 2 4xHDR\n\
[2] \"h2\"[1] # \"h2\" lid 3 1xHDR\n\n\
Hca 1 \"h1\"\n[1] \"sw1\"[1]\n\n\
Hca 1 \"h2\"\n[1] \"sw1\"[2]\n";

    fn full_sets(p: &mut Port) {
        p.width_supported = WidthSet(Width::X1.bit() | Width::X4.bit());
        p.width_enabled = WidthSet(Width::X1.bit() | Width::X4.bit());
        p.speed_supported = SpeedSet::from_masks(7, 0, 7, 0);
        p.speed_enabled = SpeedSet::from_masks(7, 0, 7, 0);
    }

    fn fabric_with_sets() -> Fabric {
        let mut f = ibnd::parse(FABRIC).unwrap();
        let h1 = f.node_by_guid(0x100000).unwrap();
        f.node_mut(h1).description = "evil\" ] ; x -- y\x1b[2J".to_string();
        f.reindex();
        let ids: Vec<_> = f.nodes().map(|(id, _)| id).collect();
        for id in ids {
            for p in f.node_mut(id).ports.iter_mut() {
                full_sets(p);
            }
        }
        f
    }

    #[test]
    fn structure_and_degraded_links() {
        let f = fabric_with_sets();
        let dot = render(&f);
        assert!(dot.starts_with("graph fabric {\n"));
        assert!(dot.ends_with("}\n"));
        assert!(dot.contains("n0000000000200000 [shape=box, label=\"sw1\\n0x0000000000200000\"];"));
        assert!(dot.contains("n0000000000100000 [shape=ellipse,"));
        let edges: Vec<&str> = dot.lines().filter(|l| l.contains("taillabel")).collect();
        assert_eq!(edges.len(), 2);
        let healthy = edges.iter().find(|l| l.contains("4xHDR")).unwrap();
        assert!(!healthy.contains("red"));
        let degraded = edges.iter().find(|l| l.contains("1xHDR")).unwrap();
        assert!(degraded.contains("color=red") && degraded.contains("penwidth=3"));
        // The hostile description stays inside its label.
        assert!(!dot.contains('\x1b'));
        assert!(
            dot.contains("label=\"evil\\\" ] ; x -- y\\\\x1b[2J\\n"),
            "{dot}"
        );
    }

    /// DOT draws red exactly what `check` calls degraded: the spec rule and the fabric
    /// norm alike, orange what it calls below the norm with capability unknown, and
    /// nothing where no rule fires.
    #[test]
    fn colours_are_checks_verdict() {
        // Only active rates (a topology file), and h2 runs no other link: below the norm,
        // capability unknown.
        let f = ibnd::parse(FABRIC).unwrap();
        let dot = render(&f);
        assert!(!dot.contains("red"), "{dot}");
        let orange: Vec<&str> = dot.lines().filter(|l| l.contains("orange")).collect();
        assert_eq!(orange.len(), 1, "{dot}");
        assert!(orange[0].contains("1xHDR") && orange[0].contains("style=dashed"));
        // The same file live, where each end reports 4x supported: degraded, red.
        let dot = render(&fabric_with_sets());
        let red: Vec<&str> = dot.lines().filter(|l| l.contains("red")).collect();
        assert_eq!(red.len(), 1, "{dot}");
        assert!(red[0].contains("1xHDR"));
        assert!(!dot.contains("orange"));
        // Every link at 4xEDR while both ends could do HDR: the spec rule on each.
        let mut f = fabric_with_sets();
        let ids: Vec<_> = f.nodes().map(|(id, _)| id).collect();
        for id in ids {
            for p in f.node_mut(id).ports.iter_mut() {
                p.width_active = Some(Width::X4);
                p.speed_active = Some(Speed::Edr);
            }
        }
        assert_eq!(render(&f).lines().filter(|l| l.contains("red")).count(), 2);
        let mut healthy = ibnd::parse(FABRIC).unwrap();
        let ids: Vec<_> = healthy.nodes().map(|(id, _)| id).collect();
        for id in ids {
            for p in healthy.node_mut(id).ports.iter_mut() {
                p.width_active = Some(Width::X4);
            }
        }
        let dot = render(&healthy);
        assert!(!dot.contains("red") && !dot.contains("orange"), "{dot}");
        // Ends that disagree: the label is the lower rate.
        let mut split = ibnd::parse(FABRIC).unwrap();
        let sw = split.node_by_guid(0x200000).unwrap();
        split.node_mut(sw).port_mut(2).unwrap().width_active = Some(Width::X4);
        split.node_mut(sw).port_mut(2).unwrap().speed_active = Some(Speed::Ndr);
        let h2 = split.node_by_guid(0x100002).unwrap();
        split.node_mut(h2).port_mut(1).unwrap().width_active = Some(Width::X1);
        let dot = render(&split);
        let edge = dot.lines().find(|l| l.contains("taillabel=\"2\"")).unwrap();
        assert!(
            edge.contains("label=\"1xHDR\"") && edge.contains("red"),
            "{dot}"
        );
    }

    #[test]
    fn graphviz_accepts_it() {
        let Ok(mut child) = std::process::Command::new("dot")
            .arg("-Tplain")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("skipped: graphviz `dot` not installed");
            return;
        };
        use std::io::Write as _;
        let text = render(&fabric_with_sets());
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "dot rejected: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plain = String::from_utf8_lossy(&out.stdout);
        // -Tplain lists 3 nodes and 2 edges, and the hostile label came through whole.
        assert_eq!(plain.lines().filter(|l| l.starts_with("node ")).count(), 3);
        assert_eq!(plain.lines().filter(|l| l.starts_with("edge ")).count(), 2);
        // (-Tplain re-escapes quotes and backslashes in what it prints.)
        assert!(
            plain.contains("\"evil\\\" ] ; x -- y\\\\x1b[2J\\n0x0000000000100000\""),
            "{plain}"
        );
        assert!(plain
            .lines()
            .any(|l| l.starts_with("edge ") && l.contains("\"1xHDR\"") && l.ends_with(" red")));
    }
}
