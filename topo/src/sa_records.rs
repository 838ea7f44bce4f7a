//! How each SA record reads (`ibscope sa`): its JSON object and its one line of text,
//! fabric strings escaped.

use crate::escape::for_terminal;
use crate::NodeKind;
use ibscope_mad::attr::link::sa_rate_gbps;
use ibscope_mad::attr::{mtu_bytes, PortInfo};
use ibscope_mad::attribute::{Attribute, SubnAdm};
use ibscope_mad::sa::{LinkRecord, NodeRecord, PathRecord, PortInfoRecord};
use serde_json::{json, Value};

/// An SA record `sa` lists: its JSON and its text line (already safe for a terminal).
pub trait Record: Attribute<Class = SubnAdm> + Default {
    fn to_json(&self) -> Value;
    fn line(&self) -> String;
    /// The records of a table as `sa` lists them, each read in the light of the others and
    /// of `context` (records asked for besides, not listed): by default each alone.
    fn table_view(records: &[Self], context: &[Self]) -> Vec<(Value, String)> {
        let _ = context;
        records.iter().map(|r| (r.to_json(), r.line())).collect()
    }
    /// The records to ask for besides a table's, for [`Record::table_view`]: each a
    /// template and its component mask (a SubnAdmGet each); by default none.
    fn context_wanted(records: &[Self]) -> Vec<(u64, Self)> {
        let _ = records;
        Vec::new()
    }
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
        port_json(self, None)
    }
    fn line(&self) -> String {
        port_line(self, None)
    }
    /// A switch's external ports (a LID with a port-0 record, here or in `context`) decode
    /// their speeds with port 0's capability masks ([`PortInfo::with_capabilities_of`]).
    fn table_view(records: &[Self], context: &[Self]) -> Vec<(Value, String)> {
        let port0 = |lid: u16| {
            records
                .iter()
                .chain(context)
                .find(|r| r.endport_lid == lid && r.port_num == 0)
                .map(|r| &r.port_info)
        };
        records
            .iter()
            .map(|r| {
                let p0 = (r.port_num != 0).then(|| port0(r.endport_lid)).flatten();
                (port_json(r, p0), port_line(r, p0))
            })
            .collect()
    }
    /// Port 0 of each LID whose external ports arrived without it and say nothing of their
    /// capabilities (CapabilityMask 0, as a switch's external ports): a template each,
    /// keyed by LID and port 0, to ask the SA for.
    fn context_wanted(records: &[Self]) -> Vec<(u64, Self)> {
        use ibscope_mad::sa::comp_mask::port_info_record::{ENDPORT_LID, PORT_NUM};
        let mut lids: Vec<u16> = records
            .iter()
            .filter(|r| r.port_num != 0 && r.port_info.capability_mask == 0)
            .map(|r| r.endport_lid)
            .filter(|&lid| {
                !records
                    .iter()
                    .any(|o| o.endport_lid == lid && o.port_num == 0)
            })
            .collect();
        lids.sort_unstable();
        lids.dedup();
        lids.into_iter()
            .map(|lid| {
                let template = PortInfoRecord {
                    endport_lid: lid,
                    port_num: 0,
                    ..Default::default()
                };
                (ENDPORT_LID | PORT_NUM, template)
            })
            .collect()
    }
}

/// A PortInfoRecord's JSON; `port0` is its switch's port 0 (for an external port).
fn port_json(r: &PortInfoRecord, port0: Option<&PortInfo>) -> Value {
    let pi = &r.port_info;
    let decoded = port0.map_or_else(|| pi.clone(), |p0| pi.with_capabilities_of(p0));
    json!({
        "endport_lid": r.endport_lid,
        "port_num": r.port_num,
        "lid": pi.lid,
        "sm_lid": pi.master_sm_lid,
        "state": pi.state().name(),
        "phys_state": pi.phys_state().name(),
        "width_active": pi.width_active().map(|w| w.name()),
        "speed_active": decoded.speed_active().map(|s| s.name()),
        "capability_mask": format!("{:#010x}", pi.capability_mask),
    })
}

/// A PortInfoRecord's line; `port0` as for [`port_json`].
fn port_line(r: &PortInfoRecord, port0: Option<&PortInfo>) -> String {
    let pi = &r.port_info;
    let decoded = port0.map_or_else(|| pi.clone(), |p0| pi.with_capabilities_of(p0));
    format!(
        "LID {:<5} port {:<3} {:<8} {:<9} {}",
        r.endport_lid,
        r.port_num,
        pi.state().name(),
        pi.phys_state().name(),
        ibscope_mad::attr::link::Rate::text(pi.width_active(), decoded.speed_active())
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_mad::attr::capability;

    fn record(lid: u16, port: u8, capability_mask: u32) -> PortInfoRecord {
        PortInfoRecord {
            endport_lid: lid,
            port_num: port,
            port_info: PortInfo {
                capability_mask,
                link_width_active: 2,
                link_speed_active: 4,
                link_speed_ext_active: 4,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// LID 7 a switch (port 0 with IsExtendedSpeedsSupported, port 3 reserved at 0), LID 9
    /// a CA port saying nothing of extended speeds: only the switch port reads HDR.
    #[test]
    fn a_switch_port_reads_its_speed_with_port_0() {
        let ext = capability::IS_EXTENDED_SPEEDS_SUPPORTED;
        let (port0, port3, ca) = (record(7, 0, ext), record(7, 3, 0), record(9, 1, 0x10));
        let alone = PortInfoRecord::table_view(&[port3.clone(), ca.clone()], &[]);
        assert_eq!(
            alone[0].0["speed_active"], "QDR",
            "no port 0 to say otherwise"
        );
        assert!(alone[0].1.ends_with("4xQDR"), "{}", alone[0].1);
        let wanted = PortInfoRecord::context_wanted(&[port3.clone(), ca.clone()]);
        assert_eq!(
            wanted.len(),
            1,
            "port 0 of LID 7 only (the CA port has capabilities)"
        );
        assert_eq!((wanted[0].1.endport_lid, wanted[0].1.port_num), (7, 0));
        let with_context =
            PortInfoRecord::table_view(&[port3.clone(), ca.clone()], std::slice::from_ref(&port0));
        assert_eq!(with_context[0].0["speed_active"], "HDR");
        assert_eq!(
            with_context[0].0["capability_mask"], "0x00000000",
            "as the SA said"
        );
        assert!(
            with_context[0].1.ends_with("4xHDR"),
            "{}",
            with_context[0].1
        );
        assert_eq!(with_context[1].0["speed_active"], "QDR");
        let in_table = PortInfoRecord::table_view(&[port0.clone(), port3.clone()], &[]);
        assert_eq!(in_table[1].0["speed_active"], "HDR");
        assert!(PortInfoRecord::context_wanted(&[port0, port3]).is_empty());
    }
}
