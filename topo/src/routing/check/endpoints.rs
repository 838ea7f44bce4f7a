//! Who sends and who is sent to: the switches numbered, the source CA ports and which
//! switch each hangs off, the destination LIDs with the port owning each.

use crate::model::{End, Fabric, NodeId};
use crate::routing::index::{number_switches, Index, NONE};

use super::report::CheckOptions;

pub(super) struct Endpoints {
    /// Switch number -> node.
    pub sw: Vec<NodeId>,
    /// Node index -> switch number ([`NONE`] for other nodes).
    pub sw_of: Vec<u32>,
    /// Channels of linked CA (and router) ports: the sources.
    pub sources: Vec<u32>,
    /// Channel -> source number ([`NONE`] when not a source).
    pub source_of_chan: Vec<u32>,
    /// Sources whose port is not usable.
    pub down_sources: Vec<u32>,
    /// Per switch: usable sources attached to it, and which.
    pub attach_count: Vec<u64>,
    pub attached: Vec<Vec<u32>>,
    /// Usable sources linked to another CA back to back.
    pub direct: Vec<u32>,
    /// (LID, channel of the port owning it, owner is a CA or router), by LID.
    pub dests: Vec<(u16, u32, bool)>,
    pub ca_destinations: usize,
    pub switch_destinations: usize,
}

impl Endpoints {
    pub fn new(fabric: &Fabric, idx: &Index, opts: &CheckOptions) -> Endpoints {
        let (sw, sw_of) = number_switches(fabric);
        let mut ends = Endpoints {
            attach_count: vec![0; sw.len()],
            attached: vec![Vec::new(); sw.len()],
            sw,
            sw_of,
            sources: Vec::new(),
            source_of_chan: vec![NONE; idx.channels()],
            down_sources: Vec::new(),
            direct: Vec::new(),
            dests: Vec::new(),
            ca_destinations: 0,
            switch_destinations: 0,
        };
        ends.find_sources(fabric, idx);
        ends.find_destinations(fabric, idx, opts);
        ends
    }

    /// Sources: linked ports of non-switch nodes.
    fn find_sources(&mut self, fabric: &Fabric, idx: &Index) {
        for (id, node) in fabric.nodes() {
            if node.is_switch() {
                continue;
            }
            let i = id.index();
            for ch in idx.base[i]..idx.base[i + 1] {
                if idx.chan_port[ch as usize] == 0 {
                    continue;
                }
                let Some(peer) = idx.peer(ch) else { continue };
                self.source_of_chan[ch as usize] = self.sources.len() as u32;
                self.sources.push(ch);
                if !idx.usable(ch) {
                    self.down_sources.push(ch);
                    continue;
                }
                let pn = idx.chan_node[peer as usize];
                if idx.is_switch_index(pn) {
                    let s = self.sw_of[pn as usize] as usize;
                    self.attach_count[s] += 1;
                    self.attached[s].push(ch);
                } else {
                    self.direct.push(ch);
                }
            }
        }
    }

    /// Destinations: CA port LIDs with their LMC range, and switch LIDs unless disabled.
    fn find_destinations(&mut self, fabric: &Fabric, idx: &Index, opts: &CheckOptions) {
        let mut dests: Vec<(u16, u32, bool)> = Vec::new();
        for (id, node) in fabric.nodes() {
            for p in &node.ports {
                if p.lid == 0 || (node.is_switch() && p.number != 0) {
                    continue;
                }
                let span = 1u32 << p.lmc.min(7);
                for off in 0..span {
                    let lid = u32::from(p.lid) + off;
                    if lid >= 0xc000 {
                        break;
                    }
                    let lid = lid as u16;
                    let end = End {
                        node: id,
                        port: p.number,
                    };
                    // Only the port the fabric's index agrees owns it (duplicates: first wins).
                    if fabric.port_by_lid(lid) != Some(end) {
                        continue;
                    }
                    if let Some(ch) = idx.channel(end) {
                        dests.push((lid, ch, !node.is_switch()));
                    }
                }
            }
        }
        dests.sort_unstable();
        dests.dedup_by_key(|d| d.0);
        self.ca_destinations = dests.iter().filter(|d| d.2).count();
        self.switch_destinations = dests.len() - self.ca_destinations;
        if !opts.switch_destinations {
            dests.retain(|d| d.2);
        }
        self.dests = dests;
    }
}
