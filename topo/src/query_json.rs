//! How `ibscope query --json` gives an attribute: its coded fields by name (codes kept
//! under `raw`), 64-bit identifiers as hex text, and PortInfo's fields a person reads first
//! decoded.

use ibscope_mad::attr::link::Width;
use ibscope_mad::attr::{
    mtu_bytes, LinkDownDefaultState, NodeType, PhysState, PortInfo, PortState, VlCount,
};
use serde_json::{json, Value};

/// Where the JSON keeps the code of every field it gives by name.
pub const RAW: &str = "raw";

/// A field whose value is a code, and its name or meaning.
type Namer = fn(u8) -> Value;

/// The coded fields of NodeInfo and PortInfo (a bit mask stays a number; `decoded` names
/// its bits): each given by name, its code kept under `raw`, so scripts read "Active"
/// and comparisons with smpquery's codes still can.
const CODED_FIELDS: &[(&str, Namer)] = &[
    ("node_type", |c| json!(NodeType::from_code(c))),
    ("port_state", |c| json!(PortState::from_code(c))),
    ("port_phys_state", |c| json!(PhysState::from_code(c))),
    ("link_down_default_state", |c| {
        json!(LinkDownDefaultState::from_code(c))
    }),
    ("link_width_active", |c| {
        Width::from_active(c).map_or(Value::Null, |w| json!(w))
    }),
    ("neighbor_mtu", |c| json!(mtu_bytes(c))),
    ("mtu_cap", |c| json!(mtu_bytes(c))),
    ("vl_cap", |c| json!(VlCount::from_code(c))),
    ("operational_vls", |c| json!(VlCount::from_code(c))),
];

/// 64-bit fields that are identifiers, not quantities.
const HEX_FIELDS: &[&str] = &["gid_prefix"];

/// Replace every coded field of `value` by its name and keep the codes under [`RAW`].
pub fn name_coded_fields(mut value: Value) -> Value {
    let Value::Object(m) = &mut value else {
        return value;
    };
    let mut raw = serde_json::Map::new();
    for (key, name) in CODED_FIELDS {
        let Some(code) = m.get(*key).and_then(Value::as_u64) else {
            continue;
        };
        let Ok(code) = u8::try_from(code) else {
            continue;
        };
        raw.insert((*key).to_string(), json!(code));
        m.insert((*key).to_string(), name(code));
    }
    if !raw.is_empty() {
        m.insert(RAW.into(), Value::Object(raw));
    }
    // 64-bit identifiers as hex text, as smpquery prints them: a JSON number above 2^53
    // is rounded by many readers (jq 1.6).
    for key in HEX_FIELDS {
        if let Some(n) = m.get(*key).and_then(Value::as_u64) {
            m.insert((*key).to_string(), json!(format!("{n:#018x}")));
        }
    }
    value
}

/// The fields a person reads first, decoded from their codes.
pub fn decoded_port_info(p: &PortInfo) -> Value {
    let width = |w: Option<ibscope_mad::attr::link::Width>| w.map(|w| w.to_string());
    let speed = |s: Option<ibscope_mad::attr::link::Speed>| s.map(|s| s.to_string());
    json!({
        "state": p.state(),
        "phys_state": p.phys_state(),
        "width_active": width(p.width_active()),
        "widths_supported": p.widths_supported().iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        "widths_enabled": p.widths_enabled().iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        "speed_active": speed(p.speed_active()),
        "speeds_supported": p.speeds_supported().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        "speeds_enabled": p.speeds_enabled().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    })
}
