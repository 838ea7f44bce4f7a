//! What a fabric's sweeper tells its supervisor, in order, over a channel: the port is
//! open, a page a family at a time, the fabric after a discovery, and how it ended.

use ibscope_topo::{Fabric, FabricId};

use crate::pieces::Deflated;

/// One message of a sweeper.
#[derive(Debug)]
pub enum Frame {
    /// The management port is open (`port`: "CA/port", or the relay's command); `id` is
    /// the fabric's name and, with several fabrics, its subnet identity.
    Opened { port: String, id: FabricId },
    /// A family of a sweep's page: its name, head (HELP and TYPE lines) and samples.
    Family {
        name: String,
        head: String,
        samples: Deflated,
    },
    /// A family of a sweep's page exactly as on the last page this sweeper sent: its
    /// head and samples are not sent again.
    Unchanged { name: String },
    /// The families sent since the last page are a sweep's page; `failure` when the sweep
    /// reached no port.
    Page { failure: Option<String> },
    /// With several fabrics, after each discovery: the fabric as discovered, for the
    /// findings only fabrics seen together show (planes).
    Fabric { fabric: Box<Fabric> },
    /// The transport was lost: the sweeper ends.
    Lost { error: String },
    /// The port could not be opened: the sweeper ends.
    Failed { error: String },
    /// Asked to stop, the sweeper has closed the port and is about to end.
    Closed,
}
