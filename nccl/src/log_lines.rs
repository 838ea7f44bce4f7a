//! The messages of NCCL's INFO lines that a log is read for, each parsed from the text
//! after `NCCL INFO` (the wording of NCCL's sources, release by release):
//!
//! - `NCCL version 2.21.5+cuda12.4`;
//! - `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE ... ; OOB ...` (the process's network
//!   devices; `NET/IB/3` in a channel line is entry 3), `NET/IB : No device found.`,
//!   `NET/Socket : Using [0]eth0:...`, `Using network IB`, `NET/Plugin: Loaded net plugin X`;
//! - `comm 0x.. rank R nranks N cudaDev D [nvmlDev X] [busId B] ... Init START|COMPLETE`;
//! - `Channel 00/32 :  0 1 2 ...` (a ring's order), `Trees [0] a/b/c->r->p ...`;
//! - `Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA` (older: `[busId]`), with a
//!   PXN proxy as `NET/IB/0(8)/GDRDMA`, and `via P2P/...`, `via SHM/...` inside a server;
//!   before NCCL 2.6 `Ring 00 : 35 -> 34 [send] via NET/Socket/0` and `Ring 00 :  0 1 2`;
//! - `NCCL_IB_HCA set by environment to mlx5_0,mlx5_1` (and `set to`);
//! - `GPU Direct RDMA Enabled for GPU 81000 / HCA 1 (distance 6 <= 7), read 0` (2.6 and
//!   later; `NET/IB : ` before it and `<` / `>=` up to 2.5), `GPU Direct RDMA Disabled for
//!   HCA 0 'mlx5_0' (no module)`;
//! - `CUDA Dev 0[3], IB NIC distance :  PHB` (2.4, 2.5);
//! - a topology dump's paths, `GPU/81000 :GPU/81000 (0/5000.000000/LOC) ... NET/1
//!   (3/24.000000/PHB) `;
//! - a call traced back with its error code, `init.cc:1234 -> 3`.

use serde::Serialize;

use crate::paths::PathType;

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

/// What a `Channel` or `Ring` line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelLine {
    /// A ring's order.
    Ring { channel: u32, order: Vec<u32> },
    /// One connection as the printing rank sees it.
    Connection {
        channel: u32,
        from: u32,
        to: u32,
        receive: bool,
        transport: Transport,
    },
    /// A graph search's ring (`Ring 00 : 1 -> 0 -> 1`): no connection.
    Graph,
}

