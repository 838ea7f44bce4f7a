//! Reading the pluggable modules of a fabric's ports over InfiniBand, through the firmware
//! registers NVIDIA's tools use (`ibscope_mad::cable::register`): for a switch, PLIB says
//! which local port carries each InfiniBand port; PMLP says which module (and which of its
//! lanes) a local port uses; MCIA reads the module's memory, 28 bytes an SMP: the lower
//! page, the halves it names, and a CMIS module's further banks of page 11h. A CA's local
//! port is its InfiniBand port.
//!
//! Every one of these is a SubnSet(AccessRegister) whose operation TLV says query: the
//! caller must have been asked to send it ([`ModuleReadMode`]). A node whose first such
//! read is not answered as a register (no reply, a MAD status, a reply without the
//! register) is asked nothing more: all its ports are reported not read, with why, so a
//! fabric without the vendor's registers (the simulator) is told apart at once.
//!
//! Verified against recorded module memory served by [`crate::responder`] only, not on
//! hardware: which local port a switch gives an InfiniBand port and which module lanes a
//! split port uses are the registers' answers as mstflint's layouts describe them.

use std::collections::BTreeMap;

use ibscope_mad::attr::link::Speed;
use ibscope_mad::cable::decode::{bank_halves, halves_to_read};
use ibscope_mad::cable::register::{
    mcia_answer, mcia_query, plib_query, pmlp_query, AccessRegister, ModuleStatus, Plib, Pmlp,
    RegisterStatus, MCIA, MCIA_SMP_CHUNK,
};
use ibscope_mad::cable::{HalfAddr, ModuleMemory, ADDR_A0, HALF};
use ibscope_mad::engine::{FollowUps, MadError, Request, Response};
use ibscope_mad::smp::{DrPath, SmpRoute};

use crate::discover::SmpExecutor;
use crate::model::refs::PortRef;
use crate::model::{End, Fabric, NodeId};
use crate::namemap::NameMap;

/// Whether the modules of a fabric's ports may be read: reading one sends a SubnSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModuleReadMode {
    /// Not asked to send SubnSet(AccessRegister): every port is reported not read.
    #[default]
    NotAllowed,
    /// Read them (`--access-register`).
    AccessRegister,
}

/// Why a port's module was not read when reading was not asked for.
pub const NOT_ALLOWED: &str = "not read: reading a module over InfiniBand sends \
    SubnSet(AccessRegister) (a register query carried in a Set MAD); --access-register allows it";

/// One port and what its module read gave.
#[derive(Debug, Clone)]
pub struct PortModule {
    pub at: PortRef,
    pub remote: Option<PortRef>,
    /// The link's active lane speed, when it is up.
    pub link_speed: Option<Speed>,
    pub read: ModuleRead,
}

/// What reading one port's module gave.
#[derive(Debug, Clone)]
pub enum ModuleRead {
    /// The module's memory, which module of the node it is, and the module lanes this port
    /// uses (from 1; every lane when the mapping says none).
    Read {
        memory: ModuleMemory,
        slot: u8,
        module: u8,
        lanes: Vec<u8>,
    },
    /// The cage is empty (MCIA: MODULE_NOT_CONNECTED).
    Empty,
    /// Not read, and why.
    NotRead(String),
}

/// Every port's module read, and what it cost.
#[derive(Debug, Clone, Default)]
pub struct FabricModules {
    pub ports: Vec<PortModule>,
    /// SubnSet(AccessRegister) MADs sent.
    pub mads_sent: u64,
}

/// How a fabric's module reads went, port by port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadCounts {
    /// Ports whose modules were asked for.
    pub ports: usize,
    pub read: usize,
    /// Ports with no module in their cage.
    pub empty: usize,
    pub not_read: usize,
}

impl FabricModules {
    pub fn counts(&self) -> ReadCounts {
        let mut c = ReadCounts {
            ports: self.ports.len(),
            ..ReadCounts::default()
        };
        for p in &self.ports {
            match p.read {
                ModuleRead::Read { .. } => c.read += 1,
                ModuleRead::Empty => c.empty += 1,
                ModuleRead::NotRead(_) => c.not_read += 1,
            }
        }
        c
    }
}

