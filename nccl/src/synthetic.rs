//! Logs and nccl-tests output as NCCL writes them, for a job laid out as on a rail-optimized
//! cluster, with faults to plant: the fixtures of the tests and the benchmark's input.
//!
//! The job: `servers` hosts with `gpus` GPUs each, one process per GPU, one HCA per GPU
//! (`mlx5_G`, rail G). Channel C runs on rail C mod `gpus`: inside a server its ring visits
//! every GPU starting at GPU C and leaves from the last one through HCA C with GPU C as
//! its PXN proxy; the next server receives on GPU C through its HCA C. After `Connected all
//! rings` the same connections are printed again for the trees, as NCCL prints both.

use std::fmt::Write;

/// A job to write a log of.
#[derive(Debug, Clone)]
pub struct Job {
    pub hosts: Vec<String>,
    pub gpus: u32,
    pub channels: u32,
    pub gdr: bool,
    /// (server index, GPU, HCA): that GPU's channels go through another HCA.
    pub hca_of_gpu: Option<(usize, u32, u32)>,
    /// A server whose GPUDirect RDMA module is missing.
    pub no_gdr_host: Option<usize>,
    /// A server on another NCCL version with an extra setting.
    pub odd_version_host: Option<usize>,
}

impl Job {
    /// `servers` hosts named `gpu-0001`... with `gpus` GPUs each, one channel per rail.
    pub fn new(servers: usize, gpus: u32) -> Job {
        Job {
            hosts: (1..=servers).map(|i| format!("gpu-{i:04}")).collect(),
            gpus,
            channels: gpus,
            gdr: true,
            hca_of_gpu: None,
            no_gdr_host: None,
            odd_version_host: None,
        }
    }
    fn ranks(&self) -> u32 {
        self.hosts.len() as u32 * self.gpus
    }
    fn rank(&self, server: usize, gpu: u32) -> u32 {
        server as u32 * self.gpus + gpu
    }
    fn pid(&self, server: usize, gpu: u32) -> u32 {
        1000 + server as u32 * 100 + gpu
    }
    /// The HCA index a GPU's network traffic uses on `server`.
    fn hca(&self, server: usize, gpu: u32) -> u32 {
        match self.hca_of_gpu {
            Some((s, g, h)) if s == server && g == gpu => h,
            _ => gpu,
        }
    }
}

/// The job's merged log (every process's lines, process after process).
pub fn log(job: &Job) -> crate::log::NcclLog {
    crate::log::parse([("synthetic.log", log_text(job).as_str())])
}

/// The job's merged log as text.
pub fn log_text(job: &Job) -> String {
    let mut out = String::new();
    for s in 0..job.hosts.len() {
        for g in 0..job.gpus {
            process(job, s, g, &mut out);
        }
    }
    out
}

fn process(job: &Job, s: usize, g: u32, out: &mut String) {
    let host = &job.hosts[s];
    let pid = job.pid(s, g);
    let odd = job.odd_version_host == Some(s);
    let gdr = job.gdr && job.no_gdr_host != Some(s);
    let p = format!("{host}:{pid}:{pid} [{g}] NCCL INFO");
    let t = format!("{host}:{pid}:{} [{g}] NCCL INFO", pid + 50);
    let version = if odd {
        "2.18.3+cuda12.2"
    } else {
        "2.21.5+cuda12.4"
    };
    let _ = writeln!(out, "{p} Bootstrap : Using eth0:10.0.{s}.1<0>");
    let _ = writeln!(out, "{p} NCCL version {version}");
    let _ = writeln!(out, "{p} NCCL_SOCKET_IFNAME set by environment to eth0");
    if odd {
        let _ = writeln!(out, "{p} NCCL_IB_GID_INDEX set by environment to 3");
    }
    let devices: Vec<String> = (0..job.gpus)
        .map(|i| format!("[{i}]mlx5_{i}:1/IB"))
        .collect();
    let _ = writeln!(
        out,
        "{p} NET/IB : Using {} ; OOB eth0:10.0.{s}.1<0>",
        devices.join(" ")
    );
    let _ = writeln!(out, "{p} Using network IB");
    let rank = job.rank(s, g);
    let comm = format!(
        "{t} comm 0x7f00{rank:04x} rank {rank} nranks {} cudaDev {g} nvmlDev {g} busId {:x}000 \
         commId 0x1234abcd - Init",
        job.ranks(),
        0x18 + g * 0x10
    );
    let _ = writeln!(out, "{comm} START");
    for i in 0..job.gpus {
        let state = if gdr {
            format!(
                "Enabled for GPU {:x}000 / HCA {i} (distance 3 <= 4), read 1",
                0x18 + g * 0x10
            )
        } else {
            format!("Disabled for HCA {i} 'mlx5_{i}' (no module)")
        };
        let _ = writeln!(out, "{t} GPU Direct RDMA {state}");
    }
    for line in [
        "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        "Setting affinity for GPU to 0-55,112-167",
        "P2P Chunksize set to 524288",
        "Check P2P Type intraNodeP2pSupport 1 directMode 0",
        "CC Off, Multi-GPU CC Off, workFifoBytes 1048576",
    ] {
        let _ = writeln!(out, "{t} {line}");
    }
    let trees: Vec<String> = (0..job.channels)
        .map(|c| {
            format!(
                "[{c}] {}/-1/-1->{rank}->{}",
                job.rank((s + 1) % job.hosts.len(), g),
                job.rank(s, (g + 1) % job.gpus)
            )
        })
        .collect();
    let _ = writeln!(out, "{t} Trees {}", trees.join(" "));
    if rank == 0 {
        for c in 0..job.channels {
            let order: Vec<String> = ring(job, c).iter().map(u32::to_string).collect();
            let _ = writeln!(
                out,
                "{t} Channel {c:02}/{:02} :    {}",
                job.channels,
                order.join("   ")
            );
        }
    }
    for phase in ["rings", "trees"] {
        for c in 0..job.channels {
            connections(job, s, g, c, gdr, &t, out);
        }
        let _ = writeln!(out, "{t} Connected all {phase}");
    }
    let _ = writeln!(out, "{comm} COMPLETE");
}

