//! nccl-tests output (`all_reduce_perf`, `alltoall_perf` and the other `*_perf` binaries):
//! the header, one line per rank (`#  Rank  3 Group  0 Pid 1234 on gpu-0001 device  3
//! [0x..] NVIDIA H100`), the column header and one row per message size with its
//! out-of-place and in-place time, algbw, busbw and wrong-value count, then `Avg bus
//! bandwidth`. A file may hold several runs (one per `# nThread` header), NCCL INFO lines
//! between the rows, and launcher prefixes ([`crate::launcher`]).
//!
//! Versions differ: older ones have no `root` column and print `error` (the largest
//! deviation, a float) where newer ones print `#wrong` (a count); alltoall and others print
//! `N/A` for what they do not measure. The column header says which layout a run has; a run
//! cut before its column header is read by its row's width.

use serde::Serialize;

use crate::launcher::Prefixes;
use crate::perf_layout::Layout;
pub use crate::perf_layout::{Measured, Row};

/// One nccl-tests run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerfRun {
    /// The file it came from.
    pub source: String,
    /// The collective (`all_reduce`, `alltoall`, ...) where the file says it (a `*_perf`
    /// command line or `Collective test starting` line), the file's name or --op names it.
    pub op: Option<String>,
    /// nccl-tests' own version line, where printed.
    pub tests_version: Option<String>,
    /// NCCL's version (`NCCL version 2.21.5+cuda12.4`), where printed.
    pub nccl_version: Option<String>,
    pub ranks: Vec<PerfRank>,
    pub rows: Vec<Row>,
    /// What the run printed as its average (not recomputed).
    pub avg_busbw: Option<f64>,
    /// `# Out of bounds values : N`.
    pub out_of_bounds: Option<u64>,
    /// Lines that could not be read, and other reasons the run is incomplete.
    pub problems: Vec<String>,
    /// The run ended early (no `Avg bus bandwidth` line) or has lines it could not read.
    pub partial: bool,
    /// The line its header (or its first line read) starts on, and its `Avg bus bandwidth`
    /// line's.
    pub first_line: usize,
    pub avg_line: Option<usize>,
    /// Its `# nThread ...` line: how the test was started.
    pub parameters: Option<String>,
    /// Its lines were interleaved with another run's of the same file (processes printing
    /// at once).
    pub interleaved: bool,
}

impl PerfRun {
    /// The first row whose size comes again, or back, in the same table (same type,
    /// operation and root): rows of several processes' runs interleaved. A test of every
    /// type (`-d all`) starts its sizes again for each type: that is another table.
    pub fn interleaved_rows(&self) -> Option<usize> {
        self.rows
            .windows(2)
            .find(|w| {
                w[1].size <= w[0].size
                    && w[1].dtype == w[0].dtype
                    && w[1].redop == w[0].redop
                    && w[1].root == w[0].root
            })
            .map(|w| w[1].line)
    }

