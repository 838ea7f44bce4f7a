//! Graphviz DOT rendering: switches as boxes, CAs as ellipses, routers as diamonds; edges
//! labelled with the active rate ("4xHDR") and port numbers at each end; degraded links red.

use std::fmt::Write;

use crate::escape;
use crate::model::{Fabric, Node, NodeKind, Port};
use crate::namemap::{display_name, NameMap};

/// True when a link runs below what both ends support and enable: active width below the
/// widest width in (supported ∩ enabled) of both ports, or likewise for speed. Only judged
/// when all four sets of that kind are known (non-zero) and the active value is known.
pub fn is_degraded(a: Option<&Port>, b: Option<&Port>) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    let width_low = (|| {
        let sets = [
            a.width_supported,
            a.width_enabled,
            b.width_supported,
            b.width_enabled,
        ];
        if sets.iter().any(|s| s.0 == 0) {
            return None;
        }
        let best = sets.into_iter().reduce(|x, y| x.intersect(y))?.best()?;
        let active = a.width_active.or(b.width_active)?;
        Some(active < best)
    })()
    .unwrap_or(false);
    let speed_low = (|| {
        let sets = [
            a.speed_supported,
            a.speed_enabled,
            b.speed_supported,
            b.speed_enabled,
        ];
        if sets.iter().any(|s| s.base == 0 && s.ext == 0) {
            return None;
        }
        let best = sets.into_iter().reduce(|x, y| x.intersect(y))?.best()?;
        let active = a.speed_active.or(b.speed_active)?;
        Some(active < best)
    })()
    .unwrap_or(false);
    width_low || speed_low
}

fn dot_id(node: &Node) -> String {
    format!("n{:016x}", node.guid)
}

/// Render the fabric as an undirected DOT graph. Names (node-name-map, else
/// NodeDescription) are escaped for DOT labels.
pub fn write(fabric: &Fabric, names: Option<&NameMap>) -> String {
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
    for link in fabric.links() {
        let (pa, pb) = (link.a_port(), link.b_port());
        let width = pa
            .and_then(|p| p.width_active)
            .or_else(|| pb.and_then(|p| p.width_active));
        let speed = pa
            .and_then(|p| p.speed_active)
            .or_else(|| pb.and_then(|p| p.speed_active));
        let mut attrs = vec![
            format!("taillabel=\"{}\"", link.a.port),
            format!("headlabel=\"{}\"", link.b.port),
        ];
        match (width, speed) {
            (Some(w), Some(s)) => attrs.push(format!("label=\"{}x{}\"", w.lanes(), s.name())),
            (Some(w), None) => attrs.push(format!("label=\"{}x\"", w.lanes())),
            (None, Some(s)) => attrs.push(format!("label=\"{}\"", s.name())),
            (None, None) => {}
        }
        if is_degraded(pa, pb) {
            attrs.push("color=red".into());
            attrs.push("fontcolor=red".into());
            attrs.push("penwidth=3".into());
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
    use crate::ibnd;
    use ibscope_mad::attr::link::{Speed, SpeedSet, Width, WidthSet};

    const FABRIC: &str = "Switch 8 \"sw1\"\n[1] \"h1\"[1] # \"h1\" lid 2 4xHDR\n\
[2] \"h2\"[1] # \"h2\" lid 3 1xHDR\n\n\
Hca 1 \"h1\"\n[1] \"sw1\"[1]\n\n\
Hca 1 \"h2\"\n[1] \"sw1\"[2]\n";

    fn full_sets(p: &mut Port) {
        p.width_supported = WidthSet(Width::X1.bit() | Width::X4.bit());
        p.width_enabled = WidthSet(Width::X1.bit() | Width::X4.bit());
        p.speed_supported = SpeedSet { base: 7, ext: 7 };
        p.speed_enabled = SpeedSet { base: 7, ext: 7 };
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
        let dot = write(&f, None);
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

    #[test]
    fn unknown_sets_are_not_degraded() {
        let f = ibnd::parse(FABRIC).unwrap();
        assert!(!write(&f, None).contains("red"));
        let mut a = Port::new(1);
        full_sets(&mut a);
        a.width_active = Some(Width::X4);
        a.speed_active = Some(Speed::Edr);
        let b = a.clone();
        assert!(is_degraded(Some(&a), Some(&b)), "EDR below HDR");
        a.speed_active = Some(Speed::Hdr);
        assert!(!is_degraded(Some(&a), Some(&b)));
        let mut c = b.clone();
        c.speed_enabled = SpeedSet { base: 7, ext: 3 };
        a.speed_active = Some(Speed::Edr);
        assert!(
            !is_degraded(Some(&a), Some(&c)),
            "peer enables only up to EDR"
        );
        c.width_supported = WidthSet(0);
        a.width_active = Some(Width::X1);
        assert!(!is_degraded(Some(&a), Some(&c)), "width sets unknown");
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
        let text = write(&fabric_with_sets(), None);
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
