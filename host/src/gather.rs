//! Putting the host together: the device list and device/port facts from libibverbs
//! where it is built in and usable, everything else (and everything, without it) from
//! sysfs; then which GPUs sit near which device.

use std::path::PathBuf;

use crate::ibv::VerbsDevice;
use crate::model::{Bridge, Device, GpuNear, LocalHost, VerbsStatus, VerbsUse, Versions};
use crate::pci;
use crate::sysfs::Sysfs;

/// The environment variable naming the root that sysfs and procfs are read under.
pub const SYSFS_ROOT_ENV: &str = "IBSCOPE_SYSFS_ROOT";

/// What the exit-2 message says first when a host has no RDMA device.
pub const NO_DEVICES: &str = "no RDMA devices: is the mlx5_ib module loaded?";

/// Where to read from.
#[derive(Debug, Clone)]
pub struct GatherOptions {
    /// `/` on a real host.
    pub root: PathBuf,
    /// Ask libibverbs (only meaningful with root `/`: it reads the real /sys and /dev).
    pub verbs: bool,
    /// Read every port's and device's counters too (`host --json`, the Prometheus page);
    /// the report and the check do not need them.
    pub counters: bool,
}

impl GatherOptions {
    /// From the environment: `IBSCOPE_SYSFS_ROOT` (default `/`); libibverbs is asked when
    /// the feature is built and the root is the real one.
    pub fn from_env() -> GatherOptions {
        let root = std::env::var_os(SYSFS_ROOT_ENV)
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from("/"), PathBuf::from);
        let real = std::fs::canonicalize(&root).is_ok_and(|r| r == std::path::Path::new("/"));
        GatherOptions {
            root,
            verbs: cfg!(feature = "verbs") && real,
            counters: false,
        }
    }
}

/// Why nothing could be reported.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    /// Neither sysfs nor libibverbs shows a device; `looked` says where (one line in
    /// all, as every exit-2 message).
    #[error("{NO_DEVICES} (looked: {})", .looked.join("; "))]
    NoDevices { looked: Vec<String> },
}

/// Read the host.
pub fn gather(opts: &GatherOptions) -> Result<LocalHost, GatherError> {
    let sysfs = Sysfs::new(&opts.root);
    let from_sysfs: Vec<Device> = sysfs
        .device_names()
        .iter()
        .map(|n| sysfs.device(n))
        .collect();
    let listing = if opts.verbs { verbs_listing() } else { None };
    let not_used = if cfg!(feature = "verbs") {
        format!("{SYSFS_ROOT_ENV}={}", sysfs.root().display())
    } else {
        "built without the verbs feature".to_string()
    };
    let (mut devices, verbs) = merge(from_sysfs, listing, not_used);
    if devices.is_empty() {
        let mut looked = vec![format!(
            "sysfs: nothing in {}",
            sysfs.root().join("sys/class/infiniband").display()
        )];
        match (verbs.status, verbs.detail) {
            (VerbsStatus::Failed, Some(why)) => looked.push(format!("libibverbs: {why}")),
            (VerbsStatus::Used, _) => looked.push("libibverbs: lists no devices".into()),
            _ => {}
        }
        return Err(GatherError::NoDevices { looked });
    }
    let gpus = sysfs.gpus();
    for device in &mut devices {
        device.gpus_near = near_gpus(device, &gpus);
    }
    let bridges = bridges_between_gpus_and_hcas(&devices, &gpus)
        .into_iter()
        .map(|address| Bridge {
            acs: sysfs.acs(&address),
            address,
        })
        .collect();
    Ok(LocalHost {
        hostname: sysfs.hostname(),
        kernel: sysfs.kernel(),
        verbs,
        devices,
        gpus,
        peer_memory: sysfs.peer_memory(),
        versions: Versions {
            rdma_core: sysfs.rdma_core_version(),
            nvidia_driver: sysfs.nvidia_driver_version(),
            // libcuda answers for the machine it runs on, not for a fixture root.
            cuda_driver: if sysfs.root() == std::path::Path::new("/") {
                crate::cuda::driver_version()
            } else {
                None
            },
        },
        bridges,
        counters: if opts.counters {
            sysfs.counters(None)
        } else {
            Vec::new()
        },
    })
}