    /// nccl-tests' busbw factor of this run: busbw over algbw as it printed them (at its
    /// largest size with both above 1 GB/s, where rounding hardly counts), else the
    /// collective's over its ranks.
    pub fn busbw_factor(&self) -> Option<f64> {
        let printed = self
            .rows
            .iter()
            .rev()
            .filter_map(Row::best)
            .find(|m| m.algbw >= 1.0)
            .map(|m| m.busbw / m.algbw);
        printed.or_else(|| {
            let ranks = u32::try_from(self.ranks.len()).ok().filter(|n| *n > 0)?;
            busbw_factor(self.op.as_deref()?, ranks)
        })
    }
    /// The processes its rank lines name (host, pid), in rank order, each once.
    pub fn processes(&self) -> Vec<(&str, Option<u32>)> {
        let mut out: Vec<(&str, Option<u32>)> = Vec::new();
        for r in &self.ranks {
            let p = (r.host.as_str(), r.pid);
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }
}

/// One rank as the run's header lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PerfRank {
    pub rank: u32,
    pub host: String,
    /// The process that runs it, where printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// CUDA device number on its host.
    pub device: u32,
    /// PCI bus ID as printed (`0x07`, `0000:07:00.0`), where printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus_id: Option<String>,
    /// GPU model, where printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

/// Read every run in `text`; `source` names the file in messages.
pub fn parse(text: &str, source: &str) -> Vec<PerfRun> {
    let prefixes = Prefixes::learn(text);
    let mut reader = Reader {
        source,
        runs: Vec::new(),
        layouts: Vec::new(),
        op_hint: op_from_name(source),
        nccl_version: None,
    };
    for (n, raw) in text.lines().enumerate() {
        reader.line(prefixes.strip(raw), n + 1);
    }
    let mut runs = reader.runs;
    for run in &mut runs {
        if let Some(line) = run.interleaved_rows() {
            run.interleaved = true;
            run.problems.push(format!(
                "{}:{line}: rows of several runs interleave (a size comes again in the same \
                 table): read as one run",
                run.source
            ));
        }
        if run.rows.is_empty() {
            run.problems
                .push(format!("{}: no row of measurements", run.source));
        }
        if run.avg_busbw.is_none() {
            run.problems.push(format!(
                "{}: no \"Avg bus bandwidth\" line: the run ended early",
                run.source
            ));
        }
        run.partial = !run.problems.is_empty();
    }
    runs
}

/// The runs of one file as its lines come. Runs of processes that each ran alone may be
/// interleaved line by line: a line goes to the run it continues (its rank's process, the
/// next size of its table), and the runs that shared lines are marked.
struct Reader<'a> {
    source: &'a str,
    runs: Vec<PerfRun>,
    /// Each run's columns (the same index as `runs`).
    layouts: Vec<Option<Layout>>,
    op_hint: Option<String>,
    nccl_version: Option<String>,
}

