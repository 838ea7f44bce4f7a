//! NCCL's evidence beside the fabric.
//!
//! - [`perf`]: nccl-tests output (every `*_perf` collective, old and new layouts);
//! - [`log`]: `NCCL_DEBUG=INFO` logs (ranks, hosts, GPUs, HCAs, channels, rings, trees);
//! - [`checks`]: what a log says of the hosts (GPU-NIC affinity, GPUDirect RDMA, idle
//!   rails, versions and settings) as findings of the one table;
//! - [`predict`]: each measured size beside what the fabric's routes allow, and a verdict;
//! - [`placement`]: the job's network connections on the forwarding tables, with the
//!   findings of every link they cross;
//! - [`report`]: what the commands report, the evidence joined with the fabric;
//! - [`text`]: the reports as terminal text (escaped);
//! - [`chart`]: measured against predicted, as text and SVG;
//! - [`synthetic`]: logs and runs of a planted job, for tests and the benchmark.
//!
//! Everything read is untrusted text from the hosts: parsers return what they could read
//! and say what they could not, never panic; names are escaped by whoever displays them.

pub mod chart;
pub mod checks;
pub mod curve;
mod launcher;
pub mod log;
mod log_lines;
pub mod paths;
pub mod perf;
mod perf_layout;
pub mod placement;
pub mod predict;
pub mod rate;
pub mod report;
pub mod synthetic;
pub mod text;