#[cfg(feature = "verbs")]
fn verbs_listing() -> Option<Result<Vec<VerbsDevice>, String>> {
    Some(crate::verbs::list())
}

#[cfg(not(feature = "verbs"))]
fn verbs_listing() -> Option<Result<Vec<VerbsDevice>, String>> {
    None
}

/// Combine what sysfs and libibverbs (`None`: not asked, for the reason `not_used`) show.
/// A device both know takes its GUIDs, firmware and ports from libibverbs and the GID types,
/// network interfaces, driver and PCIe facts from sysfs. A device only sysfs shows gets a
/// `verbs_error`: a job could not use it either.
pub fn merge(
    from_sysfs: Vec<Device>,
    listing: Option<Result<Vec<VerbsDevice>, String>>,
    not_used: String,
) -> (Vec<Device>, VerbsUse) {
    let listed = match listing {
        None => {
            let verbs = VerbsUse {
                status: VerbsStatus::NotUsed,
                detail: Some(not_used),
            };
            return (from_sysfs, verbs);
        }
        Some(Err(why)) => {
            let devices = from_sysfs
                .into_iter()
                .map(|mut d| {
                    d.verbs_error = Some(format!("libibverbs lists no devices: {why}"));
                    d
                })
                .collect();
            let verbs = VerbsUse {
                status: VerbsStatus::Failed,
                detail: Some(why),
            };
            return (devices, verbs);
        }
        Some(Ok(listed)) => listed,
    };
    let mut devices = Vec::new();
    for mut device in from_sysfs {
        match listed.iter().find(|v| v.name == device.name) {
            Some(v) => apply_verbs(&mut device, v),
            None => {
                device.verbs_error = Some(
                    "libibverbs does not list it: no user-space provider for its driver \
                     (rdma-core's ibverbs-providers), or its uverbs device is missing"
                        .to_string(),
                )
            }
        }
        devices.push(device);
    }
    for v in &listed {
        if !devices.iter().any(|d| d.name == v.name) {
            let mut device = Device::named(&v.name);
            apply_verbs(&mut device, v);
            devices.push(device);
        }
    }
    devices.sort_by_key(|d| crate::sysfs::natural_key(&d.name));
    let verbs = VerbsUse {
        status: VerbsStatus::Used,
        detail: None,
    };
    (devices, verbs)
}

fn apply_verbs(device: &mut Device, v: &VerbsDevice) {
    let facts = match &v.facts {
        Ok(f) => f,
        Err(e) => {
            device.verbs_error = Some(e.clone());
            return;
        }
    };
    device.node_guid = Some(facts.node_guid);
    device.sys_image_guid = Some(facts.sys_image_guid);
    if !facts.fw_ver.is_empty() {
        device.fw_ver = Some(facts.fw_ver.clone());
    }
    device.vendor_part_id = Some(facts.vendor_part_id);
    device.ports = facts
        .ports
        .iter()
        .map(|p| p.to_port(device.ports.iter().find(|s| s.port == p.port)))
        .collect();
}

/// GPUs near a device, closest first, then by index.
/// The bridges on the way between each HCA and every GPU behind the same PCIe switch,
/// each once, in PCI address order.
pub fn bridges_between_gpus_and_hcas(
    devices: &[Device],
    gpus: &[crate::model::Gpu],
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in devices {
        let Some(pci) = &d.pci else { continue };
        for g in gpus {
            out.extend(
                pci::bridges_between(&pci.path, &g.path)
                    .into_iter()
                    .map(str::to_string),
            );
        }
    }
    out.sort();
    out.dedup();
    out
}

