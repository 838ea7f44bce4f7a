//! What `/` finds: the text typed, and what it names in the fabric as topo's resolver
//! reads it; each view says which of its rows show it (`ViewParts::matches`).

use ibscope_topo::resolve::{resolve, NameMatch};
use ibscope_topo::{Fabric, PortKey};

/// What the find prompt holds.
#[derive(Debug, Default)]
pub struct FindState {
    pub text: String,
    /// Keys go into `text` (`/` until Enter or Esc).
    pub editing: bool,
}

/// A text to find, as the rows of a view are matched against it.
#[derive(Debug)]
pub struct Query {
    /// Lowercase: a row shows it if any of its names holds it.
    pub text: String,
    /// The node the text names in the fabric (topo's resolver), and the port if it names
    /// one.
    pub node: Option<u64>,
    pub port: Option<u8>,
}

impl Query {
    pub fn new(
        text: &str,
        fabric: Option<&Fabric>,
        names: Option<&ibscope_topo::namemap::NameMap>,
    ) -> Query {
        let target = fabric.and_then(|f| {
            let t = resolve(f, names, text, NameMatch::ExactOrPart).ok()?;
            Some((f.node(t.node()).guid, t.named_port(f)))
        });
        Query {
            text: text.trim().to_lowercase(),
            node: target.map(|t| t.0),
            port: target.and_then(|t| t.1),
        }
    }
    /// The port `key` is what the text names (its node, or that port of it).
    pub fn names_port(&self, key: PortKey) -> bool {
        self.node == Some(key.guid) && self.port.map_or(true, |p| p == key.port)
    }
    /// `shown`, a row's names as the view shows them, holds the text.
    pub fn in_text(&self, shown: &str) -> bool {
        !self.text.is_empty() && shown.to_lowercase().contains(&self.text)
    }
}

/// The names a port is shown under, for [`Query::in_text`]: `name[port]`, the node's
/// NodeDescription where a name map renames it, its GUID.
pub fn port_names(
    fabric: &Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    key: PortKey,
) -> String {
    let Some(id) = fabric.node_by_guid(key.guid) else {
        return format!("{:#018x}", key.guid);
    };
    let node = fabric.node(id);
    let name = ibscope_topo::namemap::display_name(node, names);
    format!(
        "{name}[{}] {} {:#018x} lid {}",
        key.port,
        node.description,
        key.guid,
        ibscope_topo::PortRef::lid_of(node, key.port)
    )
}
