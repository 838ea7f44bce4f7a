//! `ibscope cables`: each port's pluggable module (vendor, part, serial, media, light,
//! temperature) and the cable findings; `cables decode` for saved dumps.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use ibscope_host::module_eeprom::{self, EthtoolModules, ModuleSource, SavedModules};
use ibscope_mad::cable::{self, dump, Module, ModuleMemory};
use ibscope_topo::cables::{module_findings, ModuleContext};
use ibscope_topo::escape::{for_csv, for_terminal};
use ibscope_topo::findings::{Evidence, Finding};
use serde::Serialize;

use crate::cli::{exit, Global};

/// Pluggable modules and cables: which module is on each port (vendor, part number,
/// serial), its light per lane, its temperature, its flags, and the findings judged
/// against the module's own thresholds (cable-rx-power-low, cable-los, cable-temperature,
/// cable-checksum, ...; passive copper's LOS/LOL are never judged).
///
/// Without a subcommand: this host's Ethernet/RoCE netdevs, read through the ethtool
/// module ioctls (root, or CAP_NET_ADMIN), or from saved dumps under a fixture root
/// (IBSCOPE_SYSFS_ROOT/module/NETDEV). InfiniBand ports have no netdev module: their
/// modules are read over the fabric, which this version does not do yet.
///
/// Exit codes: 0 no finding, 1 findings, 2 nothing could be read.
///
/// Examples:
///   ibscope cables                          # every netdev of this host with a module
///   ibscope cables --netdev eth2 --json
///   ibscope cables --csv > inventory.csv    # an inventory to hand to the vendor
///   ibscope cables decode ethtool-m-eth2.txt module.bin
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<CablesCommand>,
    /// Only these netdevs (repeat the flag); default every netdev of the host.
    #[arg(long = "netdev", value_name = "NAME")]
    pub netdevs: Vec<String>,
    #[command(flatten)]
    pub format: Format,
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
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// One module as reported: where it was read and what it says.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// "file" or "netdev".
    pub source: &'static str,
    /// The file as given, or the netdev's name.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<dump::DumpFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<Module>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    modules: &'a [Entry],
}

pub fn run(_g: &Global, a: &Args) -> Result<ExitCode> {
    let entries = match &a.command {
        Some(CablesCommand::Decode { files }) => files.iter().map(|f| from_file(f)).collect(),
        None => from_host(&a.netdevs)?,
    };
    print(&entries, &a.format)?;
    let read = entries.iter().filter(|e| e.module.is_some()).count();
    Ok(ExitCode::from(if read == 0 {
        exit::ERROR
    } else if entries.iter().any(|e| !e.findings.is_empty()) {
        exit::FINDINGS
    } else {
        exit::OK
    }))
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
            source,
            findings: module_findings(
                &module,
                &ModuleContext {
                    evidence,
                    ..ModuleContext::default()
                },
            ),
            name,
            format: None,
            module: Some(module),
            error: None,
        },
        Err(e) => failed(source, name, e.to_string()),
    }
}

fn failed(source: &'static str, name: String, error: String) -> Entry {
    Entry {
        source,
        name,
        format: None,
        module: None,
        error: Some(error),
        findings: Vec::new(),
    }
}

fn from_file(path: &std::path::Path) -> Entry {
    let name = ibscope_topo::input::display_name(path);
    let bytes = match ibscope_topo::input::read_bytes(path, "module dump") {
        Ok(b) => b,
        Err(e) => return failed("file", name, e.to_string()),
    };
    match dump::parse(&bytes) {
        Ok(d) => {
            let first = d.lines.values().min().copied();
            let mut entry = judged("file", name, &d.memory, first);
            entry.format = Some(d.format);
            entry
        }
        Err(e) => failed("file", name, e.to_string()),
    }
}

