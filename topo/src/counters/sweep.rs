//! Reading the counters: every port one by one ([`sweep`]), or as ibqueryerrors does,
//! switches first as one all-ports sum ([`sweep_screened`]). One executor batch either way.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ibscope_mad::attr::{
    pma_capability, ClassPortInfo, CounterValue, PortCounters, PortCountersExtended,
};
use ibscope_mad::engine::{MadError, Request, Response};
use ibscope_mad::header::method;
use serde::{Deserialize, Serialize};

use super::names::has_extended_form;
use super::pma::{
    class_port_info_request, decode_counter_reply, group, port_request, push_port_reads, Query,
    ALL_PORTS,
};
use super::sample::{CounterSet, PortSample, Sample};
use super::screen::{screen, Screen};
use super::targets::CounterTarget;
use super::thresholds::Thresholds;
use crate::discover::SmpExecutor;
use crate::health::PortRef;
use crate::model::{End, Fabric};
use crate::namemap::NameMap;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
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
    run_sweep(exec, fabric, targets, names, None).sample
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
    run_sweep(exec, fabric, targets, names, Some(thresholds))
}

/// A switch's all-ports reads as they come in.
struct AllPortsState {
    mask: u16,
    counters: Option<Result<Vec<CounterValue>, String>>,
    /// `None` while pending or when not asked for.
    extended: Option<Result<Vec<CounterValue>, String>>,
    want_extended: bool,
}

/// A switch cleared by its sums: CapabilityMask, PortCounters sum, PortCountersExtended sum.
type ClearedSums = (u16, Vec<CounterValue>, Option<Vec<CounterValue>>);

/// The sweep; `screen_with`: screen switches against these thresholds.
fn run_sweep<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
    screen_with: Option<&Thresholds>,
) -> ScreenedSweep {
    let started = Instant::now();
    let time_ms = now_ms();
    let sent_before = exec.mads_sent();
    let mut run = Run::new(fabric, targets, names, screen_with);
    let batch = run.first_batch();
    exec.execute(batch, &mut |q, result, out| run.on_done(q, result, out));
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

/// One sweep in progress: what is asked, and what came back so far.
struct Run<'a> {
    fabric: &'a Fabric,
    targets: &'a [CounterTarget],
    names: Option<&'a NameMap>,
    screen_with: Option<&'a Thresholds>,
    /// Targets by node: the LID ClassPortInfo goes to, the target indexes.
    groups: Vec<(u16, Vec<usize>)>,
    /// Screened groups: switches. Their PortCounters wait for ClassPortInfo.
    screened_group: Vec<bool>,
    /// A threshold looks at a counter ports answer from PortCountersExtended: then the
    /// extended sum is needed too.
    thresholds_need_extended: bool,
    ports: Vec<PortSample>,
    all_ports: Vec<Option<AllPortsState>>,
    /// Per group, once its sum cleared it: the mask and the sums.
    cleared: Vec<Option<ClearedSums>>,
    drilled: Vec<(usize, String)>,
}

