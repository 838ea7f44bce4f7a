//! The text formats against the reference tools: files written by ibscope load in ibsim,
//! and what `ibnetdiscover` then reports parses back to the same fabric.
//!
//! Needs `ibsim`, `opensm`, `ibnetdiscover` and libumad2sim (Debian: ibsim-utils,
//! libumad2sim0, opensm, infiniband-diags, which scripts/install-deps.sh installs); a test
//! fails when they are missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ibscope_topo::diff::diff;
use ibscope_topo::export;
use ibscope_topo::ibnd;

fn tools_present() -> bool {
    let have = |tool: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    Path::new(ibscope_sim::SHIM_PATH).exists()
        && have("ibsim")
        && have("opensm")
        && have("ibnetdiscover")
}

/// A private simulator (ibsim + OpenSM until SUBNET UP, from ibscope-sim, the harness every
/// simulator test uses) on a topology given as text.
struct Sim {
    sim: ibscope_sim::Sim,
    /// The topology file; after `sim` in drop order.
    _dir: tempfile::TempDir,
}

impl Sim {
    fn start(topology: &str) -> Sim {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fabric.topo");
        std::fs::write(&path, topology).unwrap();
        let sim = ibscope_sim::Sim::start(ibscope_sim::SimOptions::new(&path))
            .unwrap_or_else(|e| panic!("simulator: {e:#}"));
        Sim { sim, _dir: dir }
    }

    fn ibnetdiscover(&self) -> String {
        self.ibnetdiscover_with(&[])
    }

