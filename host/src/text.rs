//! The host report's lines and table rows as `ibscope host` prints them, device and
//! interface names escaped for the terminal.

use std::collections::BTreeMap;

use ibscope_topo::escape::for_terminal;

use crate::model::{self, Device, DevicePort, Driver, GpuNear, LinkLayer, LocalHost, PeerMemory};

/// `mlx5_core 24.10-1.1.4` (all), or each driver with its devices.
pub fn drivers_line(host: &LocalHost) -> String {
    let kernel = host.kernel.as_deref().unwrap_or("?");
    let mut drivers: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for d in &host.devices {
        let name = match &d.driver {
            Some(Driver {
                module,
                version: Some(v),
            }) => format!("{module} {v}"),
            Some(Driver {
                module,
                version: None,
            }) => format!("{module} in-tree (kernel {kernel})"),
            None => "unknown".into(),
        };
        drivers.entry(name).or_default().push(&d.name);
    }
    drivers
        .iter()
        .map(|(driver, devices)| match drivers.len() {
            1 => for_terminal(driver),
            _ => format!("{} ({})", for_terminal(driver), devices.join(", ")),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn gpus_line(host: &LocalHost) -> String {
    let peer = match &host.peer_memory {
        PeerMemory::Loaded { module, version } => format!(
            "{module} {}",
            version
                .as_deref()
                .map_or("(no version)".into(), for_terminal)
        ),
        PeerMemory::Missing => "no peer-memory module loaded".into(),
        PeerMemory::Unknown => "module list unreadable".into(),
    };
    if host.gpus.is_empty() {
        return format!("NVIDIA GPUs: none; GPUDirect RDMA: {peer}");
    }
    let mut ids: Vec<String> = host
        .gpus
        .iter()
        .map(|g| g.device_id.map_or("?".into(), |id| format!("{id:#06x}")))
        .collect();
    ids.dedup();
    format!(
        "NVIDIA GPUs: {} (device {}); GPUDirect RDMA: {peer}",
        host.gpus.len(),
        ids.join(", ")
    )
}

pub fn device_rows(d: &Device, rows: &mut Vec<Vec<String>>) {
    let firmware = d.fw_ver.as_deref().map_or("?".into(), for_terminal);
    let pcie = d
        .pci
        .as_ref()
        .map_or("-".into(), |pci| match (pci.link, pci.capability()) {
            (Some(now), Some(cap)) if now.gbps() + 0.5 < cap.gbps() => {
                format!("{} of {}", now.text(), cap.text())
            }
            (Some(now), _) => now.text(),
            (None, _) => "down?".into(),
        });
    let numa = d
        .pci
        .as_ref()
        .and_then(|p| p.numa_node)
        .map_or("-".into(), |n| n.to_string());
    let mut device_cells = vec![firmware, pcie, numa, gpus_near(&d.gpus_near)];
    if d.ports.is_empty() {
        let mut row = vec![for_terminal(&d.name)];
        row.extend(["-", "-", "no ports", "", "", "", ""].map(String::from));
        row.append(&mut device_cells);
        rows.push(row);
    }
    for (i, p) in d.ports.iter().enumerate() {
        let name = if i == 0 {
            for_terminal(&d.name)
        } else {
            String::new()
        };
        let mut row = vec![name];
        row.extend(port_cells(p));
        row.extend(if i == 0 {
            std::mem::take(&mut device_cells)
        } else {
            vec![String::new(); 4]
        });
        rows.push(row);
        if p.link_layer == LinkLayer::Ethernet {
            gid_rows(p, rows);
            if let Some(c) = d.roce.iter().find(|c| c.port == p.port) {
                rows.push(vec![
                    String::new(),
                    format!("  lossless: {}", for_terminal(&c.summary())),
                ]);
            }
        }
    }
    if let Some(e) = &d.verbs_error {
        rows.push(vec![
            String::new(),
            format!("libibverbs: {}", for_terminal(e)),
        ]);
    }
}

fn port_cells(p: &DevicePort) -> Vec<String> {
    let num = |v: Option<u16>| v.map_or("-".into(), |v| v.to_string());
    vec![
        p.port.to_string(),
        p.link_layer.short().to_string(),
        p.state.map_or("?".into(), |s| s.short().to_string()),
        p.phys_state.map_or("?".into(), |s| s.short().to_string()),
        p.rate().map_or("-".into(), |r| r.to_string()),
        num(p.lid),
        num(p.sm_lid),
    ]
}

/// One line per address: `RoCE v1 gid 2, RoCE v2 gid 3  192.168.10.21  enp65s0f0np0`.
fn gid_rows(p: &DevicePort, rows: &mut Vec<Vec<String>>) {
    let mut by_address: Vec<(String, Option<&str>, Vec<String>)> = Vec::new();
    for g in &p.gids {
        let ip =
            g.ip.map_or_else(|| model::gid_string(&g.gid), |ip| ip.to_string());
        let what = format!("{} gid {}", g.gid_type.map_or("?", |t| t.name()), g.index);
        match by_address
            .iter_mut()
            .find(|(a, n, _)| *a == ip && *n == g.netdev.as_deref())
        {
            Some((_, _, whats)) => whats.push(what),
            None => by_address.push((ip, g.netdev.as_deref(), vec![what])),
        }
    }
    for (ip, netdev, whats) in by_address {
        rows.push(vec![
            String::new(),
            format!(
                "  {ip}  {}  {}",
                netdev.map_or("-".into(), for_terminal),
                whats.join(", ")
            ),
        ]);
    }
}

/// The closest GPUs: `GPU0 (switch)`, `GPU0-3 (numa)`.
fn gpus_near(near: &[GpuNear]) -> String {
    let Some(closest) = near.first().map(|n| n.relation) else {
        return "-".into();
    };
    let indices: Vec<usize> = near
        .iter()
        .filter(|n| n.relation == closest)
        .map(|n| n.gpu)
        .collect();
    format!("GPU{} ({})", ranges(&indices), closest.short())
}

/// `0-3,5` from sorted indices.
fn ranges(indices: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let mut j = i;
        while j + 1 < indices.len() && indices[j + 1] == indices[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => indices[i].to_string(),
            1 => format!("{},{}", indices[i], indices[j]),
            _ => format!("{}-{}", indices[i], indices[j]),
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3]), "0-3");
        assert_eq!(ranges(&[0, 1, 3]), "0,1,3");
        assert_eq!(ranges(&[5]), "5");
        assert_eq!(ranges(&[0, 2, 3, 4, 7]), "0,2-4,7");
        assert_eq!(ranges(&[]), "");
    }
}
