//! `ibscope cables`: each port's pluggable module (vendor, part, serial, media, light,
//! temperature) and the cable findings; `cables decode` for saved dumps.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use ibscope_host::module_eeprom::{self, LiveModules, ModuleSource, SavedModules};
use ibscope_mad::cable::{self, dump, ModuleMemory};
use ibscope_topo::cable_rates::rates;
use ibscope_topo::cable_reads::{self, FabricModules, ModuleRead, ModuleReadMode};
use ibscope_topo::cables::{module_findings, port_context, ModuleContext};
use ibscope_topo::findings::Evidence;

use super::cables_report::{Entry, FabricModuleReads, Report};
use crate::cli::{exit, Global};

/// Pluggable modules and cables: which module is on each port (vendor, part number,
/// serial), its light per lane, its temperature, its flags, and the findings judged
/// against the module's own thresholds (cable-rx-power-low, cable-los, cable-temperature,
/// cable-checksum, ...; passive copper's LOS/LOL are never judged).
///
/// Sources: this host's Ethernet/RoCE netdevs, read through ethtool netlink page by page
/// (so a CMIS module's further banks too), else the ethtool module ioctls (root, or
/// CAP_NET_ADMIN), or from saved dumps under a fixture root
/// (IBSCOPE_SYSFS_ROOT/module/NETDEV); and, when this host has an InfiniBand port (or -C
/// names a fabric), every port of the InfiniBand fabric, switches and CAs alike.
///
/// An InfiniBand port's module is read through the vendor's firmware registers (PLIB,
/// PMLP, MCIA), each sent as a SubnSet(AccessRegister) MAD whose register operation says
/// query, as NVIDIA's tools send it: nothing is written, but a Set it is, so it is sent
/// only with --access-register. Without it every InfiniBand port is listed as not read,
/// and why. A node that does not answer its first register read (no reply, a MAD status,
/// a reply without the register: so does the simulator) is asked nothing more. This path
/// is verified against recorded module memory served by `ibscope sim responder` only,
/// until it is run on hardware.
///
/// Exit codes: 0 no finding, 1 findings, 2 no module could be read.
///
/// Examples:
///   ibscope cables                          # this host's netdevs, the fabric's ports listed
///   ibscope cables --access-register        # and every InfiniBand port's module read
///   ibscope cables --netdev eth2 --json
///   ibscope cables --csv > inventory.csv    # an inventory to hand to the vendor
///   ibscope cables --interval 60            # how fast each lane's light is falling
///   ibscope cables decode ethtool-m-eth2.txt module.bin
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<CablesCommand>,
    /// Only these netdevs (repeat the flag), and no InfiniBand fabric unless -C names one;
    /// default every netdev of the host.
    #[arg(long = "netdev", value_name = "NAME")]
    pub netdevs: Vec<String>,
    /// Read the InfiniBand ports' modules: sends SubnSet(AccessRegister) MADs, register
    /// queries (PLIB, PMLP, MCIA) carried in a Set as NVIDIA's tools carry them; they
    /// write nothing. Without it those ports are listed as not read.
    #[arg(long)]
    pub access_register: bool,
    /// Read every module twice, S seconds apart, and give its rates of change: temperature
    /// per minute, each lane's light in dB per minute and bias per minute, and the lane
    /// flags raised in between (latched flags are cleared by the first read). Each source
    /// (this host's netdevs, each fabric) is read twice in turn.
    #[arg(long, value_name = "S", value_parser = parse_interval)]
    pub interval: Option<f64>,
    #[command(flatten)]
    pub format: Format,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
}

