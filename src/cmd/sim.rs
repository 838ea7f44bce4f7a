//! `ibscope sim`: run a simulated fabric (ibsim + OpenSM) in the background, run commands
//! against it, inject faults. The orchestration itself is the `ibscope-sim` crate.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use crate::cli::{exit, Global};
use ibscope_sim::{self as sim, Sim, SimOptions};

/// Run simulated fabrics (ibsim holds the fabric, the real OpenSM brings it up) in the
/// background, run commands against them, inject faults, and generate topologies. No
/// InfiniBand hardware needed; ibsim, OpenSM and libumad2sim must be installed.
///
/// Examples:
///   eval "$(ibscope sim up examples/fabrics/net)"   # start one, export its shim settings
///   ibscope check                                    # then any command runs against it
///   ibscope sim fault set-counter Switch1 1 SymbolErrorCounter 17
///   ibscope sim exec -- perfquery                    # a reference tool under the shim
///   ibscope sim down
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Start a simulated fabric in the background and print the shell exports clients need.
    ///
    /// Use as `eval "$(ibscope sim up FILE)"`: stdout carries only `export` lines
    /// (LD_PRELOAD, IBSIM_SOCKNAME, IBSCOPE_SIM), a summary goes to stderr.
    #[command(
        after_help = "Examples:\n  eval \"$(ibscope sim up examples/fabrics/net)\"\n  eval \"$(ibscope sim up ft.topo --name big --sm-option 'routing_engine minhop')\"\n  ibscope sim up examples/fabrics/net --no-sm"
    )]
    Up(UpArgs),
    /// Stop a simulator started with `sim up` (OpenSM, then ibsim) and remove its state.
    #[command(
        after_help = "Examples:\n  ibscope sim down\n  ibscope sim down --name big\n  ibscope sim down --all"
    )]
    Down(DownArgs),
    /// Stop ibsim and OpenSM and start them again on the same socket and topology (clients
    /// must attach again: the shim attaches once per process).
    #[command(after_help = "Examples:\n  ibscope sim restart\n  ibscope sim restart --name big")]
    Restart(NameArg),
    /// Run a command under the simulator's shim; exits with the command's exit code.
    #[command(
        after_help = "Examples:\n  ibscope sim exec -- ibnetdiscover\n  ibscope sim exec --node Hca2 -- ibscope links\n  ibscope sim exec --name big -- perfquery -x 1 1"
    )]
    Exec(ExecArgs),
    /// Inject a fault or set a counter through ibsim's console.
    #[command(
        after_help = "Examples:\n  ibscope sim fault --resweep unlink Switch1 3\n  ibscope sim fault set-counter Hca1 1 PortXmitDiscards 42\n  ibscope sim fault loss Switch1 2 50"
    )]
    Fault(FaultArgs),
    /// List the simulators started with `sim up` and whether they still run.
    #[command(after_help = "Examples:\n  ibscope sim status")]
    Status,
    #[command(
        about = "Generate a topology file (fat trees, rings, meshes, rail-optimised GPU clusters; degraded links)"
    )]
    Gen(crate::cmd::gen::GenArgs),
}

#[derive(Debug, clap::Args)]
pub struct NameArg {
    /// Simulator name; default: $IBSCOPE_SIM, else `default`.
    #[arg(long, short = 'n', value_name = "NAME")]
    pub name: Option<String>,
}