impl Reader<'_> {
    fn line(&mut self, line: &str, n: usize) {
        let trimmed = line.trim();
        if let Some(op) = op_from_command(trimmed) {
            self.op_hint = Some(op);
        }
        if let Some(v) = nccl_version_of(trimmed) {
            self.nccl_version = Some(v.to_string());
            if let Some(r) = self.runs.last_mut() {
                r.nccl_version.get_or_insert_with(|| v.to_string());
            }
        }
        let header = trimmed.strip_prefix('#').map(str::trim);
        let starts = header.is_some_and(|h| h.starts_with("nThread "))
            || trimmed.starts_with("nThread ")
            || self.runs.is_empty() && starts_run(trimmed);
        if starts {
            self.start(n, trimmed);
        }
        if self.runs.is_empty() {
            return;
        }
        if let Some(rest) = header {
            self.header_line(rest, n);
        } else if trimmed.starts_with("Rank ") || trimmed.starts_with("size ") {
            // Header lines that lost their `#` on the way (copied through markdown).
            self.header_line(trimmed, n);
        } else if trimmed.starts_with(|c: char| c.is_ascii_digit())
            && !trimmed.contains(" NCCL INFO")
            && !trimmed.contains(" NCCL WARN")
        {
            self.data_row(trimmed, n);
        }
    }

    fn start(&mut self, n: usize, text: &str) {
        self.runs.push(PerfRun {
            source: self.source.to_string(),
            op: self.op_hint.clone(),
            tests_version: None,
            nccl_version: self.nccl_version.clone(),
            ranks: Vec::new(),
            rows: Vec::new(),
            avg_busbw: None,
            out_of_bounds: None,
            problems: Vec::new(),
            partial: true,
            first_line: n,
            avg_line: None,
            parameters: text
                .trim_start_matches('#')
                .trim()
                .starts_with("nThread")
                .then(|| text.trim_start_matches('#').trim().to_string()),
            interleaved: false,
        });
        self.layouts.push(None);
    }

    /// The runs still printing (no `Avg bus bandwidth` yet), oldest first.
    fn open(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.runs.len()).filter(|&i| self.runs[i].avg_busbw.is_none())
    }

    /// `i` took a line: if a newer run had started, the two shared their lines.
    fn took(&mut self, i: usize) {
        if i + 1 < self.runs.len() {
            for r in &mut self.runs[i..] {
                r.interleaved = true;
            }
        }
    }

    /// The lines starting with `#` (after the launcher's prefix): ranks, columns, totals.
    fn header_line(&mut self, rest: &str, n: usize) {
        let newest = self.runs.len() - 1;
        if let Some(l) = Layout::from_header(rest) {
            let open: Vec<usize> = self.open().collect();
            for i in open {
                self.layouts[i].get_or_insert_with(|| l.clone());
            }
            self.layouts[newest] = Some(l);
        } else if let Some(r) = rank_line(rest) {
            let i = self.run_of_rank(&r);
            self.runs[i].ranks.push(r);
            self.took(i);
        } else if let Some(v) = rest.strip_prefix("Avg bus bandwidth") {
            let i = self.open().next().unwrap_or(newest);
            self.runs[i].avg_busbw = v.trim_start_matches([' ', ':']).trim().parse().ok();
            self.runs[i].avg_line = Some(n);
            self.took(i);
        } else if let Some(v) = rest.strip_prefix("Out of bounds values") {
            let i = self
                .open()
                .find(|&i| self.runs[i].out_of_bounds.is_none())
                .unwrap_or(newest);
            let v = v.trim_start_matches([' ', ':']);
            self.runs[i].out_of_bounds = v.split_whitespace().next().and_then(|n| n.parse().ok());
        } else if let Some(v) = rest.strip_prefix("nccl-tests version") {
            self.runs[newest].tests_version = v.split_whitespace().next().map(str::to_string);
        } else if let Some(op) = rest.strip_prefix("Collective test starting:") {
            let op = op.trim().trim_end_matches("_perf");
            if !op.is_empty() {
                self.op_hint = Some(op.to_string());
                self.runs[newest].op = Some(op.to_string());
            }
        }
    }

    /// The run a rank line belongs to: the one its process already printed into, else the
    /// oldest open one still without that rank, else the newest.
    fn run_of_rank(&self, r: &PerfRank) -> usize {
        let same_process = |i: &usize| {
            self.runs[*i]
                .ranks
                .iter()
                .any(|x| x.pid.is_some() && x.pid == r.pid && x.host == r.host)
        };
        let lacking = |i: &usize| self.runs[*i].ranks.iter().all(|x| x.rank != r.rank);
        self.open()
            .find(same_process)
            .or_else(|| self.open().find(lacking))
            .unwrap_or(self.runs.len() - 1)
    }

    /// One data row: to the open run whose table it continues (the largest last size below
    /// its own; of equals, the newest), else the newest.
    fn data_row(&mut self, line: &str, n: usize) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(size) = words.first().and_then(|w| w.parse::<u64>().ok()) else {
            let newest = self.runs.len() - 1;
            self.runs[newest].problems.push(format!(
                "{}:{n}: size {:?} is not a number",
                self.source, words[0]
            ));
            return;
        };
        let last = |i: usize| self.runs[i].rows.last().map(|r| r.size);
        let i = self
            .open()
            .filter(|&i| last(i).map_or(true, |l| l < size))
            .max_by_key(|&i| (last(i).map_or(0, |l| l + 1), i))
            .or_else(|| self.open().last())
            .unwrap_or(self.runs.len() - 1);
        let layout = match &self.layouts[i] {
            Some(l) if l.fits(words.len()) => Ok(l.clone()),
            _ => Layout::from_width(words.len()).ok_or_else(|| {
                format!(
                    "a row of {} columns, no layout of nccl-tests has that many: {:?}",
                    words.len(),
                    shorten(line)
                )
            }),
        };
        match layout.and_then(|l| {
            let row = l.row(&words, n)?;
            self.layouts[i] = Some(l);
            Ok(row)
        }) {
            Ok(row) => {
                self.runs[i].rows.push(row);
                self.took(i);
            }
            Err(why) => self.runs[i]
                .problems
                .push(format!("{}:{n}: {why}", self.source)),
        }
    }
}

/// A data row before any header: a file cut at its top still holds a run.
fn starts_run(line: &str) -> bool {
    line.starts_with(|c: char| c.is_ascii_digit())
        || line.starts_with('#') && line.contains("Rank ")
        || line.starts_with("Rank ")
        || line.starts_with('#') && line.contains("size")
}

