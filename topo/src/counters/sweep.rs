//! Reading the counters: every port one by one ([`sweep`]), or as ibqueryerrors does,
//! switches first as one all-ports sum ([`sweep_screened`]). One executor batch either way.
//! [`SweepOptions`] adds the detail attributes: the breakdown of an error counter that
//! counted, or every detail attribute of every port (`counters --details`).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ibscope_mad::attr::link::SpeedField;
use ibscope_mad::attr::{
    capability, capability2, perf_attrs, pma_capability, ClassPortInfo, CounterValue,
    PmaCapabilities, PortCounters, PortCountersExtended, PortExtendedSpeedsCounters, PortInfo,
    PortInfoExtended,
};
use ibscope_mad::engine::{FollowUps, MadError, PackedRequest, Request, Response};
use ibscope_mad::header::method;
use ibscope_mad::smp::SmpRoute;
use serde::{Deserialize, Serialize};

use super::names::has_extended_form;
use super::pma::{
    class_port_info_request, counters_read, decode_counter_reply, decode_counter_reply_into,
    decode_extended_speeds, extended_speeds_request, group, not_implemented, port_request,
    push_port_reads, BreakdownKind, PmaQuery, ALL_PORTS,
};
use super::sample::{CounterSet, PortSample, ReadingArena, Sample, Stored};
use super::screen::{screen, Screen};
use super::targets::CounterTarget;
use super::thresholds::Thresholds;
use crate::discover::SmpExecutor;
use crate::model::refs::{NodeRef, PortRef};
use crate::model::{End, Fabric, NodeId};
use crate::namemap::{display_name, NameMap};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Which detail attributes a sweep reads besides PortCounters and PortCountersExtended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DetailReads {
    /// None.
    #[default]
    None,
    /// The breakdown of PortRcvErrors (PortRcvErrorDetails) and of PortXmitDiscards
    /// (PortXmitDiscardDetails) of each port where that counter is above 0: what a finding
    /// about it needs, one MAD per such port. A PMA that cannot answer is passed over.
    Explaining,
    /// Both breakdowns of every port, and with `extended_speeds` also
    /// PortExtendedSpeedsCounters of every port that runs an extended speed (FDR and up;
    /// in the RS-FEC layout where the PMA and the port's PortInfoExtended say so, as
    /// perfquery decides). Failures are the port's errors.
    All { extended_speeds: bool },
}

/// How a sweep reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepOptions {
    pub details: DetailReads,
}

/// A switch whose all-ports sum cleared its ports: they were not read one by one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenedSwitch {
    /// The switch, at port 0 (its PMA).
    #[serde(flatten)]
    pub at: PortRef,
    /// The target ports the sum stood for.
    pub ports: Vec<u8>,
    pub capability_mask: u16,
    #[serde(default)]
    pub capability_mask2: u32,
    /// PortCounters summed over every port (PortSelect 0xFF), data in bytes.
    pub counters: CounterSet,
    /// PortCountersExtended summed likewise, when a threshold needed it.
    pub extended: Option<CounterSet>,
}

/// A switch whose ports were read one by one although its PMA has AllPortSelect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrilledSwitch {
    #[serde(flatten)]
    pub at: PortRef,
    /// Why: what the sum showed, or why it could not be read.
    pub reason: String,
}

/// A sweep with all-ports screening.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenedSweep {
    /// The ports read one by one, in target order. `mads_sent` and `duration_ms` cover the
    /// whole sweep, the sums included.
    pub sample: Sample,
    /// Switches cleared by their sum (their ports are not in `sample`).
    pub screened: Vec<ScreenedSwitch>,
    /// Switches with AllPortSelect whose ports were read anyway.
    pub drilled: Vec<DrilledSwitch>,
}

impl ScreenedSweep {
    /// Ports cleared by their switch's sum.
    pub fn ports_screened(&self) -> usize {
        self.screened.iter().map(|s| s.ports.len()).sum()
    }
    /// Every port covered: read one by one or cleared by a sum.
    pub fn ports_covered(&self) -> usize {
        self.sample.ports.len() + self.ports_screened()
    }
}

/// Read the counters of `targets`, every port one by one.
pub fn sweep<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
) -> Sample {
    sweep_with(exec, fabric, targets, names, SweepOptions::default())
}

/// [`sweep`], with the detail attributes `options` asks for.
pub fn sweep_with<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
    options: SweepOptions,
) -> Sample {
    run_sweep(exec, fabric, targets, names, None, options).sample
}

/// Read the counters of `targets` as ibqueryerrors does: a switch whose PMA has
/// AllPortSelect is read as one all-ports sum first, and port by port only when [`screen`]
/// says `thresholds` could find something there (or the sum cannot be read). Every other
/// port is read as [`sweep`] reads it, so it gives the same findings. All in one batch:
/// the sum follows the switch's ClassPortInfo, the per-port reads follow the sum.
///
/// A screened switch's ports are not read one by one: a port whose own counters would not
/// answer goes unnoticed there.
pub fn sweep_screened<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
    thresholds: &Thresholds,
) -> ScreenedSweep {
    let options = SweepOptions::default();
    run_sweep(exec, fabric, targets, names, Some(thresholds), options)
}

/// [`sweep_screened`], with the detail attributes `options` asks for (of the ports read
/// one by one).
pub fn sweep_screened_with<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
    thresholds: &Thresholds,
    options: SweepOptions,
) -> ScreenedSweep {
    run_sweep(exec, fabric, targets, names, Some(thresholds), options)
}

/// A switch's all-ports reads as they come in.
struct AllPortsState {
    capabilities: PmaCapabilities,
    counters: Option<Result<Vec<CounterValue>, String>>,
    /// `None` while pending or when not asked for.
    extended: Option<Result<Vec<CounterValue>, String>>,
    want_extended: bool,
}

/// A switch cleared by its sums: its PMA's capabilities, PortCounters sum,
/// PortCountersExtended sum.
type ClearedSums = (
    PmaCapabilities,
    Vec<CounterValue>,
    Option<Vec<CounterValue>>,
);

/// The sweep; `screen_with`: screen switches against these thresholds.
fn run_sweep<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
    screen_with: Option<&Thresholds>,
    options: SweepOptions,
) -> ScreenedSweep {
    let started = Instant::now();
    let time_ms = now_ms();
    let sent_before = exec.mads_sent();
    let groups = group(targets);
    let screened_group: Vec<bool> = groups
        .iter()
        .map(|(_, members)| {
            screen_with.is_some() && fabric.node(targets[members[0]].node).is_switch()
        })
        .collect();
    let sweep = SweepTargets {
        targets,
        groups: &groups,
        screened_group: &screened_group,
    };
    let mut run = Run::new(fabric, sweep, names, screen_with, options);
    exec.execute(sweep.first_batch(), &mut |q, result, out| {
        run.on_done(q, result, out)
    });
    let (ports, screened, drilled) = run.finish();
    ScreenedSweep {
        sample: Sample {
            time_ms,
            duration_ms: started.elapsed().as_millis() as u64,
            mads_sent: exec.mads_sent() - sent_before,
            data_unit: "bytes".to_string(),
            ports,
        },
        screened,
        drilled,
    }
}

/// Whether the port of `t` runs an extended speed (FDR and up): the links
/// PortExtendedSpeedsCounters counts for.
fn runs_extended_speed(fabric: &Fabric, t: &CounterTarget) -> bool {
    let speed = fabric
        .node(t.node)
        .port(t.port)
        .and_then(|p| p.speed_active);
    speed.is_some_and(|s| {
        matches!(
            s.facts().field,
            SpeedField::LinkSpeedExt | SpeedField::LinkSpeedExt2
        )
    })
}