impl NameArg {
    fn resolve(&self) -> String {
        self.name.clone().unwrap_or_else(sim::default_name)
    }
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Topology file (ibnetdiscover format, e.g. examples/fabrics/net).
    #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub file: PathBuf,
    #[command(flatten)]
    pub name: NameArg,
    /// Do not start OpenSM (ports stay Init, no LIDs: only directed routes work).
    #[arg(long)]
    pub no_sm: bool,
    /// Extra opensm.conf line, e.g. `routing_engine minhop` (repeatable).
    #[arg(long = "sm-option", value_name = "LINE")]
    pub sm_options: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct DownArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Stop every simulator started with `sim up`.
    #[arg(long, conflicts_with = "name")]
    pub all: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Node the command attaches at (SIM_HOST: ibsim's id, or any name ibscope prints);
    /// default: the first node of the topology.
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

#[derive(Debug, clap::Args)]
pub struct FaultArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Ask OpenSM for a heavy sweep afterwards and wait for SUBNET UP.
    #[arg(long)]
    pub resweep: bool,
    #[command(subcommand)]
    pub fault: Fault,
}

#[derive(Debug, Subcommand)]
pub enum Fault {
    /// Take a link down (ibsim `Unlink "NODE"[PORT]`).
    #[command(
        after_help = "Examples:\n  ibscope sim fault unlink Switch1 3\n  ibscope sim fault --resweep unlink L0001 5\n  ibscope sim fault unlink 'R1L001[9]'"
    )]
    Unlink {
        /// The node: ibsim's id, or any name ibscope prints (`leaf-r1-001`, `NAME[PORT]`).
        node: String,
        /// The port (not needed after NAME[PORT]).
        port: Option<u8>,
    },
    /// Restore a link taken down (ibsim `ReLink "NODE"[PORT]`).
    #[command(after_help = "Examples:\n  ibscope sim fault --resweep relink Switch1 3")]
    Relink {
        /// The node: ibsim's id, or any name ibscope prints (`leaf-r1-001`, `NAME[PORT]`).
        node: String,
        /// The port (not needed after NAME[PORT]).
        port: Option<u8>,
    },
    /// Drop RATE percent (0-100) of the MADs through a port (ibsim `Error`).
    #[command(
        after_help = "Examples:\n  ibscope sim fault loss Switch1 2 50\n  ibscope sim fault loss Switch1 2 100 --attribute 21   # every PortInfo\n  ibscope sim fault loss Switch1 2 0                   # heal"
    )]
    Loss {
        /// The node: ibsim's id, or any name ibscope prints (`leaf-r1-001`).
        node: String,
        port: u8,
        #[arg(value_parser = clap::value_parser!(u8).range(0..=100))]
        rate: u8,
        /// Only for this attribute ID (e.g. 21 for PortInfo).
        #[arg(long, value_name = "ATTR_ID")]
        attribute: Option<u16>,
    },
    /// Set a port counter (ibsim `PerformanceSet`); FIELD as perfquery names it, e.g.
    /// SymbolErrorCounter or PortCountersExtended.PortXmitData.
    #[command(
        after_help = "Examples:\n  ibscope sim fault set-counter L0002 3 SymbolErrorCounter 1234\n  ibscope sim fault set-counter Hca1 1 PortCountersExtended.PortXmitData 1000000"
    )]
    SetCounter {
        /// The node: ibsim's id, or any name ibscope prints (`leaf-r1-001`).
        node: String,
        port: u8,
        field: String,
        value: u64,
    },
    /// Send one line to ibsim's console as is and print its answer.
    #[command(after_help = "Examples:\n  ibscope sim fault raw help")]
    Raw { line: String },
}

pub fn run(_g: &Global, a: &Args) -> Result<ExitCode> {
    match &a.command {
        SimCommand::Up(up) => run_up(up),
        SimCommand::Down(down) => run_down(down),
        SimCommand::Restart(name) => {
            let sim = Sim::attach(&name.resolve())?;
            sim.restart()
                .with_context(|| format!("restarting simulator {:?}", sim.name()))?;
            eprintln!(
                "simulator {:?} restarted: ibsim pid {}{}",
                sim.name(),
                sim.ibsim_pid(),
                sim.opensm_pid()
                    .map_or(String::new(), |p| format!(", opensm pid {p} (SUBNET UP)"))
            );
            Ok(ExitCode::SUCCESS)
        }
        SimCommand::Exec(ex) => run_exec(ex),
        SimCommand::Fault(f) => run_fault(f),
        SimCommand::Status => run_status(),
        SimCommand::Gen(g) => crate::cmd::gen::run(g),
    }
}

