//! SA tables: one SubnAdmGetTable read whole (the kernel reassembles its RMPP transfer),
//! and whether the whole table arrived.
//!
//! How many records the table holds is what the SA says: the PayloadLength of an RMPP
//! transfer's first segment; or, when the reply is one whole MAD without RMPP (a transport
//! that cuts every reply to one MAD, as the simulator's shim does), the number of records
//! the SA confirms when asked for each one alone (one SubnAdmGet per key of the table, the
//! keys taken from a discovery of the fabric).

use std::time::Duration;

use ibscope_mad::attribute::{Attribute, SubnAdm};
use ibscope_mad::engine::{Engine, MadError, MadPort, Request};
use ibscope_mad::error::DecodeError;
use ibscope_mad::sa::{comp_mask, LinkRecord, NodeRecord, PathRecord, PortInfoRecord, SaStatus};
use ibscope_mad::umad::SIMULATOR_INTACT_MAD_BYTES;

use crate::Fabric;

/// An SA status, in the words of the specification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} (SA status {code:#06x})", .status.describe())]
pub struct SaStatusError {
    pub status: SaStatus,
    pub code: u16,
}

/// A failed SA request as the error to show: an SA status in its words, any other error
/// as it is (so a lost transport is still found in the error's chain).
pub fn sa_error(e: MadError) -> Box<dyn std::error::Error + Send + Sync> {
    if let MadError::Status(s) = &e {
        if let Some(status) = SaStatus::from_mad_status(*s) {
            return Box::new(SaStatusError { status, code: s.0 });
        }
    }
    Box::new(e)
}

/// Why a table could not be listed; `what` is the record's name ("NodeRecord").
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("SA {what} table query")]
    Query {
        what: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("SA {what} table reply")]
    Reply {
        what: &'static str,
        #[source]
        source: DecodeError,
    },
    #[error(transparent)]
    Intact(DecodeError),
}

/// The least a table query waits for its reply per attempt: the SA builds the whole table
/// before the first MAD goes out (saquery waits libibmad's default, 1 s, too).
pub const TABLE_TIMEOUT: Duration = Duration::from_secs(1);

/// A table as `sa` lists it.
pub struct Listing<R> {
    pub records: Vec<R>,
    pub completeness: Completeness,
}

/// Whether every record of the table arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completeness {
    Complete,
    /// Fewer records arrived than the SA says the table holds.
    Partial {
        table_size: usize,
        counted: Counted,
    },
    /// The reply may have been cut, and the SA's own count could not be taken.
    Unknown {
        why: String,
    },
}

/// Where the SA's count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The RMPP header of the reply (PayloadLength).
    Rmpp,
    /// One SubnAdmGet per key of the table.
    OneByOne,
}

/// Which records of a table to ask for: the component mask and the template.
pub struct Query<R> {
    pub mask: u64,
    pub template: R,
    /// Only records of this LID (the key lists for the count follow it).
    pub lid: Option<u16>,
}

impl<R: Default> Query<R> {
    pub fn whole() -> Query<R> {
        Query {
            mask: 0,
            template: R::default(),
            lid: None,
        }
    }
}

