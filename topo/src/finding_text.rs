//! How a finding reads: the one place a [`Finding`] becomes text, for `check`, `hosts`,
//! `host --check`, `nccl`, `demo --once` and the TUI alike.
//!
//! `[kind] WHERE: MESSAGE; see FILE:LINE,LINE, ...` where WHERE is, as far as each is known, the
//! host and rail (`gpu-0003 rail 5: `), then the port (`"node" (0xGUID) port N (lid L)`)
//! and the far end of its link (` <-> "peer" (0xGUID) port M (lid K)`). Every fabric
//! string is escaped for a terminal, names quoted one way ([`escape::quoted_for_terminal`]).
//! The rules word `message` so that it does not say again what WHERE says: it is the same
//! words as JSON's `message`.

use crate::escape;
use crate::finding_kinds::Finding;
use crate::model::refs::PortRef;

/// How much a finding's text says of each port it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortNaming {
    /// `"node" (0xGUID) port N (lid L)`: what `check` prints, and a finding's detail.
    Full,
    /// `"node" port N`: for a list that must fit a small screen.
    Short,
}

impl PortNaming {
    fn port(self, p: &PortRef) -> String {
        match self {
            PortNaming::Full if p.lid != 0 => format!("{} (lid {})", p.report_text(), p.lid),
            PortNaming::Full => p.report_text(),
            PortNaming::Short => format!(
                "{} port {}",
                escape::quoted_for_terminal(&p.node.name),
                p.port
            ),
        }
    }
}

impl Finding {
    /// The line `check` prints: [`Finding::text`] with every port in full.
    pub fn text_line(&self) -> String {
        self.text(PortNaming::Full)
    }

    /// The finding as text, its ports named as `naming` says.
    pub fn text(&self, naming: PortNaming) -> String {
        self.text_about(None, naming)
    }

    /// The finding as text; `device`, a local RDMA device the finding concerns without a
    /// port (`host --check`), is named where a port would be.
    pub fn text_about(&self, device: Option<&str>, naming: PortNaming) -> String {
        let mut place: Vec<String> = Vec::new();
        // A CA whose name is all its host has (no device in it) is its own host, and a host
        // known only by its SystemImageGUID has no name: neither is said again.
        let named = |h: &String| {
            [&self.at, &self.remote]
                .into_iter()
                .flatten()
                .any(|p| *p.node.name == **h)
        };
        let guid_only =
            |h: &String| h.starts_with("0x") && ibscope_mad::codes::guid::parse(h).is_some();
        let host = self.host.as_ref().filter(|h| !named(h) && !guid_only(h));
        let host_rail = match (host, self.rail) {
            (Some(h), Some(r)) => Some(format!("{} rail {r}", escape::for_terminal(h))),
            (Some(h), None) => Some(escape::for_terminal(h)),
            (None, Some(r)) => Some(format!("rail {r}")),
            (None, None) => None,
        };
        let mut ports = match (&self.at, device) {
            (Some(at), _) => naming.port(at),
            (None, Some(d)) => escape::for_terminal(d),
            (None, None) => String::new(),
        };
        if let Some(remote) = &self.remote {
            ports.push_str(&format!(" <-> {}", naming.port(remote)));
        }
        place.extend(host_rail);
        if !ports.is_empty() {
            place.push(ports);
        }
        let mut line = format!("[{}]", self.kind);
        for part in place {
            line.push_str(&format!(" {part}:"));
        }
        line.push_str(&format!(" {}", escape::for_terminal(&self.message)));
        if !self.evidence.is_empty() {
            // A file named once with its lines (`job.log:12,40`): a rule citing eight lines
            // of one log would otherwise repeat its name eight times.
            let mut files: Vec<(&str, Vec<String>)> = Vec::new();
            for e in &self.evidence {
                match files.iter_mut().find(|(f, _)| *f == e.file) {
                    Some((_, lines)) => lines.push(e.line.to_string()),
                    None => files.push((&e.file, vec![e.line.to_string()])),
                }
            }
            let seen: Vec<String> = files
                .iter()
                .map(|(f, lines)| format!("{}:{}", escape::for_terminal(f), lines.join(",")))
                .collect();
            line.push_str(&format!("; see {}", seen.join(", ")));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding_kinds::{Evidence, FindingKind};
    use crate::model::refs::NodeRef;
    use crate::model::NodeKind;

    fn port(name: &str, guid: u64, kind: NodeKind, port: u8, lid: u16) -> PortRef {
        PortRef::on(
            NodeRef {
                guid,
                kind,
                name: name.into(),
            },
            port,
            lid,
        )
    }

    #[test]
    fn a_finding_reads_where_then_what() {
        let hca = port("gpu-0003 mlx5_5", 0x2a, NodeKind::Ca, 1, 38);
        let leaf = port("leaf \"6\"\x1b[2J", 0x6, NodeKind::Switch, 17, 11);
        let mut f = Finding::new(
            FindingKind::RailMisaligned,
            "cabled to a leaf of rail 6".into(),
        )
        .at(hca, Some(leaf));
        f.host = Some("gpu-0003".into());
        f.rail = Some(5);
        assert_eq!(
            f.text_line(),
            "[rail-misaligned] gpu-0003 rail 5: \"gpu-0003 mlx5_5\" (0x000000000000002a) port \
             1 (lid 38) <-> \"leaf \"6\"\\x1b[2J\" (0x0000000000000006) port 17 (lid 11): \
             cabled to a leaf of rail 6"
        );
        assert_eq!(
            f.text(PortNaming::Short),
            "[rail-misaligned] gpu-0003 rail 5: \"gpu-0003 mlx5_5\" port 1 <-> \
             \"leaf \"6\"\\x1b[2J\" port 17: cabled to a leaf of rail 6"
        );
    }

    #[test]
    fn nothing_to_place_means_no_colon_after_the_kind() {
        let f = Finding::new(FindingKind::NoMasterSm, "no SM".into());
        assert_eq!(f.text_line(), "[no-master-sm] no SM");
        let mut f = Finding::new(FindingKind::NcclGdrOff, "rank 3 (GPU 2) ...".into());
        f.host = Some("gpu-0001".into());
        f.evidence = vec![
            Evidence {
                file: "job.log".into(),
                line: 12,
            },
            Evidence {
                file: "other.log".into(),
                line: 3,
            },
            Evidence {
                file: "job.log".into(),
                line: 40,
            },
        ];
        assert_eq!(
            f.text_line(),
            "[nccl-gdr-off] gpu-0001: rank 3 (GPU 2) ...; see job.log:12,40, other.log:3"
        );
        let f = Finding::new(FindingKind::MixedFirmware, "runs 28.39".into());
        assert_eq!(
            f.text_about(Some("mlx5_0"), PortNaming::Full),
            "[mixed-firmware] mlx5_0: runs 28.39"
        );
    }
}