pub fn near_gpus(device: &Device, gpus: &[crate::model::Gpu]) -> Vec<GpuNear> {
    let Some(pci) = &device.pci else {
        return Vec::new();
    };
    let mut near: Vec<GpuNear> = gpus
        .iter()
        .filter_map(|g| {
            let relation = pci::relation(&pci.path, pci.numa_node, &g.path, g.numa_node)?;
            Some(GpuNear {
                gpu: g.index,
                address: g.address.clone(),
                relation,
            })
        })
        .collect();
    near.sort_by_key(|n| (n.relation, n.gpu));
    near
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ibv::{VerbsFacts, VerbsPort};
    use crate::model::{DevicePort, LinkLayer};
    use ibscope_mad::attr::PortState;

    fn sysfs_device(name: &str) -> Device {
        let mut d = Device::named(name);
        d.hca_type = Some("MT4129".into());
        d.fw_ver = Some("28.39.1002".into());
        d.ports = vec![DevicePort {
            port: 1,
            link_layer: LinkLayer::InfiniBand,
            state: Some(PortState::Down),
            phys_state: None,
            width: None,
            speed: None,
            lid: None,
            sm_lid: None,
            gids: Vec::new(),
        }];
        d
    }

    fn verbs_device(name: &str) -> VerbsDevice {
        VerbsDevice {
            name: name.into(),
            facts: Ok(VerbsFacts {
                node_guid: 0x0c42_a103_00a5_8f2e,
                sys_image_guid: 0x0c42_a103_00a5_8f2e,
                fw_ver: "28.39.1010".into(),
                vendor_part_id: 4129,
                ports: vec![VerbsPort {
                    port: 1,
                    state: 4,
                    phys_state: 5,
                    link_layer: 1,
                    active_width: 2,
                    active_speed: 128,
                    active_speed_ex: 0,
                    lid: 7,
                    sm_lid: 1,
                    gids: Vec::new(),
                }],
            }),
        }
    }

    #[test]
    fn verbs_facts_win_and_sysfs_fills_in() {
        let (devices, verbs) = merge(
            vec![sysfs_device("mlx5_0")],
            Some(Ok(vec![verbs_device("mlx5_0")])),
            String::new(),
        );
        assert_eq!(verbs.status, VerbsStatus::Used);
        let d = &devices[0];
        assert_eq!(d.fw_ver.as_deref(), Some("28.39.1010"));
        assert_eq!(d.hca_type.as_deref(), Some("MT4129"));
        assert_eq!(d.vendor_part_id, Some(4129));
        assert_eq!(d.ports[0].state, Some(PortState::Active));
        assert_eq!(d.ports[0].rate().unwrap().to_string(), "4xNDR");
        assert_eq!(d.verbs_error, None);
    }

    #[test]
    fn a_device_verbs_cannot_use_is_kept_with_the_reason() {
        let mut broken = verbs_device("mlx5_1");
        broken.facts = Err("ibv_open_device: Permission denied".into());
        let (devices, _) = merge(
            vec![
                sysfs_device("mlx5_0"),
                sysfs_device("mlx5_1"),
                sysfs_device("mlx5_10"),
            ],
            Some(Ok(vec![verbs_device("mlx5_0"), broken])),
            String::new(),
        );
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["mlx5_0", "mlx5_1", "mlx5_10"]);
        assert_eq!(devices[0].verbs_error, None);
        assert!(devices[1]
            .verbs_error
            .as_deref()
            .unwrap()
            .contains("Permission denied"));
        assert_eq!(
            devices[1].fw_ver.as_deref(),
            Some("28.39.1002"),
            "sysfs facts kept"
        );
        assert!(devices[2]
            .verbs_error
            .as_deref()
            .unwrap()
            .contains("does not list it"));
    }

    #[test]
    fn verbs_only_devices_and_failures() {
        let (devices, _) = merge(
            Vec::new(),
            Some(Ok(vec![verbs_device("rxe0")])),
            String::new(),
        );
        assert_eq!(devices.len(), 1);
        assert_eq!(devices[0].node_guid, Some(0x0c42_a103_00a5_8f2e));
        let (devices, verbs) = merge(
            vec![sysfs_device("mlx5_0")],
            Some(Err("no kernel support".into())),
            String::new(),
        );
        assert_eq!(verbs.status, VerbsStatus::Failed);
        assert!(devices[0].verbs_error.is_some());
        let (devices, verbs) = merge(vec![sysfs_device("mlx5_0")], None, "why".into());
        assert_eq!(verbs.status, VerbsStatus::NotUsed);
        assert_eq!(verbs.detail.as_deref(), Some("why"));
        assert_eq!(devices[0].verbs_error, None);
    }

    #[test]
    fn an_empty_root_is_no_devices() {
        let dir = tempfile::tempdir().unwrap();
        let err = gather(&GatherOptions {
            root: dir.path().into(),
            verbs: false,
            counters: false,
        })
        .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(NO_DEVICES), "{text}");
        assert!(text.contains("sys/class/infiniband"), "{text}");
    }
}
