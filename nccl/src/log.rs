//! `NCCL_DEBUG=INFO` logs: one file per rank or merged, in any order, behind any launcher's
//! prefix. Every line NCCL writes reads `HOST:PID:TID [CUDADEV] NCCL INFO ...` (or `NCCL
//! WARN`), found by reading back from the marker ([`crate::launcher::nccl_origin`]); what
//! is read of them is listed in [`crate::log_lines`]. Outside NCCL's own lines: a bare
//! `NCCL version 2.16.5+cuda11.8` (printed to standard output before NCCL 2.19) and the
//! errors applications and nccl-tests print when NCCL fails (`NCCL error`, `Test NCCL
//! failure ... 'internal error'`).
//!
//! Lines of other wording are counted, not guessed at. Each fact keeps the file and line
//! it was read from, for the findings' evidence.

use std::collections::BTreeMap;

use serde::Serialize;

use ibscope_topo::findings::Evidence;

use crate::launcher;
use crate::log_lines::{self as lines, ChannelLine, GdrLine};
pub use crate::log_lines::{NetDevice, Transport};
use crate::paths::PathType;

/// A process, as its lines' `HOST:PID` name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ProcessId {
    pub host: String,
    pub pid: u32,
}

/// Where a fact was read: a file of [`NcclLog::files`] and a line of it (from 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Place {
    pub file: usize,
    pub line: usize,
}

/// A value and where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Seen<T> {
    pub value: T,
    pub at: Place,
}

/// What one process said of itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Process {
    pub version: Option<Seen<String>>,
    /// Its network devices, by NCCL's index, and the line listing them.
    pub net_devices: Vec<NetDevice>,
    pub net_devices_at: Option<Place>,
    /// `NCCL_*` settings it printed (from the environment or NCCL's config file).
    pub settings: BTreeMap<String, Seen<String>>,
    /// HCAs (by name) NCCL said GPUDirect RDMA is disabled for, with the reason printed.
    pub gdr_disabled: BTreeMap<String, String>,
    /// HCAs NCCL said GPUDirect RDMA is enabled for.
    pub gdr_enabled: Vec<String>,
    /// `GPU Direct RDMA Enabled|Disabled for GPU .. / HCA .. (distance D <= L)` lines.
    pub gdr_paths: Vec<GdrPath>,
    /// NCCL 2.4/2.5's `CUDA Dev 0[0], IB NIC distance :  PHB SYS`.
    pub nic_distances: Vec<NicDistances>,
    /// A topology dump's path lines (`GPU/81000 :... NET/1 (3/24.000000/PHB) ...`).
    pub topo_paths: Vec<TopoPaths>,
    /// The network NCCL says it uses (`Using network IB`).
    pub network: Option<Seen<String>>,
    /// `NET/Socket : Using [0]eth0:...`: NCCL's socket transport took the network.
    pub socket_devices: Option<Place>,
    /// `NET/IB : No device found.`
    pub ib_no_device: Option<Place>,
    /// `NET/Plugin: Loaded net plugin NAME`: a plugin loaded (it may fail and fall back).
    pub plugin_loaded: Option<Seen<String>>,
    /// Its `NCCL WARN` lines (at most 20).
    pub warnings: Vec<Seen<String>>,
    /// Calls NCCL traced back with an error code (`init.cc:1234 -> 3`; at most 20).
    pub failures: Vec<Seen<String>>,
    /// It printed `Init COMPLETE`: its communicator was built.
    pub init_complete: bool,
    /// The size of its communicator (a comm line's `nranks`) and that line.
    pub nranks: Option<Seen<u32>>,
    /// Its first line.
    pub first: Place,
}

/// One `GPU Direct RDMA ... for GPU G / HCA H (distance D <= L)` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GdrPath {
    /// As printed: a bus ID (`81000`), `0[0]` (NCCL 2.4) or a rank.
    pub gpu: String,
    /// The HCA's index in the process's `NET/IB : Using` list.
    pub hca: u32,
    /// The path type's number and NCCL's GPUDirect level, as the release numbers them.
    pub distance: u32,
    pub level: u32,
    pub enabled: bool,
    pub at: Place,
}

/// NCCL 2.4/2.5: a GPU's distance to each NIC, in the NIC list's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NicDistances {
    pub cuda_dev: u32,
    pub distances: Vec<PathType>,
    pub at: Place,
}

/// A topology dump's paths of one GPU: to each NIC (`NET/1`), its type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoPaths {
    pub gpu: String,
    pub nets: Vec<(String, PathType)>,
    pub at: Place,
}

