//! Everything ibscope writes a fabric out as, in one place: the JSON snapshot
//! ([`json`]), Graphviz DOT ([`dot`]), the ibnetdiscover text ([`ibnd`]) and the
//! Prometheus text exposition ([`prometheus`]). Untrusted strings (NodeDescriptions, names
//! from a node-name map) are escaped for each format with [`crate::escape`].

pub mod counters_csv;
pub mod dot;
pub mod ibnd;
pub mod json;
pub mod prometheus;
mod prometheus_cables;
mod prometheus_labels;
mod prometheus_text;
