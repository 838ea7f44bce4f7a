//! How each SA record reads (`ibscope sa`): its JSON object and its one line of text,
//! fabric strings escaped.

use crate::escape::for_terminal;
use crate::NodeKind;
use ibscope_mad::attr::link::sa_rate_gbps;
use ibscope_mad::attr::mtu_bytes;
use ibscope_mad::attribute::{Attribute, SubnAdm};
use ibscope_mad::sa::{LinkRecord, NodeRecord, PathRecord, PortInfoRecord};
use serde_json::{json, Value};

/// An SA record `sa` lists: its JSON and its text line (already safe for a terminal).
pub trait Record: Attribute<Class = SubnAdm> + Default {
    fn to_json(&self) -> Value;
    fn line(&self) -> String;
}

impl Record for NodeRecord {
    fn to_json(&self) -> Value {
        node_json(self)
    }
    fn line(&self) -> String {
        node_line(&node_json(self))
    }
}

impl Record for PathRecord {
    fn to_json(&self) -> Value {
        path_json(self)
    }
    fn line(&self) -> String {
        let rate = sa_rate_gbps(self.rate)
            .map_or_else(|| format!("code {}", self.rate), |g| format!("{g} Gb/s"));
        format!(
            "LID {:<5} -> LID {:<5} SL {:<2} MTU {:<5} rate {rate}  P_Key {:#06x}  hop limit {}",
            self.slid,
            self.dlid,
            self.sl,
            mtu_bytes(self.mtu).map_or_else(|| format!("code {}", self.mtu), |b| b.to_string()),
            self.p_key,
            self.hop_limit
        )
    }
}

impl Record for LinkRecord {
    fn to_json(&self) -> Value {
        json!({
            "from_lid": self.from_lid,
            "from_port": self.from_port,
            "to_lid": self.to_lid,
            "to_port": self.to_port,
        })
    }
    fn line(&self) -> String {
        format!(
            "LID {:<5} port {:<3} -> LID {:<5} port {}",
            self.from_lid, self.from_port, self.to_lid, self.to_port
        )
    }
}

impl Record for PortInfoRecord {
    fn to_json(&self) -> Value {
        let pi = &self.port_info;
        json!({
            "endport_lid": self.endport_lid,
            "port_num": self.port_num,
            "lid": pi.lid,
            "sm_lid": pi.master_sm_lid,
            "state": pi.state().name(),
            "phys_state": pi.phys_state().name(),
            "width_active": pi.width_active().map(|w| w.name()),
            "speed_active": pi.speed_active().map(|s| s.name()),
            "capability_mask": format!("{:#010x}", pi.capability_mask),
        })
    }
    fn line(&self) -> String {
        let pi = &self.port_info;
        format!(
            "LID {:<5} port {:<3} {:<8} {:<9} {}",
            self.endport_lid,
            self.port_num,
            pi.state().name(),
            pi.phys_state().name(),
            ibscope_mad::attr::link::Rate::text(pi.width_active(), pi.speed_active())
        )
    }
}

pub fn node_json(r: &NodeRecord) -> Value {
    let ni = &r.node_info;
    let description = r.node_description.text();
    json!({
        "lid": r.lid,
        "node_type": ni.kind(),
        "node_type_code": ni.node_type,
        // As everywhere in ibscope: "ca", "switch", "router", "aggregation-node".
        "kind": NodeKind::classify(ni.kind(), &description).map(NodeKind::as_str),
        "num_ports": ni.num_ports,
        "system_image_guid": format!("{:#018x}", ni.system_image_guid),
        "node_guid": format!("{:#018x}", ni.node_guid),
        "port_guid": format!("{:#018x}", ni.port_guid),
        "partition_cap": ni.partition_cap,
        "device_id": ni.device_id,
        "revision": ni.revision,
        "local_port_num": ni.local_port_num,
        "vendor_id": ni.vendor_id,
        "node_description": description,
    })
}

pub fn node_line(v: &Value) -> String {
    format!(
        "LID {:<5} {:<6} {} port {} ({} ports) {}",
        v["lid"],
        v["kind"].as_str().unwrap_or("?"),
        v["port_guid"].as_str().unwrap_or("?"),
        v["local_port_num"],
        v["num_ports"],
        for_terminal(v["node_description"].as_str().unwrap_or(""))
    )
}

/// A GID in IPv6 notation, as saquery prints it (`fe80::20:1`).
fn gid_text(g: &[u8; 16]) -> String {
    std::net::Ipv6Addr::from(*g).to_string()
}

pub fn path_json(p: &PathRecord) -> Value {
    json!({
        "service_id": format!("{:#018x}", p.service_id),
        "dgid": gid_text(&p.dgid),
        "sgid": gid_text(&p.sgid),
        "dlid": p.dlid,
        "slid": p.slid,
        "raw_traffic": p.raw_traffic,
        "flow_label": p.flow_label,
        "hop_limit": p.hop_limit,
        "traffic_class": p.traffic_class,
        "reversible": p.reversible,
        "numb_path": p.numb_path,
        "p_key": format!("{:#06x}", p.p_key),
        "qos_class": p.qos_class,
        "sl": p.sl,
        "mtu_selector": p.mtu_selector,
        "mtu": p.mtu,
        "mtu_bytes": mtu_bytes(p.mtu),
        "rate_selector": p.rate_selector,
        "rate": p.rate,
        "rate_gbps": sa_rate_gbps(p.rate),
        "packet_life_time_selector": p.packet_life_time_selector,
        "packet_life_time": p.packet_life_time,
        "preference": p.preference,
    })
}
