//! The label sets of a fabric's Prometheus page: the `fabric` label, each node's and each
//! port's labels (host, rail and the link's far end among them), made once per discovery
//! and kept for every page until the next; and which ports have series at all.

use std::fmt::Write;

use ibscope_mad::codes::guid;

use crate::counters::Sample;
use crate::escape::{self, for_prometheus_label};
use crate::hosts::Hosts;
use crate::model::{End, Fabric, Node, Port, PortKey};
use crate::namemap::{display_name, NameMap};

/// `fabric="NAME"`: the label every series of a page starts with.
pub fn fabric_label(name: &str) -> String {
    format!("fabric=\"{}\"", for_prometheus_label(name))
}

/// Which ports have series on the fabric page (and have their counters read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortFilter {
    pub switches_only: bool,
    pub active_only: bool,
}

impl PortFilter {
    pub fn keeps(&self, node: &Node, port: u8) -> bool {
        if self.switches_only && !node.is_switch() {
            return false;
        }
        if self.active_only {
            // A switch's port 0 has no physical link of its own: its logical state counts.
            let up =
                |p: &Port| p.is_active() && (p.is_phys_up() || (node.is_switch() && p.number == 0));
            return node.port(port).is_some_and(up);
        }
        true
    }
}

/// Appends `prefix` (the fabric label) and a node's own labels to `s`.
fn push_node_labels(s: &mut String, prefix: &str, node: &Node, names: Option<&NameMap>) {
    s.push_str(prefix);
    s.push_str(",node_guid=\"");
    push_guid(s, node.guid);
    s.push_str("\",node_name=\"");
    escape::push_prometheus_label(s, display_name(node, names));
    s.push_str("\",kind=\"");
    s.push_str(node.kind.as_str());
    s.push('"');
}

/// A GUID as `{:#018x}` writes it, without going through `fmt` (twice per port).
pub(crate) fn push_guid(s: &mut String, guid: u64) {
    s.push_str(guid::text_in(guid, &mut [0; 18]));
}

/// Appends the label set of one port to `s`: `node` (the fabric label and the node's own,
/// from [`push_node_labels`]), the port, its host and rail when it is a host's HCA port,
/// and its link's far end (empty values when none).
pub(crate) fn push_port_labels(
    s: &mut String,
    node: &str,
    fabric: &Fabric,
    names: Option<&NameMap>,
    hosts: &Hosts,
    end: End,
) {
    let mut number = itoa::Buffer::new();
    s.push_str(node);
    s.push_str(",port=\"");
    s.push_str(number.format(end.port));
    s.push('"');
    if let Some((host, rail)) = hosts.label(fabric.node(end.node).port_key(end.port)) {
        s.push_str(",host=\"");
        escape::push_prometheus_label(s, host);
        s.push('"');
        if let Some(rail) = rail {
            s.push_str(",rail=\"");
            s.push_str(number.format(rail));
            s.push('"');
        }
    }
    match fabric.peer(end) {
        Some(r) => {
            let rn = fabric.node(r.node);
            s.push_str(",remote_guid=\"");
            push_guid(s, rn.guid);
            s.push_str("\",remote_name=\"");
            escape::push_prometheus_label(s, display_name(rn, names));
            s.push_str("\",remote_port=\"");
            s.push_str(number.format(r.port));
            s.push('"');
        }
        None => s.push_str(",remote_guid=\"\",remote_name=\"\",remote_port=\"\""),
    }
}

/// The ports the model describes (every switch port 1..N and every CA or router port,
/// less what the filter leaves out), each with its label set; then rows of swept ports
/// the model does not list. All label sets are in one string, one after the other, so
/// the page's many passes over them read memory in order.
pub(crate) struct PortLabels {
    pub(crate) text: String,
    /// Where each row's labels are in `text`.
    pub(crate) spans: Vec<(usize, usize)>,
    /// The model's ports: the first rows.
    pub(crate) ends: Vec<(End, PortKey)>,
    pub(crate) by_key: foldhash::HashMap<PortKey, usize>,
    /// The rows of swept ports the model does not list, made by the pages so far.
    pub(crate) unlisted: foldhash::HashMap<PortKey, usize>,
}

/// The label sets of a fabric's nodes and ports on its page, made once per discovery (with
/// one fabric name, name map, host grouping and filter) and kept for every page until the
/// next ([`super::prometheus::write_fabric_page`]): at 100,000 HCAs they are 280 MB of
/// text, and making them took about a tenth of the render's time.
pub struct PageLabels {
    pub(crate) prefix: String,
    pub(crate) labels: PortLabels,
    pub(crate) nodes: NodeLabels,
}

