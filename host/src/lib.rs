//! The local host's RDMA side, for `ibscope host`: its RDMA devices and their ports
//! (through libibverbs where built in, and sysfs), their drivers and PCIe links, the NVIDIA
//! GPUs beside them and the GPUDirect RDMA module, and the commissioning preflight that
//! turns the gaps into findings.
//!
//! This crate knows the machine it runs on; it speaks the fabric's vocabulary (port states,
//! widths, speeds, rates from `ibscope-mad`; findings from `ibscope-topo`) but sends no MAD.
//!
//! - [`gather`]: read the host ([`gather::GatherOptions::from_env`] honours `IBSCOPE_SYSFS_ROOT`).
//! - [`preflight`]: the findings.
//! - [`counters`]: the ports' and devices' RDMA counters, their rates and the findings of them.
//! - [`prometheus`]: the host as Prometheus text (`host --prometheus`).
//! - [`roce`]: a RoCE port's lossless configuration (PFC, DSCP, ECN, ToS, MTU) and its profile.
//! - [`ethtool`]: a RoCE netdev's statistics (pause frames, discards) through the ethtool ioctl.
//! - [`netlink`]: netlink framing (`roce`'s DCB answers) as `wire_struct!` tables.
//! - [`fabric_select`]: which fabrics `-C`/`-P` and the config's `[[fabric]]` tables select.
//! - [`multi_plane`]: the local ports that are planes of one multi-plane HCA port.
//! - [`parse`]: pure parsers of the kernel's sysfs and procfs text.
//! - [`ibv`]: libibverbs' facts as data and their codes in the shared vocabulary; the FFI
//!   itself is the `verbs` module, behind the feature of that name.

pub mod compare;
pub mod counters;
pub mod cuda;
pub mod ethtool;
pub mod fabric_select;
pub mod firmware_manifest;
pub mod gather;
pub mod ibv;
pub mod model;
pub mod multi_plane;
pub mod netlink;
pub mod parse;
pub mod pci;
pub mod preflight;
pub mod prometheus;
pub mod roce;
pub mod sysfs;
pub mod text;
#[cfg(feature = "verbs")]
mod verbs;

pub use gather::{gather, GatherError, GatherOptions, NO_DEVICES};
pub use model::LocalHost;
pub use preflight::{preflight, HostFinding, LinkLayerNorms, PreflightOptions};