fn run_up(a: &UpArgs) -> Result<ExitCode> {
    // A stop signal while waiting for SUBNET UP: the waits fail, and Drop stops what was
    // started.
    crate::signals::install(crate::signals::STOP_SIGNALS, crate::signals::Second::Wait);
    sim::interrupt_waits_when(|| crate::signals::received().is_some());
    let name = a.name.resolve();
    let fabric = read_topology(&a.file)?;
    let opts = SimOptions {
        topology: a.file.clone(),
        name: Some(name.clone()),
        with_sm: !a.no_sm,
        sm_config: a.sm_options.clone(),
        state_dir: None,
        detach: true,
    };
    let mut sim = Sim::start(opts).with_context(|| format!("starting simulator {name:?}"))?;
    if crate::signals::received().is_some() {
        sim.stop()?;
        bail!("interrupted");
    }
    let size = sim.size();
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "simulator {:?} up: {} switches, {} CAs from {}",
        sim.name(),
        size.switches,
        size.hcas + size.routers,
        sim.topology().display()
    )?;
    match sim.opensm_pid() {
        Some(p) => writeln!(
            err,
            "  ibsim pid {}, opensm pid {p} (SUBNET UP)",
            sim.ibsim_pid()
        )?,
        None => writeln!(err, "  ibsim pid {} (no SM)", sim.ibsim_pid())?,
    }
    writeln!(err, "  state: {}", sim.state_dir().display())?;
    writeln!(err, "  stop with: ibscope sim down --name {}", sim.name())?;
    if let Some(note) = fabric.and_then(|f| speed_note(&f, &a.file)) {
        writeln!(err, "{note}")?;
    }
    print!("{}", sim.export_lines());
    std::io::stdout().flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The topology `sim up` hands ibsim, read through `ibscope_topo::input` before anything
/// starts, so that a file that is no topology is refused at once. A file ibscope cannot
/// parse that uses ibsim's own directives (`include`, `do`) is left to ibsim, which reads
/// them: `None` then.
fn read_topology(file: &std::path::Path) -> Result<Option<ibscope_topo::Fabric>> {
    let text = ibscope_topo::input::read_text(file, "topology file")?;
    let ibsim_only = text.lines().any(|l| {
        let first = l.split_whitespace().next();
        first == Some("include") || first == Some("do")
    });
    match crate::fabric::parse_topology(&text, file, "topology file") {
        Ok((fabric, _)) => Ok(Some(fabric)),
        Err(_) if ibsim_only => Ok(None),
        Err(e) => Err(e),
    }
}

/// What ibsim does with the rates of a file it cannot run (NDR, XDR, FDR10): one line
/// naming how many ports come up at which speed instead. `None` when ibsim runs the file's
/// rates.
fn speed_note(fabric: &ibscope_topo::Fabric, file: &std::path::Path) -> Option<String> {
    let changes = ibscope_topo::gen::ibsim_speed_changes(fabric);
    if changes.is_empty() {
        return None;
    }
    let parts: Vec<String> = changes
        .iter()
        .map(|(file_speed, sim_speed, ports)| {
            format!("{ports} ports the file gives at {file_speed} run at {sim_speed}")
        })
        .collect();
    Some(format!(
        "note: ibsim runs lane speeds SDR..HDR, and FDR10 as QDR: in this simulation {}; \
         `ibscope --topology {}` reads the file's own rates",
        parts.join(", "),
        file.display()
    ))
}

fn run_down(a: &DownArgs) -> Result<ExitCode> {
    if a.all {
        let all = Sim::list()?;
        let mut failed = false;
        for status in &all {
            if let Err(e) = Sim::down_dir(&status.state_dir) {
                eprintln!("ibscope: {}: {e:#}", status.name);
                failed = true;
            } else {
                eprintln!("simulator {:?} down", status.name);
            }
        }
        return Ok(if failed {
            ExitCode::from(exit::ERROR)
        } else {
            ExitCode::SUCCESS
        });
    }
    let name = a.name.resolve();
    Sim::down(&name).with_context(|| format!("stopping simulator {name:?}"))?;
    eprintln!("simulator {name:?} down");
    Ok(ExitCode::SUCCESS)
}

fn attach_running(name: &NameArg) -> Result<Sim> {
    let name = name.resolve();
    let sim = Sim::attach(&name)?;
    if !sim.is_running() {
        bail!("simulator {name:?} is not running any more; `ibscope sim down --name {name}` cleans up");
    }
    Ok(sim)
}