#[derive(Debug, clap::Args)]
pub struct Format {
    /// Print JSON.
    #[arg(long, conflicts_with = "csv", global = true)]
    pub json: bool,
    /// Print CSV: one module per line, the inventory columns.
    #[arg(long, global = true)]
    pub csv: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum CablesCommand {
    /// Decode saved module dumps: `ethtool -m DEV hex on` text (with `ethtool ... page N`
    /// lines naming pages), `ethtool -m DEV raw on` bytes, `hexdump -C` output, SONiC's
    /// `sfputil show eeprom-hexdump`.
    ///
    /// Examples:
    ///   ibscope cables decode eth2.hex
    ///   ibscope cables decode --json a.bin b.txt
    #[command(verbatim_doc_comment)]
    Decode {
        /// Dump files (`-` for standard input).
        #[arg(required = true, value_hint = clap::ValueHint::FilePath)]
        files: Vec<PathBuf>,
    },
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    // Read first, whether or not a fabric is read: a bad name map given is refused before
    // anything is printed, never silently ignored.
    let names = crate::fabric::names(g)?;
    let mut report = Report::default();
    match &a.command {
        Some(CablesCommand::Decode { files }) => {
            report.modules = files.iter().map(|f| from_file(f)).collect::<Result<_>>()?;
        }
        None => {
            let read_fabric = g.ca.is_some() || (a.netdevs.is_empty() && has_infiniband_port());
            report.modules = from_host(&a.netdevs, read_fabric)?;
            if let Some(seconds) = a.interval {
                if !report.modules.is_empty() {
                    let first = std::mem::take(&mut report.modules);
                    std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
                    report.modules = from_host(&a.netdevs, read_fabric)?;
                    with_rates(&first, &mut report.modules, seconds);
                }
            }
            if read_fabric {
                from_fabrics(g, a, names.as_ref(), &mut report)?;
            }
        }
    }
    let read = report.modules.iter().filter(|e| e.module.is_some()).count();
    let code = if read == 0 && (!report.modules.is_empty() || !report.failed.is_empty()) {
        exit::ERROR
    } else if report.modules.iter().any(|e| !e.findings.is_empty()) {
        exit::FINDINGS
    } else if !report.failed.is_empty() {
        exit::ERROR
    } else {
        exit::OK
    };
    crate::output::verdict(code);
    super::cables_print::print(&report, a.format.json, a.format.csv)?;
    if read == 0 && report.failed.is_empty() && !report.modules.is_empty() {
        // Exit 2 has its one line on standard error, for a script that reads no table; a
        // fabric that failed has said so already.
        eprintln!(
            "ibscope: error: no module could be read ({} tried; the reasons are listed above)",
            report.modules.len()
        );
    }
    Ok(ExitCode::from(code))
}

/// The seconds of --interval: more than 0, at most a day.
fn parse_interval(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err(format!(
            "{text:?} is not a number of seconds (more than 0, at most 86400)"
        )),
    }
}

/// Each module of `second` that `first` read too (the same source and name) gets its
/// rates of change over `seconds`.
fn with_rates(first: &[Entry], second: &mut [Entry], seconds: f64) {
    for e in second.iter_mut() {
        let before = first
            .iter()
            .find(|f| f.source == e.source && f.name == e.name && f.fabric == e.fabric)
            .and_then(|f| f.module.as_ref());
        if let (Some(b), Some(a)) = (before, &e.module) {
            e.rates = rates(b, a, seconds);
        }
    }
}

/// Whether this host has an InfiniBand port (libibumad lists it).
fn has_infiniband_port() -> bool {
    ibscope_mad::umad::ca_names().into_iter().any(|ca| {
        ibscope_mad::umad::ca_ports(&ca)
            .is_ok_and(|ports| ports.iter().any(ibscope_mad::umad::is_ib))
    })
}

/// Every fabric of the command line: discovered, its ports' modules read (as allowed).
fn from_fabrics(
    g: &Global,
    a: &Args,
    names: Option<&ibscope_topo::namemap::NameMap>,
    report: &mut Report,
) -> Result<()> {
    let mode = if a.access_register {
        ModuleReadMode::AccessRegister
    } else {
        ModuleReadMode::NotAllowed
    };
    let ran = crate::fabric_set::each(g, |opened, multi| {
        let fabric = crate::fabric::discover_live(
            &mut opened.engine,
            ibscope_topo::discover::DiscoverOptions::default(),
        )?;
        let mut read = cable_reads::read_modules(&mut opened.engine, &fabric, names, mode);
        opened.engine.ensure_connected()?;
        let name = opened.id.name.clone();
        let label = multi.then_some(name.as_str());
        let mut entries = fabric_entries(&read, label);
        if let (Some(seconds), ModuleReadMode::AccessRegister) = (a.interval, mode) {
            std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
            let again = cable_reads::read_modules(&mut opened.engine, &fabric, names, mode);
            opened.engine.ensure_connected()?;
            let mut second = fabric_entries(&again, label);
            with_rates(&entries, &mut second, seconds);
            read.mads_sent += again.mads_sent;
            read.ports = again.ports;
            entries = second;
        }
        report.fabrics.push(summary(&name, &read));
        report.modules.extend(entries);
        Ok(exit::OK)
    })?;
    report.failed = ran.failed;
    Ok(())
}

