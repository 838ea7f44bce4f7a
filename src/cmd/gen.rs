//! `ibscope sim gen`: topology files for ibsim, for tests, benchmarks and what-if planning.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use ibscope_topo::gen::{self, Degraded, FatTreeSpec, GenOptions, RailsSpec};

/// Generate a fabric topology (ibnetdiscover format, as ibsim reads it).
///
/// Examples:
///   ibscope sim gen fat-tree --levels 2 --radix 36 --hosts 512 -o ft512.topo
///   ibscope sim gen fat-tree --levels 3 --radix 40 --hosts 2048 --rate 4xHDR -o ft2k.topo
///   ibscope sim gen ring --switches 4 --hosts-per-switch 1 -o ring4.topo
///   ibscope sim gen fat-tree --hosts 64 --degrade L0001:19:1xHDR -o slow-uplink.topo
///   ibscope sim gen rails --hosts 64 --rails 8 -o gpu64.topo
///   ibscope sim gen rails --hosts 16 --rails 8 --degrade G0003R5:1:1xHDR -o slow-rail.topo
///   ibscope sim gen fat-tree --radix 64 --hosts 512 --rate 4xNDR --aggregation-nodes
///
/// Every port line carries its link's rate, so `ibscope --topology FILE` reads the fabric
/// at the rate given, whatever the generation (SDR DDR QDR FDR10 FDR EDR HDR NDR XDR).
/// ibsim runs lane speeds up to HDR, and FDR10 as QDR: the file enables ibsim up to the
/// nearest speed it runs, says so in a comment, and `sim up` says so too.
///
/// --degrade NODE:PORT:RATE runs that link at a lower rate (written on both ends, since
/// OpenSM re-negotiates a link from one end's enabled set).
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct GenArgs {
    #[command(subcommand)]
    pub shape: Shape,
    /// Rate of every link: WIDTHxSPEED, widths 1 2 4 8 12, speeds SDR DDR QDR FDR10 FDR EDR
    /// HDR NDR XDR (ibsim runs up to HDR, FDR10 as QDR: see above).
    #[arg(long, global = true, default_value = "4xHDR", value_parser = rate_text)]
    pub rate: String,
    /// One SHARP aggregation node per switch, on one more port (as NVIDIA Quantum switches
    /// show theirs: a CA "Mellanox Technologies Aggregation Node" behind port 65).
    #[arg(long, global = true)]
    pub aggregation_nodes: bool,
    /// Run one link slower: NODE:PORT:RATE, e.g. L0001:19:1xHDR (repeatable).
    #[arg(long = "degrade", global = true, value_name = "NODE:PORT:RATE")]
    pub degrade: Vec<String>,
    /// Output file; default stdout.
    #[arg(short, long, global = true, value_name = "FILE", value_hint = clap::ValueHint::AnyPath)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Shape {
    /// Leaf/spine (2 levels) or pods plus core (3 levels) of RADIX-port switches.
    #[command(
        after_help = "Examples:\n  ibscope sim gen fat-tree --radix 36 --hosts 512 -o ft512.topo\n  ibscope sim gen fat-tree --levels 3 --radix 40 --hosts 2048 -o ft2k.topo"
    )]
    FatTree {
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=3))]
        levels: u8,
        #[arg(long, default_value_t = 36)]
        radix: u8,
        #[arg(long)]
        hosts: usize,
    },
    /// A ring of switches (the classic credit-loop case under minhop routing).
    #[command(after_help = "Examples:\n  ibscope sim gen ring --switches 4 -o ring4.topo")]
    Ring {
        #[arg(long)]
        switches: usize,
        #[arg(long, default_value_t = 1)]
        hosts_per_switch: usize,
    },
    /// A rail-optimised GPU cluster: HOSTS servers with one HCA per rail ("gpu-0001
    /// mlx5_0" .. "mlx5_7"), HCA k of every server on the leaves of rail k, the spines
    /// shared by every rail. Server h sits on port h % K + 1 of leaf h / K of each rail
    /// (K = --hosts-per-leaf, default radix/2); each leaf has K uplinks (no
    /// oversubscription), one to each spine where the spines have the ports, else
    /// parallel ones to fewer spines. Node ids: HCAs G0001R0 (server 1, rail 0), leaves
    /// R0L001, spines S0001.
    #[command(
        after_help = "Examples:\n  ibscope sim gen rails --hosts 64 --rails 8 -o gpu64.topo\n  ibscope sim gen rails --hosts 1024 --rails 8 --radix 128 -o gpu1k.topo\n  ibscope sim gen rails --hosts 16 --rails 8 --hosts-per-leaf 4 --degrade G0003R5:1:1xHDR -o slow-rail.topo"
    )]
    Rails {
        #[arg(long)]
        hosts: usize,
        #[arg(long, default_value_t = 8)]
        rails: u8,
        /// Switch port count.
        #[arg(long, default_value_t = 64)]
        radix: u8,
        /// Servers per leaf; default radix/2.
        #[arg(long)]
        hosts_per_leaf: Option<usize>,
    },
    /// An X by Y mesh of switches without wrap-around.
    #[command(after_help = "Examples:\n  ibscope sim gen mesh --x 3 --y 3 -o mesh.topo")]
    Mesh {
        #[arg(long)]
        x: usize,
        #[arg(long)]
        y: usize,
        #[arg(long, default_value_t = 1)]
        hosts_per_switch: usize,
    },
}

/// A rate as `--expect` takes it, kept as the text the generator writes.
fn rate_text(text: &str) -> std::result::Result<String, String> {
    super::links::parse_rate(text).map(|r| r.to_string())
}

pub fn run(a: &GenArgs) -> Result<ExitCode> {
    let options = GenOptions {
        rate: Some(a.rate.clone()),
        aggregation_nodes: a.aggregation_nodes,
        degraded: a
            .degrade
            .iter()
            .map(|d| {
                d.parse::<Degraded>()
                    .map_err(|e| anyhow::anyhow!("--degrade {e}"))
            })
            .collect::<Result<_>>()?,
    };
    let text = match &a.shape {
        Shape::FatTree {
            levels,
            radix,
            hosts,
        } => {
            let mut spec = FatTreeSpec::new(*levels, *radix, *hosts);
            spec.options = options;
            gen::fat_tree(&spec)?
        }
        Shape::Ring {
            switches,
            hosts_per_switch,
        } => gen::ring_with(*switches, *hosts_per_switch, &options)?,
        Shape::Mesh {
            x,
            y,
            hosts_per_switch,
        } => gen::mesh_with(*x, *y, *hosts_per_switch, &options)?,
        Shape::Rails {
            hosts,
            rails,
            radix,
            hosts_per_leaf,
        } => {
            let mut spec = RailsSpec::new(*hosts, *rails, *radix);
            if let Some(k) = hosts_per_leaf {
                spec.hosts_per_leaf = *k;
            }
            spec.options = options;
            gen::rails(&spec)?
        }
    };
    match &a.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