    /// `ibnetdiscover` with extra options (`-g`, `-f`, `-p`), stdout only.
    fn ibnetdiscover_with(&self, options: &[&str]) -> String {
        let out = self
            .sim
            .command("ibnetdiscover")
            .args(options)
            .stdin(Stdio::null())
            .output()
            .expect("run ibnetdiscover");
        assert!(
            out.status.success(),
            "ibnetdiscover failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }
}

fn shared_fabric(name: &str) -> Option<String> {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/fabrics")).join(name);
    std::fs::read_to_string(p).ok()
}

/// ibsim's own example, which ibscope parses with ibsim's GUID rules, discovers to the
/// same fabric; and ibscope's rendering of it loads in ibsim and discovers the same again.
#[test]
fn ibsim_example_round_trip() {
    assert!(
        tools_present(),
        "ibsim, opensm or ibnetdiscover missing: run scripts/install-deps.sh"
    );
    let text = shared_fabric("net").unwrap_or_else(|| {
        "Switch 8 \"Switch1\"\n[1] \"Hca1\"[1]\n[2] \"Hca2\"[2]\n[3] \"Switch2\"[3]\n[4] \"Switch2\"[4]\n\n\
Switch 8 \"Switch2\"\n[3] \"Switch1\"[3]\n[4] \"Switch1\"[4]\n\n\
Hca 2 \"Hca1\"\n[1] \"Switch1\"[1]\n\nHca 2 \"Hca2\"\n[2] \"Switch1\"[2]\n"
            .to_string()
    });
    let expected = ibnd::parse(&text).unwrap();

    let sim = Sim::start(&text);
    let seen = ibnd::parse(&sim.ibnetdiscover()).unwrap();
    let d = diff(&expected, &seen);
    assert!(d.is_empty(), "{d}");
    drop(sim);

    let written = export::ibnd::write(&seen, None);
    let sim = Sim::start(&written);
    let again = ibnd::parse(&sim.ibnetdiscover()).unwrap();
    let d = diff(&seen, &again);
    assert!(d.is_empty(), "{d}");
    // LIDs and link rates survive too (OpenSM assigns the same LIDs on the same fabric).
    for (_, n) in seen.nodes() {
        let m = again.node(again.node_by_guid(n.guid).unwrap());
        assert_eq!(n.lid(), m.lid(), "{}", n.description);
        for p in &n.ports {
            let q = m.port(p.number).unwrap();
            assert_eq!(
                (p.width_active, p.speed_active),
                (q.width_active, q.speed_active)
            );
        }
    }
}

/// Rates written in the `# ... lid N 4xQDR` comments come back from ibsim as the active
/// rates, and hostile descriptions arrive sanitized without disturbing ibsim's parser.
#[test]
fn written_rates_and_descriptions_survive_ibsim() {
    assert!(
        tools_present(),
        "ibsim, opensm or ibnetdiscover missing: run scripts/install-deps.sh"
    );
    let base = "Switch 8 \"sw\"\n[1] \"h1\"[1]\n[2] \"h2\"[1]\n\nHca 1 \"h1\"\n[1] \"sw\"[1]\n\n\
Hca 1 \"h2\"\n[1] \"sw\"[2]\n";
    let mut fabric = ibnd::parse(base).unwrap();
    let ids: Vec<_> = fabric.nodes().map(|(id, _)| id).collect();
    for id in ids {
        let node = fabric.node_mut(id);
        if node.description == "h2" {
            node.description = "h2 \"quoted\" w=1 \x1b[2J".to_string();
        }
        for p in node.ports.iter_mut().filter(|p| p.number != 0) {
            p.width_active = Some(ibscope_mad::attr::link::Width::X4);
            p.speed_active = Some(ibscope_mad::attr::link::Speed::Qdr);
        }
    }
    fabric.reindex();
    let written = export::ibnd::write(&fabric, None);
    let sim = Sim::start(&written);
    let seen = ibnd::parse(&sim.ibnetdiscover()).unwrap();
    assert_eq!(seen.node_count(), 3);
    assert_eq!(seen.link_keys(), fabric.link_keys());
    for l in seen.links() {
        let p = l.a_port().unwrap();
        assert_eq!(p.width_active, Some(ibscope_mad::attr::link::Width::X4));
        assert_eq!(p.speed_active, Some(ibscope_mad::attr::link::Speed::Qdr));
    }
    let h2 = seen.node(seen.node_by_guid(0x100002).unwrap());
    assert_eq!(h2.description, "h2 \\x22quoted\\x22 w\\x3d1 \\x1b[2J");
}

fn generated_fabric_discovers_as_written(text: &str) -> ibscope_topo::Fabric {
    let expected = ibnd::parse(text).unwrap();
    let sim = Sim::start(text);
    let seen = ibnd::parse(&sim.ibnetdiscover()).unwrap();
    let d = diff(&expected, &seen);
    assert!(d.is_empty(), "{d}");
    seen
}

/// A 512-host 2-level fat tree (47 switches) loads, OpenSM brings it up, ibnetdiscover sees
/// every node and link, and the degraded links keep their rates through the SM's sweep.
#[test]
fn fat_tree_512_hosts_in_ibsim() {
    assert!(
        tools_present(),
        "ibsim, opensm or ibnetdiscover missing: run scripts/install-deps.sh"
    );
    use ibscope_mad::attr::link::{Speed, Width};
    use ibscope_topo::gen::{fat_tree, Degraded, FatTreeSpec};
    let mut spec = FatTreeSpec::new(2, 36, 512);
    spec.options.degraded = vec![
        Degraded {
            node: "L0003".into(),
            port: 20,
            rate: "1xHDR".into(),
        },
        Degraded {
            node: "H00007".into(),
            port: 1,
            rate: "4xEDR".into(),
        },
    ];
    let seen = generated_fabric_discovers_as_written(&fat_tree(&spec).unwrap());
    assert_eq!(seen.switches().count(), 47);
    assert_eq!(seen.node_count(), 47 + 512);
    let mut rates: Vec<(Width, Speed)> = seen
        .links()
        .filter_map(|l| {
            let p = l.a_port()?;
            Some((p.width_active?, p.speed_active?))
        })
        .collect();
    rates.sort();
    assert_eq!(rates.len(), seen.link_count());
    assert_eq!(rates[0], (Width::X1, Speed::Hdr));
    assert_eq!(rates[1], (Width::X4, Speed::Edr));
    assert!(rates[2..].iter().all(|&r| r == (Width::X4, Speed::Hdr)));
}

#[test]
fn ring_and_mesh_in_ibsim() {
    assert!(
        tools_present(),
        "ibsim, opensm or ibnetdiscover missing: run scripts/install-deps.sh"
    );
    use ibscope_topo::gen::{mesh, ring};
    let seen = generated_fabric_discovers_as_written(&ring(6, 2).unwrap());
    assert_eq!(seen.node_count(), 6 + 12);
    let seen = generated_fabric_discovers_as_written(&mesh(3, 3, 1).unwrap());
    assert_eq!(seen.node_count(), 9 + 9);
}

/// 2,048 hosts in a 3-level tree (348 switches, beyond ibsim's default 256): about 8 s
/// here, so not run by default. `cargo test -p ibscope-topo --test it formats -- --ignored`
#[test]
#[ignore]
fn fat_tree_2048_hosts_three_levels_in_ibsim() {
    assert!(
        tools_present(),
        "ibsim, opensm or ibnetdiscover missing: run scripts/install-deps.sh"
    );
    use ibscope_topo::gen::{fat_tree, FatTreeSpec};
    let text = fat_tree(&FatTreeSpec::new(3, 36, 2048)).unwrap();
    let seen = generated_fabric_discovers_as_written(&text);
    assert_eq!(seen.switches().count(), 348);
    assert_eq!(seen.node_count(), 348 + 2048);
}

/// (port GUID, port number, rate text).
type RatedEnd = (u64, u8, String);

/// Links as unordered pairs of (port GUID, port number) with each end's active rate text:
/// the one identity a ports report (`-p`) shares with the topology formats, whose CA
/// node GUIDs it lacks.
fn links_by_port_guid(f: &ibscope_topo::Fabric) -> Vec<(RatedEnd, RatedEnd)> {
    let end = |node: &ibscope_topo::Node, number: u8| {
        let p = node.port(number).expect("linked port");
        let rate = ibscope_mad::attr::link::Rate::text(p.width_active, p.speed_active);
        (p.guid, number, rate)
    };
    let mut links: Vec<_> = f
        .links()
        .map(|l| {
            let (a, b) = (end(l.a_node, l.a.port), end(l.b_node, l.b.port));
            if a <= b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect();
    links.sort();
    links
}

/// Every output flavour of the reference `ibnetdiscover` reads as the same fabric: `-g`
/// (grouping), `-f` (whose `s= w= v=` are active values, not ibsim's enabled masks), `-p`
/// (the ports report) and output with the tool's stderr captured before it.
#[test]
fn every_ibnetdiscover_flavour_reads_as_the_same_fabric() {
    assert!(
        tools_present(),
        "ibsim, opensm or ibnetdiscover missing: run scripts/install-deps.sh"
    );
    use ibscope_mad::attr::link::{Speed, Width};
    use ibscope_topo::gen::{fat_tree, Degraded, FatTreeSpec};
    let mut spec = FatTreeSpec::new(2, 8, 8);
    spec.options.rate = Some("4xQDR".into());
    spec.options.degraded = vec![Degraded {
        node: "H00002".into(),
        port: 1,
        rate: "1xDDR".into(),
    }];
    let sim = Sim::start(&fat_tree(&spec).unwrap());
    let plain = ibnd::parse_with_warnings(&sim.ibnetdiscover()).unwrap();
    assert!(plain.warnings.is_empty());
    let plain = plain.fabric;
    let degraded = plain
        .links()
        .filter(|l| l.a_port().and_then(|p| p.width_active) == Some(Width::X1))
        .count();
    assert_eq!(degraded, 1, "the 1xDDR link came up as written");

    for flag in ["-g", "-f"] {
        let text = sim.ibnetdiscover_with(&[flag]);
        let parsed = ibnd::parse_with_warnings(&text).unwrap();
        assert!(parsed.warnings.is_empty(), "{flag}: {:?}", parsed.warnings);
        let d = diff(&plain, &parsed.fabric);
        assert!(d.is_empty(), "{flag}: {d}");
        assert_eq!(
            links_by_port_guid(&plain),
            links_by_port_guid(&parsed.fabric),
            "{flag}"
        );
    }
    // -f: "4xQDR s=4 w=2 v=4" are LinkSpeedActive, LinkWidthActive and VLCap: nothing of
    // them may land in the enabled sets (ibsim's meaning of s= and w=).
    let full = sim.ibnetdiscover_with(&["-f"]);
    assert!(full.contains(" s=4 w=2 v="), "{full}");
    let full = ibnd::parse(&full).unwrap();
    for (_, n) in full.nodes() {
        for p in &n.ports {
            assert!(p.width_enabled.is_empty() && p.speed_enabled.is_empty());
        }
    }
    let one_x = full
        .links()
        .filter_map(|l| l.a_port())
        .filter(|p| p.width_active == Some(Width::X1) && p.speed_active == Some(Speed::Ddr))
        .count();
    assert_eq!(one_x, 1);

    // -p: the same links between the same port GUIDs at the same rates.
    let report = ibnd::parse_with_warnings(&sim.ibnetdiscover_with(&["-p"])).unwrap();
    assert_eq!(report.warnings.len(), 1, "the report's gaps are said once");
    assert!(report.warnings[0].message.contains("ibnetdiscover -p"));
    assert_eq!(
        links_by_port_guid(&plain),
        links_by_port_guid(&report.fabric)
    );
    assert_eq!(report.fabric.switches().count(), plain.switches().count());

    // stderr and stdout in one file (`2>&1`): the tool's "ibwarn: … attached as client"
    // line comes first and is skipped with a warning quoting it.
    let out = sim
        .sim
        .command("sh")
        .arg("-c")
        .arg("ibnetdiscover 2>&1")
        .stdin(Stdio::null())
        .output()
        .expect("run ibnetdiscover");
    let both = String::from_utf8(out.stdout).unwrap();
    let parsed = ibnd::parse_with_warnings(&both).unwrap();
    let d = diff(&plain, &parsed.fabric);
    assert!(d.is_empty(), "{d}");
    let skipped: Vec<&str> = both.lines().take_while(|l| !l.starts_with('#')).collect();
    assert!(
        !skipped.is_empty(),
        "the shim writes its ibwarn line: {both}"
    );
    assert_eq!(parsed.warnings.len(), skipped.len(), "{both}");
    for (w, line) in parsed.warnings.iter().zip(&skipped) {
        assert!(w.message.contains(line.trim()), "{w} / {line}");
    }
}
