//! `NCCL_DEBUG=INFO` logs: one file per rank or merged, in any order, with launcher prefixes.
//! Every line NCCL writes starts `HOST:PID:TID [CUDADEV] NCCL INFO ...`; what is read:
//!
//! - `NCCL version 2.21.5+cuda12.4` (the process's NCCL);
//! - `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE ... ; OOB ...` (the process's network
//!   devices; `NET/IB/3` in a channel line is entry 3 of this list);
//! - `comm 0x.. rank R nranks N cudaDev D [nvmlDev X] busId B ... Init START|COMPLETE`
//!   (which rank a process's GPU is);
//! - `Channel 00/32 :  0 1 2 ...` (a ring's order), `Trees [0] a/b/c->r->p ...`;
//! - `Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA` (newer: `[dev]`), `Channel 00
//!   : 7[7000] -> 8[7000] [send] via NET/IB/0/GDRDMA` (older: `[busId]`), with a PXN proxy as
//!   `NET/IB/0(8)/GDRDMA`, and intra-server `via P2P/...`, `via SHM/...`;
//! - `Connected all rings` (the connections after it belong to trees);
//! - before NCCL 2.6: `Ring 00 : 35 -> 34 [send] via NET/Socket/0` and `Ring 00 :  0 1 2`;
//! - `NCCL_IB_HCA set by environment to mlx5_0,mlx5_1` (and any `NCCL_*` setting);
//! - `GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)` and its `Enabled` form.
//!
//! Lines of other wording are counted, not guessed at.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::launcher;

/// A process, as its lines' `HOST:PID` name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ProcessId {
    pub host: String,
    pub pid: u32,
}

/// What one process said of itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Process {
    pub version: Option<String>,
    /// Its network devices, by NCCL's index.
    pub net_devices: Vec<NetDevice>,
    /// `NCCL_*` settings it printed (from the environment or NCCL's config file).
    pub settings: BTreeMap<String, String>,
    /// HCAs (by name) NCCL said GPUDirect RDMA is disabled for, with the reason printed.
    pub gdr_disabled: BTreeMap<String, String>,
    /// HCAs NCCL said GPUDirect RDMA is enabled for.
    pub gdr_enabled: Vec<String>,
    /// The transport NCCL chose (`IB`, `Socket`, a plugin's name).
    pub network: Option<String>,
}

/// One entry of `NET/IB : Using ...`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetDevice {
    pub index: u32,
    /// The HCA (`mlx5_3`), or several joined by `+` when NCCL merged ports.
    pub device: String,
    pub port: u8,
    /// `IB` or `RoCE`.
    pub link_layer: String,
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

/// How a connection moves data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Transport {
    /// Over a network device of the printing process (`NET/IB/3`), through a PXN proxy
    /// rank's GPU when `proxy` is set, with GPUDirect RDMA when `gdr`.
    Net {
        plugin: String,
        device: u32,
        proxy: Option<u32>,
        gdr: bool,
    },
    /// Inside a server (P2P, SHM, CollNet...): as printed.
    Local { via: String },
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
    pub processes: BTreeMap<ProcessId, Process>,
    pub ranks: BTreeMap<u32, Rank>,
    /// Ring order per channel.
    pub rings: BTreeMap<u32, Vec<u32>>,
    /// `Trees` lines read.
    pub trees: usize,
    pub connections: Vec<Connection>,
    /// Lines NCCL wrote (INFO or WARN) and lines of them not understood.
    pub nccl_lines: usize,
    pub unread_lines: usize,
    /// NCCL's warnings, as printed (at most 50).
    pub warnings: Vec<String>,
    /// Why the log is incomplete: truncated lines, ranks that never said where they run,
    /// connections of ranks the log does not place.
    pub problems: Vec<String>,
}