fn run_exec(a: &ExecArgs) -> Result<ExitCode> {
    let sim = attach_running(&a.name)?;
    let (program, args) = a.command.split_first().expect("clap requires a command");
    let mut cmd = sim.command(program);
    cmd.args(args);
    // The user's relative paths mean their cwd, not the sim's client directory.
    cmd.current_dir(std::env::current_dir()?);
    if let Some(node) = &a.node {
        cmd.env("SIM_HOST", SimNames::read(&sim).id(node)?.0);
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {}", program.to_string_lossy()))?;
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => exit::ERROR as i32,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

fn run_fault(a: &FaultArgs) -> Result<ExitCode> {
    let sim = attach_running(&a.name)?;
    let names = SimNames::read(&sim);
    match &a.fault {
        Fault::Unlink { node, port } => {
            let (id, port) = names.port(node, *port)?;
            sim.unlink(&id, port)?
        }
        Fault::Relink { node, port } => {
            let (id, port) = names.port(node, *port)?;
            sim.relink(&id, port)?
        }
        Fault::Loss {
            node,
            port,
            rate,
            attribute,
        } => {
            let (id, port) = names.port(node, Some(*port))?;
            sim.set_error_rate(&id, port, *rate, *attribute)?
        }
        Fault::SetCounter {
            node,
            port,
            field,
            value,
        } => {
            let (id, port) = names.port(node, Some(*port))?;
            sim.set_counter(&id, port, field, *value)?
        }
        Fault::Raw { line } => {
            let out = sim.console_output(line)?;
            if !out.is_empty() {
                println!("{out}");
            }
        }
    }
    if a.resweep {
        sim.resweep()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A simulator's nodes as ibscope names them, to give ibsim its own ids: its topology
/// file read as ibscope reads it (ibsim's GUIDs, each node's id as an alias).
struct SimNames {
    /// `None` when ibscope cannot read the file (ibsim is more lenient): names then go to
    /// ibsim as they are.
    read: Option<SimFile>,
}

/// A simulator's topology as ibscope reads it: the fabric, its node ids as aliases, and
/// the ids with their GUIDs.
struct SimFile {
    fabric: ibscope_topo::Fabric,
    aliases: ibscope_topo::namemap::NameMap,
    ids: Vec<(String, u64)>,
}

impl SimNames {
    fn read(sim: &Sim) -> SimNames {
        let read = (|| {
            let text = ibscope_topo::input::read_text(sim.topology(), "simulator topology").ok()?;
            let parsed = ibscope_topo::ibnd::parse_with_warnings(&text).ok()?;
            let mut aliases = ibscope_topo::namemap::NameMap::new();
            for (id, guid) in &parsed.node_ids {
                aliases.insert_alias(id.clone(), *guid);
            }
            Some(SimFile {
                fabric: parsed.fabric,
                aliases,
                ids: parsed.node_ids,
            })
        })();
        SimNames { read }
    }

    /// ibsim's id of the node `text` names, and the port it names.
    fn id(&self, text: &str) -> Result<(String, Option<u8>)> {
        use ibscope_topo::resolve::{resolve, NameMatch};
        let Some(SimFile {
            fabric,
            aliases,
            ids,
        }) = &self.read
        else {
            return Ok((text.to_string(), None));
        };
        let target = resolve(fabric, Some(aliases), text, NameMatch::Exact)?;
        let node = fabric.node(target.node());
        let id = ids
            .iter()
            .find(|(_, g)| *g == node.guid)
            .map(|(id, _)| id.clone())
            .with_context(|| format!("no node id for GUID {:#018x} in the topology", node.guid))?;
        // A CA named alone stands for its port (its first linked one); a switch for none.
        let port = match target.named_port(fabric) {
            None if !node.is_switch() => Some(target.end(fabric).port),
            named => named,
        };
        Ok((id, port))
    }

    /// ibsim's id and the port: PORT, or the one NODE names as `NAME[PORT]`.
    fn port(&self, text: &str, port: Option<u8>) -> Result<(String, u8)> {
        let (id, named) = self.id(text)?;
        match (port, named) {
            (Some(p), Some(q)) if p != q => bail!(
                "{} names port {q}, PORT says {p}: give one",
                ibscope_topo::escape::quoted_for_terminal(text)
            ),
            (Some(p), _) | (None, Some(p)) => Ok((id, p)),
            (None, None) => bail!(
                "which port of {}? give PORT (or NAME[PORT])",
                ibscope_topo::escape::quoted_for_terminal(text)
            ),
        }
    }
}

fn run_status() -> Result<ExitCode> {
    let all = Sim::list()?;
    if all.is_empty() {
        eprintln!(
            "no simulators (state in {})",
            sim::state_base_dir().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<16} {:<8} {:<8} {:<8} TOPOLOGY",
        "NAME", "STATE", "IBSIM", "OPENSM"
    )?;
    for s in all {
        writeln!(
            out,
            "{:<16} {:<8} {:<8} {:<8} {}",
            s.name,
            if s.running { "running" } else { "dead" },
            s.ibsim_pid,
            s.opensm_pid.map_or("-".to_string(), |p| p.to_string()),
            s.topology.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