/// Every node's label sets on the page: its own (the scrape-error families') and, with its
/// facts, those of `ibscope_node_info`.
pub(crate) struct NodeLabels {
    pub(crate) guids: Vec<u64>,
    pub(crate) own: Vec<String>,
    pub(crate) info: Vec<String>,
}

impl NodeLabels {
    pub(crate) fn new(prefix: &str, fabric: &Fabric, names: Option<&NameMap>) -> NodeLabels {
        let (mut guids, mut own, mut info) = (Vec::new(), Vec::new(), Vec::new());
        for (_, node) in fabric.nodes() {
            let mut base = String::new();
            push_node_labels(&mut base, prefix, node, names);
            let facts = format!(
                "{base},description=\"{}\",lid=\"{}\",num_ports=\"{}\",vendor_id=\"{:#08x}\",device_id=\"{:#06x}\",system_image_guid=\"{:#018x}\"",
                escape::for_prometheus_label(&node.description),
                node.lid().unwrap_or(0),
                node.num_ports,
                node.vendor_id,
                node.device_id,
                node.system_image_guid
            );
            guids.push(node.guid);
            own.push(base);
            info.push(facts);
        }
        NodeLabels { guids, own, info }
    }
}

impl PageLabels {
    pub fn new(
        fabric: &Fabric,
        names: Option<&NameMap>,
        hosts: &Hosts,
        fabric_name: &str,
        filter: PortFilter,
    ) -> PageLabels {
        let prefix = fabric_label(fabric_name);
        let labels = PortLabels::new(&prefix, fabric, names, hosts, filter);
        let nodes = NodeLabels::new(&prefix, fabric, names);
        PageLabels {
            prefix,
            labels,
            nodes,
        }
    }
}

impl PortLabels {
    pub(crate) fn new(
        prefix: &str,
        fabric: &Fabric,
        names: Option<&NameMap>,
        hosts: &Hosts,
        filter: PortFilter,
    ) -> PortLabels {
        // Most label sets are 200-250 bytes: one reservation instead of a dozen copies.
        let ports: usize = fabric.nodes().map(|(_, n)| n.ports.len()).sum();
        let mut labels = PortLabels {
            text: String::with_capacity(ports * 256),
            spans: Vec::new(),
            ends: Vec::new(),
            by_key: foldhash::HashMap::default(),
            unlisted: foldhash::HashMap::default(),
        };
        // A node's own labels, the same on each of its ports (a switch has dozens).
        let mut node_part = String::new();
        for (id, node) in fabric.nodes() {
            node_part.clear();
            for p in &node.ports {
                if (node.is_switch() && p.number == 0) || !filter.keeps(node, p.number) {
                    continue;
                }
                if node_part.is_empty() {
                    push_node_labels(&mut node_part, prefix, node, names);
                }
                let end = End {
                    node: id,
                    port: p.number,
                };
                let start = labels.text.len();
                push_port_labels(&mut labels.text, &node_part, fabric, names, hosts, end);
                labels.spans.push((start, labels.text.len()));
                labels.ends.push((end, node.port_key(p.number)));
            }
        }
        labels.by_key = labels
            .ends
            .iter()
            .enumerate()
            .map(|(i, &(_, key))| (key, i))
            .collect();
        labels
    }

    pub(crate) fn row(&self, row: usize) -> &str {
        let (start, end) = self.spans[row];
        &self.text[start..end]
    }

    pub(crate) fn row_of(&self, key: PortKey) -> Option<usize> {
        self.by_key.get(&key).copied()
    }

    /// The row of each swept port, in the sample's order. A port the model does not list
    /// (a switch's port 0) gets a row of its own.
    pub(crate) fn add_sample(
        &mut self,
        prefix: &str,
        fabric: &Fabric,
        names: Option<&NameMap>,
        hosts: &Hosts,
        sample: &Sample,
    ) -> Vec<usize> {
        let mut row_of = |key: PortKey, guid: u64, port: u8| {
            if let Some(&row) = self.by_key.get(&key).or_else(|| self.unlisted.get(&key)) {
                return row;
            }
            let start = self.text.len();
            match fabric.node_by_guid(guid) {
                Some(node) => {
                    let mut node_part = String::new();
                    push_node_labels(&mut node_part, prefix, fabric.node(node), names);
                    let end = End { node, port };
                    push_port_labels(&mut self.text, &node_part, fabric, names, hosts, end);
                }
                None => {
                    let _ = write!(
                        self.text,
                        "{prefix},node_guid=\"{guid:#018x}\",port=\"{port}\""
                    );
                }
            }
            self.spans.push((start, self.text.len()));
            // Not in `by_key`: a link's end looked up by key is a listed port.
            self.unlisted.insert(key, self.spans.len() - 1);
            self.spans.len() - 1
        };
        (sample.ports.iter())
            .map(|p| row_of(p.at.key(), p.at.node.guid, p.at.port))
            .collect()
    }
}
