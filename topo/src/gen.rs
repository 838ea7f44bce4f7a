//! Topology generators: fat trees, rings and meshes written as ibsim topology files (the
//! ibnetdiscover format as ibsim reads it).
//!
//! Node ids are short and stable ("H00001" hosts, "L0001" leaves, "S0001" spines, "A0001"
//! aggregation switches, "C0001" core, "X0001" ring/mesh switches, "N0001" SHARP
//! aggregation nodes); each header also carries a
//! realistic NodeDescription (`# "gpu-node-0001 mlx5_0"`), which ibsim reports instead of
//! the id. Hosts come first, so ibsim's default attach point (the first node) is a host.
//!
//! Rates: every port line carries its link's rate as ibnetdiscover writes it (`# "peer"
//! lid 0 4xXDR`), for every generation SDR..XDR and FDR10, so the file read back
//! (`--topology`) gives every link its rate. ibsim reads that comment as the port's
//! enabled width and speed, but knows lane speeds only up to HDR (ibsim 0.10), and FDR10
//! it brings up as QDR: `width=` / `speed=` / `extspeed=` lines at the top enable every
//! port up to the nearest speed it runs ([`ibsim_speed`]), so under ibsim an NDR or XDR
//! fabric comes up at HDR (the file says so in a comment, and `sim up` on stderr).
//!
//! A degraded link gets its lower rate on BOTH ends: ibsim recomputes a link's active rate
//! from the enabled set of whichever end the SM last writes PortInfo to (measured:
//! OpenSM's later write wins), so a one-sided override does not survive an SM sweep.
//! Consequence: in ibsim a degraded link's enabled sets match its active rate on both ends.
//!
//! With [`GenOptions::aggregation_nodes`], every switch gets one more port cabled to a
//! SHARP aggregation node ("N0001", NodeDescription "Mellanox Technologies Aggregation
//! Node"), as NVIDIA's Quantum switches show theirs (a one-port CA behind port 65 of a
//! 64-port switch).

use std::collections::BTreeMap;
use std::fmt::Write;

use ibscope_mad::attr::link::{Rate, Speed, SpeedField, SpeedSet, Width};
use ibscope_mad::attr::PortState;

use crate::model::{Fabric, NodeId};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    #[error("invalid specification: {0}")]
    Spec(String),
    #[error("rate {0:?} is not <width>x<speed> such as 4xHDR")]
    Rate(String),
    #[error("degraded link {node}[{port}]: no such linked port")]
    NoSuchPort { node: String, port: u8 },
}

/// One link to run at a lower rate: the node id and port of either end, and the rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degraded {
    pub node: String,
    pub port: u8,
    /// e.g. "1xHDR" or "4xEDR".
    pub rate: String,
}

impl std::str::FromStr for Degraded {
    type Err = String;
    /// `NODE:PORT:RATE` (`L0001:19:1xHDR`); a node id may hold colons.
    fn from_str(text: &str) -> Result<Degraded, String> {
        let parts: Vec<&str> = text.rsplitn(3, ':').collect();
        if parts.len() != 3 {
            return Err(format!(
                "{text:?}: expected NODE:PORT:RATE, e.g. L0001:19:1xHDR"
            ));
        }
        let port = parts[1]
            .parse()
            .map_err(|_| format!("{text:?}: {:?} is not a port number", parts[1]))?;
        Ok(Degraded {
            node: parts[2].to_string(),
            port,
            rate: parts[0].to_string(),
        })
    }
}

/// Options shared by every generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenOptions {
    /// Every link's rate, e.g. "4xHDR"; `None` leaves ibsim's default (4xSDR).
    pub rate: Option<String>,
    pub degraded: Vec<Degraded>,
    /// One SHARP aggregation node per switch, on an extra port.
    pub aggregation_nodes: bool,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            rate: Some("4xHDR".into()),
            degraded: Vec::new(),
            aggregation_nodes: false,
        }
    }
}

/// Whether ibsim (0.10, Debian's) runs a lane speed: SDR..HDR; not FDR10 (it brings a
/// port enabled for FDR10 up at QDR: measured), NDR or XDR.
pub fn ibsim_runs(speed: Speed) -> bool {
    speed <= Speed::Hdr && speed != Speed::Fdr10
}

/// The speed ibsim brings a port up at when a topology file gives it `speed` and enables
/// `enabled` (its `speed=` / `extspeed=` lines or `s=` / `e=` options): `speed` itself when
/// ibsim runs it; else the fastest enabled speed it runs (SDR when none is enabled: ibsim's
/// default), and for FDR10 at least QDR.
pub fn ibsim_speed(speed: Speed, enabled: SpeedSet) -> Speed {
    if ibsim_runs(speed) {
        return speed;
    }
    let best = enabled.iter().filter(|s| ibsim_runs(*s)).max();
    match speed {
        Speed::Fdr10 => best.map_or(Speed::Qdr, |b| b.max(Speed::Qdr)),
        _ => best.unwrap_or(Speed::Sdr),
    }
}