fn summary(fabric: &str, read: &FabricModules) -> FabricModuleReads {
    FabricModuleReads {
        fabric: fabric.to_string(),
        counts: read.counts(),
        mads: read.mads_sent,
    }
}

/// The entries of a fabric's ports: each module read, or why not; empty cages are left
/// out (the summary counts them).
pub fn fabric_entries(read: &FabricModules, fabric: Option<&str>) -> Vec<Entry> {
    read.ports
        .iter()
        .filter(|p| !matches!(p.read, ModuleRead::Empty))
        .map(|p| {
            let mut e = Entry::new("fabric", format!("{}[{}]", p.at.node.name, p.at.port));
            e.fabric = fabric.map(str::to_string);
            e.port = Some(p.at.clone());
            e.remote = p.remote.clone();
            e.link_speed = p.link_speed;
            match &p.read {
                ModuleRead::Read {
                    memory,
                    module,
                    lanes,
                    ..
                } => {
                    e.module_index = Some(*module);
                    e.lanes = lanes.clone();
                    match cable::decode(memory) {
                        Ok(m) => {
                            e.findings = module_findings(&m, &port_context(p));
                            e.module = Some(m);
                        }
                        Err(err) => e.error = Some(err.to_string()),
                    }
                }
                ModuleRead::NotRead(why) => e.error = Some(why.clone()),
                ModuleRead::Empty => {}
            }
            e
        })
        .collect()
}

fn judged(source: &'static str, name: String, memory: &ModuleMemory, line: Option<usize>) -> Entry {
    let evidence = line
        .map(|line| Evidence {
            file: name.clone(),
            line,
        })
        .into_iter()
        .collect();
    match cable::decode(memory) {
        Ok(module) => Entry {
            findings: module_findings(
                &module,
                &ModuleContext {
                    evidence,
                    ..ModuleContext::default()
                },
            ),
            module: Some(module),
            ..Entry::new(source, name)
        },
        Err(e) => Entry::failed(source, name, e.to_string()),
    }
}

/// A saved dump, decoded and judged: a file that cannot be read or is no module's memory
/// stops the command, as every unreadable input does (docs/cli.md).
fn from_file(path: &std::path::Path) -> Result<Entry> {
    let name = ibscope_topo::input::display_name(path);
    let bytes = ibscope_topo::input::read_bytes_up_to(path, "module dump", dump::MOST_BYTES)?;
    let d = dump::parse(&bytes).map_err(|e| anyhow::anyhow!("module dump {name}: {e}"))?;
    let first = d.lines.values().min().copied();
    let mut entry = judged("file", name.clone(), &d.memory, first);
    if let Some(e) = entry.error.take() {
        anyhow::bail!("module dump {name}: {e}");
    }
    entry.format = Some(d.format);
    Ok(entry)
}

/// Whether a netdev (its /sys/class/net directory) may have a pluggable module: one on a
/// device (not a bridge, bond or veth), and not IPoIB (ARPHRD_INFINIBAND, 32: an
/// InfiniBand port's module is read over the fabric).
fn has_module_port(dir: &std::path::Path) -> bool {
    let ipoib = std::fs::read_to_string(dir.join("type")).is_ok_and(|t| t.trim() == "32");
    dir.join("device").exists() && !ipoib
}

/// This host's netdevs: `only`, else every one (none is an error only when no fabric is
/// read either).
fn from_host(only: &[String], fabric_too: bool) -> Result<Vec<Entry>> {
    let root = std::env::var_os(ibscope_host::gather::SYSFS_ROOT_ENV).map(PathBuf::from);
    let netdevs = if only.is_empty() {
        let net = root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/"))
            .join("sys/class/net");
        let mut names: Vec<String> = std::fs::read_dir(&net)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| has_module_port(&e.path()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    } else {
        only.to_vec()
    };
    if netdevs.is_empty() {
        if fabric_too {
            return Ok(Vec::new());
        }
        bail!(
            "no netdev and no InfiniBand port on this host (Ethernet/RoCE modules are read \
             through netdevs, InfiniBand ones over the fabric)"
        );
    }
    let source: Box<dyn ModuleSource> = match &root {
        Some(r) => Box::new(SavedModules {
            dir: r.join("module"),
        }),
        None => Box::new(LiveModules),
    };
    Ok(module_eeprom::read_all(source.as_ref(), &netdevs)
        .into_iter()
        .map(|(name, read)| match read {
            Ok(memory) => judged("netdev", name, &memory, None),
            Err(e) => Entry::failed("netdev", name, e),
        })
        .collect())
}
