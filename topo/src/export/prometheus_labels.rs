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
fn push_port_labels(
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

/// The label sets of a fabric's page, made once per discovery (with one fabric name, name
/// map, host grouping and filter) and kept for every page until the next
/// ([`super::prometheus::write_fabric_page`]): at 100,000 HCAs they are 280 MB of text, and
/// making them took about a tenth of the render's time.
///
/// A row per port: first the ports the model describes (every switch port 1..N and every
/// CA or router port the filter keeps), then swept ports it does not list (a switch's port
/// 0) as pages meet them. The rows are in one string, one after the other, so the page's
/// many passes over them read memory in order.
pub struct PageLabels {
    /// `fabric="NAME"`, which every series starts with.
    pub(crate) prefix: String,
    text: String,
    /// Where each row's labels are in `text`.
    spans: Vec<(usize, usize)>,
    /// The model's ports: the first rows.
    pub(crate) ends: Vec<End>,
    by_key: foldhash::HashMap<PortKey, usize>,
    /// The rows of swept ports the model does not list.
    unlisted: foldhash::HashMap<PortKey, usize>,
    /// Each node's GUID, own labels (the scrape-error families') and, with its facts,
    /// those of `ibscope_node_info`.
    pub(crate) nodes: Vec<(u64, String, String)>,
}

impl PageLabels {
    pub fn new(
        fabric: &Fabric,
        names: Option<&NameMap>,
        hosts: &Hosts,
        fabric_name: &str,
        filter: PortFilter,
    ) -> PageLabels {
        // Most label sets are 200-250 bytes: one reservation instead of a dozen copies.
        let ports: usize = fabric.nodes().map(|(_, n)| n.ports.len()).sum();
        let mut labels = PageLabels {
            prefix: fabric_label(fabric_name),
            text: String::with_capacity(ports * 256),
            spans: Vec::new(),
            ends: Vec::new(),
            by_key: foldhash::HashMap::default(),
            unlisted: foldhash::HashMap::default(),
            nodes: Vec::with_capacity(fabric.node_count()),
        };
        for (id, node) in fabric.nodes() {
            // A node's own labels, the same on each of its ports (a switch has dozens).
            let mut own = String::new();
            push_node_labels(&mut own, &labels.prefix, node, names);
            for p in &node.ports {
                if (node.is_switch() && p.number == 0) || !filter.keeps(node, p.number) {
                    continue;
                }
                let end = End {
                    node: id,
                    port: p.number,
                };
                let start = labels.text.len();
                push_port_labels(&mut labels.text, &own, fabric, names, hosts, end);
                labels.spans.push((start, labels.text.len()));
                labels
                    .by_key
                    .insert(node.port_key(p.number), labels.ends.len());
                labels.ends.push(end);
            }
            let info = format!(
                "{own},description=\"{}\",lid=\"{}\",num_ports=\"{}\",vendor_id=\"{:#08x}\",device_id=\"{:#06x}\",system_image_guid=\"{:#018x}\"",
                escape::for_prometheus_label(&node.description),
                node.lid().unwrap_or(0),
                node.num_ports,
                node.vendor_id,
                node.device_id,
                node.system_image_guid
            );
            labels.nodes.push((node.guid, own, info));
        }
        labels
    }

    pub(crate) fn row(&self, row: usize) -> &str {
        let (start, end) = self.spans[row];
        &self.text[start..end]
    }

    /// The row of a port the model lists.
    pub(crate) fn row_of(&self, key: PortKey) -> Option<usize> {
        self.by_key.get(&key).copied()
    }

    /// The row of each swept port, in the sample's order. A port the model does not list
    /// gets a row of its own.
    pub(crate) fn add_sample(
        &mut self,
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
                    let mut own = String::new();
                    push_node_labels(&mut own, &self.prefix, fabric.node(node), names);
                    let end = End { node, port };
                    push_port_labels(&mut self.text, &own, fabric, names, hosts, end);
                }
                None => {
                    let prefix = &self.prefix;
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