/// The ports whose modules are read: every physical port of every node discovery knows
/// (a switch's port 0 has none), linked or not: a dark module often takes its link down.
fn ports_of(fabric: &Fabric, names: Option<&NameMap>) -> Vec<(NodeId, PortModule)> {
    let mut out = Vec::new();
    for (id, node) in fabric.nodes() {
        for port in node.ports.iter().filter(|p| p.number != 0) {
            let end = End {
                node: id,
                port: port.number,
            };
            let remote = fabric.peer(end).map(|e| {
                let n = fabric.node(e.node);
                PortRef::new(n, e.port, names)
            });
            out.push((
                id,
                PortModule {
                    at: PortRef::new(node, port.number, names),
                    link_speed: port.is_active().then_some(port.speed_active).flatten(),
                    remote,
                    read: ModuleRead::NotRead(NOT_ALLOWED.to_string()),
                },
            ));
        }
    }
    out
}

/// Every port of `fabric`, none read, each saying why.
pub fn not_read(fabric: &Fabric, names: Option<&NameMap>) -> FabricModules {
    FabricModules {
        ports: ports_of(fabric, names)
            .into_iter()
            .map(|(_, p)| p)
            .collect(),
        mads_sent: 0,
    }
}

/// A request's place in the reads.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A switch's local port `local`: which InfiniBand port it carries.
    Plib { node: usize, local: u16 },
    /// Port `port` (an index into the ports read) at local port `local`: its module.
    Pmlp { port: usize, local: u16 },
    /// `len` bytes at `offset` of `half` of port `port`'s module.
    Mcia {
        port: usize,
        half: HalfAddr,
        offset: u8,
    },
}

/// One node's reads.
struct NodeReads {
    route: SmpRoute,
    switch: bool,
    /// Indexes of its ports in the ports read.
    ports: Vec<usize>,
    /// InfiniBand port to local port (PLIB's answers), for a switch.
    local_of: BTreeMap<u8, u16>,
    /// The last local port PLIB is asked about.
    scan_last: u16,
    plib_pending: usize,
}

/// One port's module being read.
#[derive(Default)]
struct PortReads {
    slot: u8,
    module: u8,
    lanes: Vec<u8>,
    memory: ModuleMemory,
    /// Halves being read, with their bytes so far and how many chunks are still due.
    partial: BTreeMap<HalfAddr, ([u8; HALF], usize)>,
    failed: Option<String>,
    empty: bool,
}

/// The local ports a switch's PLIB is asked about: its InfiniBand ports and the gaps a
/// split-capable switch leaves (two local ports per cage), 8 bits' worth at most.
fn local_ports_to_scan(num_ports: u8) -> u16 {
    (2 * u16::from(num_ports) + 2).min(255)
}

/// The reads of one half: (offset in the half, length) of its chunks of at most 28 bytes.
fn half_chunks() -> impl Iterator<Item = (u8, u16)> {
    (0..HALF)
        .step_by(MCIA_SMP_CHUNK)
        .map(|offset| (offset as u8, MCIA_SMP_CHUNK.min(HALF - offset) as u16))
}

fn set(route: &SmpRoute, register: &AccessRegister) -> Request {
    Request::set(route, 0, register)
}

/// Reads the modules of every port of `fabric` through `exec`, or, unless `mode` allows
/// the SubnSets, says why each was not read.
pub fn read_modules<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    names: Option<&NameMap>,
    mode: ModuleReadMode,
) -> FabricModules {
    if mode == ModuleReadMode::NotAllowed {
        return not_read(fabric, names);
    }
    let before = exec.mads_sent();
    let listed = ports_of(fabric, names);
    let mut reader = Reader::new(fabric, &listed);
    let mut ports: Vec<PortModule> = listed.into_iter().map(|(_, p)| p).collect();
    let first: Vec<(Step, Request)> = reader.probes();
    let mut on_done = |step: Step, reply: Result<Response, MadError>, q: &mut FollowUps<Step>| {
        reader.done(step, reply, q);
    };
    exec.execute(first, &mut on_done);
    for (i, p) in ports.iter_mut().enumerate() {
        p.read = reader.outcome(i);
    }
    FabricModules {
        ports,
        mads_sent: exec.mads_sent() - before,
    }
}