/// `00/32 :  0 1 2 ...` (a ring) or `00/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA`.
pub fn channel_line(rest: &str) -> Result<ChannelLine, String> {
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
        return Ok(ChannelLine::Ring { channel, order });
    }
    let Some((ends, via)) = body.split_once(" via ") else {
        return Ok(ChannelLine::Graph);
    };
    let (from, rest) = ends.split_once("->").ok_or("a connection without \"->\"")?;
    let from = rank_of(from)?;
    let mut words = rest.split_whitespace();
    let to = rank_of(words.next().ok_or("a connection without its peer")?)?;
    Ok(ChannelLine::Connection {
        channel,
        from,
        to,
        receive: words.next() == Some("[receive]"),
        transport: transport(via.trim())?,
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
pub fn transport(via: &str) -> Result<Transport, String> {
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
pub fn net_devices(rest: &str) -> Result<Vec<NetDevice>, String> {
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

/// A comm line's numbers: rank, nranks, CUDA device, bus ID.
pub struct CommLine {
    pub rank: u32,
    pub nranks: u32,
    pub cuda_dev: u32,
    pub bus_id: Option<String>,
}

/// `comm 0x.. rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 3a000 commId 0x.. - Init COMPLETE`.
pub fn comm_line(m: &str) -> Result<CommLine, String> {
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
    Ok(CommLine {
        rank: number("rank")?,
        nranks: number("nranks")?,
        cuda_dev: number("cudaDev")?,
        bus_id: after("busId").map(str::to_string),
    })
}

/// `NCCL_IB_HCA set by environment to mlx5_0,mlx5_1` (also `set to`).
pub fn setting(m: &str) -> Option<(String, String)> {
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

/// What a `GPU Direct RDMA` line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GdrLine {
    /// `Enabled|Disabled for GPU G / HCA H (distance D <= L)`.
    Path {
        gpu: String,
        hca: u32,
        distance: u32,
        level: u32,
        enabled: bool,
    },
    /// `Disabled for HCA 0 'mlx5_0' (no module)` / `Enabled for HCA 0 'mlx5_0'`: the HCA's
    /// name or index, and the reason printed.
    Hca {
        name: Option<String>,
        index: Option<u32>,
        enabled: bool,
        why: String,
    },
}

/// The text after `GPU Direct RDMA ` (and after `NET/IB : ` in older releases).
pub fn gdr_line(rest: &str) -> Option<GdrLine> {
    let enabled = rest.starts_with("Enabled");
    if !enabled && !rest.starts_with("Disabled") {
        return None;
    }
    if let Some(g) = rest.find("for GPU ") {
        let after = &rest[g + "for GPU ".len()..];
        let (gpu, after) = after.split_once(" / HCA ")?;
        let hca_text = after.split_whitespace().next()?;
        // NCCL 2.21 and later print the HCA as hex.
        let hca = hca_text
            .parse()
            .ok()
            .or_else(|| u32::from_str_radix(hca_text, 16).ok())?;
        let d = after.find("(distance ")?;
        let mut nums = after[d + "(distance ".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty());
        let distance = nums.next()?.parse().ok()?;
        let level = nums.next()?.parse().ok()?;
        return Some(GdrLine::Path {
            gpu: gpu.trim().to_string(),
            hca,
            distance,
            level,
            enabled,
        });
    }
    let name = rest.split('\'').nth(1).map(str::to_string);
    let index = rest
        .find("HCA ")
        .and_then(|i| rest[i + 4..].split_whitespace().next()?.parse().ok());
    let why = rest
        .rsplit_once('(')
        .map(|(_, w)| w.trim_end_matches(')').to_string())
        .unwrap_or_default();
    Some(GdrLine::Hca {
        name,
        index,
        enabled,
        why,
    })
}

/// `CUDA Dev 0[3], IB NIC distance :  PHB SYS`: the CUDA device and each NIC's type.
pub fn nic_distances(m: &str) -> Option<(u32, Vec<PathType>)> {
    let rest = m.strip_prefix("CUDA Dev ")?;
    let dev = rest.split(['[', ',']).next()?.trim().parse().ok()?;
    let (_, list) = rest.split_once("NIC distance :")?;
    let types: Option<Vec<PathType>> = list.split_whitespace().map(PathType::named).collect();
    Some((dev, types?))
}

/// A topology dump's path line of a GPU: `GPU/81000 :GPU/81000 (0/5000.000000/LOC) CPU/1
/// (1/24.000000/PHB) NET/1 (3/24.000000/PHB) NET/0 (4/3.125000/SYS) `: the GPU and each NET's
/// path type.
pub fn topo_paths(m: &str) -> Option<(String, Vec<(String, PathType)>)> {
    if !m.starts_with("GPU/") {
        return None;
    }
    let (gpu, rest) = m.split_once(" :")?;
    let mut nets = Vec::new();
    let mut words = rest.split_whitespace();
    while let Some(node) = words.next() {
        let detail = words.next()?;
        if node.starts_with("NET/") {
            let kind = detail.trim_matches(['(', ')']).rsplit('/').next()?;
            nets.push((node.to_string(), PathType::named(kind)?));
        }
    }
    Some((gpu.to_string(), nets))
}

/// `init.cc:1234 -> 3` (or `-> 2 (Connection refused)`, `-> 3 [Async thread]`): a call
/// that failed, with its code; `None` for other lines and for code 0.
pub fn traceback(m: &str) -> Option<u32> {
    let mut words = m.split_whitespace();
    let place = words.next()?;
    let (file, line) = place.rsplit_once(':')?;
    if !file.contains('.') || line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if words.next()? != "->" {
        return None;
    }
    let code: u32 = words.next()?.parse().ok()?;
    (code != 0).then_some(code)
}

/// What an application or nccl-tests prints when an NCCL call fails (`NCCL error in:
/// ...`, `Test NCCL failure common.cu:1005 'internal error ...'`, `ncclInternalError`):
/// the line, trimmed, when it is one.
pub fn job_error(line: &str) -> Option<String> {
    const SIGNS: [&str; 9] = [
        "NCCL error",
        "NCCL failure",
        "ncclInternalError",
        "ncclSystemError",
        "ncclUnhandledCudaError",
        "ncclRemoteError",
        "ncclInvalidUsage",
        "ncclCommInitRank failed",
        "NCCL communicator was aborted",
    ];
    SIGNS
        .iter()
        .any(|s| line.contains(s))
        .then(|| line.trim().chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as NCCL's sources print them (the format strings named in each case).
    #[test]
    fn gdr_lines_of_every_release() {
        // 2.7 and later: paths.cc's "GPU Direct RDMA %s for GPU %lx / HCA %d (distance %d <= %d)".
        assert_eq!(
            gdr_line("Enabled for GPU 81000 / HCA 1 (distance 6 <= 7), read 0"),
            Some(GdrLine::Path {
                gpu: "81000".into(),
                hca: 1,
                distance: 6,
                level: 7,
                enabled: true
            })
        );
        // 2.4: net.cc's "GPU %d[%d] / HCA %d (distance %d >= %d)".
        assert!(matches!(
            gdr_line("Disabled for GPU 0[0] / HCA 0 (distance 4 >= 2)"),
            Some(GdrLine::Path {
                distance: 4,
                level: 2,
                enabled: false,
                ..
            })
        ));
        // 2.21 and later print the HCA's id in hex.
        assert!(matches!(
            gdr_line("Enabled for GPU 1b000 / HCA a (distance 4 <= 5), read 1 mode Default"),
            Some(GdrLine::Path { hca: 10, .. })
        ));
        assert_eq!(
            gdr_line("Disabled for HCA 0 'mlx5_0' (no module)"),
            Some(GdrLine::Hca {
                name: Some("mlx5_0".into()),
                index: Some(0),
                enabled: false,
                why: "no module".into()
            })
        );
        assert_eq!(gdr_line("is something else"), None);
    }

    #[test]
    fn distances_and_dumps() {
        assert_eq!(
            nic_distances("CUDA Dev 0[3], IB NIC distance :  PHB"),
            Some((0, vec![PathType::Phb]))
        );
        assert_eq!(
            nic_distances("CUDA Dev 2[2], IB NIC distance :  PIX SYS"),
            Some((2, vec![PathType::Pix, PathType::Sys]))
        );
        let (gpu, nets) = topo_paths(
            "GPU/81000 :GPU/81000 (0/5000.000000/LOC) CPU/1 (1/24.000000/PHB) CPU/0 \
             (2/24.000000/SYS) NET/1 (3/24.000000/PHB) NET/0 (4/3.125000/SYS) ",
        )
        .unwrap();
        assert_eq!(gpu, "GPU/81000");
        assert_eq!(
            nets,
            [
                ("NET/1".to_string(), PathType::Phb),
                ("NET/0".to_string(), PathType::Sys)
            ]
        );
        assert_eq!(topo_paths("NET/1 :GPU/81000 (3/24.000000/PHB)"), None);
    }

    #[test]
    fn failures_and_graph_rings() {
        assert_eq!(traceback("init.cc:1234 -> 3"), Some(3));
        assert_eq!(
            traceback("misc/socket.cc:456 -> 2 (Connection refused)"),
            Some(2)
        );
        assert_eq!(traceback("plugin/net.cc:118 -> 0"), None);
        assert_eq!(
            traceback("Connection to proxy localRank 0 -> connection 0x1"),
            None
        );
        assert_eq!(channel_line("00 : 1 -> 0 -> 1"), Ok(ChannelLine::Graph));
        assert!(
            job_error("RuntimeError: NCCL error in: x.cpp:1, unhandled system error").is_some()
        );
        assert!(job_error("all fine").is_none());
    }
}
