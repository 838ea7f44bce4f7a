//! What a CA's NodeDescription says about its host and device.
//!
//! rdma-ndd (rdma-core) writes every HCA's NodeDescription as `"%h %d"`: the hostname, a
//! space, the RDMA device name (`gpu-0042 mlx5_3`). Before it runs, or where it does not,
//! the description is the firmware's (`MT4129 ConnectX7   Mellanox Technologies`) and
//! says nothing of the host: such CAs are grouped by their SystemImageGUID instead.
//!
//! A device's rail is its index: `mlx5_3` is rail 3 (`mlx4_1`, `hfi1_0`, `irdma2` alike:
//! the decimal number the name ends with). Two kinds of names carry no such index:
//! - `mlx5_bond_0`: a bonded (RoCE LAG) device, two ports under one name. It belongs to
//!   no single rail: no rail.
//! - `ibp12s0`, `ibP1p12s0f1`: names by PCI location (rdma-core's udev renaming policy).
//!   The numbers are a bus address, not an order: these devices are ranked by their PCI
//!   address within their host, and each address takes the rank most hosts give it
//!   (so one host missing a device does not shift its others). See [`PciName`].

use std::cmp::Ordering;

/// A NodeDescription split as rdma-ndd writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Described<'a> {
    /// `"host device"`.
    HostDevice { host: &'a str, device: &'a str },
    /// One word: taken as the host's name, device unknown.
    HostOnly(&'a str),
    /// Anything else (a firmware default, free text): says nothing of the host.
    Other,
}

/// A word that can be an RDMA device name: a letter first, then letters, digits, `_`, `-`.
fn is_device_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A word that can be a hostname (RFC 1123 labels, dots between them).
fn is_host_name(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= 253
        && word.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// Split a NodeDescription (or a node-name-map name) into host and device.
pub fn describe(description: &str) -> Described<'_> {
    let mut words = description.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some(host), Some(device), None) if is_host_name(host) && is_device_name(device) => {
            Described::HostDevice { host, device }
        }
        (Some(host), None, None) if is_host_name(host) => Described::HostOnly(host),
        _ => Described::Other,
    }
}

/// How a device name gives its rail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceIndex {
    /// The number the name ends with (`mlx5_3`: 3).
    Index(u8),
    /// A PCI-location name: ranked within its host.
    Pci(PciName),
    /// A bonded device or a name without an index: no rail.
    None,
}

/// The numbers of a PCI-location device name (`ibP1p12s0f1`: domain 1, bus 12, slot 0,
/// function 1), compared in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciName {
    pub domain: u32,
    pub bus: u32,
    pub slot: u32,
    pub function: u32,
}

impl PciName {
    /// `ib[P<domain>]p<bus>s<slot>[f<function>]`, as rdma-core's udev rules name IB devices
    /// by PCI location; `None` for anything else.
    pub fn parse(device: &str) -> Option<PciName> {
        let rest = device.strip_prefix("ib")?;
        let (domain, rest) = match rest.strip_prefix('P') {
            Some(r) => number(r)?,
            None => (0, rest),
        };
        let (bus, rest) = number(rest.strip_prefix('p')?)?;
        let (slot, rest) = number(rest.strip_prefix('s')?)?;
        let (function, rest) = match rest.strip_prefix('f') {
            Some(r) => number(r)?,
            None => (0, rest),
        };
        rest.is_empty().then_some(PciName {
            domain,
            bus,
            slot,
            function,
        })
    }
}

/// A leading decimal number and the rest.
fn number(text: &str) -> Option<(u32, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    Some((text[..end].parse().ok()?, &text[end..]))
}

/// What a device name says of its rail.
pub fn device_index(device: &str) -> DeviceIndex {
    if device.contains("_bond") {
        return DeviceIndex::None;
    }
    if let Some(pci) = PciName::parse(device) {
        return DeviceIndex::Pci(pci);
    }
    let digits = device.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits == device.len() {
        return DeviceIndex::None;
    }
    device[device.len() - digits..]
        .parse::<u8>()
        .map_or(DeviceIndex::None, DeviceIndex::Index)
}

/// Natural order of host names: digit runs compare as numbers (`gpu-9` before `gpu-10`).
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (trim_zeros(&a[..da]), trim_zeros(&b[..db]));
                let by_value = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
                // Equal values: the shorter (less padded) first, so the order is total.
                match by_value.then(da.cmp(&db)) {
                    Ordering::Equal => {}
                    other => return other,
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => match x.cmp(y) {
                Ordering::Equal => {
                    a = &a[1..];
                    b = &b[1..];
                }
                other => return other,
            },
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let z = digits.iter().take_while(|&&c| c == b'0').count();
    &digits[z..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_ndd_descriptions() {
        assert_eq!(
            describe("gpu-0042 mlx5_3"),
            Described::HostDevice {
                host: "gpu-0042",
                device: "mlx5_3"
            }
        );
        assert_eq!(
            describe("a08-p1-dgx-04-c17 HCA-6"),
            Described::HostDevice {
                host: "a08-p1-dgx-04-c17",
                device: "HCA-6"
            }
        );
        assert_eq!(
            describe("node7.cluster.example mlx5_0"),
            Described::HostDevice {
                host: "node7.cluster.example",
                device: "mlx5_0"
            }
        );
        assert_eq!(describe("Hca1"), Described::HostOnly("Hca1"));
        assert_eq!(
            describe("MT4129 ConnectX7   Mellanox Technologies"),
            Described::Other
        );
        assert_eq!(
            describe("Mellanox Technologies Aggregation Node"),
            Described::Other
        );
        assert_eq!(describe("MF0;leaf-01:MQM9701/U1"), Described::Other);
        assert_eq!(describe("gpu-1 \u{1b}[31m"), Described::Other);
        assert_eq!(describe(""), Described::Other);
    }

    #[test]
    fn device_indexes() {
        assert_eq!(device_index("mlx5_3"), DeviceIndex::Index(3));
        assert_eq!(device_index("mlx5_12"), DeviceIndex::Index(12));
        assert_eq!(device_index("mlx4_0"), DeviceIndex::Index(0));
        assert_eq!(device_index("hfi1_1"), DeviceIndex::Index(1));
        assert_eq!(device_index("irdma2"), DeviceIndex::Index(2));
        assert_eq!(device_index("HCA-6"), DeviceIndex::Index(6));
        assert_eq!(device_index("mlx5_bond_0"), DeviceIndex::None);
        assert_eq!(device_index("mlx5_999"), DeviceIndex::None);
        assert_eq!(device_index("ConnectX"), DeviceIndex::None);
        assert_eq!(
            device_index("ibp12s0"),
            DeviceIndex::Pci(PciName {
                domain: 0,
                bus: 12,
                slot: 0,
                function: 0
            })
        );
        assert_eq!(
            device_index("ibP1p12s0f1"),
            DeviceIndex::Pci(PciName {
                domain: 1,
                bus: 12,
                slot: 0,
                function: 1
            })
        );
        // Not the PCI pattern: the trailing number.
        assert_eq!(device_index("ibp12x0"), DeviceIndex::Index(0));
        assert!(PciName::parse("ibp12s0") < PciName::parse("ibp12s0f1"));
        assert!(PciName::parse("ibp9s0") < PciName::parse("ibp12s0"));
    }

    #[test]
    fn natural_order() {
        let mut v = vec![
            "gpu-10", "gpu-9", "gpu-09", "a", "gpu-100", "gpu-1b", "gpu-1a",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            ["a", "gpu-1a", "gpu-1b", "gpu-9", "gpu-09", "gpu-10", "gpu-100"]
        );
    }
}