/// `Rank  0 Group  0 Pid  12345 on gpu-0001 device  0 [0x07] NVIDIA H100 80GB HBM3`.
fn rank_line(rest: &str) -> Option<PerfRank> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    if words.first() != Some(&"Rank") {
        return None;
    }
    let after = |key: &str| {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1).copied()
    };
    let rank = words.get(1)?.parse().ok()?;
    let host = after("on")?.to_string();
    let device = after("device")?.parse().ok()?;
    let at = words.iter().position(|w| *w == "device")? + 2;
    let bus_id = words
        .get(at)
        .filter(|w| w.starts_with('['))
        .map(|w| w.trim_matches(['[', ']']).to_string());
    let gpu_from = at + usize::from(bus_id.is_some());
    let gpu = (gpu_from < words.len()).then(|| words[gpu_from..].join(" "));
    Some(PerfRank {
        rank,
        host,
        pid: after("Pid").and_then(|p| p.parse().ok()),
        device,
        bus_id,
        gpu,
    })
}

fn shorten(line: &str) -> String {
    line.chars().take(80).collect()
}

/// `NCCL version 2.21.5+cuda12.4` anywhere in the line (NCCL INFO or nccl-tests' own).
pub(crate) fn nccl_version_of(line: &str) -> Option<&str> {
    let at = line.find("NCCL version ")?;
    line[at + "NCCL version ".len()..].split_whitespace().next()
}

/// The collective of a command line naming a `*_perf` binary.
fn op_from_command(line: &str) -> Option<String> {
    if line.starts_with('#') && !line.contains("_perf") {
        return None;
    }
    line.split(|c: char| c.is_whitespace() || c == '/' || c == '=' || c == '"')
        .find_map(|w| {
            w.strip_suffix("_perf")
                .or_else(|| w.strip_suffix("_perf_mpi"))
        })
        .filter(|op| known_op(op))
        .map(str::to_string)
}

/// The collective a file's name says (`all_reduce_perf.out`, `alltoall-64n.log`).
fn op_from_name(source: &str) -> Option<String> {
    let name = source
        .rsplit('/')
        .next()
        .unwrap_or(source)
        .to_ascii_lowercase();
    let name = name.replace('-', "_");
    // Longest first: `all_reduce` before `reduce`.
    let mut ops = OPS.to_vec();
    ops.sort_by_key(|o| std::cmp::Reverse(o.len()));
    ops.into_iter()
        .find(|op| name.contains(op) || name.contains(&op.replace('_', "")))
        .map(str::to_string)
}

/// nccl-tests' bus bandwidth factor of `op` over `ranks` ranks (its `busbw = algbw x f`).
pub fn busbw_factor(op: &str, ranks: u32) -> Option<f64> {
    let n = f64::from(ranks.max(1));
    Some(match op {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" | "alltoall" | "gather" | "scatter" => (n - 1.0) / n,
        "broadcast" | "reduce" | "sendrecv" | "hypercube" => 1.0,
        _ => return None,
    })
}

/// nccl-tests' collectives.
pub const OPS: [&str; 10] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
];

pub fn known_op(op: &str) -> bool {
    OPS.contains(&op)
}