/// Ports of a topology file that ibsim brings up at another speed than the file gives
/// them: (the file's speed, the speed under ibsim, ports), fastest first.
pub fn ibsim_speed_changes(fabric: &Fabric) -> Vec<(Speed, Speed, usize)> {
    let mut changes: BTreeMap<(Speed, Speed), usize> = BTreeMap::new();
    for (_, node) in fabric.nodes() {
        for p in &node.ports {
            if let Some(speed) = p.speed_active {
                let sim = ibsim_speed(speed, p.speed_enabled);
                if sim != speed {
                    *changes.entry((speed, sim)).or_default() += 1;
                }
            }
        }
    }
    changes
        .into_iter()
        .rev()
        .map(|((file, sim), n)| (file, sim, n))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatTreeSpec {
    /// 2 (leaf/spine) or 3 (pods of leaf + aggregation, then core).
    pub levels: u8,
    /// Switch port count (even), e.g. 36 or 40.
    pub radix: u8,
    /// Exact host count; the last leaf (and pod) may be partly filled.
    pub hosts: usize,
    /// Ports per host; only 1 is supported.
    pub host_ports: u8,
    pub options: GenOptions,
}

impl FatTreeSpec {
    pub fn new(levels: u8, radix: u8, hosts: usize) -> Self {
        FatTreeSpec {
            levels,
            radix,
            hosts,
            host_ports: 1,
            options: GenOptions::default(),
        }
    }
}

#[derive(Debug)]
struct GenNode {
    switch: bool,
    id: String,
    description: String,
    ports: u8,
    /// local port -> (peer node index, peer port)
    links: BTreeMap<u8, (usize, u8)>,
}

#[derive(Debug, Default)]
struct Layout {
    nodes: Vec<GenNode>,
    summary: String,
}

impl Layout {
    fn add(&mut self, switch: bool, id: String, description: String, ports: u8) -> usize {
        self.nodes.push(GenNode {
            switch,
            id,
            description,
            ports,
            links: BTreeMap::new(),
        });
        self.nodes.len() - 1
    }
    fn link(&mut self, a: usize, ap: u8, b: usize, bp: u8) {
        self.nodes[a].links.insert(ap, (b, bp));
        self.nodes[b].links.insert(bp, (a, ap));
    }
}

/// ibsim's enabled masks for a "4xHDR" comment: (width, speed, extended speed), up to the
/// nearest speed ibsim runs.
fn enabled_masks(width: Width, speed: Speed) -> (u8, u8, u8) {
    let w = match width {
        Width::X4 => 3,
        Width::X12 => 11,
        other => other.bit(),
    };
    let sim = ibsim_speed(
        speed,
        Speed::ALL.into_iter().filter(|s| *s <= speed).collect(),
    );
    // Every speed up to that one, in the fields ibsim reads.
    let upto: SpeedSet = Speed::ALL
        .into_iter()
        .filter(|s| *s <= sim && ibsim_runs(*s))
        .collect();
    (
        w,
        upto.mask(SpeedField::LinkSpeed),
        upto.mask(SpeedField::LinkSpeedExt),
    )
}

fn parse_rate(rate: &str) -> Result<(Width, Speed), GenError> {
    Rate::parse(rate)
        .map(|r| (r.width, r.speed))
        .ok_or_else(|| GenError::Rate(rate.to_string()))
}

/// One SHARP aggregation node per switch, cabled to one more port of it.
fn add_aggregation_nodes(layout: &mut Layout) -> Result<(), GenError> {
    let switches: Vec<usize> = (0..layout.nodes.len())
        .filter(|&i| layout.nodes[i].switch)
        .collect();
    for (n, sw) in switches.into_iter().enumerate() {
        let port = layout.nodes[sw].ports.checked_add(1).ok_or_else(|| {
            GenError::Spec("aggregation nodes need a free port number: radix up to 254".into())
        })?;
        layout.nodes[sw].ports = port;
        let node = layout.add(
            false,
            format!("N{:04}", n + 1),
            // What NVIDIA's switches report, and what NodeKind::classify recognises.
            "Mellanox Technologies Aggregation Node".to_string(),
            1,
        );
        layout.link(sw, port, node, 1);
    }
    layout
        .summary
        .push_str(", one SHARP aggregation node per switch");
    Ok(())
}

fn render(mut layout: Layout, options: &GenOptions) -> Result<String, GenError> {
    if options.aggregation_nodes {
        add_aggregation_nodes(&mut layout)?;
    }
    let mut overrides: BTreeMap<(usize, u8), String> = BTreeMap::new();
    let index: BTreeMap<&str, usize> = layout
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    for d in &options.degraded {
        let (w, s) = parse_rate(&d.rate)?;
        let text = Rate::new(w, s).to_string();
        let no_port = || GenError::NoSuchPort {
            node: d.node.clone(),
            port: d.port,
        };
        let &i = index.get(d.node.as_str()).ok_or_else(no_port)?;
        let &(peer, peer_port) = layout.nodes[i].links.get(&d.port).ok_or_else(no_port)?;
        overrides.insert((i, d.port), text.clone());
        overrides.insert((peer, peer_port), text);
    }
    let mut out = String::new();
    let _ = writeln!(out, "# generated by ibscope: {}", layout.summary);
    let mut every_link = None;
    if let Some(rate) = &options.rate {
        let (w, s) = parse_rate(rate)?;
        let (wm, sm, em) = enabled_masks(w, s);
        let text = Rate::new(w, s).to_string();
        let _ = writeln!(out, "# every link at {text}");
        let sim = ibsim_speed(s, Speed::ALL.into_iter().filter(|x| *x <= s).collect());
        if sim != s {
            let _ = writeln!(
                out,
                "# ibsim runs lane speeds SDR..HDR (FDR10 as QDR): under ibsim these links \
                 come up at {}",
                Rate::new(w, sim)
            );
        }
        let _ = writeln!(out, "width={wm}\nspeed={sm}\nextspeed={em}");
        every_link = Some(text);
    }
    for (i, n) in layout.nodes.iter().enumerate() {
        let kind = if n.switch { "Switch" } else { "Hca" };
        let _ = writeln!(
            out,
            "\n{kind}\t{} \"{}\"\t# \"{}\"",
            n.ports, n.id, n.description
        );
        for (&port, &(peer, peer_port)) in &n.links {
            let _ = write!(out, "[{port}]\t\"{}\"[{peer_port}]", layout.nodes[peer].id);
            if let Some(rate) = overrides.get(&(i, port)).or(every_link.as_ref()) {
                let _ = write!(out, "\t# \"{}\" lid 0 {rate}", layout.nodes[peer].id);
            }
            out.push('\n');
        }
    }
    Ok(out)
}

fn host_ids(layout: &mut Layout, hosts: usize) -> Vec<usize> {
    (1..=hosts)
        .map(|h| {
            layout.add(
                false,
                format!("H{h:05}"),
                format!("gpu-node-{h:04} mlx5_0"),
                1,
            )
        })
        .collect()
}

/// Largest divisor k of `uplinks` with `groups * k <= radix`: the number of parallel links
/// between one lower switch and one upper switch, so that few upper switches suffice.
fn parallel_links(uplinks: usize, groups: usize, radix: usize) -> usize {
    (1..=uplinks)
        .rev()
        .find(|k| uplinks % k == 0 && groups * k <= radix)
        .unwrap_or(1)
}

fn switch(layout: &mut Layout, prefix: &str, role: &str, n: usize, radix: u8) -> usize {
    layout.add(
        true,
        format!("{prefix}{n:04}"),
        format!("MF0;{role}-{n:04}:MQM8790/U1"),
        radix,
    )
}

/// A fat tree as an ibsim topology file.
///
/// 2 levels: leaves with radix/2 hosts below and radix/2 uplinks, spread evenly over the
/// spines (one link per leaf-spine pair when the leaves fill the spines' ports, else
/// several parallel ones and fewer spines). At most radix²/2 hosts.
/// 3 levels: pods of radix/2 leaves and radix/2 aggregation switches (each leaf linked to
/// every aggregation switch of its pod), aggregation switch j of every pod linked to core
/// group j. At most radix³/4 hosts.
pub fn fat_tree(spec: &FatTreeSpec) -> Result<String, GenError> {
    let radix = usize::from(spec.radix);
    if radix < 4 || radix % 2 != 0 {
        return Err(GenError::Spec(format!(
            "radix {radix}: need an even port count of at least 4"
        )));
    }
    if spec.hosts == 0 {
        return Err(GenError::Spec("need at least one host".into()));
    }
    if spec.host_ports != 1 {
        return Err(GenError::Spec(format!(
            "{} ports per host: only 1 is supported",
            spec.host_ports
        )));
    }
    let mut layout = Layout::default();
    let hosts = host_ids(&mut layout, spec.hosts);
    match spec.levels {
        2 => two_levels(&mut layout, spec, &hosts)?,
        3 => three_levels(&mut layout, spec, &hosts)?,
        other => {
            return Err(GenError::Spec(format!(
                "{other} levels: only 2 or 3 are supported"
            )))
        }
    }
    render(layout, &spec.options)
}

/// Leaves and spines under `hosts`.
fn two_levels(layout: &mut Layout, spec: &FatTreeSpec, hosts: &[usize]) -> Result<(), GenError> {
    let radix = usize::from(spec.radix);
    let half = radix / 2;
    let leaves = spec.hosts.div_ceil(half);
    if leaves > radix {
        return Err(GenError::Spec(format!(
            "{} hosts need {leaves} leaves, more than a 2-level tree of radix {radix} \
             holds ({radix}); use 3 levels",
            spec.hosts
        )));
    }
    let k = parallel_links(half, leaves, radix);
    let spines = half / k;
    let leaf_ids: Vec<usize> = (1..=leaves)
        .map(|l| switch(layout, "L", "leaf", l, spec.radix))
        .collect();
    let spine_ids: Vec<usize> = (1..=spines)
        .map(|s| switch(layout, "S", "spine", s, spec.radix))
        .collect();
    for (h, &host) in hosts.iter().enumerate() {
        layout.link(host, 1, leaf_ids[h / half], (h % half + 1) as u8);
    }
    for (l, &leaf) in leaf_ids.iter().enumerate() {
        for j in 0..half {
            let spine = spine_ids[j / k];
            let spine_port = l * k + j % k + 1;
            layout.link(leaf, (half + j + 1) as u8, spine, spine_port as u8);
        }
    }
    layout.summary = format!(
        "2-level fat tree, radix {radix}, {} hosts, {leaves} leaves, {spines} spines",
        spec.hosts
    );
    Ok(())
}

/// Pods of leaves and aggregation switches, and the core, under `hosts`.
fn three_levels(layout: &mut Layout, spec: &FatTreeSpec, hosts: &[usize]) -> Result<(), GenError> {
    let radix = usize::from(spec.radix);
    let half = radix / 2;
    let leaves = spec.hosts.div_ceil(half);
    let per_pod = half * half;
    let pods = spec.hosts.div_ceil(per_pod);
    if pods > radix {
        return Err(GenError::Spec(format!(
            "{} hosts need {pods} pods, more than a 3-level tree of radix {radix} \
             holds ({radix})",
            spec.hosts
        )));
    }
    let k = parallel_links(half, pods, radix);
    let cores_per_group = half / k;
    let mut leaf_ids = Vec::new();
    let mut agg_ids = Vec::new();
    for p in 0..pods {
        let pod_leaves = (leaves - p * half).min(half);
        let base_leaf = leaf_ids.len();
        for l in 0..pod_leaves {
            leaf_ids.push(switch(layout, "L", "leaf", base_leaf + l + 1, spec.radix));
        }
        let mut pod_aggs = Vec::new();
        for a in 0..half {
            pod_aggs.push(switch(layout, "A", "agg", p * half + a + 1, spec.radix));
        }
        for l in 0..pod_leaves {
            for (a, &agg) in pod_aggs.iter().enumerate() {
                layout.link(
                    leaf_ids[base_leaf + l],
                    (half + a + 1) as u8,
                    agg,
                    (l + 1) as u8,
                );
            }
        }
        agg_ids.push(pod_aggs);
    }
    let mut core_ids = Vec::new();
    for c in 0..half * cores_per_group {
        core_ids.push(switch(layout, "C", "core", c + 1, spec.radix));
    }
    for (h, &host) in hosts.iter().enumerate() {
        layout.link(host, 1, leaf_ids[h / half], (h % half + 1) as u8);
    }
    for (p, pod_aggs) in agg_ids.iter().enumerate() {
        for (a, &agg) in pod_aggs.iter().enumerate() {
            for j in 0..half {
                let core = core_ids[a * cores_per_group + j / k];
                let core_port = p * k + j % k + 1;
                layout.link(agg, (half + j + 1) as u8, core, core_port as u8);
            }
        }
    }
    layout.summary = format!(
        "3-level fat tree, radix {radix}, {} hosts, {pods} pods, {leaves} leaves, \
         {} aggregation, {} core",
        spec.hosts,
        pods * half,
        core_ids.len()
    );
    Ok(())
}

/// A rail-optimised GPU cluster: `hosts` servers with one HCA per rail (`gpu-0001
/// mlx5_0` .. `mlx5_{rails-1}`), HCA k of every server on the leaves of rail k, spines
/// shared by every rail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailsSpec {
    pub hosts: usize,
    pub rails: u8,
    /// Servers per leaf (each leaf has as many uplinks: no oversubscription).
    pub hosts_per_leaf: usize,
    /// Switch port count.
    pub radix: u8,
    pub options: GenOptions,
}

