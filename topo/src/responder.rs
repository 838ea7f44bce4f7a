//! An in-process fabric: a [`MadPort`] that answers SMPs and PerfMgt MADs from a fabric
//! model, with a configurable latency and loss. It measures ibscope's own cost without a
//! simulator (benchmarks at 100k HCAs) and lets discovery, counters and checks be tested
//! without ibsim.
//!
//! What it answers, as a real fabric would (IBA 14.2.5, 16.1.3):
//! - directed-route and LID-routed SubnGet of NodeInfo, NodeDescription, PortInfo,
//!   SwitchInfo, LinearForwardingTable blocks and SMInfo (the SM is the local port);
//! - PerfMgt Get of ClassPortInfo (AllPortSelect, extended counters), PortCounters and
//!   PortCountersExtended, per port or summed over a switch's ports (PortSelect 0xFF);
//! - with recorded module memory ([`FabricModel::with_modules`]), SubnSet(AccessRegister)
//!   queries of PLIB, PMLP and MCIA (`responder_modules`); without, that attribute is not
//!   supported, as on a fabric without the vendor's registers.
//!
//! A directed route through an unlinked port comes back at once with umad status 110 (as
//! libumad2sim returns it); anything else not understood is dropped, as an SMA drops it.
//! LIDs missing from the model are assigned (a switch's port 0, every CA port), and the
//! switches' LFTs are the model's (fill them with `routing::compute_minhop_lfts` first
//! when routes matter). Counters are clean: error counters 0, data counters made up from
//! the port's GUID.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibscope_mad::attr::link::{Speed, SpeedField, SpeedSet, Width, WidthSet};
use ibscope_mad::attr::{
    capability, pma_capability, ClassPortInfo, LinearForwardingTableBlock, NodeDescription,
    NodeInfo, PhysState, PortCounters, PortCountersExtended, PortInfo, PortState, SmInfo,
    SwitchInfo,
};
use ibscope_mad::attribute::{Attribute, Class, PerfMgt};
use ibscope_mad::engine::{Dest, LocalPort, MadPort, Received, TransportError};
use ibscope_mad::header::{class, method, MadHeader, MAD_SIZE};
use ibscope_mad::smp::{SmpFrame, SmpRoute};

use crate::model::{End, Fabric};
use crate::responder_modules::{RecordedModules, RegisterTarget};
use ibscope_mad::cable::register::AccessRegister;

const NONE: u32 = u32::MAX;
/// The highest unicast LID (IBA 4.1.3): a subnet holds at most this many LIDs.
pub const MAX_UNICAST_LID: u16 = 0xbfff;
/// umad status of a send given back unanswered (ETIMEDOUT), as the simulator's shim does.
const UNROUTABLE: i32 = 110;
/// The directed-route D bit in the status of a reply.
const DIRECTION: u16 = 0x8000;

#[derive(Debug, Clone, Copy)]
struct ModelPort {
    peer: u32,
    peer_port: u8,
    lid: u16,
    guid: u64,
    width: Width,
    speed: Speed,
}

#[derive(Debug, Clone)]
struct ModelNode {
    guid: u64,
    system_image_guid: u64,
    switch: bool,
    num_ports: u8,
    description: NodeDescription,
    /// Index = port number (0 = a switch's management port).
    ports: Vec<ModelPort>,
    lft: Vec<u8>,
}

impl ModelNode {
    fn port(&self, number: u8) -> Option<&ModelPort> {
        self.ports.get(usize::from(number))
    }
    #[cfg(test)]
    fn lid(&self) -> u16 {
        if self.switch {
            self.ports.first().map_or(0, |p| p.lid)
        } else {
            self.ports
                .iter()
                .skip(1)
                .map(|p| p.lid)
                .find(|&l| l != 0)
                .unwrap_or(0)
        }
    }
}

/// A fabric as the responder serves it: flat, indexed by node and LID.
#[derive(Debug, Clone)]
pub struct FabricModel {
    nodes: Vec<ModelNode>,
    /// LID -> (node, port); `NONE` where unassigned.
    by_lid: Vec<(u32, u8)>,
    local: (u32, u8),
    sm_lid: u16,
    modules: Option<Arc<RecordedModules>>,
}

