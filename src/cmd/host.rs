//! `ibscope host`: the local machine's RDMA side (devices, ports, firmware, drivers, PCIe,
//! GPUs, GPUDirect RDMA) and, with --check, the commissioning preflight.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{bail, Result};
use ibscope_host::firmware_manifest::FirmwareManifest;
use ibscope_host::model::{LocalHost, VerbsStatus};
use ibscope_host::{HostFinding, LinkLayerNorms, PreflightOptions};
use ibscope_topo::escape::for_terminal;
use ibscope_topo::findings::Severity;
use ibscope_topo::health::Rate;
use serde::Serialize;

use crate::cli::{exit, Global};

/// This host's RDMA devices, ports, PCIe links, GPUs; --check: ready for a job?
///
/// Lists every RDMA device through libibverbs (as RDMA applications and NCCL see them) and
/// sysfs: node GUID, firmware, driver and its version, each port's link layer (InfiniBand
/// or Ethernet/RoCE), state, physical state, rate, LID and SM LID; for RoCE ports the GID
/// table (RoCE v1/v2, the IP addresses and interfaces); the HCA's PCIe link against what it
/// and its slot support, its NUMA node, and the NVIDIA GPUs that share its PCIe switch
/// (else its host bridge, else its NUMA node). Sends nothing to the fabric.
///
/// --check turns each gap into a finding (exit 1); the kinds are listed below the options.
///
/// -C/--ca restricts the report to one device. IBSCOPE_SYSFS_ROOT=DIR reads sysfs and
/// procfs under DIR instead of / (libibverbs is then not asked: it reads the real host).
///
/// Exit code: 0 listed (with --check: ready), 1 findings (--check), 2 no RDMA device or
/// could not run.
///
/// Examples:
///   ibscope host
///   ibscope host --check
///   ibscope host --check --expect 4xNDR --json
///   ibscope host --check --firmware fleet-firmware.txt
///   ibscope -C mlx5_0 host
///   ibscope host --counters --interval 5     # counters and their rates over 5 s
///   ibscope host --check --interval 10       # also counters rising above their limits
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, after_long_help = ibscope_host::preflight::kinds_help())]
pub struct Args {
    /// JSON output: the host, and with --check the norms and findings.
    #[arg(long)]
    pub json: bool,
    /// Prometheus text for node_exporter's textfile collector (ibscope_host_*: the host's
    /// versions, ports, every counter read with device, port, netdev and priority labels,
    /// the --check findings by kind, ready); e.g. every minute from cron into
    /// /var/lib/node_exporter/textfile_collector/ibscope.prom.
    #[arg(long, conflicts_with_all = ["json", "counters"])]
    pub prometheus: bool,
    /// Judge the host: findings, and exit 1 when there are any.
    #[arg(long)]
    pub check: bool,
    /// Expected rate of every InfiniBand port, e.g. 4xNDR (default: the host's most
    /// common rate).
    #[arg(long, value_name = "WIDTHxSPEED", value_parser = super::links::parse_rate)]
    pub expect: Option<Rate>,
    /// The RDMA counters of every port (ports/N/counters, hw_counters, the RoCE netdev's
    /// carrier_changes) and device (hw_counters), named as the driver names them and
    /// grouped: link errors, data (in bytes), transport, receive resources, congestion.
    #[arg(long)]
    pub counters: bool,
    /// Read the counters twice, S seconds apart: with --counters their rates; with --check
    /// also findings of counters rising faster than their limits (any link_downed,
    /// symbol_error above 120/h, local_ack_timeout_err above 1/s, ...).
    #[arg(long, value_name = "S")]
    pub interval: Option<f64>,
    /// With --check: a file of `KEY=VERSION` lines, KEY an HCA's board_id (PSID), model
    /// (MT4129) or PCI device id (4129): HCAs on other firmware are findings.
    #[arg(long, value_name = "MANIFEST", requires = "check", value_hint = clap::ValueHint::FilePath)]
    pub firmware: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub action: Option<super::host_compare::HostAction>,
    #[command(flatten)]
    pub device: crate::cli::DeviceArgs,
}

/// The firmware manifest of --firmware, read through `ibscope_topo::input`.
fn read_manifest(path: &std::path::Path) -> Result<FirmwareManifest> {
    let name = ibscope_topo::input::display_name(path);
    let text = ibscope_topo::input::read_text(path, "firmware manifest")?;
    let manifest = FirmwareManifest::parse(&text)
        .map_err(|e| anyhow::anyhow!("firmware manifest {name}: {e}"))?;
    if manifest.is_empty() {
        bail!("firmware manifest {name} names no firmware (KEY=VERSION lines)");
    }
    Ok(manifest)
}