/// Ask the SA at `sm_lid` for the table, read the reply whole and, when it may be cut,
/// count the table one record at a time. `discover_keys` discovers the fabric whose ports
/// are the keys of that count (the caller's way: a progress bar on a terminal); its error
/// is the text of the failure.
pub fn list<R: Countable, P: MadPort>(
    engine: &mut Engine<P>,
    sm_lid: u16,
    query: &Query<R>,
    discover_keys: impl FnOnce(&mut Engine<P>) -> Result<Fabric, String>,
) -> Result<Listing<R>, TableError> {
    let what = R::NAME;
    let config = engine.config();
    engine.set_config(ibscope_mad::engine::EngineConfig {
        timeout: config.timeout.max(TABLE_TIMEOUT),
        ..config
    });
    let reply = engine.call(Request::sa_get_table(sm_lid, query.mask, &query.template));
    engine.set_config(config);
    let reply = reply.map_err(|e| TableError::Query {
        what,
        source: sa_error(e),
    })?;
    let message = reply.message();
    let mut table = ibscope_mad::sa::table(&message, R::LEN)
        .map_err(|source| TableError::Reply { what, source })?;
    if table.maybe_cut && engine.local().is_simulator() {
        // The simulator's shim hands over only the first 224 bytes of a MAD intact: the
        // records past them are not the SA's (saquery lists them anyway).
        let intact = &message[..message.len().min(SIMULATOR_INTACT_MAD_BYTES)];
        table.records = ibscope_mad::sa::table(intact, R::LEN)
            .map_err(TableError::Intact)?
            .records;
    }
    let records = table
        .records
        .iter()
        .map(|r| R::decode(r))
        .collect::<Result<Vec<R>, _>>()
        .map_err(|source| TableError::Reply { what, source })?;
    let completeness = match table.announced {
        Some(m) if m > records.len() => Completeness::Partial {
            table_size: m,
            counted: Counted::Rmpp,
        },
        Some(_) => Completeness::Complete,
        None if table.maybe_cut => {
            match count_one_by_one::<R, P>(engine, sm_lid, query.lid, discover_keys) {
                Ok(m) if m > records.len() => Completeness::Partial {
                    table_size: m,
                    counted: Counted::OneByOne,
                },
                Ok(_) => Completeness::Complete,
                Err(why) => Completeness::Unknown { why },
            }
        }
        None => Completeness::Complete,
    };
    Ok(Listing {
        records,
        completeness,
    })
}

/// How many records of the table the SA confirms one key at a time.
fn count_one_by_one<R: Countable, P: MadPort>(
    engine: &mut Engine<P>,
    sm_lid: u16,
    lid: Option<u16>,
    discover_keys: impl FnOnce(&mut Engine<P>) -> Result<Fabric, String>,
) -> Result<usize, String> {
    let fabric = discover_keys(engine)
        .map_err(|e| format!("discovering the fabric for the keys failed: {e}"))?;
    let requests = R::single_queries(&fabric, sm_lid, lid);
    if requests.len() > MAX_SINGLE_QUERIES {
        return Err(format!(
            "counting it would take {} queries (more than {MAX_SINGLE_QUERIES})",
            requests.len()
        ));
    }
    let (mut found, mut failed) = (0usize, Vec::new());
    engine.run(
        requests.into_iter().map(|r| ((), r)),
        |(), result, _| match result {
            Ok(_) => found += 1,
            Err(MadError::Status(s))
                if SaStatus::from_mad_status(s) == Some(SaStatus::NoRecords) => {}
            Err(e) => failed.push(e),
        },
    );
    if let Some(e) = engine.transport_lost() {
        return Err(e.to_string());
    }
    match failed.first() {
        None => Ok(found),
        Some(e) => Err(format!(
            "{} of the one-record queries failed ({})",
            failed.len(),
            sa_error(e.clone())
        )),
    }
}

/// Counting by single queries stops being reasonable beyond this many.
const MAX_SINGLE_QUERIES: usize = 1 << 20;

/// A table whose records can be asked for one at a time, by keys found in the fabric.
pub trait Countable: Attribute<Class = SubnAdm> + Default {
    /// The record's length on the wire (without the padding to 8-byte words).
    const LEN: usize;
    /// One SubnAdmGet per record the table can hold (only records of `lid` when given).
    fn single_queries(fabric: &Fabric, sm_lid: u16, lid: Option<u16>) -> Vec<Request>;
}

/// Every end port's LID: a switch's port 0, each CA or router port with a LID.
fn endport_lids(fabric: &Fabric) -> Vec<u16> {
    let mut lids: Vec<u16> = fabric
        .nodes()
        .flat_map(|(_, n)| {
            n.ports
                .iter()
                .filter(|p| p.lid != 0 && (!n.is_switch() || p.number == 0))
                .map(|p| p.lid)
                .collect::<Vec<_>>()
        })
        .collect();
    lids.sort_unstable();
    lids.dedup();
    lids
}

