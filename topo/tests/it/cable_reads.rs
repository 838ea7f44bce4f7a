//! Module reads over InfiniBand against the in-process fabric serving recorded module
//! memory (the published captures of tests/data/cables): the engine, the
//! SubnSet(AccessRegister) reads of PLIB, PMLP and MCIA, the decoders and the findings,
//! together; and a fabric without the registers told apart with one MAD per node.

use std::sync::Arc;

use ibscope_mad::cable::decode::halves_to_read;
use ibscope_mad::cable::{self, dump, HalfAddr, ModuleMemory, ADDR_A0, ADDR_A2};
use ibscope_mad::engine::{Engine, EngineConfig};
use ibscope_topo::cable_reads::{read_modules, ModuleRead, ModuleReadMode, NOT_ALLOWED};
use ibscope_topo::cables::{module_findings, ModuleContext};
use ibscope_topo::discover::{discover, DiscoverOptions};
use ibscope_topo::findings::FindingKind;
use ibscope_topo::gen::{fat_tree, FatTreeSpec};
use ibscope_topo::responder::{FabricModel, FabricPort, ResponderOptions};
use ibscope_topo::responder_modules::RecordedModules;
use ibscope_topo::Fabric;

const SFP: &str = "sonic-sfputil-sff8472-finisar-ftlx8571d3bcl.txt";
const DAC: &str = "sonic-sfputil-sff8636-molex-1110401054.txt";

fn memory(name: &str) -> ModuleMemory {
    let path = format!("{}/../tests/data/cables/{name}", env!("CARGO_MANIFEST_DIR"));
    dump::parse(&std::fs::read(path).unwrap()).unwrap().memory
}

/// The FINISAR SFP with no light received (A2h bytes 104-105 zero).
fn dark_sfp() -> ModuleMemory {
    let mut m = memory(SFP);
    let mut a2 = *m.half(HalfAddr::lower(ADDR_A2)).unwrap();
    a2[104] = 0;
    a2[105] = 0;
    m.insert(HalfAddr::lower(ADDR_A2), a2);
    m
}

fn fabric() -> Fabric {
    ibscope_topo::ibnd::parse(&fat_tree(&FatTreeSpec::new(2, 8, 4)).unwrap()).unwrap()
}

fn engine(model: FabricModel) -> Engine<FabricPort> {
    let port = FabricPort::new(Arc::new(model), ResponderOptions::default());
    Engine::with_port(port, EngineConfig::default(), 1)
}

/// The halves a reader asks for: the lower page and what it names.
fn read_part(m: &ModuleMemory) -> ModuleMemory {
    let lower = *m.half(HalfAddr::lower(ADDR_A0)).unwrap();
    let mut out = ModuleMemory::new();
    out.insert(HalfAddr::lower(ADDR_A0), lower);
    for h in halves_to_read(&lower).unwrap() {
        out.insert(h, *m.half(h).unwrap());
    }
    out
}