impl<'a> Run<'a> {
    fn new(
        fabric: &'a Fabric,
        targets: &'a [CounterTarget],
        names: Option<&'a NameMap>,
        screen_with: Option<&'a Thresholds>,
    ) -> Run<'a> {
        let ports = targets
            .iter()
            .map(|t| {
                let node = fabric.node(t.node);
                PortSample {
                    at: PortRef {
                        lid: t.lid,
                        ..PortRef::new(node, t.port, names)
                    },
                    remote: fabric
                        .peer(End {
                            node: t.node,
                            port: t.port,
                        })
                        .map(|e| PortRef::new(fabric.node(e.node), e.port, names)),
                    capability_mask: None,
                    counters: None,
                    extended: None,
                    saturated: Vec::new(),
                    errors: Vec::new(),
                }
            })
            .collect();
        let groups = group(targets);
        let screened_group = groups
            .iter()
            .map(|(_, members)| {
                screen_with.is_some() && fabric.node(targets[members[0]].node).is_switch()
            })
            .collect();
        let thresholds_need_extended =
            screen_with.is_some_and(|t| t.limits.iter().any(|(n, _)| has_extended_form(n)));
        Run {
            fabric,
            targets,
            names,
            screen_with,
            all_ports: groups.iter().map(|_| None).collect(),
            cleared: groups.iter().map(|_| None).collect(),
            groups,
            screened_group,
            thresholds_need_extended,
            ports,
            drilled: Vec::new(),
        }
    }

    /// ClassPortInfo of every node, and the PortCounters of every port not held for
    /// screening.
    fn first_batch(&self) -> Vec<(Query, Request)> {
        let mut batch = Vec::new();
        for (g, (lid, members)) in self.groups.iter().enumerate() {
            batch.push((Query::ClassPortInfo(g), class_port_info_request(*lid)));
            if !self.screened_group[g] {
                push_port_reads(&mut batch, self.targets, members, true, false);
            }
        }
        batch
    }

    fn on_done(
        &mut self,
        q: Query,
        result: Result<Response, MadError>,
        out: &mut Vec<(Query, Request)>,
    ) {
        match q {
            Query::ClassPortInfo(g) => self.class_port_info(g, result, out),
            Query::AllPorts(g) => self.all_ports_reply(g, false, result, out),
            Query::AllPortsExtended(g) => self.all_ports_reply(g, true, result, out),
            Query::Counters(i) => match decode_counter_reply(result, false, self.targets[i].port) {
                Ok(values) => {
                    let port = &mut self.ports[i];
                    port.saturated = values
                        .iter()
                        .filter(|v| v.saturated())
                        .map(|v| v.name.to_string())
                        .collect();
                    port.counters = Some(CounterSet::from_values(&values));
                }
                Err(e) => self.ports[i].errors.push(format!("PortCounters: {e}")),
            },
            Query::Extended(i) => match decode_counter_reply(result, true, self.targets[i].port) {
                Ok(values) => self.ports[i].extended = Some(CounterSet::from_values(&values)),
                Err(e) => self.ports[i]
                    .errors
                    .push(format!("PortCountersExtended: {e}")),
            },
        }
    }

    /// A node's PMA capabilities: ask for its all-ports sums (a screened switch with
    /// AllPortSelect) or its ports' remaining counters.
    fn class_port_info(
        &mut self,
        g: usize,
        result: Result<Response, MadError>,
        out: &mut Vec<(Query, Request)>,
    ) {
        let members = &self.groups[g].1;
        let screened = self.screened_group[g];
        let mask = match result.map_err(|e| e.to_string()).and_then(|r| {
            r.decode::<ClassPortInfo>()
                .map(|c| c.capability_mask)
                .map_err(|e| format!("malformed reply: {e}"))
        }) {
            Ok(m) => m,
            Err(e) => {
                for &i in members {
                    self.ports[i].errors.push(format!(
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
        for &i in members {
            self.ports[i].capability_mask = Some(mask);
        }
        let extended = pma_capability::has_extended_counters(mask);
        if !(screened && mask & pma_capability::ALL_PORT_SELECT != 0) {
            // PortCounters already queued unless this group was held for screening.
            push_port_reads(out, self.targets, members, screened, extended);
            return;
        }
        let sum_target = CounterTarget {
            port: ALL_PORTS,
            ..self.targets[members[0]]
        };
        let want_extended = extended && self.thresholds_need_extended;
        out.push((
            Query::AllPorts(g),
            port_request::<PortCounters>(&sum_target, method::GET, 0),
        ));
        if want_extended {
            let request = port_request::<PortCountersExtended>(&sum_target, method::GET, 0);
            out.push((Query::AllPortsExtended(g), request));
        }
        self.all_ports[g] = Some(AllPortsState {
            mask,
            counters: None,
            extended: None,
            want_extended,
        });
    }

    /// One of a switch's all-ports sums; once both are in, clear the switch or read its
    /// ports one by one.
    fn all_ports_reply(
        &mut self,
        g: usize,
        extended: bool,
        result: Result<Response, MadError>,
        out: &mut Vec<(Query, Request)>,
    ) {
        let Some(state) = self.all_ports[g].as_mut() else {
            return;
        };
        let reply = decode_counter_reply(result, extended, ALL_PORTS);
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
        let mask = state.mask;
        if let Some(reason) = self.judge_sums(g, state, thresholds) {
            self.drilled.push((g, reason));
            let members = &self.groups[g].1;
            let extended = pma_capability::has_extended_counters(mask);
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
                match screen(&sum, extended.as_deref(), state.mask, thresholds) {
                    Screen::Clean => {
                        self.cleared[g] = Some((state.mask, sum, extended));
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
        PortRef {
            lid: t.lid,
            ..PortRef::new(self.fabric.node(t.node), 0, self.names)
        }
    }

    /// The ports read one by one, the switches their sums cleared, and those drilled into.
    fn finish(self) -> (Vec<PortSample>, Vec<ScreenedSwitch>, Vec<DrilledSwitch>) {
        let mut screened = Vec::new();
        let mut skip = vec![false; self.targets.len()];
        for (g, c) in self.cleared.iter().enumerate() {
            let Some((mask, sum, extended)) = c else {
                continue;
            };
            let members = &self.groups[g].1;
            for &i in members {
                skip[i] = true;
            }
            screened.push(ScreenedSwitch {
                at: self.switch_at(g),
                ports: members.iter().map(|&i| self.targets[i].port).collect(),
                capability_mask: *mask,
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
        let ports = self
            .ports
            .into_iter()
            .zip(skip)
            .filter(|(_, skip)| !skip)
            .map(|(p, _)| p)
            .collect();
        (ports, screened, drilled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::sample::test_support::{saturating_sum, SWITCH_MASK};
    use crate::counters::targets::targets;
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

    /// A PMA per LID, answering at once, one request after another.
    #[derive(Default)]
    struct FakePma {
        /// (LID, port) -> counters.
        ports: HashMap<(u16, u8), (PortCounters, PortCountersExtended)>,
        masks: HashMap<u16, u16>,
        /// LIDs whose ClassPortInfo does not answer.
        no_class_port_info: Vec<u16>,
        /// How PortSelect 0xFF is answered.
        all_ports: AllPortsBehaviour,
        /// (LID, port) whose per-port reads are answered with PortSelect 7.
        wrong_port: Vec<(u16, u8)>,
        executes: usize,
        sent: u64,
        /// (LID, attribute, PortSelect) of every request, in order.
        log: Vec<(u16, u16, u8)>,
    }

    #[derive(Default, Clone, Copy, PartialEq)]
    enum AllPortsBehaviour {
        #[default]
        Sum,
        Timeout,
        /// A PMA that ignores PortSelect 0xFF and answers for port 1.
        WrongPort,
    }

    impl FakePma {
        fn new(mask_switch: u16) -> FakePma {
            let mut f = FakePma::default();
            f.masks.insert(1, mask_switch);
            f.masks.insert(2, 0x1200);
            f.masks.insert(3, 0x1200);
            for p in 1..=4 {
                f.ports.insert((1, p), Default::default());
            }
            f.ports.insert((2, 1), Default::default());
            f.ports.insert((3, 1), Default::default());
            f
        }

        fn answer(&self, r: &Request) -> Result<Response, MadError> {
            let ibscope_mad::umad::Dest::Gsi { lid, .. } = r.dest else {
                panic!("not a GSI request")
            };
            let attribute = r.header().unwrap().attribute_id;
            let select = r.decode::<PortCounters>().unwrap().port_select;
            let mut mad = r.mad;
            let data: Vec<u8> = match attribute {
                ClassPortInfo::ID => {
                    if self.no_class_port_info.contains(&lid) {
                        return Err(MadError::Timeout { attempts: 4 });
                    }
                    ClassPortInfo {
                        capability_mask: self.masks[&lid],
                        ..Default::default()
                    }
                    .to_bytes()
                    .to_vec()
                }
                PortCounters::ID | PortCountersExtended::ID => {
                    let extended = attribute == PortCountersExtended::ID;
                    let (c, e) = if select == ALL_PORTS {
                        match self.all_ports {
                            AllPortsBehaviour::Timeout => {
                                return Err(MadError::Timeout { attempts: 4 })
                            }
                            AllPortsBehaviour::WrongPort => {
                                let (mut c, mut e) = self.ports[&(lid, 1)].clone();
                                c.port_select = 1;
                                e.port_select = 1;
                                (c, e)
                            }
                            AllPortsBehaviour::Sum => {
                                let mine: Vec<_> = self
                                    .ports
                                    .iter()
                                    .filter(|((l, _), _)| *l == lid)
                                    .map(|(_, v)| v.clone())
                                    .collect();
                                saturating_sum(&mine, false)
                            }
                        }
                    } else {
                        let (mut c, mut e) = self.ports[&(lid, select)].clone();
                        let answered = if self.wrong_port.contains(&(lid, select)) {
                            7
                        } else {
                            select
                        };
                        c.port_select = answered;
                        e.port_select = answered;
                        (c, e)
                    };
                    if extended {
                        e.to_bytes().to_vec()
                    } else {
                        c.to_bytes().to_vec()
                    }
                }
                other => panic!("unexpected attribute {other:#x}"),
            };
            // The response bit is not looked at by the sweep.
            MadHeader::response.write(&mut mad, &true).unwrap();
            PerfMgt::PAYLOAD.bytes_mut(&mut mad).unwrap()[..data.len()].copy_from_slice(&data);
            Ok(Response::from_mad(mad))
        }
    }

    impl SmpExecutor for FakePma {
        fn execute<T>(
            &mut self,
            requests: Vec<(T, Request)>,
            on_done: &mut crate::discover::OnDone<'_, T>,
        ) {
            self.executes += 1;
            let mut queue: std::collections::VecDeque<(T, Request)> = requests.into();
            let mut follow_ups = Vec::new();
            while let Some((token, request)) = queue.pop_front() {
                self.sent += 1;
                let ibscope_mad::umad::Dest::Gsi { lid, .. } = request.dest else {
                    panic!("not a GSI request")
                };
                self.log.push((
                    lid,
                    request.header().unwrap().attribute_id,
                    request.decode::<PortCounters>().unwrap().port_select,
                ));
                let result = self.answer(&request);
                on_done(token, result, &mut follow_ups);
                queue.extend(follow_ups.drain(..));
            }
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
        let (s, plain, pma) = both(|| FakePma::new(0x1200), &Thresholds::default());
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
}