/// What a sweep reads: the targets, by node.
#[derive(Clone, Copy)]
struct SweepTargets<'a> {
    targets: &'a [CounterTarget],
    /// Targets by node: the LID ClassPortInfo goes to, the target indexes.
    groups: &'a [(u16, Vec<usize>)],
    /// Screened groups: switches. Their PortCounters wait for ClassPortInfo.
    screened_group: &'a [bool],
}

impl<'a> SweepTargets<'a> {
    /// ClassPortInfo of every node, and the PortCounters of every port not held for
    /// screening: made as the engine takes them (a million requests at 100k HCAs).
    fn first_batch(self) -> impl Iterator<Item = (PmaQuery, PackedRequest)> + 'a {
        let targets = self.targets;
        let screened = self.screened_group;
        self.groups
            .iter()
            .enumerate()
            .flat_map(move |(g, (lid, members))| {
                let reads = if screened[g] { &[][..] } else { &members[..] };
                let counters = reads.iter().map(move |&i| counters_read(targets, i));
                let class_port_info = class_port_info_request(*lid).into();
                std::iter::once((PmaQuery::ClassPortInfo(g), class_port_info)).chain(counters)
            })
    }
}

/// The ports of a sweep's targets, each made when a read first needs it: a port a
/// screening sum clears is never made (at 100k HCAs most switch ports, each with two
/// named port references). Targets hold a 4-byte index into the ports made so far, so a
/// screened sweep does not lay out a full-size slot per target (200 MiB at 100k HCAs).
struct Ports<'a> {
    fabric: &'a Fabric,
    targets: &'a [CounterTarget],
    names: Option<&'a NameMap>,
    /// Per target, where in `made` its port is; [`Ports::UNMADE`] if not made yet.
    slot: Vec<u32>,
    made: Vec<PortSample>,
    /// Per made port, where its PortCounters and PortCountersExtended readings are: the
    /// sets are made from `readings` when the sweep is over.
    stored: Vec<StoredSets>,
    readings: ReadingArena,
    /// Per node (by index), its name as the records give it, once a record needed it: a
    /// node's ports, and the far ends that are its ports, share one copy (at 100k HCAs a
    /// sweep makes some 1.2M references to about 110k nodes).
    node_names: Vec<Option<Arc<str>>>,
}

/// Where a port's PortCounters and PortCountersExtended readings are in the sweep's arena.
#[derive(Debug, Clone, Copy, Default)]
struct StoredSets {
    counters: Option<Stored>,
    extended: Option<Stored>,
}

impl<'a> Ports<'a> {
    const UNMADE: u32 = u32::MAX;

    /// `expected`: how many ports the sweep is likely to make (every target when nothing
    /// is screened), so the list is not moved as it grows.
    fn new(
        fabric: &'a Fabric,
        targets: &'a [CounterTarget],
        names: Option<&'a NameMap>,
        expected: usize,
    ) -> Self {
        Ports {
            fabric,
            targets,
            names,
            slot: vec![Self::UNMADE; targets.len()],
            made: Vec::with_capacity(expected),
            stored: Vec::with_capacity(expected),
            readings: ReadingArena::default(),
            node_names: vec![None; fabric.node_count()],
        }
    }

    /// The port of target `i`, made now if nothing touched it yet.
    fn get(&mut self, i: usize) -> &mut PortSample {
        let at = self.made_at(i);
        &mut self.made[at]
    }

    /// Where in `made` the port of target `i` is, made now if nothing touched it yet.
    fn made_at(&mut self, i: usize) -> usize {
        let mut at = self.slot[i];
        if at == Self::UNMADE {
            at = u32::try_from(self.made.len()).expect("fewer than 4G ports");
            let port = self.new_port(self.targets[i]);
            self.made.push(port);
            self.stored.push(StoredSets::default());
            self.slot[i] = at;
        }
        at as usize
    }

    /// Target `t`'s port as a sweep starts it: named, with the far end of its link.
    fn new_port(&mut self, t: CounterTarget) -> PortSample {
        let at = PortRef::on(self.node_ref(t.node), t.port, t.lid);
        let far = self.fabric.peer(End {
            node: t.node,
            port: t.port,
        });
        let remote = far.map(|e| {
            let lid = PortRef::lid_of(self.fabric.node(e.node), e.port);
            PortRef::on(self.node_ref(e.node), e.port, lid)
        });
        PortSample::new(at, remote)
    }

    /// Node `id` as the records name it (see [`NodeRef::named`]), its name made once.
    fn node_ref(&mut self, id: NodeId) -> NodeRef {
        let node = self.fabric.node(id);
        let names = self.names;
        let name =
            self.node_names[id.index()].get_or_insert_with(|| display_name(node, names).into());
        NodeRef::sharing(node, Arc::clone(name))
    }

    /// Keeps the PortCounters (or, `extended`, PortCountersExtended) values read of the
    /// port of target `i`; a later read of the same replaces them.
    fn keep_readings(&mut self, i: usize, extended: bool, values: &[CounterValue]) {
        let at = self.made_at(i);
        let stored = self.readings.store(values);
        let sets = &mut self.stored[at];
        if extended {
            sets.extended = Some(stored);
        } else {
            sets.counters = Some(stored);
        }
    }

    /// Every port in target order but those `skip` marks; a port nothing touched is as
    /// made (nothing read). The ports are put in order where they are (a swap per port out
    /// of place), not copied into a second list: at 100k HCAs they are 200 MiB.
    fn finish(mut self, skip: &[bool]) -> Vec<PortSample> {
        let mut kept = 0;
        for (i, &skip) in skip.iter().enumerate() {
            if !skip {
                self.get(i);
                kept += 1;
            }
        }
        // Where each made port goes: kept ports in target order, then the skipped ones.
        let mut dest = vec![0u32; self.made.len()];
        let (mut next_kept, mut next_skipped) = (0u32, kept as u32);
        for (&at, &skip) in self.slot.iter().zip(skip) {
            if at == Self::UNMADE {
                continue;
            }
            let next = if skip {
                &mut next_skipped
            } else {
                &mut next_kept
            };
            dest[at as usize] = *next;
            *next += 1;
        }
        let mut made = self.made;
        let readings = self.readings.seal();
        for (port, sets) in made.iter_mut().zip(&self.stored) {
            if let Some(at) = sets.counters {
                port.counters = Some(readings.set(at));
            }
            if let Some(at) = sets.extended {
                port.extended = Some(readings.set(at));
            }
        }
        for i in 0..made.len() {
            while dest[i] as usize != i {
                let to = dest[i] as usize;
                made.swap(i, to);
                dest.swap(i, to);
            }
        }
        made.truncate(kept);
        made
    }
}

/// One sweep in progress: what is asked, and what came back so far.
struct Run<'a> {
    fabric: &'a Fabric,
    targets: &'a [CounterTarget],
    names: Option<&'a NameMap>,
    screen_with: Option<&'a Thresholds>,
    options: SweepOptions,
    /// Targets by node: the LID ClassPortInfo goes to, the target indexes.
    groups: &'a [(u16, Vec<usize>)],
    /// Screened groups: switches. Their PortCounters wait for ClassPortInfo.
    screened_group: &'a [bool],
    ports: Ports<'a>,
    all_ports: Vec<Option<AllPortsState>>,
    /// Per group, once its sum cleared it: the capabilities and the sums.
    cleared: Vec<Option<ClearedSums>>,
    drilled: Vec<(usize, String)>,
    /// The counters of the reply at hand, decoded (one buffer for every reply).
    values: Vec<CounterValue>,
}