#[derive(Serialize)]
struct Report<'a> {
    #[serde(flatten)]
    host: &'a LocalHost,
    #[serde(skip_serializing_if = "Option::is_none")]
    norms: Option<LinkLayerNorms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ready: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    findings: Option<&'a [HostFinding]>,
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if let Some(super::host_compare::HostAction::Compare(c)) = &a.action {
        return super::host_compare::run(g, c);
    }
    let interval = a.interval.map(super::host_counters::interval).transpose()?;
    // The manifest is read before the host is: one that cannot be read stops the command.
    let manifest = a.firmware.as_deref().map(read_manifest).transpose()?;
    if a.counters {
        return super::host_counters::run(g, a.json, interval);
    }
    let mut host = ibscope_host::gather(&ibscope_host::GatherOptions {
        counters: a.json || a.prometheus,
        ..ibscope_host::GatherOptions::from_env()
    })?;
    if let Some(ca) = &g.ca {
        let names: Vec<String> = host.devices.iter().map(|d| d.name.clone()).collect();
        host.devices.retain(|d| &d.name == ca);
        host.counters.retain(|c| &c.device == ca);
        if host.devices.is_empty() {
            bail!(
                "no RDMA device named {} (this host has {})",
                for_terminal(ca),
                for_terminal(&names.join(", "))
            );
        }
    }
    let opts = PreflightOptions {
        expect: a.expect,
        roce: g.roce.clone(),
    };
    let mut findings = if a.check || a.prometheus {
        ibscope_host::preflight(&host, &opts)
    } else {
        Vec::new()
    };
    if let Some(interval) = interval.filter(|_| a.check) {
        findings.extend(super::host_counters::rate_findings(g, interval)?);
    }
    if let Some(manifest) = &manifest {
        findings.extend(manifest.check(&host));
    }
    let code = crate::output::verdict(if findings.is_empty() || !a.check {
        exit::OK
    } else {
        exit::FINDINGS
    });
    let mut out = std::io::stdout().lock();
    let written = if a.prometheus {
        out.write_all(ibscope_host::prometheus::page(&host, &host.counters, &findings).as_bytes())
    } else if a.json {
        let report = Report {
            host: &host,
            norms: a.check.then(|| LinkLayerNorms::of(&host, &opts)),
            ready: a.check.then_some(findings.is_empty()),
            findings: a.check.then_some(findings.as_slice()),
        };
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&crate::output::json_document(&report)?)?
        )
    } else {
        print_text(&mut out, &host).and_then(|()| match a.check {
            true => print_findings(&mut out, &findings),
            false => Ok(()),
        })
    };
    // A closed pipe comes back as an error; main ends quietly on it, as for every command.
    written.and_then(|()| out.flush())?;
    Ok(ExitCode::from(code))
}

fn print_text(out: &mut impl Write, host: &LocalHost) -> io::Result<()> {
    let text = |s: &Option<String>| s.as_deref().map_or("?".into(), for_terminal);
    let detail = for_terminal(host.verbs.detail.as_deref().unwrap_or("?"));
    let verbs = match host.verbs.status {
        VerbsStatus::Used => "libibverbs and sysfs".to_string(),
        VerbsStatus::Failed => format!("sysfs only (libibverbs failed: {detail})"),
        VerbsStatus::NotUsed => format!("sysfs only ({detail})"),
    };
    writeln!(
        out,
        "host {}, kernel {}; read through {verbs}",
        text(&host.hostname),
        text(&host.kernel)
    )?;
    writeln!(out, "drivers: {}", ibscope_host::text::drivers_line(host))?;
    let v = &host.versions;
    let known = |x: &Option<String>| x.as_deref().map_or("unknown".into(), for_terminal);
    writeln!(
        out,
        "stack: rdma-core {}, NVIDIA driver {}, CUDA driver {}",
        known(&v.rdma_core),
        known(&v.nvidia_driver),
        known(&v.cuda_driver)
    )?;
    writeln!(out, "{}\n", ibscope_host::text::gpus_line(host))?;
    let mut rows = vec![[
        "device",
        "port",
        "link",
        "state",
        "physical",
        "rate",
        "LID",
        "SM",
        "firmware",
        "PCIe",
        "NUMA",
        "GPUs near",
    ]
    .map(String::from)
    .to_vec()];
    for d in &host.devices {
        ibscope_host::text::device_rows(d, &mut rows);
    }
    crate::output::write_columns(out, &rows)
}

fn print_findings(out: &mut impl Write, findings: &[HostFinding]) -> io::Result<()> {
    if findings.is_empty() {
        return writeln!(out, "\npreflight: ready (no findings)");
    }
    let errors = findings
        .iter()
        .filter(|f| f.finding.severity == Severity::Error)
        .count();
    writeln!(
        out,
        "\npreflight: {} finding(s), {errors} error(s), {} warning(s)",
        findings.len(),
        findings.len() - errors
    )?;
    for f in findings {
        writeln!(out, "  {}", f.text_line())?;
    }
    Ok(())
}