/// Why a fabric cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FabricModelError {
    #[error("the fabric has no channel adapter to attach to")]
    NoLocalPort,
    #[error("the fabric needs {0} LIDs; a subnet holds at most {MAX_UNICAST_LID}")]
    TooManyLids(usize),
}

/// The fastest rate a port of `fabric` may run at: its active rate, else the best of its
/// enabled sets, else 4xHDR.
fn rate_of(port: Option<&crate::model::Port>) -> (Width, Speed) {
    let width = port
        .and_then(|p| p.width_active.or(p.width_enabled.best()))
        .unwrap_or(Width::X4);
    let speed = port
        .and_then(|p| p.speed_active.or(p.speed_enabled.best()))
        .unwrap_or(Speed::Hdr);
    (width, speed)
}

impl FabricModel {
    /// The model of `fabric`, attached at the first CA's first linked port. `guid_offset`
    /// is added to every node and port GUID (several planes served side by side stay
    /// apart). LIDs the fabric lacks are assigned after the highest it has.
    pub fn from_fabric(fabric: &Fabric, guid_offset: u64) -> Result<FabricModel, FabricModelError> {
        let index: Vec<_> = fabric.nodes().map(|(id, _)| id).collect();
        let mut position = vec![NONE; index.iter().map(|id| id.index() + 1).max().unwrap_or(0)];
        for (i, id) in index.iter().enumerate() {
            position[id.index()] = i as u32;
        }
        let mut next_lid = fabric
            .nodes()
            .flat_map(|(_, n)| n.ports.iter().map(|p| usize::from(p.lid)))
            .max()
            .unwrap_or(0)
            + 1;
        let mut nodes = Vec::with_capacity(index.len());
        for &id in &index {
            let node = fabric.node(id);
            let switch = node.is_switch();
            let mut ports = Vec::with_capacity(usize::from(node.num_ports) + 1);
            for number in 0..=node.num_ports {
                let known = node.port(number);
                let peer = fabric.peer(End {
                    node: id,
                    port: number,
                });
                let (width, speed) = rate_of(known);
                let mut lid = known.map_or(0, |p| p.lid);
                let is_own = if switch { number == 0 } else { number != 0 };
                if is_own && lid == 0 {
                    lid = u16::try_from(next_lid).unwrap_or(0);
                    next_lid += 1;
                }
                let guid = match known.map_or(0, |p| p.guid) {
                    0 if switch => node.guid,
                    0 => node.guid.wrapping_add(u64::from(number)),
                    g => g,
                };
                ports.push(ModelPort {
                    peer: peer.map_or(NONE, |e| position[e.node.index()]),
                    peer_port: peer.map_or(0, |e| e.port),
                    lid: if switch && number != 0 { 0 } else { lid },
                    guid: guid.wrapping_add(guid_offset),
                    width,
                    speed,
                });
            }
            if switch {
                // External ports answer with the switch's LID (port 0's).
                let lid = ports[0].lid;
                for p in ports.iter_mut().skip(1) {
                    p.lid = lid;
                }
            }
            nodes.push(ModelNode {
                guid: node.guid.wrapping_add(guid_offset),
                system_image_guid: match node.system_image_guid {
                    0 => node.guid,
                    g => g,
                }
                .wrapping_add(guid_offset),
                switch,
                num_ports: node.num_ports,
                description: NodeDescription::from_text(&node.description),
                ports,
                lft: node
                    .switch
                    .as_ref()
                    .map(|s| s.lft.clone())
                    .unwrap_or_default(),
            });
        }
        if next_lid - 1 > usize::from(MAX_UNICAST_LID) {
            return Err(FabricModelError::TooManyLids(next_lid - 1));
        }
        let mut by_lid = vec![(NONE, 0u8); next_lid];
        for (i, n) in nodes.iter().enumerate() {
            for (number, p) in n.ports.iter().enumerate() {
                let own = if n.switch { number == 0 } else { number != 0 };
                if own && p.lid != 0 {
                    by_lid[usize::from(p.lid)] = (i as u32, number as u8);
                }
            }
        }
        let local = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.switch)
            .find_map(|(i, n)| {
                (1..=n.num_ports)
                    .find(|&p| n.port(p).is_some_and(|p| p.peer != NONE))
                    .map(|p| (i as u32, p))
            })
            .ok_or(FabricModelError::NoLocalPort)?;
        let sm_lid = nodes[local.0 as usize].ports[usize::from(local.1)].lid;
        Ok(FabricModel {
            nodes,
            by_lid,
            local,
            sm_lid,
            modules: None,
        })
    }

    /// The model answering module reads from `modules` (keyed by the GUIDs it serves).
    pub fn with_modules(mut self, modules: RecordedModules) -> FabricModel {
        self.modules = Some(Arc::new(modules));
        self
    }

    /// The answer to an AccessRegister query at node `n`, when modules are recorded.
    fn access_register(&self, n: u32, mad: &[u8; MAD_SIZE]) -> Option<AccessRegister> {
        let modules = self.modules.as_ref()?;
        let asked = AccessRegister::decode(SmpFrame::data.bytes(&mad[..]).ok()?).ok()?;
        let node = &self.nodes[n as usize];
        let target = RegisterTarget {
            guid: node.guid,
            switch: node.switch,
            num_ports: node.num_ports,
        };
        Some(modules.answer(target, &asked))
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The highest LID in use.
    pub fn top_lid(&self) -> u16 {
        (self.by_lid.len().saturating_sub(1)) as u16
    }

    /// The local port a [`FabricPort`] presents.
    pub fn local_port(&self) -> LocalPort {
        let (n, p) = self.local;
        let node = &self.nodes[n as usize];
        let port = &node.ports[usize::from(p)];
        LocalPort {
            ca_name: "fabric0".into(),
            ca_type: "in-process fabric".into(),
            node_guid: node.guid,
            port_num: p,
            lid: port.lid,
            sm_lid: self.sm_lid,
            lmc: 0,
            state: PortState::Active,
            phys_state: PhysState::LinkUp,
            port_guid: port.guid,
            link_layer: "IB".into(),
            sm_disabled: false,
        }
    }

    /// The node at the end of a directed route from the local port, and the port it was
    /// entered through; `None` when the route leads through an unlinked port or a CA.
    fn walk(&self, path: &[u8]) -> Option<(u32, u8)> {
        let (mut at, mut entered) = self.local;
        for (i, &egress) in path.iter().enumerate() {
            let node = &self.nodes[at as usize];
            // A CA forwards nothing: only the local CA's own port leads out, first hop.
            if !node.switch && (i > 0 || egress != self.local.1) {
                return None;
            }
            let port = node.port(egress).filter(|_| egress != 0)?;
            if port.peer == NONE {
                return None;
            }
            at = port.peer;
            entered = port.peer_port;
        }
        Some((at, entered))
    }

    fn by_lid(&self, lid: u16) -> Option<(u32, u8)> {
        match self.by_lid.get(usize::from(lid)) {
            Some(&(n, p)) if n != NONE => Some((n, p)),
            _ => None,
        }
    }

    fn node_info(&self, n: u32, entered: u8) -> NodeInfo {
        let node = &self.nodes[n as usize];
        let port_guid = node
            .port(if node.switch { 0 } else { entered })
            .map_or(node.guid, |p| p.guid);
        NodeInfo {
            base_version: 1,
            class_version: 1,
            node_type: if node.switch { 2 } else { 1 },
            num_ports: node.num_ports,
            system_image_guid: node.system_image_guid,
            node_guid: node.guid,
            port_guid,
            partition_cap: 128,
            device_id: if node.switch { 0xd2f0 } else { 0x101b },
            revision: 0,
            local_port_num: entered,
            vendor_id: 0x02c9,
        }
    }

    fn port_info(&self, n: u32, number: u8) -> Option<PortInfo> {
        let node = &self.nodes[n as usize];
        let port = node.port(number)?;
        let linked = port.peer != NONE || (node.switch && number == 0);
        let widths = WidthSet(Width::X1.bit() | port.width.bit());
        let speeds: SpeedSet = Speed::ALL
            .into_iter()
            .filter(|s| *s <= port.speed && s.facts().field != SpeedField::MellanoxExtended)
            .collect();
        let (active, ext_active) = match port.speed.facts().field {
            SpeedField::LinkSpeed => (port.speed.facts().bit, 0),
            _ => (Speed::Qdr.facts().bit, port.speed.facts().bit),
        };
        let own_caps = !node.switch || number == 0;
        Some(PortInfo {
            lid: port.lid,
            master_sm_lid: self.sm_lid,
            capability_mask: if own_caps {
                capability::IS_EXTENDED_SPEEDS_SUPPORTED
            } else {
                0
            },
            local_port_num: number,
            link_width_enabled: widths.0,
            link_width_supported: widths.0,
            link_width_active: if linked { port.width.bit() } else { 0 },
            link_speed_supported: speeds.mask(SpeedField::LinkSpeed),
            port_state: if linked { 4 } else { 1 },
            port_phys_state: if linked { 5 } else { 2 },
            link_down_default_state: 2,
            link_speed_active: if linked { active } else { 0 },
            link_speed_enabled: speeds.mask(SpeedField::LinkSpeed),
            neighbor_mtu: 5,
            vl_cap: 4,
            mtu_cap: 5,
            link_speed_ext_active: if linked { ext_active } else { 0 },
            link_speed_ext_supported: speeds.mask(SpeedField::LinkSpeedExt),
            link_speed_ext_enabled: speeds.mask(SpeedField::LinkSpeedExt),
            ..PortInfo::default()
        })
    }

    fn switch_info(&self, n: u32) -> Option<SwitchInfo> {
        let node = &self.nodes[n as usize];
        node.switch.then(|| SwitchInfo {
            linear_fdb_cap: 0xc000,
            linear_fdb_top: if node.lft.is_empty() {
                self.top_lid()
            } else {
                (node.lft.len() - 1) as u16
            },
            multicast_fdb_cap: 1024,
            lids_per_port: 1,
            ..SwitchInfo::default()
        })
    }

    fn lft_block(&self, n: u32, block: u32) -> Option<LinearForwardingTableBlock> {
        let node = &self.nodes[n as usize];
        if !node.switch || block as usize * 64 > usize::from(MAX_UNICAST_LID) {
            return None;
        }
        let mut out = LinearForwardingTableBlock::default();
        let start = block as usize * 64;
        for (i, slot) in out.ports.iter_mut().enumerate() {
            if let Some(&p) = node.lft.get(start + i) {
                *slot = p;
            }
        }
        Some(out)
    }

    /// Made-up, steady traffic counters of one port (bytes in 4-octet words as the PMA
    /// counts them); error counters stay 0.
    fn traffic(&self, n: u32, port: u8) -> (u64, u64, u64, u64) {
        let node = &self.nodes[n as usize];
        let seed = node.guid.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(port);
        let words = (seed >> 20) & 0xffff_ffff;
        (words, words / 2 + 1, words / 64 + 1, words / 128 + 1)
    }

    fn counters(&self, n: u32, select: u8) -> Option<PortCounters> {
        let node = &self.nodes[n as usize];
        let ports: Vec<u8> = match select {
            0xff if node.switch => (1..=node.num_ports).collect(),
            p if node.port(p).is_some() => vec![p],
            _ => return None,
        };
        let mut sum = (0u64, 0u64, 0u64, 0u64);
        for &p in &ports {
            let t = self.traffic(n, p);
            sum = (sum.0 + t.0, sum.1 + t.1, sum.2 + t.2, sum.3 + t.3);
        }
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Some(PortCounters {
            port_select: select,
            port_xmit_data: sat(sum.0),
            port_rcv_data: sat(sum.1),
            port_xmit_pkts: sat(sum.2),
            port_rcv_pkts: sat(sum.3),
            ..PortCounters::default()
        })
    }

    fn counters_extended(&self, n: u32, select: u8) -> Option<PortCountersExtended> {
        let c = self.counters(n, select)?;
        let node = &self.nodes[n as usize];
        let ports: Vec<u8> = match select {
            0xff => (1..=node.num_ports).collect(),
            p => vec![p],
        };
        let mut sum = (0u64, 0u64, 0u64, 0u64);
        for &p in &ports {
            let t = self.traffic(n, p);
            sum = (sum.0 + t.0, sum.1 + t.1, sum.2 + t.2, sum.3 + t.3);
        }
        Some(PortCountersExtended {
            port_select: c.port_select,
            port_xmit_data: sum.0,
            port_rcv_data: sum.1,
            port_xmit_pkts: sum.2,
            port_rcv_pkts: sum.3,
            ..PortCountersExtended::default()
        })
    }

    /// The reply to `mad` sent to `dest`: `Ok(Some)` a reply, `Ok(None)` dropped, `Err`
    /// the umad status of a send given back.
    fn answer(&self, mad: &[u8; MAD_SIZE], dest: &Dest) -> Result<Option<[u8; MAD_SIZE]>, i32> {
        let Ok(header) = MadHeader::decode(&mad[..]) else {
            return Ok(None);
        };
        if header.response || !matches!(header.method, method::GET | method::SET) {
            return Ok(None);
        }
        let target = match (header.mgmt_class, dest) {
            (class::SMI_DIRECT, Dest::Smp(SmpRoute::Directed(path))) => {
                Some(self.walk(path.hops()).ok_or(UNROUTABLE)?)
            }
            (class::SMI_LID, Dest::Smp(SmpRoute::Lid(lid))) => {
                Some(self.by_lid(*lid).ok_or(UNROUTABLE)?)
            }
            (class::PERF, Dest::Gsi { lid, .. }) => Some(self.by_lid(*lid).ok_or(UNROUTABLE)?),
            _ => None,
        };
        let Some((n, entered)) = target else {
            return Ok(None);
        };
        let mut reply = *mad;
        let modifier = header.attribute_modifier;
        let written = if header.mgmt_class == class::PERF {
            let request = PortCounters::decode(PerfMgt::PAYLOAD.bytes(&mad[..]).unwrap_or(&[]));
            let select = request.map_or(0, |r| r.port_select);
            match header.attribute_id {
                ClassPortInfo::ID => put::<ClassPortInfo>(
                    &mut reply,
                    Some(ClassPortInfo {
                        base_version: 1,
                        class_version: 1,
                        capability_mask: pma_capability::ALL_PORT_SELECT
                            | pma_capability::IS_EXTENDED_WIDTH_SUPPORTED,
                        ..ClassPortInfo::default()
                    }),
                ),
                PortCounters::ID => put(&mut reply, self.counters(n, select)),
                PortCountersExtended::ID => put(&mut reply, self.counters_extended(n, select)),
                _ => false,
            }
        } else {
            let port = u8::try_from(modifier).unwrap_or(u8::MAX);
            match header.attribute_id {
                NodeInfo::ID => put(&mut reply, Some(self.node_info(n, entered))),
                NodeDescription::ID => {
                    put(&mut reply, Some(self.nodes[n as usize].description.clone()))
                }
                PortInfo::ID => put(&mut reply, self.port_info(n, port)),
                SwitchInfo::ID => put(&mut reply, self.switch_info(n)),
                LinearForwardingTableBlock::ID => put(&mut reply, self.lft_block(n, modifier)),
                AccessRegister::ID if header.method == method::SET => {
                    put(&mut reply, self.access_register(n, mad))
                }
                SmInfo::ID => {
                    let sm =
                        (self.by_lid(self.sm_lid).map(|(n, _)| n) == Some(n)).then(|| SmInfo {
                            guid: self.local_port().port_guid,
                            priority: 15,
                            sm_state: 3,
                            ..SmInfo::default()
                        });
                    put(&mut reply, sm)
                }
                _ => false,
            }
        };
        let status = match (written, header.mgmt_class) {
            (true, class::SMI_DIRECT) => DIRECTION,
            (true, _) => 0,
            // Attribute or modifier not supported (IBA 13.4.7).
            (false, class::SMI_DIRECT) => DIRECTION | 0x000c,
            (false, _) => 0x000c,
        };
        let _ = MadHeader::response.write(&mut reply, &true);
        let _ = MadHeader::method.write(&mut reply, &(method::GET_RESP & 0x7f));
        let _ = MadHeader::status.write(&mut reply, &status);
        if header.mgmt_class == class::SMI_DIRECT {
            let hops = SmpFrame::hop_count.read(&reply).unwrap_or(0);
            let _ = SmpFrame::hop_pointer.write(&mut reply, &hops);
        }
        Ok(Some(reply))
    }
}