impl<'a> Run<'a> {
    fn new(
        fabric: &'a Fabric,
        sweep: SweepTargets<'a>,
        names: Option<&'a NameMap>,
        screen_with: Option<&'a Thresholds>,
        options: SweepOptions,
    ) -> Run<'a> {
        let targets = sweep.targets;
        let expected = if screen_with.is_some() {
            0
        } else {
            targets.len()
        };
        let ports = Ports::new(fabric, targets, names, expected);
        Run {
            fabric,
            targets,
            names,
            screen_with,
            options,
            all_ports: sweep.groups.iter().map(|_| None).collect(),
            cleared: sweep.groups.iter().map(|_| None).collect(),
            groups: sweep.groups,
            screened_group: sweep.screened_group,
            ports,
            drilled: Vec::new(),
            values: Vec::new(),
        }
    }

    fn on_done(
        &mut self,
        q: PmaQuery,
        result: Result<Response, MadError>,
        out: &mut FollowUps<PmaQuery>,
    ) {
        match q {
            PmaQuery::ClassPortInfo(g) => self.class_port_info(g, result, out),
            PmaQuery::AllPorts(g) => self.all_ports_reply(g, false, result, out),
            PmaQuery::AllPortsExtended(g) => self.all_ports_reply(g, true, result, out),
            PmaQuery::Counters(i) => self.counters_reply(i, result, out),
            PmaQuery::Extended(i) => {
                let t = self.targets[i];
                let caps = self.ports.get(i).capabilities();
                let values = &mut self.values;
                match decode_counter_reply_into(result, true, t.port, caps, values) {
                    Ok(()) => self.ports.keep_readings(i, true, values),
                    Err(e) => self
                        .ports
                        .get(i)
                        .errors
                        .push(format!("PortCountersExtended: {e}")),
                }
            }
            PmaQuery::Breakdown(i, b) => self.breakdown_reply(i, b, result),
            PmaQuery::FecPortInfo(i) => self.fec_port_info(i, result, out),
            PmaQuery::FecMode(i) => self.fec_mode(i, result, out),
            PmaQuery::ExtendedSpeeds(i, rs_fec) => {
                let t = self.targets[i];
                let name = <PortExtendedSpeedsCounters as ibscope_mad::attribute::Attribute>::NAME;
                match decode_extended_speeds(result, t.port, rs_fec) {
                    Ok(values) => self
                        .ports
                        .get(i)
                        .details
                        .insert(name, CounterSet::from_values(&values)),
                    Err(e) => self.ports.get(i).errors.push(format!("{name}: {e}")),
                }
            }
        }
    }

    /// A port's PortCounters: recorded, then the breakdowns the options call for.
    fn counters_reply(
        &mut self,
        i: usize,
        result: Result<Response, MadError>,
        out: &mut FollowUps<PmaQuery>,
    ) {
        let t = self.targets[i];
        let caps = self.ports.get(i).capabilities();
        let values = &mut self.values;
        if let Err(e) = decode_counter_reply_into(result, false, t.port, caps, values) {
            self.ports.get(i).errors.push(format!("PortCounters: {e}"));
            return;
        }
        let values = &self.values;
        self.ports.get(i).saturated = values
            .iter()
            .filter(|v| v.saturated())
            .map(|v| v.name.to_string())
            .collect();
        self.ports.keep_readings(i, false, values);
        for b in BreakdownKind::ALL {
            let wanted = match self.options.details {
                DetailReads::None => false,
                DetailReads::Explaining => values
                    .iter()
                    .any(|v| v.name == b.facts().explains && v.value > 0),
                DetailReads::All { .. } => true,
            };
            if wanted {
                out.push((PmaQuery::Breakdown(i, b), b.request(&t)));
            }
        }
    }

    fn breakdown_reply(&mut self, i: usize, b: BreakdownKind, result: Result<Response, MadError>) {
        let attribute = b.facts().attribute;
        if not_implemented(&result) {
            return;
        }
        match b.decode(result, self.targets[i].port) {
            Ok(values) => self
                .ports
                .get(i)
                .details
                .insert(attribute, CounterSet::from_values(&values)),
            Err(e) if matches!(self.options.details, DetailReads::All { .. }) => {
                self.ports.get(i).errors.push(format!("{attribute}: {e}"))
            }
            Err(e) => {
                tracing::debug!(port = %self.ports.get(i).at.report_text(), "{attribute}: {e}")
            }
        }
    }

    /// Start reading PortExtendedSpeedsCounters of the members of a group that run an
    /// extended speed: straight away, or after finding out whether they run RS-FEC.
    fn ask_extended_speeds(
        &mut self,
        g: usize,
        caps: PmaCapabilities,
        out: &mut FollowUps<PmaQuery>,
    ) {
        if self.options.details
            != (DetailReads::All {
                extended_speeds: true,
            })
        {
            return;
        }
        for &i in &self.groups[g].1 {
            let t = self.targets[i];
            if !runs_extended_speed(self.fabric, &t) {
                continue;
            }
            if caps.mask & pma_capability::IS_RS_FEC_COUNTERS_SUPPORTED == 0 {
                out.push((
                    PmaQuery::ExtendedSpeeds(i, false),
                    extended_speeds_request(&t, false),
                ));
                continue;
            }
            // perfquery asks PortInfo of the port (port 0 of a switch) whether it has
            // PortInfoExtended.
            let port = if self.fabric.node(t.node).is_switch() {
                0
            } else {
                t.port
            };
            let request = Request::get::<PortInfo>(&SmpRoute::Lid(t.lid), u32::from(port));
            out.push((PmaQuery::FecPortInfo(i), request));
        }
    }

    fn fec_port_info(
        &mut self,
        i: usize,
        result: Result<Response, MadError>,
        out: &mut FollowUps<PmaQuery>,
    ) {
        let t = self.targets[i];
        let info = match result.map_err(|e| e.to_string()).and_then(|r| {
            r.decode::<PortInfo>()
                .map_err(|e| format!("malformed reply: {e}"))
        }) {
            Ok(info) => info,
            Err(e) => {
                let what = "PortInfo (is the port's FEC mode readable?)";
                self.ports.get(i).errors.push(format!("{what}: {e}"));
                return;
            }
        };
        let has_extended_info = info.capability_mask & capability::IS_CAPABILITY_MASK2_SUPPORTED
            != 0
            && info.capability_mask2 & capability2::IS_PORT_INFO_EXTENDED_SUPPORTED != 0;
        if has_extended_info {
            let request = Request::get::<PortInfoExtended>(&SmpRoute::Lid(t.lid), t.port.into());
            out.push((PmaQuery::FecMode(i), request));
        } else {
            out.push((
                PmaQuery::ExtendedSpeeds(i, false),
                extended_speeds_request(&t, false),
            ));
        }
    }

    fn fec_mode(
        &mut self,
        i: usize,
        result: Result<Response, MadError>,
        out: &mut FollowUps<PmaQuery>,
    ) {
        let t = self.targets[i];
        match result.map_err(|e| e.to_string()).and_then(|r| {
            r.decode::<PortInfoExtended>()
                .map_err(|e| format!("malformed reply: {e}"))
        }) {
            Ok(pie) => {
                let caps = self.ports.get(i).capabilities();
                let rs_fec = perf_attrs::extended_speeds_rs_fec(caps, Some(&pie));
                out.push((
                    PmaQuery::ExtendedSpeeds(i, rs_fec),
                    extended_speeds_request(&t, rs_fec),
                ));
            }
            Err(e) => self
                .ports
                .get(i)
                .errors
                .push(format!("PortInfoExtended (the port's FEC mode): {e}")),
        }
    }

    /// A node's PMA capabilities: ask for its all-ports sums (a screened switch with
    /// AllPortSelect) or its ports' remaining counters.
    fn class_port_info(
        &mut self,
        g: usize,
        result: Result<Response, MadError>,
        out: &mut FollowUps<PmaQuery>,
    ) {
        let screened = self.screened_group[g];
        let caps = match result.map_err(|e| e.to_string()).and_then(|r| {
            r.decode::<ClassPortInfo>()
                .map(|c| c.capabilities())
                .map_err(|e| format!("malformed reply: {e}"))
        }) {
            Ok(c) => c,
            Err(e) => {
                let members = &self.groups[g].1;
                for &i in members {
                    self.ports.get(i).errors.push(format!(
                        "ClassPortInfo: {e} (PortCountersExtended not read)"
                    ));
                }
                if screened {
                    // As unscreened: PortCounters of every port, no extended.
                    push_port_reads(out, self.targets, members, true, false);
                }
                return;
            }
        };
        let sums = screened && caps.mask & pma_capability::ALL_PORT_SELECT != 0;
        // The ports of a switch read as a sum are made only if it is drilled into (they
        // get their capabilities then), unless PortExtendedSpeedsCounters reads of them go
        // out now.
        let reads_speeds = self.options.details
            == (DetailReads::All {
                extended_speeds: true,
            });
        if !sums || reads_speeds {
            self.set_capabilities(g, caps);
        }
        self.ask_extended_speeds(g, caps, out);
        let members = &self.groups[g].1;
        let extended = pma_capability::has_extended_counters(caps.mask);
        if !sums {
            // PortCounters already queued unless this group was held for screening.
            push_port_reads(out, self.targets, members, screened, extended);
            return;
        }
        let sum_target = CounterTarget {
            port: ALL_PORTS,
            ..self.targets[members[0]]
        };
        // A threshold on a counter the ports answer from PortCountersExtended needs the
        // extended sum.
        let want_extended = self.screen_with.is_some_and(|t| {
            t.limits
                .iter()
                .any(|(name, _)| has_extended_form(name, caps))
        });
        out.push((
            PmaQuery::AllPorts(g),
            port_request::<PortCounters>(&sum_target, method::GET, 0),
        ));
        if want_extended {
            let request = port_request::<PortCountersExtended>(&sum_target, method::GET, 0);
            out.push((PmaQuery::AllPortsExtended(g), request));
        }
        self.all_ports[g] = Some(AllPortsState {
            capabilities: caps,
            counters: None,
            extended: None,
            want_extended,
        });
    }

    /// Every port of group `g` has a PMA with `caps`.
    fn set_capabilities(&mut self, g: usize, caps: PmaCapabilities) {
        for &i in &self.groups[g].1 {
            let port = self.ports.get(i);
            port.capability_mask = Some(caps.mask);
            port.capability_mask2 = Some(caps.mask2);
        }
    }

    /// One of a switch's all-ports sums; once both are in, clear the switch or read its
    /// ports one by one.
    fn all_ports_reply(
        &mut self,
        g: usize,
        extended: bool,
        result: Result<Response, MadError>,
        out: &mut FollowUps<PmaQuery>,
    ) {
        let Some(state) = self.all_ports[g].as_mut() else {
            return;
        };
        let reply = decode_counter_reply(result, extended, ALL_PORTS, state.capabilities);
        if extended {
            state.extended = Some(reply);
        } else {
            state.counters = Some(reply);
        }
        let complete =
            state.counters.is_some() && (!state.want_extended || state.extended.is_some());
        if !complete {
            return;
        }
        let (Some(state), Some(thresholds)) = (self.all_ports[g].take(), self.screen_with) else {
            return;
        };
        let caps = state.capabilities;
        if let Some(reason) = self.judge_sums(g, state, thresholds) {
            self.drilled.push((g, reason));
            self.set_capabilities(g, caps);
            let members = &self.groups[g].1;
            let extended = pma_capability::has_extended_counters(caps.mask);
            push_port_reads(out, self.targets, members, true, extended);
        }
    }

    /// Why a switch's ports must be read one by one, or `None` when its sums cleared it.
    fn judge_sums(
        &mut self,
        g: usize,
        state: AllPortsState,
        thresholds: &Thresholds,
    ) -> Option<String> {
        let sum = match state.counters {
            Some(Ok(sum)) => Ok(sum),
            Some(Err(e)) => Err(format!("PortCounters (PortSelect {ALL_PORTS}): {e}")),
            None => Err("no all-ports PortCounters".to_string()),
        };
        let extended = match state.extended {
            None => Ok(None),
            Some(Ok(e)) => Ok(Some(e)),
            Some(Err(e)) => Err(format!(
                "PortCountersExtended (PortSelect {ALL_PORTS}): {e}"
            )),
        };
        match (sum, extended) {
            (Ok(sum), Ok(extended)) => {
                match screen(&sum, extended.as_deref(), state.capabilities, thresholds) {
                    Screen::Clean => {
                        self.cleared[g] = Some((state.capabilities, sum, extended));
                        None
                    }
                    Screen::DrillDown(reason) => Some(reason),
                }
            }
            (Err(e), _) | (_, Err(e)) => Some(e),
        }
    }

    /// The switch of group `g`, at port 0 (its PMA).
    fn switch_at(&self, g: usize) -> PortRef {
        let t = self.targets[self.groups[g].1[0]];
        PortRef::with_lid(self.fabric.node(t.node), 0, t.lid, self.names)
    }

    /// The ports read one by one, the switches their sums cleared, and those drilled into.
    fn finish(self) -> (Vec<PortSample>, Vec<ScreenedSwitch>, Vec<DrilledSwitch>) {
        let mut screened = Vec::new();
        let mut skip = vec![false; self.targets.len()];
        for (g, c) in self.cleared.iter().enumerate() {
            let Some((caps, sum, extended)) = c else {
                continue;
            };
            let members = &self.groups[g].1;
            for &i in members {
                skip[i] = true;
            }
            screened.push(ScreenedSwitch {
                at: self.switch_at(g),
                ports: members.iter().map(|&i| self.targets[i].port).collect(),
                capability_mask: caps.mask,
                capability_mask2: caps.mask2,
                counters: CounterSet::from_values(sum),
                extended: extended.as_ref().map(|e| CounterSet::from_values(e)),
            });
        }
        let mut drilled_groups = self.drilled.clone();
        drilled_groups.sort_by_key(|(g, _)| *g);
        let drilled = drilled_groups
            .into_iter()
            .map(|(g, reason)| DrilledSwitch {
                at: self.switch_at(g),
                reason,
            })
            .collect();
        (self.ports.finish(&skip), screened, drilled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::sample::test_support::{saturating_sum, ADDITIONAL_MASK, SWITCH_MASK};
    use crate::counters::targets::targets;
    use ibscope_mad::attr::{PortRcvErrorDetails, PortXmitDiscardDetails};
    use ibscope_mad::attribute::{Attribute, Class, PerfMgt};
    use ibscope_mad::header::MadHeader;
    use std::collections::HashMap;

    // ---- screening: the sweep, against a fake PMA ----

    /// One switch (LID 1, 4 ports) with two CAs (LIDs 2 and 3) on ports 1 and 2.
    const SMALL_FABRIC: &str = "
switchguid=0x10(10)
Switch\t4 \"S-0000000000000010\"\t\t# \"sw\" base port 0 lid 1 lmc 0
[1]\t\"H-0000000000000020\"[1](21) \t\t# \"ca1\" lid 2 4xSDR
[2]\t\"H-0000000000000030\"[1](31) \t\t# \"ca2\" lid 3 4xSDR

caguid=0x20
Ca\t1 \"H-0000000000000020\"\t\t# \"ca1\"
[1](21) \t\"S-0000000000000010\"[1]\t\t# lid 2 lmc 0 \"sw\" lid 1 4xSDR

caguid=0x30
Ca\t1 \"H-0000000000000030\"\t\t# \"ca2\"
[1](31) \t\"S-0000000000000010\"[2]\t\t# lid 3 lmc 0 \"sw\" lid 1 4xSDR
";

    /// A PMA per LID, answering at once, one request after another; and the SMA of each
    /// LID for the PortInfo and PortInfoExtended the RS-FEC layout choice asks.
    #[derive(Default)]
    struct FakePma {
        /// (LID, port) -> counters.
        ports: HashMap<(u16, u8), (PortCounters, PortCountersExtended)>,
        /// (LID, port) -> the breakdowns (zeros where absent).
        details: HashMap<(u16, u8), (PortRcvErrorDetails, PortXmitDiscardDetails)>,
        /// (LID, port) -> PortExtendedSpeedsCounters' SyncHeaderErrorCounter, in either
        /// layout.
        sync_header_errors: HashMap<(u16, u8), u16>,
        /// (LID, port) -> PortInfo / PortInfoExtended, answered to LID-routed SMPs.
        port_infos: HashMap<(u16, u8), PortInfo>,
        fec: HashMap<(u16, u8), PortInfoExtended>,
        masks: HashMap<u16, PmaCapabilities>,
        /// LIDs whose ClassPortInfo does not answer.
        no_class_port_info: Vec<u16>,
        /// LIDs whose PMA does not implement the breakdown attributes.
        no_details: Vec<u16>,
        /// How PortSelect 0xFF is answered.
        all_ports: AllPortsBehaviour,
        /// (LID, port) whose per-port reads are answered with PortSelect 7.
        wrong_port: Vec<(u16, u8)>,
        executes: usize,
        sent: u64,
        /// (LID, attribute, PortSelect) of every PMA request, in order.
        log: Vec<(u16, u16, u8)>,
        /// (LID, attribute, modifier) of every SMP.
        smp_log: Vec<(u16, u16, u32)>,
    }

    #[derive(Default, Clone, Copy, PartialEq)]
    enum AllPortsBehaviour {
        #[default]
        Sum,
        Timeout,
        /// A PMA that ignores PortSelect 0xFF and answers for port 1.
        WrongPort,
    }

    /// A CA's PMA as ibsim's: PortCountersExtended, PortXmitWait.
    const CA_MASK: PmaCapabilities = PmaCapabilities::new(0x1200, 0);

    fn unsupported() -> MadError {
        MadError::Status(ibscope_mad::header::MadStatus(3 << 2))
    }

    impl FakePma {
        fn new(mask_switch: PmaCapabilities) -> FakePma {
            let mut f = FakePma::default();
            f.masks.insert(1, mask_switch);
            f.masks.insert(2, CA_MASK);
            f.masks.insert(3, CA_MASK);
            for p in 1..=4 {
                f.ports.insert((1, p), Default::default());
            }
            f.ports.insert((2, 1), Default::default());
            f.ports.insert((3, 1), Default::default());
            f
        }

        /// The counters of a PMA request, or of PortSelect 0xFF.
        fn counters(
            &self,
            lid: u16,
            select: u8,
        ) -> Result<(PortCounters, PortCountersExtended), MadError> {
            if select != ALL_PORTS {
                let (mut c, mut e) = self.ports[&(lid, select)].clone();
                let answered = if self.wrong_port.contains(&(lid, select)) {
                    7
                } else {
                    select
                };
                c.port_select = answered;
                e.port_select = answered;
                return Ok((c, e));
            }
            match self.all_ports {
                AllPortsBehaviour::Timeout => Err(MadError::Timeout { attempts: 4 }),
                AllPortsBehaviour::WrongPort => {
                    let (mut c, mut e) = self.ports[&(lid, 1)].clone();
                    c.port_select = 1;
                    e.port_select = 1;
                    Ok((c, e))
                }
                AllPortsBehaviour::Sum => {
                    let mine: Vec<_> = self
                        .ports
                        .iter()
                        .filter(|((l, _), _)| *l == lid)
                        .map(|(_, v)| v.clone())
                        .collect();
                    Ok(saturating_sum(&mine, false))
                }
            }
        }

        fn answer_pma(&self, lid: u16, attribute: u16, select: u8) -> Result<Vec<u8>, MadError> {
            let key = (lid, select);
            Ok(match attribute {
                ClassPortInfo::ID => {
                    if self.no_class_port_info.contains(&lid) {
                        return Err(MadError::Timeout { attempts: 4 });
                    }
                    let caps = self.masks[&lid];
                    ClassPortInfo {
                        capability_mask: caps.mask,
                        capability_mask2: caps.mask2,
                        ..Default::default()
                    }
                    .to_bytes()
                    .to_vec()
                }
                PortCounters::ID => self.counters(lid, select)?.0.to_bytes().to_vec(),
                PortCountersExtended::ID => self.counters(lid, select)?.1.to_bytes().to_vec(),
                PortRcvErrorDetails::ID | PortXmitDiscardDetails::ID => {
                    if self.no_details.contains(&lid) {
                        return Err(unsupported());
                    }
                    let (mut r, mut x) = self.details.get(&key).cloned().unwrap_or_default();
                    r.port_select = select;
                    x.port_select = select;
                    if attribute == PortRcvErrorDetails::ID {
                        r.to_bytes().to_vec()
                    } else {
                        x.to_bytes().to_vec()
                    }
                }
                PortExtendedSpeedsCounters::ID => {
                    let sync = self.sync_header_errors.get(&key).copied().unwrap_or(0);
                    PortExtendedSpeedsCounters {
                        port_select: select,
                        sync_header_error_counter: sync,
                        ..Default::default()
                    }
                    .to_bytes()
                    .to_vec()
                }
                other => panic!("unexpected PMA attribute {other:#x}"),
            })
        }

        fn answer_smp(&self, lid: u16, attribute: u16, port: u8) -> Result<Vec<u8>, MadError> {
            let key = (lid, port);
            Ok(match attribute {
                PortInfo::ID => self
                    .port_infos
                    .get(&key)
                    .cloned()
                    .ok_or(unsupported())?
                    .to_bytes()
                    .to_vec(),
                PortInfoExtended::ID => self
                    .fec
                    .get(&key)
                    .cloned()
                    .ok_or(unsupported())?
                    .to_bytes()
                    .to_vec(),
                other => panic!("unexpected SMP attribute {other:#x}"),
            })
        }

        fn answer(&mut self, r: &Request) -> Result<Response, MadError> {
            let header = r.header().unwrap();
            let attribute = header.attribute_id;
            let (data, class): (Vec<u8>, bool) = match &r.dest {
                ibscope_mad::umad::Dest::Gsi { lid, .. } => {
                    let select = r.decode::<PortCounters>().unwrap().port_select;
                    self.log.push((*lid, attribute, select));
                    (self.answer_pma(*lid, attribute, select)?, true)
                }
                ibscope_mad::umad::Dest::Smp(SmpRoute::Lid(lid)) => {
                    let modifier = header.attribute_modifier;
                    self.smp_log.push((*lid, attribute, modifier));
                    (self.answer_smp(*lid, attribute, modifier as u8)?, false)
                }
                other => panic!("unexpected destination {other:?}"),
            };
            let mut mad = r.mad;
            // The response bit is not looked at by the sweep.
            MadHeader::response.write(&mut mad, &true).unwrap();
            let area = if class {
                PerfMgt::PAYLOAD.bytes_mut(&mut mad).unwrap()
            } else {
                ibscope_mad::attribute::SubnMgt::PAYLOAD
                    .bytes_mut(&mut mad)
                    .unwrap()
            };
            // The extended-speeds layouts are longer than the others but fit the data area.
            area[..data.len()].copy_from_slice(&data);
            Ok(Response::from_mad(mad))
        }
    }

    impl SmpExecutor for FakePma {
        fn execute<T, R: Into<ibscope_mad::engine::PackedRequest>>(
            &mut self,
            requests: impl IntoIterator<Item = (T, R)>,
            on_done: &mut crate::discover::OnDone<'_, T>,
        ) {
            self.executes += 1;
            self.sent += crate::discover::execute_in_order(requests, on_done, |r| self.answer(r));
        }
        fn mads_sent(&self) -> u64 {
            self.sent
        }
    }

    fn small_fabric() -> (Fabric, Vec<CounterTarget>) {
        let f = crate::ibnd::parse(SMALL_FABRIC).unwrap();
        let t = targets(&f, None, None);
        assert_eq!(t.len(), 6, "{t:?}");
        (f, t)
    }

    /// Ports made in any order come out in target order, those skipped left out, those
    /// never touched made at the end, each with what was written to it.
    #[test]
    fn ports_come_out_in_target_order_whatever_order_they_were_made_in() {
        let (f, t) = small_fabric();
        let orders: [&[usize]; 4] = [&[], &[5, 4, 3, 2, 1, 0], &[3, 0, 5], &[1, 2, 0, 4, 5, 3]];
        let skips: [&[usize]; 3] = [&[], &[0, 3], &[1, 2, 4, 5]];
        for order in orders {
            for skip in skips {
                let mut ports = Ports::new(&f, &t, None, 0);
                for &i in order {
                    ports.get(i).errors.push(format!("target {i}"));
                }
                let marks: Vec<bool> = (0..t.len()).map(|i| skip.contains(&i)).collect();
                let out = ports.finish(&marks);
                let kept: Vec<usize> = (0..t.len()).filter(|i| !skip.contains(i)).collect();
                assert_eq!(out.len(), kept.len(), "{order:?} skipping {skip:?}");
                for (port, &i) in out.iter().zip(&kept) {
                    assert_eq!((port.at.port, port.at.lid), (t[i].port, t[i].lid));
                    let written = order.contains(&i).then(|| format!("target {i}"));
                    assert_eq!(port.errors.first(), written.as_ref(), "{order:?} {skip:?}");
                }
            }
        }
    }

    /// A node's name is made once per sweep: its ports, and the far ends that are its
    /// ports, share it; each port is named and aimed as `PortRef` names it alone, and a
    /// node-name map's name is the one shared.
    #[test]
    fn ports_of_a_node_share_its_name() {
        let (f, t) = small_fabric();
        let map = NameMap::parse("0x10 \"spine-1\"\n", "names").unwrap();
        for names in [None, Some(&map)] {
            let ports = Ports::new(&f, &t, names, 0);
            let out = ports.finish(&vec![false; t.len()]);
            let switch: Vec<&PortSample> = out.iter().filter(|p| p.at.node.guid == 0x10).collect();
            assert_eq!(switch.len(), 4, "{out:?}");
            let name = &switch[0].at.node.name;
            assert_eq!(&**name, if names.is_some() { "spine-1" } else { "sw" });
            let far_ends = out.iter().filter_map(|p| p.remote.as_ref());
            let the_switch = far_ends.filter(|r| r.node.guid == 0x10).map(|r| &r.node);
            let referring = switch.iter().map(|p| &p.at.node).chain(the_switch);
            assert_eq!(referring.clone().count(), 6);
            for node in referring {
                assert!(Arc::ptr_eq(&node.name, name), "{node:?}");
            }
            for (p, target) in out.iter().zip(&t) {
                let alone = PortRef::with_lid(f.node(target.node), target.port, target.lid, names);
                assert_eq!(p.at, alone);
                let far = f.peer(End {
                    node: target.node,
                    port: target.port,
                });
                let far = far.map(|e| PortRef::new(f.node(e.node), e.port, names));
                assert_eq!(p.remote, far);
            }
        }
    }

    /// Both sweeps on fresh copies of the same PMA: (screened, per-port, screened's PMA).
    fn both(
        pma: impl Fn() -> FakePma,
        thresholds: &Thresholds,
    ) -> (ScreenedSweep, Sample, FakePma) {
        let (f, t) = small_fabric();
        let mut screened_pma = pma();
        let screened = sweep_screened(&mut screened_pma, &f, &t, None, thresholds);
        let mut plain_pma = pma();
        let plain = sweep(&mut plain_pma, &f, &t, None);
        assert_eq!(screened_pma.executes, 1, "one batch");
        assert_eq!(plain_pma.executes, 1, "one batch");
        assert_eq!(plain.mads_sent, plain_pma.sent);
        assert_eq!(screened.sample.mads_sent, screened_pma.sent);
        (screened, plain, screened_pma)
    }

    /// Ports of `sample` on the switch (LID 1).
    fn switch_ports(ports: &[PortSample]) -> Vec<u8> {
        ports
            .iter()
            .filter(|p| p.at.lid == 1)
            .map(|p| p.at.port)
            .collect()
    }

    #[test]
    fn sweep_screened_clean_switch_is_one_sum() {
        let (s, plain, pma) = both(|| FakePma::new(SWITCH_MASK), &Thresholds::default());
        // 3 ClassPortInfo + 1 sum + 2 CA ports x (PortCounters + extended).
        assert_eq!(s.sample.mads_sent, 8);
        // 3 ClassPortInfo + 6 ports x 2.
        assert_eq!(plain.mads_sent, 15);
        assert_eq!(s.screened.len(), 1);
        assert_eq!(s.screened[0].ports, vec![1, 2, 3, 4]);
        assert_eq!(s.screened[0].at.lid, 1);
        assert_eq!(s.ports_screened(), 4);
        assert_eq!(s.ports_covered(), 6);
        assert!(s.drilled.is_empty());
        assert!(switch_ports(&s.sample.ports).is_empty());
        // The CA ports are read exactly as sweep reads them.
        let cas: Vec<_> = plain
            .ports
            .iter()
            .filter(|p| p.at.lid != 1)
            .cloned()
            .collect();
        assert_eq!(s.sample.ports, cas);
        // The sum follows the switch's ClassPortInfo, with PortSelect 0xFF.
        let sums: Vec<_> = pma.log.iter().filter(|l| l.2 == ALL_PORTS).collect();
        assert_eq!(sums, vec![&(1, PortCounters::ID, ALL_PORTS)]);
        assert!(!pma
            .log
            .iter()
            .any(|l| l.0 == 1 && l.2 != ALL_PORTS && l.1 != ClassPortInfo::ID));
    }

    #[test]
    fn sweep_screened_drills_into_a_switch_with_errors_and_matches_sweep() {
        let pma = || {
            let mut p = FakePma::new(SWITCH_MASK);
            p.ports.get_mut(&(1, 3)).unwrap().0.symbol_error_counter = 5;
            p.ports.get_mut(&(2, 1)).unwrap().0.port_rcv_errors = 65535;
            p
        };
        let (s, plain, _) = both(pma, &Thresholds::default());
        assert!(s.screened.is_empty());
        assert_eq!(s.drilled.len(), 1);
        assert_eq!(
            s.drilled[0].reason,
            "SymbolErrorCounter = 5 in the all-ports sum, above its threshold 0"
        );
        assert_eq!(s.sample.ports, plain.ports);
        assert_eq!(s.sample.mads_sent, plain.mads_sent + 1);
    }

    #[test]
    fn sweep_rejects_a_reply_for_another_port() {
        // A PMA answering LID 2 port 1 with PortSelect 7: neither set of values is taken
        // for port 1, and both errors say why; the other ports are unaffected.
        let (f, t) = small_fabric();
        let mut pma = FakePma::new(SWITCH_MASK);
        pma.wrong_port.push((2, 1));
        let s = sweep(&mut pma, &f, &t, None);
        let bad = s.ports.iter().find(|p| p.at.lid == 2).unwrap();
        assert_eq!(bad.counters, None);
        assert_eq!(bad.extended, None);
        assert_eq!(
            bad.errors,
            vec![
                "PortCounters: reply is for port 7 (asked 1)".to_string(),
                "PortCountersExtended: reply is for port 7 (asked 1)".to_string(),
            ]
        );
        for p in s.ports.iter().filter(|p| p.at.lid != 2) {
            assert!(p.errors.is_empty(), "{p:?}");
            assert!(p.counters.is_some() && p.extended.is_some(), "{p:?}");
        }
    }

    #[test]
    fn sweep_screened_falls_back_when_the_sum_fails() {
        for behaviour in [AllPortsBehaviour::Timeout, AllPortsBehaviour::WrongPort] {
            let pma = || {
                let mut p = FakePma::new(SWITCH_MASK);
                p.all_ports = behaviour;
                p.ports.get_mut(&(1, 4)).unwrap().0.link_downed_counter = 1;
                p
            };
            let (s, plain, _) = both(pma, &Thresholds::default());
            assert!(s.screened.is_empty());
            assert_eq!(s.drilled.len(), 1);
            let r = &s.drilled[0].reason;
            assert!(r.starts_with("PortCounters (PortSelect 255): "), "{r}");
            if behaviour == AllPortsBehaviour::WrongPort {
                assert!(r.ends_with("reply is for port 1 (asked 255)"), "{r}");
            }
            assert_eq!(s.sample.ports, plain.ports);
            assert_eq!(switch_ports(&s.sample.ports), vec![1, 2, 3, 4]);
        }
    }

    #[test]
    fn sweep_screened_without_all_port_select_reads_ports() {
        let (s, plain, pma) = both(|| FakePma::new(CA_MASK), &Thresholds::default());
        assert!(s.screened.is_empty() && s.drilled.is_empty());
        assert_eq!(s.sample.ports, plain.ports);
        assert_eq!(s.sample.mads_sent, plain.mads_sent);
        assert!(!pma.log.iter().any(|l| l.2 == ALL_PORTS));
    }

    #[test]
    fn sweep_screened_switch_without_class_port_info_reads_ports() {
        let pma = || {
            let mut p = FakePma::new(SWITCH_MASK);
            p.no_class_port_info.push(1);
            p
        };
        let (s, plain, _) = both(pma, &Thresholds::default());
        assert!(s.screened.is_empty());
        assert_eq!(s.sample.ports, plain.ports);
        let p = s.sample.ports.iter().find(|p| p.at.lid == 1).unwrap();
        assert!(p.counters.is_some() && p.extended.is_none());
        assert!(p.errors[0].starts_with("ClassPortInfo: "), "{:?}", p.errors);
    }

    #[test]
    fn sweep_screened_reads_the_extended_sum_for_extended_thresholds() {
        let t = Thresholds::parse("PortXmitData=4000\n", "t").unwrap();
        let pma = |words: u64| {
            move || {
                let mut p = FakePma::new(SWITCH_MASK);
                p.ports.get_mut(&(1, 2)).unwrap().1.port_xmit_data = words;
                p
            }
        };
        let (s, _, log) = both(pma(1000), &t);
        assert_eq!(s.screened.len(), 1);
        assert_eq!(
            s.screened[0].extended.as_ref().unwrap().get("PortXmitData"),
            Some(4000)
        );
        assert!(log.log.contains(&(1, PortCountersExtended::ID, ALL_PORTS)));
        assert_eq!(s.sample.mads_sent, 9);
        let (s, plain, _) = both(pma(1001), &t);
        assert!(s.screened.is_empty());
        assert_eq!(s.sample.ports, plain.ports);
        let port2 = s
            .sample
            .ports
            .iter()
            .find(|p| (p.at.lid, p.at.port) == (1, 2));
        assert_eq!(t.exceeded(port2.unwrap()).len(), 1);
    }

    // ---- the detail attributes and the 64-bit error counters ----

    fn port(s: &Sample, lid: u16, port: u8) -> &PortSample {
        s.ports
            .iter()
            .find(|p| (p.at.lid, p.at.port) == (lid, port))
            .unwrap()
    }

    fn with_options(pma: &mut FakePma, options: SweepOptions) -> Sample {
        let (f, t) = small_fabric();
        sweep_with(pma, &f, &t, None, options)
    }

    /// Explaining: the breakdown of a counter that counted, of that port only.
    #[test]
    fn sweep_reads_the_breakdown_of_errors_that_counted() {
        let mut pma = FakePma::new(SWITCH_MASK);
        pma.ports.get_mut(&(1, 3)).unwrap().0.port_rcv_errors = 9;
        pma.ports.get_mut(&(2, 1)).unwrap().0.port_xmit_discards = 4;
        let rcv = PortRcvErrorDetails {
            port_malformed_pkt_errors: 7,
            port_vl_mapping_errors: 2,
            ..Default::default()
        };
        pma.details.insert((1, 3), (rcv, Default::default()));
        let xmit = PortXmitDiscardDetails {
            port_sw_hoq_lifetime_limit_discards: 4,
            ..Default::default()
        };
        pma.details.insert((2, 1), (Default::default(), xmit));
        let options = SweepOptions {
            details: DetailReads::Explaining,
        };
        let s = with_options(&mut pma, options);
        // 3 ClassPortInfo + 6 ports x 2 + one breakdown each for two ports.
        assert_eq!(s.mads_sent, 17);
        let sw3 = port(&s, 1, 3);
        let d = sw3.details.get("PortRcvErrorDetails").unwrap();
        assert_eq!(d.get("PortMalformedPktErrors"), Some(7));
        assert_eq!(d.get("PortVLMappingErrors"), Some(2));
        assert!(sw3.details.get("PortXmitDiscardDetails").is_none());
        let ca = port(&s, 2, 1);
        assert_eq!(ca.value("PortSwHOQLifetimeLimitDiscards"), Some(4));
        assert!(port(&s, 1, 1).details.is_empty());
        assert!(s.ports.iter().all(|p| p.errors.is_empty()));
        // A PMA without the breakdowns: no details, no error.
        let mut bare = FakePma::new(SWITCH_MASK);
        bare.ports.get_mut(&(1, 3)).unwrap().0.port_rcv_errors = 9;
        bare.no_details.push(1);
        let s = with_options(&mut bare, options);
        assert!(port(&s, 1, 3).details.is_empty());
        assert!(port(&s, 1, 3).errors.is_empty());
    }

    /// All: both breakdowns of every port; PortExtendedSpeedsCounters only where asked for
    /// and only on ports at an extended speed (none on this SDR fabric).
    #[test]
    fn sweep_reads_every_breakdown_with_all() {
        let mut pma = FakePma::new(SWITCH_MASK);
        let options = SweepOptions {
            details: DetailReads::All {
                extended_speeds: true,
            },
        };
        let s = with_options(&mut pma, options);
        assert_eq!(s.mads_sent, 3 + 6 * 4);
        for p in &s.ports {
            let names: Vec<&str> = p.details.0.iter().map(|(a, _)| a.as_str()).collect();
            assert_eq!(
                names,
                ["PortRcvErrorDetails", "PortXmitDiscardDetails"],
                "{p:?}"
            );
        }
        assert!(!pma
            .log
            .iter()
            .any(|l| l.1 == PortExtendedSpeedsCounters::ID));
        // A PMA that does not implement them: absent, not an error, even when asked for all.
        let mut bare = FakePma::new(SWITCH_MASK);
        bare.no_details.push(2);
        let s = with_options(&mut bare, options);
        assert!(port(&s, 2, 1).details.is_empty());
        assert!(port(&s, 2, 1).errors.is_empty());
    }

    /// The same fabric at 4xHDR: PortExtendedSpeedsCounters of every port, in the layout
    /// perfquery would pick. The switch's PMA has no RS-FEC counters (original layout, no
    /// SMP); ca1's has, and its PortInfoExtended says RS-FEC (RS-FEC layout); ca2's has, but
    /// its port has no PortInfoExtended (original layout).
    #[test]
    fn sweep_reads_extended_speeds_counters_in_the_layout_perfquery_picks() {
        let f = crate::ibnd::parse(&SMALL_FABRIC.replace("4xSDR", "4xHDR")).unwrap();
        let t = targets(&f, None, None);
        let mut pma = FakePma::new(SWITCH_MASK);
        let rs_fec_pma =
            PmaCapabilities::new(0x1200 | pma_capability::IS_RS_FEC_COUNTERS_SUPPORTED, 0);
        pma.masks.insert(2, rs_fec_pma);
        pma.masks.insert(3, rs_fec_pma);
        let with_pie = PortInfo {
            capability_mask: capability::IS_CAPABILITY_MASK2_SUPPORTED,
            capability_mask2: capability2::IS_PORT_INFO_EXTENDED_SUPPORTED,
            ..Default::default()
        };
        pma.port_infos.insert((2, 1), with_pie);
        pma.port_infos.insert((3, 1), PortInfo::default());
        pma.fec.insert(
            (2, 1),
            PortInfoExtended {
                capability_mask: PortInfoExtended::IS_FEC_MODE_SUPPORTED,
                fec_mode_active: ibscope_mad::attr::FecMode::RsFec.code(),
                ..Default::default()
            },
        );
        pma.sync_header_errors.insert((1, 2), 5);
        pma.sync_header_errors.insert((2, 1), 6);
        let options = SweepOptions {
            details: DetailReads::All {
                extended_speeds: true,
            },
        };
        let s = sweep_with(&mut pma, &f, &t, None, options);
        let pesc = |lid, p| {
            port(&s, lid, p)
                .details
                .get("PortExtendedSpeedsCounters")
                .unwrap_or_else(|| panic!("no PortExtendedSpeedsCounters at {lid}/{p}"))
        };
        assert_eq!(pesc(1, 2).get("SyncHeaderErrorCounter"), Some(5));
        assert!(pesc(1, 2).get("ErrorDetectionCounterLane0").is_some());
        let rs = pesc(2, 1);
        assert_eq!(rs.get("SyncHeaderErrorCounter"), Some(6));
        assert!(rs.get("FECCorrectableSymbolCtrLane0").is_some());
        assert!(rs.get("ErrorDetectionCounterLane0").is_none());
        assert!(pesc(3, 1).get("ErrorDetectionCounterLane0").is_some());
        // The SMPs perfquery's choice takes: PortInfo of each RS-FEC-capable CA's port,
        // PortInfoExtended only where PortInfo says it exists.
        let mut smps = pma.smp_log.clone();
        smps.sort_unstable();
        assert_eq!(
            smps,
            vec![
                (2, PortInfo::ID, 1),
                (2, PortInfoExtended::ID, 1),
                (3, PortInfo::ID, 1)
            ]
        );
        assert!(s.ports.iter().all(|p| p.errors.is_empty()), "{:?}", s.ports);
        // Without extended_speeds nothing of this is sent.
        let mut quiet = FakePma::new(SWITCH_MASK);
        let plain = SweepOptions {
            details: DetailReads::All {
                extended_speeds: false,
            },
        };
        let s = sweep_with(&mut quiet, &f, &t, None, plain);
        assert!(quiet.smp_log.is_empty());
        assert!(s
            .ports
            .iter()
            .all(|p| p.details.get("PortExtendedSpeedsCounters").is_none()));
    }

    /// A switch PMA with IsAdditionalPortCountersExtendedSupported: the error counters come
    /// from PortCountersExtended, 64 bits wide; past 65535 they are neither saturated nor
    /// a finding of saturation, and screening reads the extended sum for them.
    #[test]
    fn sweep_uses_the_64_bit_error_counters_where_the_pma_has_them() {
        let pma = || {
            let mut p = FakePma::new(ADDITIONAL_MASK);
            let (c, e) = p.ports.get_mut(&(1, 2)).unwrap();
            c.symbol_error_counter = u16::MAX;
            e.symbol_error_counter = 123_456;
            p
        };
        let (f, t) = small_fabric();
        let s = sweep(&mut pma(), &f, &t, None);
        let p = port(&s, 1, 2);
        assert_eq!(p.capability_mask2, Some(ADDITIONAL_MASK.mask2));
        assert_eq!(p.value("SymbolErrorCounter"), Some(123_456));
        assert!(!p.is_saturated("SymbolErrorCounter"));
        assert_eq!(
            p.saturated,
            vec!["SymbolErrorCounter"],
            "the 16-bit field is"
        );
        // The CA ports' PMAs (ibsim's mask) have no 64-bit error counters.
        assert!(port(&s, 2, 1)
            .extended
            .as_ref()
            .unwrap()
            .get("SymbolErrorCounter")
            .is_none());

        let limit = Thresholds::parse("SymbolErrorCounter=200000\n", "t").unwrap();
        let mut screened_pma = pma();
        let screened = sweep_screened(&mut screened_pma, &f, &t, None, &limit);
        // The 16-bit sum is stuck at 65535 and bounds nothing, but the 64-bit sum (123456)
        // is below the threshold: the switch is cleared.
        assert_eq!(screened.screened.len(), 1, "{:?}", screened.drilled);
        assert!(screened_pma
            .log
            .contains(&(1, PortCountersExtended::ID, ALL_PORTS)));
        let over = Thresholds::parse("SymbolErrorCounter=100000\n", "t").unwrap();
        let drilled = sweep_screened(&mut pma(), &f, &t, None, &over);
        assert_eq!(
            drilled.drilled[0].reason,
            "SymbolErrorCounter = 123456 in the all-ports sum, above its threshold 100000"
        );
    }
}