fn from_host(only: &[String]) -> Result<Vec<Entry>> {
    let root = std::env::var_os(ibscope_host::gather::SYSFS_ROOT_ENV).map(PathBuf::from);
    let netdevs = if only.is_empty() {
        let net = root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/"))
            .join("sys/class/net");
        let mut names: Vec<String> = std::fs::read_dir(&net)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n != "lo")
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    } else {
        only.to_vec()
    };
    if netdevs.is_empty() {
        bail!("no netdev on this host (Ethernet/RoCE modules are read through netdevs)");
    }
    let source: Box<dyn ModuleSource> = match &root {
        Some(r) => Box::new(SavedModules {
            dir: r.join("module"),
        }),
        None => Box::new(EthtoolModules),
    };
    Ok(module_eeprom::read_all(source.as_ref(), &netdevs)
        .into_iter()
        .map(|(name, read)| match read {
            Ok(memory) => judged("netdev", name, &memory, None),
            Err(e) => failed("netdev", name, e),
        })
        .collect())
}

fn print(entries: &[Entry], format: &Format) -> Result<()> {
    if format.json {
        return crate::output::print_json(&Report { modules: entries });
    }
    if format.csv {
        print_csv(entries);
        return Ok(());
    }
    let mut rows = vec![[
        "PORT",
        "MAP",
        "VENDOR",
        "PART",
        "SERIAL",
        "MEDIA",
        "LEN",
        "TEMP",
        "RX dBm (per lane)",
    ]
    .map(String::from)
    .to_vec()];
    for e in entries {
        let name = for_terminal(&e.name);
        match (&e.module, &e.error) {
            (Some(m), _) => rows.push(row(&name, m)),
            (None, Some(err)) => rows.push(vec![name, for_terminal(err)]),
            _ => {}
        }
    }
    crate::output::write_columns(&mut std::io::stdout().lock(), &rows)?;
    for f in entries.iter().flat_map(|e| &e.findings) {
        let mut line = f.text_line();
        for ev in &f.evidence {
            line.push_str(&format!(" ({})", for_terminal(&ev.to_string())));
        }
        println!("{line}");
    }
    Ok(())
}

fn row(name: &str, m: &Module) -> Vec<String> {
    let id = &m.identity;
    let rx: Vec<String> = m
        .diagnostics
        .as_ref()
        .map(|d| {
            d.lanes
                .iter()
                .map(|l| match l.rx_power_mw.and_then(cable::model::units::dbm) {
                    Some(dbm) => format!("{dbm:.1}"),
                    None if l.rx_power_mw.is_some() => "dark".to_string(),
                    None => "-".to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    vec![
        name.to_string(),
        m.map.name().to_string(),
        for_terminal(&id.vendor),
        for_terminal(&id.part_number),
        for_terminal(&id.serial),
        m.media.name().to_string(),
        m.length_m.map_or("-".into(), |l| format!("{l}m")),
        m.diagnostics
            .as_ref()
            .and_then(|d| d.temperature_c)
            .map_or("-".into(), |t| format!("{t:.1}C")),
        if m.media.is_optical() && !rx.is_empty() {
            rx.join(" ")
        } else {
            "-".into()
        },
    ]
}

/// The inventory: one line per module, every identity field.
fn print_csv(entries: &[Entry]) {
    println!(
        "source,name,map,identifier,vendor,oui,part_number,revision,serial,date_code,media,\
         length_m,wavelength_nm,temperature_c,checksums_ok,findings,error"
    );
    for e in entries {
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        let cells: Vec<String> = match &e.module {
            Some(m) => vec![
                m.map.name().into(),
                m.identifier.name().into(),
                m.identity.vendor.clone(),
                m.identity.oui.clone(),
                m.identity.part_number.clone(),
                m.identity.revision.clone(),
                m.identity.serial.clone(),
                m.identity.date_code.clone(),
                m.media.name().into(),
                opt(m.length_m),
                opt(m.wavelength_nm),
                opt(m.diagnostics.as_ref().and_then(|d| d.temperature_c)),
                m.checksums_ok().to_string(),
            ],
            None => vec![String::new(); 13],
        };
        let kinds: Vec<&str> = e.findings.iter().map(|f| f.kind.name()).collect();
        let mut line = vec![e.source.to_string(), e.name.clone()];
        line.extend(cells);
        line.push(kinds.join(" "));
        line.push(e.error.clone().unwrap_or_default());
        let line: Vec<String> = line.iter().map(|c| for_csv(c)).collect();
        println!("{}", line.join(","));
    }
}