/// Write `value` as the reply's attribute; false when there is none.
fn put<A: Attribute>(mad: &mut [u8; MAD_SIZE], value: Option<A>) -> bool {
    let Some(value) = value else {
        return false;
    };
    match <A::Class as Class>::PAYLOAD.bytes_mut(mad) {
        Ok(area) => {
            area.fill(0);
            value.encode_into(area).is_ok()
        }
        Err(_) => false,
    }
}

/// Latency and loss of a [`FabricPort`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResponderOptions {
    /// Time from a send to its reply being readable.
    pub latency: Duration,
    /// Share of sends (0.0..=1.0) dropped without a reply.
    pub loss: f64,
    /// Seed of the loss draws (the same seed drops the same sends).
    pub seed: u64,
}

impl Default for ResponderOptions {
    fn default() -> Self {
        ResponderOptions {
            latency: Duration::ZERO,
            loss: 0.0,
            seed: 1,
        }
    }
}

/// What a [`FabricPort`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponderStats {
    pub answered: u64,
    pub dropped: u64,
    pub unroutable: u64,
    /// Time spent building replies and handing them over (the fabric's and the
    /// transport's work, not ibscope's).
    pub busy: Duration,
    /// Time spent waiting for a reply's latency to pass.
    pub waited: Duration,
    /// Calls timed into `busy` (every send and recv), each between two clock reads. About
    /// one read's cost of each falls outside its interval (the start of the first read,
    /// the end of the second) and is counted as the caller's unless taken off: a
    /// benchmark subtracts `timed` times a read's measured cost.
    pub timed: u64,
}