#[test]
fn recorded_modules_are_read_through_the_registers_and_judged() {
    let f = fabric();
    let plain = engine(FabricModel::from_fabric(&f, 0).unwrap());
    let mut plain = plain;
    let live = discover(&mut plain, DiscoverOptions::default(), |_| {});
    assert!(live.report.complete);
    // The leaf the local host hangs off, two of its ports cabled to hosts, and a host.
    let (leaf_id, leaf) = live
        .nodes()
        .find(|(_, n)| n.is_switch() && n.dr_path.as_deref() == Some("0,1"))
        .expect("the local leaf");
    let host_ports: Vec<u8> = leaf
        .ports
        .iter()
        .filter(|p| {
            live.peer(ibscope_topo::model::End {
                node: leaf_id,
                port: p.number,
            })
            .is_some_and(|e| !live.node(e.node).is_switch())
        })
        .map(|p| p.number)
        .collect();
    assert!(host_ports.len() >= 2, "{host_ports:?}");
    let (host_id, host) = live
        .nodes()
        .find(|(_, n)| !n.is_switch() && n.dr_path.as_deref() != Some("0"))
        .unwrap();
    let _ = host_id;
    let mut recorded = RecordedModules::new();
    recorded.insert(leaf.guid, host_ports[0], memory(DAC));
    recorded.insert(leaf.guid, host_ports[1], dark_sfp());
    recorded.insert(host.guid, 1, memory(SFP));
    let mut e = engine(
        FabricModel::from_fabric(&f, 0)
            .unwrap()
            .with_modules(recorded),
    );
    let live = discover(&mut e, DiscoverOptions::default(), |_| {});
    let got = read_modules(&mut e, &live, None, ModuleReadMode::AccessRegister);

    let at = |guid: u64, port: u8| {
        got.ports
            .iter()
            .find(|p| p.at.node.guid == guid && p.at.port == port)
            .unwrap()
    };
    // Each recorded module comes back byte for byte in the halves a reader asks for:
    // the switch's InfiniBand ports are found at their local ports (PLIB), their modules
    // through PMLP, so no port reads its neighbour's cage.
    for (guid, port, want) in [
        (leaf.guid, host_ports[0], memory(DAC)),
        (leaf.guid, host_ports[1], dark_sfp()),
        (host.guid, 1, memory(SFP)),
    ] {
        match &at(guid, port).read {
            ModuleRead::Read { memory, lanes, .. } => {
                assert_eq!(memory, &read_part(&want), "{guid:#x} port {port}");
                assert_eq!(lanes, &[1, 2, 3, 4]);
            }
            other => panic!("{guid:#x} port {port}: {other:?}"),
        }
    }
    // Every other cage is empty, none unread.
    let empty = got
        .ports
        .iter()
        .filter(|p| matches!(p.read, ModuleRead::Empty))
        .count();
    assert_eq!(empty, got.ports.len() - 3);

    // The dark module is found by its serial at its switch port, its peer named.
    let dark = at(leaf.guid, host_ports[1]);
    let ModuleRead::Read { memory, .. } = &dark.read else {
        unreachable!()
    };
    let module = cable::decode(memory).unwrap();
    let found = module_findings(
        &module,
        &ModuleContext {
            at: Some(dark.at.clone()),
            remote: dark.remote.clone(),
            link_speed: dark.link_speed,
            ..ModuleContext::default()
        },
    );
    // A 10GBASE-SR module (10.3 Gb/s nominal) on the generator's HDR link is too slow
    // for it as well.
    let kinds: Vec<FindingKind> = found.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [FindingKind::CableRxPowerLow, FindingKind::CableRateMismatch]
    );
    assert!(found[0].message.contains("SN AUJ0RCJ"));
    assert_eq!(found[0].at.as_ref().map(|p| p.port), Some(host_ports[1]));
    assert!(found[0].remote.is_some());
    // The healthy ones raise nothing of their own.
    for (guid, port) in [(leaf.guid, host_ports[0]), (host.guid, 1)] {
        let ModuleRead::Read { memory, .. } = &at(guid, port).read else {
            unreachable!()
        };
        let m = cable::decode(memory).unwrap();
        assert_eq!(module_findings(&m, &ModuleContext::default()), []);
    }
}

#[test]
fn a_fabric_without_the_registers_is_told_with_one_read_per_node() {
    let f = fabric();
    let mut e = engine(FabricModel::from_fabric(&f, 0).unwrap());
    let live = discover(&mut e, DiscoverOptions::default(), |_| {});
    let got = read_modules(&mut e, &live, None, ModuleReadMode::AccessRegister);
    assert_eq!(got.mads_sent, live.node_count() as u64);
    assert!(!got.ports.is_empty());
    for p in &got.ports {
        let ModuleRead::NotRead(why) = &p.read else {
            panic!("{:?}", p.read)
        };
        assert!(
            why.contains("does not read modules through AccessRegister"),
            "{why}"
        );
    }
    // Not allowed to send the SubnSet: nothing is sent, and every port says why.
    let got = read_modules(&mut e, &live, None, ModuleReadMode::NotAllowed);
    assert_eq!(got.mads_sent, 0);
    assert!(got
        .ports
        .iter()
        .all(|p| matches!(&p.read, ModuleRead::NotRead(w) if w == NOT_ALLOWED)));
}
