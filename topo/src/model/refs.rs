//! The one way reports name a node and a port of the fabric: by GUID, kind and name (the
//! node-name-map name where one is given, else the NodeDescription), with the port's LID and,
//! where known, its host and rail. Every report uses [`PortRef`]; what differs is only the
//! JSON shape each report's schema has always had:
//! - the flat record (`port_ref` in the schemas) of checks, counters and findings: the
//!   default `Serialize` of [`PortRef`];
//! - `{"node": {guid, kind, name}, "port"}` (`route_port`) of routing reports: fields of
//!   those reports say `#[serde(with = "route_port")]`.
//!
//! Neither carries a graph index: a reference outlives the fabric it was read from (it is
//! sent between processes and kept across sweeps), and code that needs the node looks it up
//! by GUID.

use std::sync::Arc;

use ibscope_mad::codes::guid;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Fabric, Node, NodeId, NodeKind, PortKey};
use crate::escape;
use crate::namemap::{display_name, NameMap};

/// A node, identified for people: GUID, kind and name (untrusted text: escape it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeRef {
    #[serde(with = "guid")]
    pub guid: u64,
    pub kind: NodeKind,
    /// The node-name-map name where the report was given a map, else the NodeDescription.
    /// Shared: the records of a sweep name each node's ports with one copy of its name.
    pub name: Arc<str>,
}

impl NodeRef {
    /// Node `id` of `fabric` under its own NodeDescription (routing reports take no map).
    pub fn new(fabric: &Fabric, id: NodeId) -> NodeRef {
        NodeRef::named(fabric.node(id), None)
    }
    /// `node` under its node-name-map name, if `names` has one.
    pub fn named(node: &Node, names: Option<&NameMap>) -> NodeRef {
        NodeRef::sharing(node, display_name(node, names).into())
    }
    /// `node` under `name`, a name made before (its [`NodeRef::named`] name) and shared.
    pub fn sharing(node: &Node, name: Arc<str>) -> NodeRef {
        NodeRef {
            guid: node.guid,
            kind: node.kind,
            name,
        }
    }
}

/// `"name" (0x...)`, escaped for a terminal, as routing text prints a node.
impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\"{}\" ({})",
            escape::for_terminal(&self.name),
            guid::text(self.guid)
        )
    }
}

/// A port of a node, as every report names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortRef {
    pub node: NodeRef,
    pub port: u8,
    /// The port's LID (a switch's LID for its external ports), 0 if none.
    pub lid: u16,
    /// The host a CA port belongs to (see [`crate::hosts`]), where known (untrusted text).
    pub host: Option<String>,
    /// Its rail, where known.
    pub rail: Option<u8>,
}

impl PortRef {
    /// Port `port` of `node`, the node under its node-name-map name if `names` has one.
    pub fn new(node: &Node, port: u8, names: Option<&NameMap>) -> PortRef {
        PortRef::with_lid(node, port, PortRef::lid_of(node, port), names)
    }
    /// The LID a report gives port `port` of `node`: the port's own, else the node's (a
    /// switch's for its external ports), else 0.
    pub fn lid_of(node: &Node, port: u8) -> u16 {
        node.port(port)
            .map(|p| p.lid)
            .filter(|&l| l != 0)
            .or_else(|| node.lid())
            .unwrap_or(0)
    }
    /// [`PortRef::new`] with the LID already known (a counter target's, its PMA's), so
    /// the port is not looked up again.
    pub fn with_lid(node: &Node, port: u8, lid: u16, names: Option<&NameMap>) -> PortRef {
        PortRef::on(NodeRef::named(node, names), port, lid)
    }
    /// Port `port` of `node` at `lid`, its host and rail not known (yet).
    pub fn on(node: NodeRef, port: u8, lid: u16) -> PortRef {
        PortRef {
            node,
            port,
            lid,
            host: None,
            rail: None,
        }
    }
    /// The port at `end` of `fabric`, under its own NodeDescription (as routing names it).
    pub fn at(fabric: &Fabric, end: super::End) -> PortRef {
        PortRef::new(fabric.node(end.node), end.port, None)
    }
    pub fn key(&self) -> PortKey {
        PortKey {
            guid: self.node.guid,
            port: self.port,
        }
    }
    /// `'name' (0x...) port N`, escaped for a terminal, as checks and counters print a port.
    pub fn report_text(&self) -> String {
        format!(
            "{} ({}) port {}",
            escape::quoted_for_terminal(&self.node.name),
            guid::text(self.node.guid),
            self.port
        )
    }
    /// `"name" (0x...)[N]`, escaped for a terminal, as routing text prints a port.
    pub fn route_text(&self) -> String {
        format!("{}[{}]", self.node, self.port)
    }
}

