//! `ibscope sim responder`: a topology file served as a fabric from this process, over the
//! agent protocol, with recorded module memory on chosen ports.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ibscope_mad::cable::dump;
use ibscope_topo::resolve::{resolve, NameMatch, NamedTarget};
use ibscope_topo::responder::{FabricModel, FabricPort, ResponderOptions};
use ibscope_topo::responder_modules::RecordedModules;

use crate::cli::exit;

/// Serve a topology file as a fabric from this process, over the protocol `ibscope agent`
/// speaks: the command a `[[fabric]]` table runs, for a fabric without hardware or ibsim.
/// SMPs and PMA reads are answered from the file (LIDs assigned, counters clean, the local
/// port is the first CA's); module reads (SubnSet AccessRegister) from recorded module
/// dumps: any format `ibscope cables decode` reads. Every other cage is empty; without
/// --module no node answers module reads.
///
/// Examples:
///   # in a config file:
///   [[fabric]]
///   name = "recorded"
///   command = "ibscope sim responder examples/fabrics/net --module 'Switch1[3]=sfp.txt'"
///   # then:
///   ibscope -C recorded cables --access-register
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ResponderArgs {
    /// The topology (ibnetdiscover format or a JSON snapshot).
    #[arg(value_hint = clap::ValueHint::FilePath)]
    pub topology: PathBuf,
    /// A recorded module in a port: `NODE[PORT]=FILE` (the node by name or GUID); repeat
    /// for more.
    #[arg(long = "module", value_name = "NODE[PORT]=FILE")]
    pub modules: Vec<String>,
}

pub fn run(a: &ResponderArgs) -> Result<ExitCode> {
    let fabric = crate::fabric::load_file(&a.topology)?;
    let mut recorded = RecordedModules::new();
    for spec in &a.modules {
        let (at, file) = spec
            .rsplit_once('=')
            .ok_or_else(|| anyhow!("--module {spec:?}: not NODE[PORT]=FILE"))?;
        let end = match resolve(&fabric, None, at, NameMatch::Exact)
            .with_context(|| format!("--module {spec:?}"))?
        {
            NamedTarget::Port(end) => end,
            NamedTarget::Node(_) | NamedTarget::Lid { .. } => {
                bail!("--module {spec:?}: name the port, as NODE[PORT]")
            }
        };
        let path = PathBuf::from(file);
        let bytes = ibscope_topo::input::read_bytes_up_to(&path, "module dump", dump::MOST_BYTES)?;
        let memory = dump::parse(&bytes)
            .map_err(|e| anyhow!("{}: {e}", path.display()))?
            .memory;
        recorded.insert(fabric.node(end.node).guid, end.port, memory);
    }
    let model = FabricModel::from_fabric(&fabric, 0)?.with_modules(recorded);
    let port = FabricPort::new(Arc::new(model), ResponderOptions::default());
    let (port, receiver) = ibscope_topo::responder_relay::split(port);
    let stdin = std::io::stdin().lock();
    ibscope_mad::relay::serve(Ok((port, receiver)), stdin, std::io::stdout())?;
    Ok(ExitCode::from(exit::OK))
}