/// The state of the reads while replies come in.
struct Reader {
    nodes: Vec<NodeReads>,
    /// Per port read: its node (an index into `nodes`), port number, state.
    ports: Vec<(usize, u8, PortReads)>,
}

impl Reader {
    fn new(fabric: &Fabric, listed: &[(NodeId, PortModule)]) -> Reader {
        let mut nodes: Vec<NodeReads> = Vec::new();
        let mut node_of: BTreeMap<NodeId, usize> = BTreeMap::new();
        let mut ports = Vec::new();
        for (i, (id, p)) in listed.iter().enumerate() {
            let n = *node_of.entry(*id).or_insert_with(|| {
                let node = fabric.node(*id);
                let route = match node.dr_path.as_deref().map(DrPath::parse) {
                    Some(Ok(path)) => SmpRoute::Directed(path),
                    _ => SmpRoute::Lid(p.at.lid),
                };
                nodes.push(NodeReads {
                    route,
                    switch: node.is_switch(),
                    ports: Vec::new(),
                    local_of: BTreeMap::new(),
                    scan_last: local_ports_to_scan(node.num_ports),
                    plib_pending: 0,
                });
                nodes.len() - 1
            });
            nodes[n].ports.push(i);
            ports.push((n, p.at.port, PortReads::default()));
        }
        Reader { nodes, ports }
    }

