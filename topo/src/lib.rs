//! The InfiniBand fabric as a graph: the model, discovery, routing analysis, health checks
//! and exports. Knows nothing of terminals.

pub mod model;

pub use model::refs::{NodeRef, PortRef};

pub use model::{
    End, Fabric, FabricFile, FabricId, LinkKey, Node, NodeId, NodeKind, Port, PortKey,
};
pub mod changes;
pub mod counters;
pub mod diff;
pub mod discover;
pub mod escape;
pub mod export;
mod finding_kinds;
mod finding_text;
pub mod findings;
pub mod gen;
pub mod health;
pub mod health_text;
pub mod hosts;
pub mod ibnd;
mod ibnd_ports;
mod ibnd_text;
pub mod input;
pub mod journal;
pub mod m_key;
pub mod master_sm;
pub mod namemap;
pub mod narrow_links;
pub mod parse_error;
pub mod plan;
pub mod port_apply;
pub mod port_toggle;
pub mod query_json;
pub mod resolve;
pub mod responder;
pub mod routing;
pub mod sa_records;
pub mod sa_tables;
pub mod subnet;
#[cfg(test)]
mod test_fixtures;