impl NcclLog {
    /// Nothing of the job was found.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty() && self.connections.is_empty() && self.processes.is_empty()
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
    /// Merge another file's lines (one file per rank).
    pub fn read(&mut self, text: &str, source: &str) {
        let mut in_trees: BTreeMap<ProcessId, bool> = BTreeMap::new();
        // Lines come in runs of one process: its state is looked up when the process changes.
        let mut current: Option<(ProcessId, bool)> = None;
        for (n, raw) in text.lines().enumerate() {
            let line = launcher::strip(raw);
            let Some((at, warn)) = nccl_marker(line) else {
                continue;
            };
            self.nccl_lines += 1;
            let message = line[at + " NCCL INFO ".len()..].trim();
            if warn {
                if self.warnings.len() < 50 {
                    self.warnings.push(message.to_string());
                }
                continue;
            }
            let Some((host, pid)) = prefix(&line[..at]) else {
                self.unread_lines += 1;
                continue;
            };
            if !matches!(&current, Some((p, _)) if p.pid == pid && p.host == host) {
                if let Some((p, trees)) = current.take() {
                    in_trees.insert(p, trees);
                }
                let id = ProcessId {
                    host: host.to_string(),
                    pid,
                };
                let trees = in_trees.get(&id).copied().unwrap_or_default();
                current = Some((id, trees));
            }
            let (process, trees) = current.as_mut().expect("set above");
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
            if let Err(why) = self.message(message, &process, pattern) {
                self.problems.push(format!("{source}:{}: {why}", n + 1));
            }
        }
    }

    fn message(&mut self, m: &str, process: &ProcessId, pattern: Algorithm) -> Result<(), String> {
        // NCCL before 2.6 wrote `Ring 00 : 35 -> 34 [send] via NET/Socket/0` for a ring's
        // connection and `Ring 00 :  0 1 2 3` for its order.
        if let Some(rest) = m
            .strip_prefix("Channel ")
            .or_else(|| m.strip_prefix("Ring "))
        {
            self.channel_line(rest, process, pattern)?;
        } else if let Some(v) = m.strip_prefix("NCCL version ") {
            let v = v.split_whitespace().next().unwrap_or_default();
            self.proc(process).version = Some(v.to_string());
        } else if let Some(rest) = m.strip_prefix("NET/IB : Using") {
            self.proc(process).net_devices = net_devices(rest)?;
        } else if let Some(rest) = m.strip_prefix("Using network ") {
            self.proc(process).network = Some(rest.trim().to_string());
        } else if m.starts_with("Trees ") {
            self.trees += 1;
        } else if m.contains("comm 0x") && m.contains(" cudaDev ") {
            let rank = comm_line(m, process)?;
            self.ranks.insert(rank.rank, rank);
        } else if let Some((key, value)) = setting(m) {
            self.proc(process).settings.insert(key, value);
        } else if let Some(rest) = m.strip_prefix("GPU Direct RDMA ") {
            gdr_line(rest, self.proc(process));
        } else if !m.contains("comm 0x") {
            self.unread_lines += 1;
        }
        Ok(())
    }

    fn proc(&mut self, id: &ProcessId) -> &mut Process {
        self.processes.entry(id.clone()).or_default()
    }

    /// `00/32 :  0 1 2 ...` (a ring) or `00/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA`.
    fn channel_line(
        &mut self,
        rest: &str,
        process: &ProcessId,
        pattern: Algorithm,
    ) -> Result<(), String> {
        let (head, body) = rest
            .split_once(" : ")
            .or_else(|| rest.split_once(':'))
            .ok_or("a channel line without \" : \"")?;
        let channel: u32 = head
            .trim()
            .split('/')
            .next()
            .and_then(|c| c.trim().parse().ok())
            .ok_or_else(|| format!("channel {head:?} is not a number"))?;
        if !body.contains("->") {
            let order: Result<Vec<u32>, _> = body.split_whitespace().map(str::parse).collect();
            let order = order.map_err(|_| format!("ring {body:?} is not a list of ranks"))?;
            if !order.is_empty() {
                self.rings.entry(channel).or_insert(order);
            }
            return Ok(());
        }
        let (ends, via) = body
            .split_once(" via ")
            .ok_or("a connection without \"via\"")?;
        let (from, rest) = ends.split_once("->").ok_or("a connection without \"->\"")?;
        let from = rank_of(from)?;
        let mut words = rest.split_whitespace();
        let to = rank_of(words.next().ok_or("a connection without its peer")?)?;
        let direction = match words.next() {
            Some("[receive]") => ConnectionDirection::Receive,
            _ => ConnectionDirection::Send,
        };
        self.connections.push(Connection {
            channel,
            from,
            to,
            direction,
            pattern,
            transport: transport(via.trim())?,
            printed_by: process.clone(),
        });
        Ok(())
    }
}