impl RailsSpec {
    /// `hosts` servers with `rails` rails on `radix`-port switches, radix/2 servers a leaf.
    pub fn new(hosts: usize, rails: u8, radix: u8) -> RailsSpec {
        RailsSpec {
            hosts,
            rails,
            hosts_per_leaf: usize::from(radix / 2),
            radix,
            options: GenOptions::default(),
        }
    }
}

/// The node id of server `host`'s HCA on `rail` (1-based host), as the file names it.
pub fn rails_hca_id(host: usize, rail: u8) -> String {
    format!("G{host:04}R{rail}")
}

/// A rail-optimised fabric as an ibsim topology file.
///
/// Server h (0-based) has its rail-r HCA on port h % K + 1 of leaf h / K of rail r
/// (K servers a leaf), so every HCA of a server sits on the same port of its group's
/// leaves. Each leaf has K uplinks spread over the spines, one link per leaf and spine
/// where the spines have the ports for it, else several parallel ones to fewer spines
/// (every leaf reaches every spine: two levels, leaf-spine-leaf between rails).
pub fn rails(spec: &RailsSpec) -> Result<String, GenError> {
    let radix = usize::from(spec.radix);
    let per_leaf = spec.hosts_per_leaf;
    if spec.hosts == 0 || spec.rails == 0 || per_leaf == 0 {
        return Err(GenError::Spec(
            "need at least one host, one rail and one host per leaf".into(),
        ));
    }
    if 2 * per_leaf > radix {
        return Err(GenError::Spec(format!(
            "{per_leaf} hosts per leaf need {} ports (as many uplinks), more than radix {radix}",
            2 * per_leaf
        )));
    }
    let groups = spec.hosts.div_ceil(per_leaf);
    let leaves = groups * usize::from(spec.rails);
    let k = (1..=per_leaf)
        .find(|k| per_leaf % k == 0 && leaves * k <= radix)
        .ok_or_else(|| {
            GenError::Spec(format!(
                "{leaves} leaves need spines of at least {leaves} ports: raise --radix or \
                 --hosts-per-leaf"
            ))
        })?;
    let spines = per_leaf / k;
    let mut layout = Layout::default();
    let mut hcas = Vec::new();
    for h in 1..=spec.hosts {
        for r in 0..spec.rails {
            hcas.push(layout.add(false, rails_hca_id(h, r), format!("gpu-{h:04} mlx5_{r}"), 1));
        }
    }
    let mut leaf_ids = Vec::new();
    for r in 0..spec.rails {
        for g in 1..=groups {
            leaf_ids.push(layout.add(
                true,
                format!("R{r}L{g:03}"),
                format!("MF0;leaf-r{r}-{g:03}:MQM9700/U1"),
                spec.radix,
            ));
        }
    }
    let spine_ids: Vec<usize> = (1..=spines)
        .map(|s| switch(&mut layout, "S", "spine", s, spec.radix))
        .collect();
    let rails = usize::from(spec.rails);
    for (i, &hca) in hcas.iter().enumerate() {
        let (h, r) = (i / rails, i % rails);
        let leaf = leaf_ids[r * groups + h / per_leaf];
        layout.link(hca, 1, leaf, (h % per_leaf + 1) as u8);
    }
    for (l, &leaf) in leaf_ids.iter().enumerate() {
        for j in 0..per_leaf {
            let spine_port = l * k + j % k + 1;
            layout.link(
                leaf,
                (per_leaf + j + 1) as u8,
                spine_ids[j / k],
                spine_port as u8,
            );
        }
    }
    layout.summary = format!(
        "rail-optimised, {} hosts x {} rails, {per_leaf} hosts per leaf, {leaves} leaves, \
         {spines} spines, radix {radix}",
        spec.hosts, spec.rails
    );
    render(layout, &spec.options)
}

