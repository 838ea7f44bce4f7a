//! The Prometheus exporter behind `ibscope serve`: each fabric's pages kept in a slot,
//! served over HTTP (and TLS, basic auth) without waiting on a fabric.

pub mod frames;
pub mod http;
pub mod pieces;
pub mod plane_counts;
pub mod server;
pub mod supervisor;
pub mod sweeper;
pub mod tls;
pub mod web;