/// `HOST:PID:TID [DEV]` before ` NCCL INFO`: host and pid (the rank comes from the comm
/// lines, not from the CUDA device in brackets).
fn prefix(head: &str) -> Option<(&str, u32)> {
    let head = head.trim();
    let ids = head.rsplit_once(" [").map_or(head, |(ids, _)| ids.trim());
    let mut parts = ids.rsplitn(3, ':');
    let _tid = parts.next()?;
    let pid = parts.next()?.parse().ok()?;
    let host = parts.next()?.rsplit(' ').next()?;
    if host.is_empty() {
        return None;
    }
    Some((host, pid))
}

/// Where ` NCCL INFO ` or ` NCCL WARN ` starts, and whether it is a warning. NCCL's own
/// prefix ends in `[DEV]`, so the first `]` is tried before searching the line.
fn nccl_marker(line: &str) -> Option<(usize, bool)> {
    let kind = |at: usize| match line.get(at..at + " NCCL INFO ".len()) {
        Some(" NCCL INFO ") => Some((at, false)),
        Some(" NCCL WARN ") => Some((at, true)),
        _ => None,
    };
    if let Some(close) = line.find(']') {
        if let Some(found) = kind(close + 1) {
            return Some(found);
        }
    }
    let at = line.find(" NCCL ")?;
    kind(at).or_else(|| {
        let rest = at + 1;
        line[rest..].find(" NCCL ").and_then(|a| kind(rest + a))
    })
}

/// `3[3]`, `7[7000]` or `3`: the rank.
fn rank_of(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let t = t.split('[').next().unwrap_or(t);
    t.parse()
        .map_err(|_| format!("rank {:?} is not a number", text.trim()))
}

/// `NET/IB/3/GDRDMA`, `NET/IB/0(8)/GDRDMA`, `NET/Socket/1`, `P2P/IPC/read`, `SHM/direct/direct`.
fn transport(via: &str) -> Result<Transport, String> {
    let Some(rest) = via.strip_prefix("NET/") else {
        return Ok(Transport::Local {
            via: via.to_string(),
        });
    };
    let mut parts = rest.split('/');
    let plugin = parts.next().unwrap_or_default().to_string();
    let dev = parts
        .next()
        .ok_or_else(|| format!("{via:?} names no network device"))?;
    let (dev, proxy) = match dev.split_once('(') {
        Some((d, p)) => (d, p.trim_end_matches(')').parse().ok()),
        None => (dev, None),
    };
    let device = dev
        .parse()
        .map_err(|_| format!("network device {dev:?} of {via:?} is not a number"))?;
    Ok(Transport::Net {
        plugin,
        device,
        proxy,
        gdr: parts.any(|p| p == "GDRDMA"),
    })
}

/// ` [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [2]mlx5_4:1/IB/SHARP ; OOB eth0:10.0.0.1<0>`.
fn net_devices(rest: &str) -> Result<Vec<NetDevice>, String> {
    let list = rest.split(';').next().unwrap_or_default();
    let mut out = Vec::new();
    for entry in list.split_whitespace() {
        // Flags after the list (`[RO]`: relaxed ordering) name no device.
        if !entry.contains(':') {
            continue;
        }
        let (index, rest) = entry
            .strip_prefix('[')
            .and_then(|e| e.split_once(']'))
            .ok_or_else(|| format!("network device {entry:?} is not [N]NAME:PORT/TYPE"))?;
        let (name, rest) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("network device {entry:?} names no port"))?;
        let mut port_type = rest.split('/');
        let port = port_type.next().and_then(|p| p.parse().ok());
        let (Ok(index), Some(port)) = (index.parse(), port) else {
            return Err(format!("network device {entry:?} is not [N]NAME:PORT/TYPE"));
        };
        out.push(NetDevice {
            index,
            device: name.to_string(),
            port,
            link_layer: port_type.next().unwrap_or("IB").to_string(),
        });
    }
    Ok(out)
}

