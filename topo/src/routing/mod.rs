//! Routing analysis over a [`Fabric`](crate::Fabric) whose switch linear forwarding tables (LFTs) were read
//! (`DiscoverOptions { read_lft: true }`) or modelled ([`compute_minhop_lfts`]).
//!
//! Everything here is a pure function of the fabric (IBA 18.2.4: a switch forwards a unicast
//! packet out of the port its LFT holds for the destination LID; LIDs above LinearFDBTop are
//! dropped):
//!
//! - [`trace`]: the path of one (source port, destination LID) pair, hop by hop, like
//!   `ibtracert`, with an error that names where the path breaks;
//! - [`dump`]: one switch's LFT with each entry's destination resolved, like `ibroute`
//!   ([`format_ibroute_like`] prints it in ibroute's layout);
//! - [`check`]: every CA port to every destination LID: unreachable destinations, black
//!   holes, forwarding loops, hop counts, route balance (per switch port and per layer, plus
//!   `check_lft_balance`'s rule) and credit loops in the channel dependency graph;
//! - [`load`]: places a traffic pattern (ring, pairs, all-to-all) on its routes and predicts
//!   each flow's rate with a max-min fair share of link capacity;
//! - [`collectives`]: a job's NCCL-style collectives (rail-local rings, trees, all-to-all)
//!   on the same placement, with a latency-bandwidth model of their bus bandwidth;
//! - [`compute_minhop_lfts`]: a modelling utility that fills LFTs the way a min-hop SM
//!   would, for what-if planning and tests.
//!
//! Conventions shared by these functions:
//! - A port is usable for forwarding when it is linked and neither end reports a known
//!   PortState other than Active (state 0 = unknown, as in topology files, counts as usable:
//!   a file has no states to judge by).
//! - Hop counts are links traversed: host to host across one leaf switch is 2.
//! - A switch's LID lives on its port 0: the owning switch must have `lft[lid] == 0`.
//! - A table with `linear_fdb_top == 0` is taken as unknown-top and bounded by its length.
//! - Node names in results are the raw NodeDescription (untrusted): escape before display
//!   ([`crate::escape::for_terminal`]); the `Display` impls here already do.

mod check;
mod collective;
mod dump;
mod index;
mod job;
mod load;
mod minhop;
mod path;
mod text;
mod trace;

pub use crate::model::refs::{NodeRef, PortRef};
pub use check::{
    check, BreakKind, BreakSummary, CdgStats, CheckOptions, CreditLoop, Direction, ForwardingLoop,
    LayerStats, PortLoad, RouteBalance, RouteReport, SwitchLftBalance, UnreachableDest,
};
pub use collective::{
    collectives, Collective, CollectiveReport, CurvePoint, JobHost, JobReport, Limit, ModelOptions,
    ModelText, MODEL,
};
pub use dump::{dump, format_ibroute_like, LftEntry};
pub use job::{job_servers, JobError, JobServers};
pub use load::{
    default_hosts, load, load_with, FlowResult, LinkLoad, LoadError, LoadOptions, LoadReport,
    Pattern,
};
pub use minhop::{compute_minhop_lfts, compute_minhop_lfts_with, MinhopOptions};
pub use path::{ChannelRef, Hop, Path, MAX_HOPS};
pub use text::{check_text, job_text, load_text};
pub use trace::{trace, trace_partial, PartialTrace, TraceError, Tracer};