    /// The first read of each node: a switch's PLIB of local port 1, a CA's first port's
    /// PMLP. Whether it is answered decides whether the node is asked more.
    fn probes(&self) -> Vec<(Step, Request)> {
        let mut out = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            let Some(&first) = node.ports.first() else {
                continue;
            };
            if node.switch {
                out.push((
                    Step::Plib { node: n, local: 1 },
                    set(&node.route, &plib_query(1)),
                ));
            } else {
                let local = u16::from(self.ports[first].1);
                out.push((
                    Step::Pmlp { port: first, local },
                    set(&node.route, &pmlp_query(local)),
                ));
            }
        }
        out
    }

    /// Every port of node `n` not read, for `why`.
    fn fail_node(&mut self, n: usize, why: &str) {
        for &i in &self.nodes[n].ports {
            let p = &mut self.ports[i].2;
            if p.failed.is_none() && !p.empty {
                p.failed = Some(why.to_string());
            }
        }
    }

    fn done(&mut self, step: Step, reply: Result<Response, MadError>, q: &mut FollowUps<Step>) {
        let (asked, n) = match step {
            Step::Plib { node, local } => (plib_query(local), node),
            Step::Pmlp { port, local } => (pmlp_query(local), self.ports[port].0),
            Step::Mcia { port, .. } => (AccessRegister::query(MCIA, &[]), self.ports[port].0),
        };
        let answer = match register_reply(&reply, &asked) {
            Ok(a) => a,
            Err(why) => {
                // A node that does not answer its first read is asked nothing more; a
                // later read that fails fails its port (or its PLIB entry) alone.
                let first = match step {
                    Step::Plib { local, .. } => local == 1,
                    Step::Pmlp { port, .. } => {
                        !self.nodes[n].switch && self.nodes[n].ports.first() == Some(&port)
                    }
                    Step::Mcia { .. } => false,
                };
                if first {
                    self.fail_node(n, &why);
                } else {
                    self.step_failed(step, &why, q);
                }
                return;
            }
        };
        match step {
            Step::Plib { node, local } => self.on_plib(node, local, &answer, q),
            Step::Pmlp { port, local } => self.on_pmlp(port, local, &answer, q),
            Step::Mcia { port, half, offset } => self.on_mcia(port, half, offset, &answer, q),
        }
    }

    /// A read that failed after its node answered others.
    fn step_failed(&mut self, step: Step, why: &str, q: &mut FollowUps<Step>) {
        match step {
            Step::Plib { node, .. } => self.plib_done(node, q),
            Step::Pmlp { port, .. } => self.ports[port].2.failed = Some(format!("PMLP: {why}")),
            Step::Mcia { port, .. } => {
                let p = &mut self.ports[port].2;
                p.failed.get_or_insert_with(|| format!("MCIA: {why}"));
            }
        }
    }

    fn on_plib(&mut self, n: usize, local: u16, answer: &AccessRegister, q: &mut FollowUps<Step>) {
        let node = &mut self.nodes[n];
        if local == 1 {
            if answer.status() == RegisterStatus::RegisterNotSupported {
                // No PLIB (older switches): local ports are InfiniBand ports, as on a CA.
                for &i in &node.ports {
                    let local = u16::from(self.ports[i].1);
                    q.push((
                        Step::Pmlp { port: i, local },
                        set(&node.route, &pmlp_query(local)),
                    ));
                }
                return;
            }
            node.plib_pending = usize::from(node.scan_last);
            for l in 2..=node.scan_last {
                q.push((
                    Step::Plib { node: n, local: l },
                    set(&node.route, &plib_query(l)),
                ));
            }
        }
        if answer.status() == RegisterStatus::Ok {
            let ib = Plib::decode(&answer.register).map_or(0, |p| p.ib_port);
            if let Ok(ib @ 1..) = u8::try_from(ib) {
                node.local_of.entry(ib).or_insert(local);
            }
        }
        self.plib_done(n, q);
    }

    /// One PLIB answered or failed; when the last has, each port's PMLP is asked.
    fn plib_done(&mut self, n: usize, q: &mut FollowUps<Step>) {
        let node = &mut self.nodes[n];
        node.plib_pending = node.plib_pending.saturating_sub(1);
        if node.plib_pending > 0 {
            return;
        }
        for &i in &node.ports {
            let port = self.ports[i].1;
            match node.local_of.get(&port) {
                Some(&local) => q.push((
                    Step::Pmlp { port: i, local },
                    set(&node.route, &pmlp_query(local)),
                )),
                None => {
                    self.ports[i].2.failed = Some(format!(
                        "no local port of the switch carries InfiniBand port {port} (PLIB of \
                         local ports 1-{})",
                        node.scan_last
                    ))
                }
            }
        }
    }

    fn on_pmlp(&mut self, i: usize, local: u16, answer: &AccessRegister, q: &mut FollowUps<Step>) {
        let n = self.ports[i].0;
        if !self.nodes[n].switch && self.nodes[n].ports.first() == Some(&i) {
            // A CA's probe answered: its other ports' mappings are asked now.
            for &j in self.nodes[n].ports.iter().skip(1) {
                let local = u16::from(self.ports[j].1);
                q.push((
                    Step::Pmlp { port: j, local },
                    set(&self.nodes[n].route, &pmlp_query(local)),
                ));
            }
        }
        let status = answer.status();
        let p = &mut self.ports[i].2;
        if status != RegisterStatus::Ok {
            p.failed = Some(format!("PMLP of local port {local}: {status}"));
            return;
        }
        let Ok(pmlp) = Pmlp::decode(&answer.register_padded(Pmlp::WIRE_LEN)) else {
            p.failed = Some("PMLP: a malformed register".to_string());
            return;
        };
        let lanes = pmlp.used_lanes();
        let Some(first) = lanes.first() else {
            p.failed = Some(format!(
                "local port {local} uses no module lanes (PMLP width 0)"
            ));
            return;
        };
        p.slot = first.slot_index;
        p.module = first.module;
        p.lanes = if pmlp.m_lane_m {
            Vec::new()
        } else {
            lanes
                .iter()
                .filter(|l| l.module == first.module)
                .map(|l| l.tx_lane + 1)
                .collect()
        };
        self.read_half(i, HalfAddr::lower(ADDR_A0), q);
    }

    fn read_half(&mut self, i: usize, half: HalfAddr, q: &mut FollowUps<Step>) {
        let route = &self.nodes[self.ports[i].0].route;
        let p = &mut self.ports[i].2;
        p.partial.insert(half, ([0u8; HALF], half_chunks().count()));
        // MCIA addresses a page's 256 bytes: the lower half at 0, the upper at 128.
        let (base, page) = if half.upper { (128, half.page) } else { (0, 0) };
        for (offset, len) in half_chunks() {
            let query = mcia_query(
                p.slot,
                p.module,
                half.i2c,
                half.bank,
                page,
                base + u16::from(offset),
                len,
            );
            q.push((
                Step::Mcia {
                    port: i,
                    half,
                    offset,
                },
                set(route, &query),
            ));
        }
    }

    fn on_mcia(
        &mut self,
        i: usize,
        half: HalfAddr,
        offset: u8,
        answer: &AccessRegister,
        q: &mut FollowUps<Step>,
    ) {
        let p = &mut self.ports[i].2;
        if p.failed.is_some() || p.empty {
            return;
        }
        if answer.status() != RegisterStatus::Ok {
            p.failed = Some(format!("MCIA: {}", answer.status()));
            return;
        }
        let (status, data) = match mcia_answer(answer) {
            Ok(a) => a,
            Err(e) => {
                p.failed = Some(format!("MCIA: {e}"));
                return;
            }
        };
        match status {
            ModuleStatus::Success => {}
            ModuleStatus::NotConnected => {
                p.empty = true;
                return;
            }
            other => {
                p.failed = Some(format!("the module answers {other} ({half})"));
                return;
            }
        }
        let Some((bytes, due)) = p.partial.get_mut(&half) else {
            return;
        };
        let start = usize::from(offset);
        let end = (start + data.len()).min(HALF);
        bytes[start..end].copy_from_slice(&data[..end - start]);
        *due = due.saturating_sub(1);
        if *due > 0 {
            return;
        }
        let whole = *bytes;
        p.partial.remove(&half);
        p.memory.insert(half, whole);
        let more = if half == HalfAddr::lower(ADDR_A0) {
            match halves_to_read(&whole) {
                Ok(more) => more,
                Err(e) => {
                    p.failed = Some(e.to_string());
                    return;
                }
            }
        } else if half == HalfAddr::page(ADDR_A0, 0x01) {
            // CMIS: the banks beyond bank 0 page 01h says the module has.
            bank_halves(&p.memory)
        } else {
            Vec::new()
        };
        for h in more {
            self.read_half(i, h, q);
        }
    }

    fn outcome(&self, i: usize) -> ModuleRead {
        let (_, _, p) = &self.ports[i];
        if p.empty {
            return ModuleRead::Empty;
        }
        if let Some(why) = &p.failed {
            return ModuleRead::NotRead(why.clone());
        }
        if p.memory.is_empty() || !p.partial.is_empty() {
            return ModuleRead::NotRead("the module's memory was not read whole".to_string());
        }
        ModuleRead::Read {
            memory: p.memory.clone(),
            slot: p.slot,
            module: p.module,
            lanes: p.lanes.clone(),
        }
    }
}

/// A reply as an AccessRegister answer to `asked`, or why it is none.
fn register_reply(
    reply: &Result<Response, MadError>,
    asked: &AccessRegister,
) -> Result<AccessRegister, String> {
    match reply {
        Err(MadError::Timeout { attempts }) => Err(format!(
            "no reply to SubnSet(AccessRegister) after {attempts} attempt(s): the node does \
             not implement it, or its M_Key protection drops a Set without the right key (see \
             --m-key)"
        )),
        Err(MadError::Status(status)) => Err(format!(
            "the node does not read modules through AccessRegister (MAD status {status})"
        )),
        Err(e) => Err(format!("SubnSet(AccessRegister): {e}")),
        Ok(r) => match r.decode::<AccessRegister>() {
            Ok(a) if a.answers(asked) => Ok(a),
            Ok(_) => Err(
                "the node answers SubnSet(AccessRegister) without a register: it does not read \
                 modules through it"
                    .to_string(),
            ),
            Err(e) => Err(format!("SubnSet(AccessRegister): {e}")),
        },
    }
}