/// One rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rank {
    pub rank: u32,
    pub nranks: u32,
    pub process: ProcessId,
    pub cuda_dev: u32,
    /// As printed (`7000`, `18000`).
    pub bus_id: Option<String>,
}

/// Which way the printing rank sees a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionDirection {
    Send,
    Receive,
}

/// Whether a connection serves a ring or a tree (after `Connected all rings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    Ring,
    Tree,
}

/// One `Channel NN : a -> b via ...` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Connection {
    pub channel: u32,
    pub from: u32,
    pub to: u32,
    pub direction: ConnectionDirection,
    pub pattern: Algorithm,
    pub transport: Transport,
    /// The process that printed it (its network devices are the ones `NET/IB/k` means).
    pub printed_by: ProcessId,
    pub at: Place,
}

impl Connection {
    /// The rank whose end of the connection this line describes.
    pub fn own_rank(&self) -> u32 {
        match self.direction {
            ConnectionDirection::Send => self.from,
            ConnectionDirection::Receive => self.to,
        }
    }
}

/// A whole log.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NcclLog {
    /// The files read, as named; a [`Place`] points into it.
    pub files: Vec<String>,
    pub processes: BTreeMap<ProcessId, Process>,
    pub ranks: BTreeMap<u32, Rank>,
    /// Ring order per channel.
    pub rings: BTreeMap<u32, Vec<u32>>,
    /// `Trees` lines read.
    pub trees: usize,
    pub connections: Vec<Connection>,
    /// `NCCL version X` lines without NCCL's prefix (their process unknown).
    pub bare_versions: Vec<Seen<String>>,
    /// Errors outside NCCL's lines: what the application or nccl-tests printed when an
    /// NCCL call failed (at most 20).
    pub job_errors: Vec<Seen<String>>,
    /// Lines NCCL wrote (INFO or WARN) and lines of them not understood.
    pub nccl_lines: usize,
    pub unread_lines: usize,
    /// NCCL's warnings, as printed (at most 50).
    pub warnings: Vec<String>,
    /// Why the log is incomplete: truncated lines, ranks that never said where they run,
    /// connections of ranks the log does not place.
    pub problems: Vec<String>,
}

/// How many warnings and failures of one process are kept.
const KEPT_PER_PROCESS: usize = 20;

