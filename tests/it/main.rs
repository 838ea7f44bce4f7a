//! The integration tests: one binary, one module per area (each module says what it covers).
//! `common` is the harness they share: a private simulated fabric per test and the runners.

// Tests tell a story step by step and may run longer: the workspace's function length
// is for the crates' code.
#![allow(clippy::too_many_lines)]

mod common;

mod check;
mod closed_pipe;
mod config;
mod contract;
mod counters;
mod demo;
mod discover;
mod docs;
mod faults;
mod host;
mod host_compare;
mod hosts;
mod json_schema;
mod mkey;
mod monitoring;
mod multifabric;
mod names;
mod nccl;
mod pacing;
mod package;
mod plan;
mod planes;
mod query;
mod route;
mod serve;
mod sim_interrupt;
mod sim_lifecycle;
mod sm_sa;
mod tui_e2e;
mod tui_render;
mod untrusted_strings;
mod web_config;