/// Channel `c`'s ring: every server in turn, its GPUs from the channel's rail on.
fn ring(job: &Job, c: u32) -> Vec<u32> {
    let first = c % job.gpus;
    (0..job.hosts.len())
        .flat_map(|s| (0..job.gpus).map(move |i| job.rank(s, (first + i) % job.gpus)))
        .collect()
}

/// What GPU `g` of server `s` prints of channel `c`.
fn connections(job: &Job, s: usize, g: u32, c: u32, gdr: bool, t: &str, out: &mut String) {
    let first = c % job.gpus;
    let last = (first + job.gpus - 1) % job.gpus;
    let servers = job.hosts.len();
    let rank = job.rank(s, g);
    let gdr = if gdr { "/GDRDMA" } else { "" };
    if g == last {
        let next = job.rank((s + 1) % servers, first);
        let hca = job.hca(s, first);
        let proxy = job.rank(s, first);
        let _ = writeln!(
            out,
            "{t} Channel {c:02}/0 : {rank}[{g}] -> {next}[{first}] [send] via NET/IB/{hca}({proxy}){gdr}"
        );
    } else {
        let next = job.rank(s, (g + 1) % job.gpus);
        let _ = writeln!(
            out,
            "{t} Channel {c:02}/0 : {rank}[{g}] -> {next}[{}] via P2P/CUMEM/read",
            (g + 1) % job.gpus
        );
    }
    if g == first {
        let prev = job.rank((s + servers - 1) % servers, last);
        let hca = job.hca(s, g);
        let _ = writeln!(
            out,
            "{t} Channel {c:02}/0 : {prev}[{last}] -> {rank}[{g}] [receive] via NET/IB/{hca}{gdr}"
        );
    }
}

/// nccl-tests output of `op` over the job's ranks, one row per (size, busbw), out-of-place
/// and in-place alike, with the busbw factor of `op`.
pub fn perf_text(job: &Job, op: &str, rows: &[(u64, f64)]) -> String {
    let factor = crate::perf::busbw_factor(op, job.ranks()).unwrap_or(1.0);
    let mut out = String::new();
    let _ = writeln!(out, "# Collective test starting: {op}_perf");
    let _ = writeln!(
        out,
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 \
         iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices"
    );
    for s in 0..job.hosts.len() {
        for g in 0..job.gpus {
            let _ = writeln!(
                out,
                "#  Rank {:2} Group  0 Pid {:6} on {:>10} device {g:2} [0x{:02x}] NVIDIA H100 80GB HBM3",
                job.rank(s, g),
                job.pid(s, g),
                job.hosts[s],
                0x18 + g * 0x10
            );
        }
    }
    let _ = writeln!(out, "#\n#{:>60}{:>35}", "out-of-place", "in-place");
    let _ = writeln!(
        out,
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     \
         time   algbw   busbw #wrong"
    );
    let redop = if op == "all_reduce" || op == "reduce_scatter" {
        "sum"
    } else {
        "none"
    };
    let mut total = 0.0;
    for &(size, busbw) in rows {
        let algbw = busbw / factor;
        let time = size as f64 / (algbw * 1e3);
        total += busbw;
        let _ = writeln!(
            out,
            "{size:12}  {:12}  {:>8}  {redop:>6}  {:6}  {time:7.2}  {algbw:6.2}  {busbw:6.2}  {:5}  \
             {time:7.2}  {algbw:6.2}  {busbw:6.2}  {:5}",
            size / 4,
            "float",
            -1,
            0,
            0
        );
    }
    let _ = writeln!(out, "# Out of bounds values : 0 OK");
    let _ = writeln!(
        out,
        "# Avg bus bandwidth    : {:.4}\n#",
        total / rows.len().max(1) as f64
    );
    out
}
