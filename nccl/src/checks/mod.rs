//! What a job's NCCL log says of its hosts and its start, as findings of the one table
//! (`nccl-*` kinds, [`Scope::Job`](ibscope_topo::findings::Scope)), each citing the lines
//! that show it (`evidence`):
//!
//! - [`rails`]: GPU-NIC rails (`nccl-wrong-rail`, `nccl-rail-unused`), only on servers
//!   that have rails: several HCAs of one link layer, one per GPU of the job there;
//! - [`gdr`]: GPUDirect RDMA off where it is used elsewhere (`nccl-gdr-off`), or forced by
//!   a variable where NCCL's default would refuse it or help (`nccl-gdr-forced`);
//! - [`distance`]: a GPU's NIC across the CPU interconnect (`nccl-gpu-nic-distance`);
//! - [`settings`]: NCCL versions and `NCCL_*` settings that differ (`nccl-mismatch`);
//! - [`failure`]: a job that did not start (`nccl-init-failed`), with its known causes;
//! - [`network`]: TCP sockets where HCAs exist (`nccl-net-socket`).

mod all;
pub mod common;
pub mod distance;
pub mod failure;
pub mod gdr;
pub mod network;
pub mod rails;
pub mod settings;

pub use all::{check, check_indexed};
pub use network::network_of;