/// `comm 0x.. rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 3a000 commId 0x.. - Init COMPLETE`.
fn comm_line(m: &str, process: &ProcessId) -> Result<Rank, String> {
    let words: Vec<&str> = m.split_whitespace().collect();
    let after = |key: &str| {
        let i = words.iter().position(|w| w.eq_ignore_ascii_case(key))?;
        words.get(i + 1).copied()
    };
    let number = |key: &str| -> Result<u32, String> {
        after(key)
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| format!("a comm line without a number after {key:?}"))
    };
    Ok(Rank {
        rank: number("rank")?,
        nranks: number("nranks")?,
        process: process.clone(),
        cuda_dev: number("cudaDev")?,
        bus_id: after("busId").map(str::to_string),
    })
}

/// `NCCL_IB_HCA set by environment to mlx5_0,mlx5_1` (also `set to`).
fn setting(m: &str) -> Option<(String, String)> {
    if !m.starts_with("NCCL_") {
        return None;
    }
    let (key, rest) = m.split_once(' ')?;
    let value = rest
        .strip_prefix("set by environment to ")
        .or_else(|| rest.strip_prefix("set to "))?;
    Some((
        key.to_string(),
        value.trim().trim_end_matches('.').to_string(),
    ))
}

/// `Disabled for HCA 0 'mlx5_0' (no module)` / `Enabled for HCA 0 'mlx5_0'` / `Enabled for
/// GPU 7000 / HCA 0 (distance 4 <= 5), read 1`.
fn gdr_line(rest: &str, p: &mut Process) {
    let name = rest.split('\'').nth(1).map(str::to_string).or_else(|| {
        let i = rest.find("HCA ")?;
        let index: u32 = rest[i + 4..].split_whitespace().next()?.parse().ok()?;
        p.net_devices
            .iter()
            .find(|d| d.index == index)
            .map(|d| d.device.clone())
    });
    let Some(name) = name else { return };
    if rest.starts_with("Disabled") {
        let why = rest
            .rsplit_once('(')
            .map(|(_, w)| w.trim_end_matches(')').to_string())
            .unwrap_or_default();
        p.gdr_disabled.insert(name, why);
    } else if rest.starts_with("Enabled") && !p.gdr_enabled.contains(&name) {
        p.gdr_enabled.push(name);
    }
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
        assert_eq!(proc.version.as_deref(), Some("2.21.5+cuda12.4"));
        assert_eq!(proc.net_devices.len(), 2);
        assert_eq!(proc.net_devices[1].device, "mlx5_1");
        assert_eq!(proc.settings["NCCL_IB_HCA"], "mlx5");
        assert_eq!(proc.network.as_deref(), Some("IB"));
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
    fn prefixes_of_other_shapes() {
        assert_eq!(prefix("gpu-1:9:10 [3]"), Some(("gpu-1", 9)));
        assert_eq!(prefix("2024-01-01 gpu-1:9:10 [3]").unwrap().0, "gpu-1");
        let stamped =
            "[2026-04-28 14:14:48] gpu-1:9:10 [4] NCCL INFO Channel 00/0 : 1 -> 2 via P2P";
        assert_eq!(
            nccl_marker(stamped),
            Some((stamped.find(" NCCL").unwrap(), false))
        );
        assert_eq!(nccl_marker("x] NCCL WARN y z"), Some((2, true)));
        assert_eq!(nccl_marker("NCCL INFO at the start"), None);
        assert_eq!(nccl_marker("a NCCL b NCCL INFO c"), Some((8, false)));
        assert!(prefix("no pid").is_none());
        assert!(prefix(":1:2 [0]").is_none());
    }
}