/// The flat record (`port_ref`), borrowed to write.
#[derive(Serialize)]
struct FlatOut<'a> {
    node: &'a str,
    #[serde(serialize_with = "guid::serialize")]
    node_guid: u64,
    kind: NodeKind,
    port: u8,
    lid: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rail: Option<u8>,
}

/// The flat record (`port_ref`), read.
#[derive(Deserialize)]
struct FlatIn {
    node: String,
    #[serde(deserialize_with = "guid::deserialize")]
    node_guid: u64,
    kind: NodeKind,
    port: u8,
    lid: u16,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    rail: Option<u8>,
}

impl Serialize for PortRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FlatOut {
            node: &self.node.name,
            node_guid: self.node.guid,
            kind: self.node.kind,
            port: self.port,
            lid: self.lid,
            host: self.host.as_deref(),
            rail: self.rail,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for PortRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PortRef, D::Error> {
        let f = FlatIn::deserialize(d)?;
        Ok(PortRef {
            node: NodeRef {
                guid: f.node_guid,
                kind: f.kind,
                name: f.node.into(),
            },
            port: f.port,
            lid: f.lid,
            host: f.host,
            rail: f.rail,
        })
    }
}

/// serde `with` for a routing report's port: `{"node": {guid, kind, name}, "port"}`. Read
/// back, the LID, host and rail (not in that shape) are 0 and none.
pub mod route_port {
    use super::{NodeRef, PortRef};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Out<'a> {
        node: &'a NodeRef,
        port: u8,
    }

    #[derive(Deserialize)]
    struct In {
        node: NodeRef,
        port: u8,
    }

    impl From<In> for PortRef {
        fn from(r: In) -> PortRef {
            PortRef::on(r.node, r.port, 0)
        }
    }

    pub fn serialize<S: Serializer>(p: &PortRef, s: S) -> Result<S::Ok, S::Error> {
        Out {
            node: &p.node,
            port: p.port,
        }
        .serialize(s)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PortRef, D::Error> {
        In::deserialize(d).map(PortRef::from)
    }

    /// The same for an optional port (`null` when absent).
    pub mod option {
        use super::{In, Out, PortRef};
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        pub fn serialize<S: Serializer>(p: &Option<PortRef>, s: S) -> Result<S::Ok, S::Error> {
            p.as_ref()
                .map(|p| Out {
                    node: &p.node,
                    port: p.port,
                })
                .serialize(s)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PortRef>, D::Error> {
            Ok(Option::<In>::deserialize(d)?.map(PortRef::from))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port() -> PortRef {
        PortRef {
            node: NodeRef {
                guid: 0x0002_c903_0000_0001,
                kind: NodeKind::Switch,
                name: "sw\x1b[2J\"1".into(),
            },
            port: 7,
            lid: 3,
            host: Some("gpu01".into()),
            rail: Some(2),
        }
    }

    #[test]
    fn the_flat_record_keeps_its_shape_and_reads_back() {
        let json = serde_json::to_string(&port()).unwrap();
        assert_eq!(
            json,
            r#"{"node":"sw\u001b[2J\"1","node_guid":"0x0002c90300000001","kind":"switch","port":7,"lid":3,"host":"gpu01","rail":2}"#
        );
        assert_eq!(serde_json::from_str::<PortRef>(&json).unwrap(), port());
        let bare = PortRef {
            host: None,
            rail: None,
            ..port()
        };
        let json = serde_json::to_string(&bare).unwrap();
        assert!(!json.contains("host") && !json.contains("rail"), "{json}");
    }

    #[test]
    fn the_route_shape_nests_the_node_and_drops_the_rest() {
        #[derive(Serialize, Deserialize)]
        struct Report {
            #[serde(with = "route_port")]
            at: PortRef,
            #[serde(with = "route_port::option")]
            peer: Option<PortRef>,
        }
        let json = serde_json::to_string(&Report {
            at: port(),
            peer: None,
        })
        .unwrap();
        assert_eq!(
            json,
            r#"{"at":{"node":{"guid":"0x0002c90300000001","kind":"switch","name":"sw\u001b[2J\"1"},"port":7},"peer":null}"#
        );
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back.at.key(), port().key());
        assert_eq!((back.at.lid, back.at.host, back.peer), (0, None, None));
    }

    #[test]
    fn text_forms_escape_the_name() {
        let p = port();
        assert!(!p.report_text().contains('\x1b'));
        assert!(!p.route_text().contains('\x1b'));
        assert!(p.route_text().ends_with("(0x0002c90300000001)[7]"));
        assert!(p.report_text().ends_with("(0x0002c90300000001) port 7"));
    }
}