fn check_ports(hosts_per_switch: usize, fabric_ports: usize) -> Result<u8, GenError> {
    u8::try_from(hosts_per_switch + fabric_ports)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| {
            GenError::Spec(format!(
                "{hosts_per_switch} hosts per switch: a switch has at most 255 ports"
            ))
        })
}

/// A ring of switches (port 1 to the next switch's port 2), each with hosts on ports 3...
pub fn ring(switches: usize, hosts_per_switch: usize) -> Result<String, GenError> {
    ring_with(switches, hosts_per_switch, &GenOptions::default())
}

pub fn ring_with(
    switches: usize,
    hosts_per_switch: usize,
    options: &GenOptions,
) -> Result<String, GenError> {
    if switches == 0 {
        return Err(GenError::Spec("a ring needs at least one switch".into()));
    }
    let ports = check_ports(hosts_per_switch, 2)?;
    let mut layout = Layout::default();
    let hosts = host_ids(&mut layout, switches * hosts_per_switch);
    let sw: Vec<usize> = (1..=switches)
        .map(|s| switch(&mut layout, "X", "ring", s, ports))
        .collect();
    if switches > 1 {
        for s in 0..switches {
            layout.link(sw[s], 1, sw[(s + 1) % switches], 2);
        }
    }
    for (h, &host) in hosts.iter().enumerate() {
        layout.link(
            host,
            1,
            sw[h / hosts_per_switch],
            (h % hosts_per_switch + 3) as u8,
        );
    }
    layout.summary = format!("ring of {switches} switches, {hosts_per_switch} hosts each");
    render(layout, options)
}