/// (LID, port) of every port a per-port table can name: a switch's ports 0..=N (port 0
/// only when `with_port0`) under the switch's LID, each CA or router port with a LID.
fn lid_ports(fabric: &Fabric, with_port0: bool) -> Vec<(u16, u8)> {
    let mut keys = Vec::new();
    for (_, n) in fabric.nodes() {
        if n.is_switch() {
            let Some(lid) = n.lid() else { continue };
            let first = u8::from(!with_port0);
            keys.extend((first..=n.num_ports).map(|p| (lid, p)));
        } else {
            keys.extend(
                n.ports
                    .iter()
                    .filter(|p| p.lid != 0 && p.number != 0)
                    .map(|p| (p.lid, p.number)),
            );
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

impl Countable for NodeRecord {
    const LEN: usize = NodeRecord::WIRE_LEN;
    fn single_queries(fabric: &Fabric, sm_lid: u16, lid: Option<u16>) -> Vec<Request> {
        endport_lids(fabric)
            .into_iter()
            .filter(|l| lid.map_or(true, |want| want == *l))
            .map(|l| node_request(sm_lid, l))
            .collect()
    }
}

impl Countable for PathRecord {
    const LEN: usize = PathRecord::WIRE_LEN;
    fn single_queries(fabric: &Fabric, sm_lid: u16, _lid: Option<u16>) -> Vec<Request> {
        let lids = endport_lids(fabric);
        let mut out = Vec::with_capacity(lids.len() * lids.len());
        for &s in &lids {
            for &d in &lids {
                out.push(path_request(sm_lid, s, d));
            }
        }
        out
    }
}

impl Countable for LinkRecord {
    const LEN: usize = LinkRecord::WIRE_LEN;
    fn single_queries(fabric: &Fabric, sm_lid: u16, lid: Option<u16>) -> Vec<Request> {
        use comp_mask::link_record as lr;
        lid_ports(fabric, false)
            .into_iter()
            .filter(|(l, _)| lid.map_or(true, |want| want == *l))
            .map(|(from_lid, from_port)| {
                let template = LinkRecord {
                    from_lid,
                    from_port,
                    ..Default::default()
                };
                Request::sa_get(sm_lid, lr::FROM_LID | lr::FROM_PORT, &template)
            })
            .collect()
    }
}

impl Countable for PortInfoRecord {
    const LEN: usize = PortInfoRecord::WIRE_LEN;
    fn single_queries(fabric: &Fabric, sm_lid: u16, lid: Option<u16>) -> Vec<Request> {
        use comp_mask::port_info_record as pir;
        lid_ports(fabric, true)
            .into_iter()
            .filter(|(l, _)| lid.map_or(true, |want| want == *l))
            .map(|(endport_lid, port_num)| {
                let template = PortInfoRecord {
                    endport_lid,
                    port_num,
                    ..Default::default()
                };
                Request::sa_get(sm_lid, pir::ENDPORT_LID | pir::PORT_NUM, &template)
            })
            .collect()
    }
}

/// SubnAdmGet(NodeRecord) by LID.
pub fn node_request(sm_lid: u16, lid: u16) -> Request {
    let template = NodeRecord {
        lid,
        ..Default::default()
    };
    Request::sa_get(sm_lid, comp_mask::node_record::LID, &template)
}

/// SubnAdmGet(PathRecord) with SLID, DLID and NumbPath 1.
pub fn path_request(sm_lid: u16, src: u16, dst: u16) -> Request {
    use comp_mask::path_record as pr;
    let template = PathRecord {
        slid: src,
        dlid: dst,
        numb_path: 1,
        ..Default::default()
    };
    Request::sa_get(sm_lid, pr::SLID | pr::DLID | pr::NUMB_PATH, &template)
}