impl NcclLog {
    /// Nothing of the job was found.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
            && self.connections.is_empty()
            && self.processes.is_empty()
            && self.bare_versions.is_empty()
            && self.job_errors.is_empty()
    }
    /// The HCA (device name, port) a connection's own rank uses, from its process's list.
    pub fn net_device(&self, c: &Connection) -> Option<&NetDevice> {
        let Transport::Net { device, .. } = c.transport else {
            return None;
        };
        self.processes
            .get(&c.printed_by)?
            .net_devices
            .iter()
            .find(|d| d.index == device)
    }
    /// The job's size as its ranks say it.
    pub fn nranks(&self) -> Option<u32> {
        self.ranks.values().map(|r| r.nranks).max()
    }
    /// The file and line of a place, as the findings cite it.
    pub fn evidence(&self, at: Place) -> Evidence {
        Evidence {
            file: self.files.get(at.file).cloned().unwrap_or_default(),
            line: at.line,
        }
    }
    /// The NCCL release a process runs: its own version line, else the one release the
    /// log's bare version lines name.
    pub fn version_of(&self, id: &ProcessId) -> Option<&str> {
        if let Some(v) = self.processes.get(id).and_then(|p| p.version.as_ref()) {
            return Some(&v.value);
        }
        let first = self.bare_versions.first()?;
        self.bare_versions
            .iter()
            .all(|v| v.value == first.value)
            .then_some(first.value.as_str())
    }
    /// Merge another file's lines (one file per rank).
    pub fn read(&mut self, text: &str, source: &str) {
        let file = self.files.len();
        self.files.push(source.to_string());
        let mut in_trees: BTreeMap<ProcessId, bool> = BTreeMap::new();
        // Lines come in runs of one process: its state is looked up when the process changes.
        let mut current: Option<(ProcessId, bool)> = None;
        for (n, line) in text.lines().enumerate() {
            let at = Place { file, line: n + 1 };
            let Some(launcher::NcclLine {
                host,
                pid,
                warn,
                message,
                ..
            }) = launcher::nccl_line(line)
            else {
                if line.contains(" NCCL INFO") || line.contains(" NCCL WARN") {
                    self.nccl_lines += 1;
                    self.unread_lines += 1;
                } else {
                    self.other_line(line, at);
                }
                continue;
            };
            self.nccl_lines += 1;
            if !matches!(&current, Some((p, _)) if p.pid == pid && p.host == host) {
                if let Some((p, trees)) = current.take() {
                    in_trees.insert(p, trees);
                }
                let id = ProcessId {
                    host: host.to_string(),
                    pid,
                };
                let trees = in_trees.get(&id).copied().unwrap_or_default();
                self.processes.entry(id.clone()).or_insert_with(|| Process {
                    first: at,
                    ..Process::default()
                });
                current = Some((id, trees));
            }
            let (process, trees) = current.as_mut().expect("set above");
            if warn {
                self.warning(message, &process.clone(), at);
                continue;
            }
            if message.starts_with("Connected all rings") {
                *trees = true;
                continue;
            }
            let pattern = if *trees {
                Algorithm::Tree
            } else {
                Algorithm::Ring
            };
            let process = process.clone();
            if let Err(why) = self.message(message, &process, pattern, at) {
                self.problems.push(format!("{source}:{}: {why}", n + 1));
            }
        }
    }

    fn warning(&mut self, message: &str, process: &ProcessId, at: Place) {
        if self.warnings.len() < 50 {
            self.warnings.push(message.to_string());
        }
        let p = self.proc(process);
        if p.warnings.len() < KEPT_PER_PROCESS {
            p.warnings.push(Seen {
                value: message.to_string(),
                at,
            });
        }
    }

    /// A line without NCCL's prefix: a bare version line, or an error NCCL caused.
    fn other_line(&mut self, line: &str, at: Place) {
        if let Some(v) = crate::perf::nccl_version_of(line) {
            self.bare_versions.push(Seen {
                value: v.to_string(),
                at,
            });
        } else if self.job_errors.len() < KEPT_PER_PROCESS {
            if let Some(e) = lines::job_error(line) {
                self.job_errors.push(Seen { value: e, at });
            }
        }
    }

    fn message(
        &mut self,
        m: &str,
        process: &ProcessId,
        pattern: Algorithm,
        at: Place,
    ) -> Result<(), String> {
        // NCCL before 2.6 wrote `Ring 00 : 35 -> 34 [send] via NET/Socket/0` for a ring's
        // connection and `Ring 00 :  0 1 2 3` for its order.
        if let Some(rest) = m
            .strip_prefix("Channel ")
            .or_else(|| m.strip_prefix("Ring "))
        {
            self.channel(lines::channel_line(rest)?, process, pattern, at);
        } else if let Some(v) = m.strip_prefix("NCCL version ") {
            let v = v.split_whitespace().next().unwrap_or_default();
            self.proc(process).version = Some(Seen {
                value: v.to_string(),
                at,
            });
        } else if let Some(rest) = m.strip_prefix("NET/IB : Using") {
            let p = self.proc(process);
            p.net_devices = lines::net_devices(rest)?;
            p.net_devices_at = Some(at);
        } else if m.starts_with("NET/IB : No device found") {
            self.proc(process).ib_no_device = Some(at);
        } else if m.starts_with("NET/Socket : Using") {
            self.proc(process).socket_devices = Some(at);
        } else if let Some(rest) = m.strip_prefix("Using network ") {
            self.proc(process).network = Some(Seen {
                value: rest.trim().to_string(),
                at,
            });
        } else if let Some(name) = loaded_plugin(m) {
            self.proc(process).plugin_loaded = Some(Seen { value: name, at });
        } else if m.starts_with("Trees ") {
            self.trees += 1;
        } else if m.contains("comm 0x") && m.contains(" cudaDev ") {
            self.comm(m, process, at)?;
        } else if let Some((key, value)) = lines::setting(m) {
            self.proc(process).settings.insert(key, Seen { value, at });
        } else if let Some(rest) = gdr_text(m) {
            self.gdr(rest, process, at);
        } else if let Some((cuda_dev, distances)) = lines::nic_distances(m) {
            self.proc(process).nic_distances.push(NicDistances {
                cuda_dev,
                distances,
                at,
            });
        } else if let Some((gpu, nets)) = lines::topo_paths(m) {
            self.proc(process)
                .topo_paths
                .push(TopoPaths { gpu, nets, at });
        } else if lines::traceback(m).is_some() {
            let p = self.proc(process);
            if p.failures.len() < KEPT_PER_PROCESS {
                p.failures.push(Seen {
                    value: m.to_string(),
                    at,
                });
            }
        } else if !m.contains("comm 0x") {
            self.unread_lines += 1;
        }
        Ok(())
    }

    fn channel(&mut self, line: ChannelLine, process: &ProcessId, pattern: Algorithm, at: Place) {
        match line {
            ChannelLine::Ring { channel, order } => {
                if !order.is_empty() {
                    self.rings.entry(channel).or_insert(order);
                }
            }
            ChannelLine::Connection {
                channel,
                from,
                to,
                receive,
                transport,
            } => self.connections.push(Connection {
                channel,
                from,
                to,
                direction: if receive {
                    ConnectionDirection::Receive
                } else {
                    ConnectionDirection::Send
                },
                pattern,
                transport,
                printed_by: process.clone(),
                at,
            }),
            ChannelLine::Graph => {}
        }
    }

    fn comm(&mut self, m: &str, process: &ProcessId, at: Place) -> Result<(), String> {
        let c = lines::comm_line(m)?;
        let p = self.proc(process);
        if m.contains("Init COMPLETE") {
            p.init_complete = true;
        }
        p.nranks.get_or_insert(Seen {
            value: c.nranks,
            at,
        });
        self.ranks.insert(
            c.rank,
            Rank {
                rank: c.rank,
                nranks: c.nranks,
                process: process.clone(),
                cuda_dev: c.cuda_dev,
                bus_id: c.bus_id,
            },
        );
        Ok(())
    }

    fn gdr(&mut self, rest: &str, process: &ProcessId, at: Place) {
        let p = self.proc(process);
        match lines::gdr_line(rest) {
            Some(GdrLine::Path {
                gpu,
                hca,
                distance,
                level,
                enabled,
            }) => p.gdr_paths.push(GdrPath {
                gpu,
                hca,
                distance,
                level,
                enabled,
                at,
            }),
            Some(GdrLine::Hca {
                name,
                index,
                enabled,
                why,
            }) => {
                let name = name.or_else(|| {
                    p.net_devices
                        .iter()
                        .find(|d| Some(d.index) == index)
                        .map(|d| d.device.clone())
                });
                let Some(name) = name else { return };
                if !enabled {
                    p.gdr_disabled.insert(name, why);
                } else if !p.gdr_enabled.contains(&name) {
                    p.gdr_enabled.push(name);
                }
            }
            None => self.unread_lines += 1,
        }
    }

    pub(crate) fn proc(&mut self, id: &ProcessId) -> &mut Process {
        self.processes.entry(id.clone()).or_default()
    }
}