/// An x-by-y mesh (no wrap-around): ports 1 east, 2 west, 3 north, 4 south, hosts on 5...
pub fn mesh(x: usize, y: usize, hosts_per_switch: usize) -> Result<String, GenError> {
    mesh_with(x, y, hosts_per_switch, &GenOptions::default())
}

pub fn mesh_with(
    x: usize,
    y: usize,
    hosts_per_switch: usize,
    options: &GenOptions,
) -> Result<String, GenError> {
    if x == 0 || y == 0 {
        return Err(GenError::Spec("a mesh needs at least 1x1 switches".into()));
    }
    let ports = check_ports(hosts_per_switch, 4)?;
    let mut layout = Layout::default();
    let hosts = host_ids(&mut layout, x * y * hosts_per_switch);
    let sw: Vec<usize> = (1..=x * y)
        .map(|s| switch(&mut layout, "X", "mesh", s, ports))
        .collect();
    let at = |i: usize, j: usize| sw[j * x + i];
    for j in 0..y {
        for i in 0..x {
            if i + 1 < x {
                layout.link(at(i, j), 1, at(i + 1, j), 2);
            }
            if j + 1 < y {
                layout.link(at(i, j), 3, at(i, j + 1), 4);
            }
        }
    }
    for (h, &host) in hosts.iter().enumerate() {
        layout.link(
            host,
            1,
            sw[h / hosts_per_switch],
            (h % hosts_per_switch + 5) as u8,
        );
    }
    layout.summary = format!("{x}x{y} mesh, {hosts_per_switch} hosts per switch");
    render(layout, options)
}