/// A collective as a user names it (`all_reduce`, `all-reduce`, `all_reduce_perf`).
pub fn op_named(s: &str) -> Result<String, String> {
    let op = s.trim_end_matches("_perf").replace('-', "_");
    if known_op(&op) {
        Ok(op)
    } else {
        Err(format!(
            "unknown collective {s:?} (one of {})",
            OPS.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = "\
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41 on   gpu-0001 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  42 on   gpu-0002 device  0 [0x18] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
gpu-0001:41:41 [0] NCCL INFO Launch mode Parallel
           8             2     float     sum      -1    20.31    0.00    0.00      0    19.94    0.00    0.00      0
   134217728      33554432     float     sum      -1   1432.1   93.72   93.72      0   1431.0   93.79   93.79      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 46.8775
#
";

    #[test]
    fn a_new_run_reads_whole() {
        let runs = parse(NEW, "all_reduce_perf.out");
        assert_eq!(runs.len(), 1);
        let r = &runs[0];
        assert_eq!(r.op.as_deref(), Some("all_reduce"));
        assert!(!r.partial, "{:?}", r.problems);
        assert_eq!(r.ranks.len(), 2);
        assert_eq!(r.ranks[1].host, "gpu-0002");
        assert_eq!(r.ranks[1].bus_id.as_deref(), Some("0x18"));
        assert_eq!(r.ranks[1].gpu.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(r.rows.len(), 2);
        assert_eq!(r.rows[1].size, 134_217_728);
        assert_eq!(r.rows[1].root, Some(-1));
        assert_eq!(r.rows[1].best().unwrap().busbw, 93.72);
        assert_eq!(r.rows[1].in_place.unwrap().time_us, 1431.0);
        assert_eq!(r.avg_busbw, Some(46.8775));
        assert_eq!(r.out_of_bounds, Some(0));
    }

    #[test]
    fn an_old_layout_and_prefixes_read_the_same() {
        let text = "\
[1,0]<stdout>:#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
[1,0]<stdout>:           8             2     float     sum    30.11    0.00    0.00  0e+00    29.80    0.00    0.00  0e+00
[1,0]<stdout>:     1048576        262144     float     sum    120.5    8.70   17.41  2e-07    119.9    8.75   17.49  2e-07
[1,0]<stdout>:# Avg bus bandwidth    : 8.7
";
        let r = &parse(text, "run.txt")[0];
        assert!(!r.partial, "{:?}", r.problems);
        assert_eq!(r.op, None);
        assert_eq!(r.rows.len(), 2);
        assert_eq!(r.rows[1].root, None);
        assert_eq!(r.rows[1].redop.as_deref(), Some("sum"));
        assert_eq!(r.rows[1].best().unwrap().busbw, 17.41);
        assert_eq!(
            r.rows[1].wrong(),
            2,
            "an error above zero counts in each measurement"
        );
    }

    #[test]
    fn alltoall_in_place_is_not_measured() {
        let text = "\
#  Collective test starting: alltoall_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 1024
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024            16     float    none      -1    40.10    0.03    0.02      0      N/A     N/A     N/A    N/A
# Avg bus bandwidth    : 0.02
";
        let r = &parse(text, "x")[0];
        assert_eq!(r.op.as_deref(), Some("alltoall"));
        assert!(r.rows[0].in_place.is_none());
        assert_eq!(r.rows[0].best().unwrap().time_us, 40.10);
    }

    #[test]
    fn truncated_and_garbled_runs_are_partial_not_wrong() {
        let cut = &NEW[..NEW.find("# Out of bounds").unwrap() - 40];
        let r = &parse(cut, "cut.txt")[0];
        assert!(r.partial);
        assert_eq!(r.rows.len(), 1, "the cut row is reported, not read");
        assert!(
            r.problems.iter().any(|p| p.contains("cut.txt:")),
            "{:?}",
            r.problems
        );
        assert!(r.problems.iter().any(|p| p.contains("ended early")));
        for junk in [
            "8 2 float sum -1 abc 1 1 0 1 1 1 0",
            "8 x",
            "99999999999999999999999 1",
        ] {
            let r = &parse(junk, "j")[0];
            assert!(r.rows.is_empty() && r.partial, "{junk}");
        }
    }

    #[test]
    fn several_runs_in_one_file() {
        let two =
            format!("./build/all_gather_perf -b 8 -e 128M\n{NEW}mpirun ./alltoall_perf\n{NEW}");
        let runs = parse(&two, "both.log");
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].op.as_deref(), Some("all_gather"));
        assert_eq!(runs[1].op.as_deref(), Some("alltoall"));
    }

    #[test]
    fn ops_from_names() {
        assert_eq!(
            op_from_name("logs/all_reduce_perf.out").as_deref(),
            Some("all_reduce")
        );
        assert_eq!(
            op_from_name("alltoall-64n.log").as_deref(),
            Some("alltoall")
        );
        assert_eq!(
            op_from_name("reduce-scatter.txt").as_deref(),
            Some("reduce_scatter")
        );
        assert_eq!(op_from_name("run7.txt"), None);
    }
}