/// A [`MadPort`] over a [`FabricModel`].
pub struct FabricPort {
    model: Arc<FabricModel>,
    info: LocalPort,
    options: ResponderOptions,
    rng: u64,
    queue: VecDeque<(Instant, Received)>,
    pub stats: ResponderStats,
}

impl FabricPort {
    pub fn new(model: Arc<FabricModel>, options: ResponderOptions) -> FabricPort {
        FabricPort {
            info: model.local_port(),
            model,
            options,
            rng: options.seed.max(1),
            queue: VecDeque::new(),
            stats: ResponderStats::default(),
        }
    }

    pub fn model(&self) -> &FabricModel {
        &self.model
    }

    pub fn set_options(&mut self, options: ResponderOptions) {
        self.options = options;
        self.rng = options.seed.max(1);
    }

    /// xorshift64*: a uniform draw in 0..1.
    fn draw(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Wait until `until`: short waits spin (a sleep overshoots by tens of microseconds).
    fn wait_until(&mut self, until: Instant) {
        let start = Instant::now();
        if until <= start {
            return;
        }
        if until - start > Duration::from_millis(2) {
            std::thread::sleep(until - start - Duration::from_millis(1));
        }
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        self.stats.waited += start.elapsed();
    }
}

impl MadPort for FabricPort {
    fn info(&self) -> &LocalPort {
        &self.info
    }
    fn register(&mut self, mgmt_class: u8, _version: u8) -> Result<u32, TransportError> {
        Ok(u32::from(mgmt_class))
    }
    fn unregister(&mut self, _agent: u32) {}
    fn send(
        &mut self,
        agent: u32,
        mad: &[u8; MAD_SIZE],
        dest: &Dest,
        _timeout_ms: u32,
        _retries: u32,
    ) -> Result<(), TransportError> {
        let started = Instant::now();
        self.stats.timed += 1;
        if self.options.loss > 0.0 && self.draw() < self.options.loss {
            self.stats.dropped += 1;
            self.stats.busy += started.elapsed();
            return Ok(());
        }
        let (status, reply) = match self.model.answer(mad, dest) {
            Ok(Some(reply)) => (0, reply),
            Ok(None) => {
                self.stats.dropped += 1;
                self.stats.busy += started.elapsed();
                return Ok(());
            }
            Err(status) => {
                self.stats.unroutable += 1;
                (status, *mad)
            }
        };
        self.stats.answered += u64::from(status == 0);
        self.queue.push_back((
            started + self.options.latency,
            Received {
                agent,
                status,
                len: MAD_SIZE,
                mad: reply,
                tail: Vec::new(),
            },
        ));
        self.stats.busy += started.elapsed();
        Ok(())
    }
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        let now = Instant::now();
        self.stats.timed += 1;
        let waited_before = self.stats.waited;
        let limit = now + Duration::from_millis(u64::from(timeout_ms));
        let received = match self.queue.front() {
            Some(&(due, _)) if due <= now => self.queue.pop_front().map(|(_, r)| r),
            Some(&(due, _)) if due <= limit => {
                self.wait_until(due);
                self.queue.pop_front().map(|(_, r)| r)
            }
            _ => {
                // Nothing will arrive before the limit: wait it out, as a port would.
                self.wait_until(limit);
                None
            }
        };
        // Handing over a queued reply stands in for the kernel's read: the fabric's side
        // of the port, busy time like building the reply (what was waited is counted apart).
        let waited = self.stats.waited - waited_before;
        self.stats.busy += now.elapsed().saturating_sub(waited);
        Ok(received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::{discover, DiscoverOptions};
    use crate::gen::{fat_tree, FatTreeSpec};
    use ibscope_mad::engine::{Engine, EngineConfig, Request};
    use ibscope_mad::smp::DrPath;

    fn fat_tree_fabric(hosts: usize) -> Fabric {
        let text = fat_tree(&FatTreeSpec::new(2, 8, hosts)).unwrap();
        crate::ibnd::parse(&text).unwrap()
    }

    fn engine(model: &Arc<FabricModel>, options: ResponderOptions) -> Engine<FabricPort> {
        let port = FabricPort::new(model.clone(), options);
        Engine::with_port(port, EngineConfig::default(), 1)
    }

    #[test]
    fn discovery_through_the_responder_finds_the_model() {
        let fabric = fat_tree_fabric(12);
        let model = Arc::new(FabricModel::from_fabric(&fabric, 0).unwrap());
        let mut e = engine(&model, ResponderOptions::default());
        let found = discover(&mut e, DiscoverOptions { read_lft: false }, |_| {});
        assert!(found.report.complete, "{:?}", found.report.errors);
        assert_eq!(found.node_count(), fabric.node_count());
        assert_eq!(found.link_count(), fabric.link_count());
        // Every node by GUID, with its description and kind.
        for (_, n) in fabric.nodes() {
            let id = found.node_by_guid(n.guid).expect("node found");
            let f = found.node(id);
            assert_eq!((f.kind, &f.description), (n.kind, &n.description));
        }
        // LIDs were assigned, one per switch and CA port, none twice.
        assert!(found.report.duplicate_lids.is_empty());
        let lids = found.nodes().filter(|(_, n)| n.lid().is_some()).count();
        assert_eq!(lids, found.node_count());
        // Links run at the generator's 4xHDR and are up.
        let link = found.links().next().unwrap();
        let port = link.a_port().unwrap();
        assert_eq!(
            (port.width_active, port.speed_active),
            (Some(Width::X4), Some(Speed::Hdr))
        );
        assert_eq!(port.state, Some(PortState::Active));
    }

    #[test]
    fn unlinked_ports_and_forwarding_cas_are_unroutable() {
        let fabric = fat_tree_fabric(4);
        let model = FabricModel::from_fabric(&fabric, 0).unwrap();
        let local = model.local;
        assert!(model.walk(&[local.1]).is_some());
        assert!(
            model.walk(&[local.1 + 1]).is_none(),
            "a CA port that does not exist"
        );
        // Through the leaf to a host, then on through that host: a CA forwards nothing.
        let to_host = model.walk(&[local.1, 2]).unwrap();
        assert!(!model.nodes[to_host.0 as usize].switch);
        assert!(model.walk(&[local.1, 2, 1]).is_none());
        // A leaf port with nothing behind it (radix 8 leaf, 4 hosts, 4 uplinks used).
        let leaf = &model.nodes[model.walk(&[local.1]).unwrap().0 as usize];
        let free = (1..=leaf.num_ports).find(|&p| leaf.ports[usize::from(p)].peer == NONE);
        if let Some(p) = free {
            assert!(model.walk(&[local.1, p]).is_none());
        }
    }

    #[test]
    fn loss_drops_that_share_and_latency_delays_replies() {
        let fabric = fat_tree_fabric(4);
        let model = Arc::new(FabricModel::from_fabric(&fabric, 0).unwrap());
        let mut port = FabricPort::new(
            model.clone(),
            ResponderOptions {
                latency: Duration::from_millis(3),
                loss: 0.25,
                seed: 7,
            },
        );
        let request = Request::get::<NodeInfo>(&SmpRoute::Directed(DrPath::local()), 0);
        for _ in 0..4000 {
            port.send(0x81, &request.mad, &request.dest, 100, 0)
                .unwrap();
        }
        let dropped = port.stats.dropped as f64 / 4000.0;
        assert!((0.22..0.28).contains(&dropped), "dropped {dropped}");
        assert_eq!(port.stats.answered + port.stats.dropped, 4000);
        assert_eq!(port.stats.timed, 4000, "a dropped send is timed too");
        let mut port = FabricPort::new(
            model.clone(),
            ResponderOptions {
                latency: Duration::from_millis(3),
                ..ResponderOptions::default()
            },
        );
        let t = Instant::now();
        port.send(0x81, &request.mad, &request.dest, 100, 0)
            .unwrap();
        assert!(port.recv(0).unwrap().is_none(), "not before its latency");
        let first = port.recv(100).unwrap().expect("a reply");
        assert!(t.elapsed() >= Duration::from_millis(3), "{:?}", t.elapsed());
        let info = ibscope_mad::engine::Response::from_mad(first.mad)
            .decode::<NodeInfo>()
            .unwrap();
        assert_eq!(info.node_guid, model.local_port().node_guid);
        // One send and two recvs: each a timed call, leaving one clock read outside its
        // interval for a benchmark to take off.
        assert_eq!(port.stats.timed, 3);
    }

    #[test]
    fn counters_are_answered_per_port_and_summed() {
        let fabric = fat_tree_fabric(4);
        let model = Arc::new(FabricModel::from_fabric(&fabric, 0).unwrap());
        let mut e = engine(&model, ResponderOptions::default());
        let leaf_lid = model.nodes[model.walk(&[model.local.1]).unwrap().0 as usize].lid();
        let select = |p: u8| PortCounters {
            port_select: p,
            ..PortCounters::default()
        };
        let one = e
            .call(Request::get_with(&leaf_lid, 0, &select(1)))
            .unwrap()
            .decode::<PortCounters>()
            .unwrap();
        assert_eq!(one.port_select, 1);
        assert!(one.port_xmit_data > 0);
        assert_eq!(one.symbol_error_counter, 0);
        let all = e
            .call(Request::get_with(&leaf_lid, 0, &select(0xff)))
            .unwrap()
            .decode::<PortCounters>()
            .unwrap();
        assert_eq!(all.port_select, 0xff);
        assert!(all.port_xmit_data > one.port_xmit_data);
        let info = e.get::<ClassPortInfo>(&leaf_lid, 0).unwrap();
        assert!(info.capability_mask & pma_capability::ALL_PORT_SELECT != 0);
        // SMInfo from the local port's LID: a master.
        let sm = e.get::<SmInfo>(&SmpRoute::Lid(model.sm_lid), 0).unwrap();
        assert_eq!(sm.state(), ibscope_mad::attr::SmState::Master);
    }

    #[test]
    fn lids_past_the_unicast_range_are_refused() {
        let mut fabric = fat_tree_fabric(4);
        let id = fabric.nodes().find(|(_, n)| !n.is_switch()).unwrap().0;
        fabric.node_mut(id).ports[0].lid = MAX_UNICAST_LID - 1;
        // The other nodes get LIDs after it: past 0xbfff.
        assert!(matches!(
            FabricModel::from_fabric(&fabric, 0),
            Err(FabricModelError::TooManyLids(n)) if n > usize::from(MAX_UNICAST_LID)
        ));
    }
}