/// Bring a fabric read from a generated topology up as a subnet manager would, for
/// modelling and benchmarks (a topology file has no LIDs or states): LIDs numbered
/// switches first (a switch's on every port, as its external ports repeat port 0's), then
/// every CA port in node order; every port Active at `rate`.
pub fn bring_up(fabric: &mut Fabric, rate: Rate) {
    let ids: Vec<NodeId> = fabric.nodes().map(|(id, _)| id).collect();
    let mut next = 1u16;
    for switches in [true, false] {
        for &id in &ids {
            let node = fabric.node_mut(id);
            if node.is_switch() != switches {
                continue;
            }
            for p in node.ports.iter_mut() {
                p.state = Some(PortState::Active);
                p.width_active = Some(rate.width);
                p.speed_active = Some(rate.speed);
                if switches || p.number != 0 {
                    p.lid = next;
                }
                if !switches {
                    next += 1;
                }
            }
            if switches {
                next += 1;
            }
        }
    }
    fabric.reindex();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degrade_syntax() {
        let d: Degraded = "L0001:19:1xHDR".parse().unwrap();
        assert_eq!(
            (d.node.as_str(), d.port, d.rate.as_str()),
            ("L0001", 19, "1xHDR")
        );
        assert!("L0001:1xHDR".parse::<Degraded>().is_err());
        assert!("L0001:x:1xHDR".parse::<Degraded>().is_err());
    }
    use crate::ibnd;
    use crate::model::{End, Fabric};
    use ibscope_mad::attr::link::{SpeedSet, WidthSet};

    fn degree_ok(f: &Fabric) {
        // Every node id resolves and no port is used twice (the parser checks symmetry).
        for (_, n) in f.nodes() {
            assert!(n.ports.iter().all(|p| p.number <= n.num_ports));
        }
    }

    #[test]
    fn two_level_shape() {
        let text = fat_tree(&FatTreeSpec::new(2, 36, 512)).unwrap();
        let f = ibnd::parse(&text).unwrap();
        degree_ok(&f);
        let switches = f.switches().count();
        assert_eq!(f.node_count() - switches, 512);
        // 29 leaves (the last with 8 hosts) and 18 spines: one link per leaf-spine pair.
        assert_eq!(switches, 29 + 18);
        assert_eq!(f.link_count(), 512 + 29 * 18);
        let last_leaf = f.nodes_by_description("MF0;leaf-0029:MQM8790/U1");
        assert_eq!(last_leaf.len(), 1);
        let hosts_on_last = f
            .node(last_leaf[0])
            .ports
            .iter()
            .filter(|p| (1..=18).contains(&p.number))
            .count();
        assert_eq!(hosts_on_last, 512 - 28 * 18);
        assert_eq!(f.nodes_by_description("gpu-node-0512 mlx5_0").len(), 1);
        // Rate lines: enabled 1x|4x and up to HDR on every port.
        let p = f.node(last_leaf[0]).port(19).unwrap();
        assert_eq!(p.width_enabled, WidthSet(3));
        assert_eq!(p.speed_enabled, SpeedSet::from_masks(7, 0, 7, 0));
    }

    #[test]
    fn small_two_level_uses_parallel_links() {
        let text = fat_tree(&FatTreeSpec::new(2, 36, 64)).unwrap();
        let f = ibnd::parse(&text).unwrap();
        // 4 leaves fill 2 spines with 9 parallel links each.
        assert_eq!(f.switches().count(), 4 + 2);
        assert_eq!(f.link_count(), 64 + 4 * 18);
    }

    #[test]
    fn three_level_shape() {
        let text = fat_tree(&FatTreeSpec::new(3, 36, 2048)).unwrap();
        let f = ibnd::parse(&text).unwrap();
        degree_ok(&f);
        let switches = f.switches().count();
        assert_eq!(f.node_count() - switches, 2048);
        // 7 pods; 114 leaves; 126 aggregation; 18 groups of 6 cores (3 parallel links).
        let leaves = 2048usize.div_ceil(18);
        assert_eq!(leaves, 114);
        assert_eq!(switches, 114 + 7 * 18 + 18 * 6);
        let agg_links = leaves * 18;
        let core_links = 7 * 18 * 18;
        assert_eq!(f.link_count(), 2048 + agg_links + core_links);
    }

    #[test]
    fn degraded_links_get_both_ends() {
        let mut spec = FatTreeSpec::new(2, 8, 10);
        spec.options.degraded.push(Degraded {
            node: "L0001".into(),
            port: 5,
            rate: "1xHDR".into(),
        });
        let text = fat_tree(&spec).unwrap();
        let f = ibnd::parse(&text).unwrap();
        let degraded: Vec<_> = f
            .links()
            .filter(|l| l.a_port().unwrap().width_active == Some(Width::X1))
            .collect();
        assert_eq!(degraded.len(), 1);
        let l = degraded[0];
        assert_eq!(l.b_port().unwrap().width_active, Some(Width::X1));
        assert_eq!(l.a_port().unwrap().speed_active, Some(Speed::Hdr));
        assert_eq!(text.matches("lid 0 1xHDR").count(), 2);

        spec.options.degraded[0].port = 99;
        assert!(matches!(fat_tree(&spec), Err(GenError::NoSuchPort { .. })));
        spec.options.degraded[0].rate = "fast".into();
        assert!(matches!(fat_tree(&spec), Err(GenError::Rate(_))));
    }

    /// Every width and every lane speed, FDR10 and XDR included: the file read back gives
    /// every link that rate, and its ibsim lines enable no more than ibsim runs (ibsim
    /// 0.10 refuses extspeed above 7).
    #[test]
    fn every_generation_is_written_and_read_back() {
        for width in Width::KNOWN {
            for speed in Speed::ALL {
                let rate = Rate::new(*width, speed).to_string();
                let mut spec = FatTreeSpec::new(2, 4, 4);
                spec.options.rate = Some(rate.clone());
                let text = fat_tree(&spec).unwrap();
                let f = ibnd::parse(&text).unwrap();
                assert_eq!(f.link_count(), 4 + 2 * 2, "{rate}");
                for l in f.links() {
                    for p in [l.a_port().unwrap(), l.b_port().unwrap()] {
                        assert_eq!(p.rate_active().map(|r| r.to_string()), Some(rate.clone()));
                    }
                }
                let setting = |key: &str| -> u8 {
                    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
                    line[key.len()..].parse().unwrap()
                };
                assert!(setting("extspeed=") <= 7, "{rate}");
                let enabled = SpeedSet::from_masks(setting("speed="), 0, setting("extspeed="), 0);
                let sim = ibsim_speed(speed, enabled);
                assert_eq!(enabled.best(), Some(sim), "{rate}");
                assert_eq!(
                    text.contains("under ibsim these links come up at"),
                    sim != speed,
                    "{rate}"
                );
                // Both rates in the comments are the one text form of a rate.
                assert!(
                    text.contains(&format!("# every link at {rate}\n")),
                    "{rate}"
                );
                if sim != speed {
                    let at = format!("come up at {}\n", Rate::new(*width, sim));
                    assert!(text.contains(&at), "{rate}: {text}");
                }
            }
        }
    }

    #[test]
    fn the_speed_ibsim_runs() {
        let upto = |s: Speed| -> SpeedSet { Speed::ALL.into_iter().filter(|x| *x <= s).collect() };
        assert_eq!(ibsim_speed(Speed::Hdr, SpeedSet::EMPTY), Speed::Hdr);
        assert_eq!(ibsim_speed(Speed::Xdr, upto(Speed::Xdr)), Speed::Hdr);
        assert_eq!(ibsim_speed(Speed::Ndr, upto(Speed::Edr)), Speed::Edr);
        // No speed lines: ibsim's default, SDR (measured: a 4xNDR comment comes up 4xSDR).
        assert_eq!(ibsim_speed(Speed::Ndr, SpeedSet::EMPTY), Speed::Sdr);
        // FDR10 comes up as QDR (measured), or faster when faster is enabled.
        assert_eq!(ibsim_speed(Speed::Fdr10, SpeedSet::EMPTY), Speed::Qdr);
        assert_eq!(ibsim_speed(Speed::Fdr10, upto(Speed::Fdr10)), Speed::Qdr);
        assert_eq!(ibsim_speed(Speed::Fdr10, upto(Speed::Edr)), Speed::Edr);
        let mut spec = FatTreeSpec::new(2, 4, 4);
        spec.options.rate = Some("4xXDR".into());
        let f = ibnd::parse(&fat_tree(&spec).unwrap()).unwrap();
        // 4 hosts, 2 leaves with 2 uplinks each: 8 links, 16 ports.
        assert_eq!(ibsim_speed_changes(&f), vec![(Speed::Xdr, Speed::Hdr, 16)]);
        spec.options.rate = Some("4xHDR".into());
        let f = ibnd::parse(&fat_tree(&spec).unwrap()).unwrap();
        assert!(ibsim_speed_changes(&f).is_empty());
    }

    /// One SHARP aggregation node per switch, on the port after the last: recognised as
    /// such when read back, and no host.
    #[test]
    fn aggregation_nodes_on_every_switch() {
        let mut spec = FatTreeSpec::new(2, 8, 16);
        spec.options.aggregation_nodes = true;
        let text = fat_tree(&spec).unwrap();
        let f = ibnd::parse(&text).unwrap();
        let switches: Vec<_> = f.switches().collect();
        assert_eq!(switches.len(), 4 + 2);
        let aggregation: Vec<_> = f
            .nodes()
            .filter(|(_, n)| n.kind == crate::model::NodeKind::AggregationNode)
            .collect();
        assert_eq!(aggregation.len(), switches.len());
        for (id, sw) in switches {
            assert_eq!(sw.num_ports, 9);
            let peer = f.peer(crate::model::End { node: id, port: 9 }).unwrap();
            assert_eq!(
                f.node(peer.node).kind,
                crate::model::NodeKind::AggregationNode
            );
        }
        let hosts = f.nodes().filter(|(_, n)| n.kind.is_host_ca()).count();
        assert_eq!(hosts, 16);
        // Hosts still come first: ibsim attaches to the first node.
        assert!(text.split("\nHca").nth(1).unwrap().contains("\"H00001\""));
        assert!(text.contains("one SHARP aggregation node per switch"));
    }

    #[test]
    fn bad_specs() {
        assert!(fat_tree(&FatTreeSpec::new(2, 36, 649)).is_err());
        assert!(fat_tree(&FatTreeSpec::new(2, 36, 648)).is_ok());
        assert!(fat_tree(&FatTreeSpec::new(4, 36, 10)).is_err());
        assert!(fat_tree(&FatTreeSpec::new(2, 7, 10)).is_err());
        assert!(fat_tree(&FatTreeSpec::new(2, 36, 0)).is_err());
        let mut s = FatTreeSpec::new(2, 36, 10);
        s.host_ports = 2;
        assert!(fat_tree(&s).is_err());
        assert!(ring(0, 1).is_err());
        assert!(mesh(2, 0, 1).is_err());
        assert!(ring(2, 300).is_err());
    }

    #[test]
    fn rails_shape() {
        let mut spec = RailsSpec {
            hosts_per_leaf: 8,
            ..RailsSpec::new(20, 8, 32)
        };
        let text = rails(&spec).unwrap();
        let f = ibnd::parse(&text).unwrap();
        degree_ok(&f);
        // 3 groups of 8 (the last with 4) per rail, 24 leaves of 8 uplinks: 8 spines.
        assert_eq!(f.switches().count(), 24 + 8);
        assert_eq!(f.node_count() - f.switches().count(), 160);
        assert_eq!(f.link_count(), 160 + 24 * 8);
        // gpu-0010's HCAs: port 2 of the second leaf of every rail.
        for r in 0..8u8 {
            let hca = f.nodes_by_description(&format!("gpu-0010 mlx5_{r}"))[0];
            let peer = f.peer(End { node: hca, port: 1 }).unwrap();
            assert_eq!(peer.port, 2);
            assert_eq!(
                f.node(peer.node).description,
                format!("MF0;leaf-r{r}-002:MQM9700/U1")
            );
        }
        spec.options.degraded.push(Degraded {
            node: rails_hca_id(3, 5),
            port: 1,
            rate: "1xHDR".into(),
        });
        assert_eq!(rails(&spec).unwrap().matches("lid 0 1xHDR").count(), 2);
        // Too many leaves for the spines' ports.
        assert!(rails(&RailsSpec::new(1024, 8, 64)).is_err());
        assert!(rails(&RailsSpec::new(1024, 8, 128)).is_ok());
        let mut odd = RailsSpec::new(4, 2, 8);
        odd.hosts_per_leaf = 5;
        assert!(rails(&odd).is_err());
    }

    #[test]
    fn ring_and_mesh() {
        let f = ibnd::parse(&ring(5, 3).unwrap()).unwrap();
        assert_eq!(f.switches().count(), 5);
        assert_eq!(f.node_count(), 5 + 15);
        assert_eq!(f.link_count(), 5 + 15);
        let f = ibnd::parse(&ring(1, 2).unwrap()).unwrap();
        assert_eq!(f.link_count(), 2);
        let f = ibnd::parse(&mesh(3, 2, 2).unwrap()).unwrap();
        assert_eq!(f.switches().count(), 6);
        // (x-1)*y + x*(y-1) = 4 + 3 switch links.
        assert_eq!(f.link_count(), 7 + 12);
        let opts = GenOptions {
            rate: None,
            degraded: vec![],
            aggregation_nodes: false,
        };
        let text = ring_with(3, 1, &opts).unwrap();
        assert!(!text.contains("width="));
    }
}
