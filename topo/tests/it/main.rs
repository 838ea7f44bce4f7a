//! topo's integration tests, one binary: routing analysis, the ibnetdiscover reader on
//! rdma-core's layouts and every file flavour, and the real files published by others.

mod cable_reads;
mod cables;
mod formats;
mod ibnd_read;
mod real_files;
mod routing;