/// `NET/IB : GPU Direct RDMA ...` (up to 2.5) or `GPU Direct RDMA ...`: what follows.
fn gdr_text(m: &str) -> Option<&str> {
    let rest = match m.strip_prefix("NET/") {
        Some(r) => r.split_once(" : ")?.1,
        None => m,
    };
    rest.strip_prefix("GPU Direct RDMA ")
}

/// `NET/Plugin: Loaded net plugin AWS Libfabric (v6)` (and `NET/Plugin : Loaded ...`).
fn loaded_plugin(m: &str) -> Option<String> {
    let rest = m.strip_prefix("NET/Plugin")?;
    let name = rest.split_once("Loaded net plugin ")?.1;
    let name = name.rsplit_once(" (").map_or(name, |(n, _)| n);
    Some(name.trim().to_string())
}

/// Read every file into one log.
pub fn parse<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> NcclLog {
    let mut log = NcclLog::default();
    for (source, text) in files {
        log.read(text, source);
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_SERVERS: &str = "\
gpu-0001:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
gpu-0001:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>
gpu-0001:100:100 [0] NCCL INFO Using network IB
gpu-0001:100:100 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5.
gpu-0001:100:120 [0] NCCL INFO [Rank 0] ncclCommInitRank comm 0x55 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0xab - Init START
gpu-0001:100:120 [0] NCCL INFO comm 0x55 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0
gpu-0001:100:120 [0] NCCL INFO Channel 00/02 :    0   1   2   3
gpu-0001:100:120 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] 1/-1/-1->0->2
gpu-0001:100:120 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
gpu-0001:100:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
gpu-0001:100:120 [0] NCCL INFO Connected all rings
gpu-0001:100:120 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [receive] via NET/IB/0(1)/GDRDMA
gpu-0001:100:120 [0] NCCL INFO GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)
gpu-0001:100:120 [0] NCCL WARN NET/IB : Got async event : port error
[1,2]<stdout>:gpu-0002:200:210 [0] NCCL INFO comm 0x66 rank 2 nranks 4 cudaDev 0 busId 18000 - Init COMPLETE
gpu-0002:200:210 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE
gpu-0002:200:210 [0] NCCL INFO Channel 00 : 1[7000] -> 2[18000] [receive] via NET/IB/0
gpu-0002:200:210 [0] NCCL INFO something new in a later version
";

    #[test]
    fn a_log_reads_whole() {
        let log = parse([("a.log", TWO_SERVERS)]);
        assert!(log.problems.is_empty(), "{:?}", log.problems);
        let p = ProcessId {
            host: "gpu-0001".into(),
            pid: 100,
        };
        let proc = &log.processes[&p];
        assert_eq!(proc.version.as_ref().unwrap().value, "2.21.5+cuda12.4");
        assert_eq!(proc.net_devices.len(), 2);
        assert_eq!(proc.net_devices[1].device, "mlx5_1");
        assert_eq!(proc.settings["NCCL_IB_HCA"].value, "mlx5");
        assert_eq!(proc.settings["NCCL_IB_HCA"].at.line, 4);
        assert_eq!(proc.network.as_ref().unwrap().value, "IB");
        assert_eq!(proc.gdr_disabled["mlx5_1"], "no module");
        assert_eq!(log.ranks.len(), 2);
        assert_eq!(log.ranks[&2].process.host, "gpu-0002");
        assert_eq!(log.nranks(), Some(4));
        assert_eq!(log.rings[&0], vec![0, 1, 2, 3]);
        assert_eq!(log.trees, 1);
        assert_eq!(log.connections.len(), 4);
        let c = &log.connections[0];
        assert_eq!((c.from, c.to, c.own_rank()), (3, 0, 0));
        assert_eq!(c.pattern, Algorithm::Ring);
        assert_eq!(log.net_device(c).unwrap().device, "mlx5_0");
        assert!(matches!(
            log.connections[1].transport,
            Transport::Local { .. }
        ));
        let pxn = &log.connections[2];
        assert_eq!(pxn.pattern, Algorithm::Tree);
        assert_eq!(
            pxn.transport,
            Transport::Net {
                plugin: "IB".into(),
                device: 0,
                proxy: Some(1),
                gdr: true
            }
        );
        let old = &log.connections[3];
        assert_eq!(
            (old.from, old.to),
            (1, 2),
            "older logs print busId in brackets"
        );
        assert!(matches!(old.transport, Transport::Net { gdr: false, .. }));
        assert_eq!(log.net_device(old).unwrap().link_layer, "RoCE");
        assert_eq!(log.warnings.len(), 1);
        assert_eq!(log.unread_lines, 1);
    }

    #[test]
    fn bad_lines_are_problems_with_their_place() {
        let text = "\
h:1:1 [0] NCCL INFO Channel xx/0 : 1 -> 2 via NET/IB/0
h:1:1 [0] NCCL INFO Channel 00/0 : a -> 2 via NET/IB/0
h:1:1 [0] NCCL INFO Channel 00/0 : 1 -> 2 via NET/IB/x
h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:x/IB
h:1:1 [0] NCCL INFO comm 0x1 rank x nranks 2 cudaDev 0
h:1:1 [0] NCCL INFO Channel 00/0 : 1 -> 2 via NET/IB/0/GDR";
        for cut in 0..text.len() {
            if text.is_char_boundary(cut) {
                parse([("cut", &text[..cut])]);
            }
        }
        let log = parse([("bad.log", text)]);
        assert_eq!(log.problems.len(), 5, "{:?}", log.problems);
        assert!(log.problems[0].starts_with("bad.log:1: "));
        assert_eq!(log.connections.len(), 1);
    }

    #[test]
    fn older_ring_lines_read_as_channels() {
        let text = "\
node1:10:10 [2] NCCL INFO Ring 00 :    0   1   2   3
node1:10:10 [2] NCCL INFO Ring 00 : 2[2] -> 3[3] via P2P/IPC
node1:10:10 [3] NCCL INFO Ring 00 : 35 -> 34 [send] via NET/Socket/0";
        let log = parse([("old.log", text)]);
        assert!(log.problems.is_empty(), "{:?}", log.problems);
        assert_eq!(log.rings[&0], [0, 1, 2, 3]);
        assert_eq!(log.connections.len(), 2);
        assert_eq!((log.connections[1].from, log.connections[1].to), (35, 34));
        assert!(matches!(
            &log.connections[1].transport,
            Transport::Net { plugin, device: 0, .. } if plugin == "Socket"
        ));
    }

    #[test]
    fn bare_version_lines_are_the_jobs() {
        let log = parse([(
            "bare.log",
            "NCCL version 2.16.5+cuda11.8\n[1,1]<stdout>:NCCL version 2.16.5+cuda11.8\n",
        )]);
        assert_eq!(log.bare_versions.len(), 2);
        assert_eq!(log.bare_versions[1].at.line, 2);
    }
}
