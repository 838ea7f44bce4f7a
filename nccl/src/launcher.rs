//! What job launchers and log shippers put before a program's lines: Open MPI's
//! `--tag-output` (`[1,0]<stdout>:`) and `--timestamp-output`, srun's `--label` (`0: `),
//! MPICH/Intel MPI's `-prepend-rank` (`[0] `), a cloud launcher's `(head, rank=0,
//! pid=3808) `, kubectl's and container runtimes' timestamps.
//!
//! No list can hold them all, so a file teaches its own: the text before each line's anchor
//! (NCCL's `HOST:PID:TID [DEV] NCCL INFO`, nccl-tests' `#` header lines and rows, a bare
//! `NCCL version`), its digits generalised (`[1,#]<stdout>:`), is a prefix of the file
//! wherever that shape repeats. Lines are stripped of the learned shapes and of the known forms
//! above (a lone line of a known launcher needs no company), as often as they nest.

use std::collections::HashMap;

/// A piece of a prefix's shape: text as printed, or a run of digits (a rank, a pid, a time).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Piece {
    Text(String),
    Digits,
}

/// The prefixes a file's lines carry, learned from the file.
#[derive(Debug, Clone, Default)]
pub struct Prefixes {
    /// Longest first, so that a nested prefix is taken whole.
    shapes: Vec<Vec<Piece>>,
}

/// How often a shape must come before an anchor to count as the file's.
const LEARNED_AFTER: usize = 2;

/// nccl-tests' header lines, after their `#`: what a prefix may stand before.
const HEADER_WORDS: [&str; 10] = [
    "nThread",
    "Using devices",
    "Rank",
    "size",
    "(B)",
    "Avg bus bandwidth",
    "Out of bounds values",
    "nccl-tests version",
    "Collective test",
    "out-of-place",
];

impl Prefixes {
    /// Learn the prefixes of `text`'s lines.
    pub fn learn(text: &str) -> Prefixes {
        let mut counts: HashMap<Vec<Piece>, usize> = HashMap::new();
        for raw in text.lines() {
            let line = raw.trim_start();
            let Some(at) = anchor(line) else { continue };
            let before = line[..at].trim_end();
            if before.is_empty() {
                continue;
            }
            *counts.entry(shape(before)).or_default() += 1;
        }
        let mut shapes: Vec<Vec<Piece>> = counts
            .into_iter()
            .filter(|(_, n)| *n >= LEARNED_AFTER)
            .map(|(s, _)| s)
            .collect();
        shapes.sort_by_key(|s| std::cmp::Reverse(shape_len(s)));
        Prefixes { shapes }
    }

    /// `line` without its prefixes (learned ones and the known launchers'), trimmed at
    /// its start and of its line ending.
    pub fn strip<'a>(&self, line: &'a str) -> &'a str {
        let mut rest = line.trim_end_matches(['\r', '\n']).trim_start();
        loop {
            let next = self
                .shapes
                .iter()
                .find_map(|s| matches(s, rest))
                .or_else(|| known(rest));
            match next {
                Some(r) if r.len() < rest.len() => rest = r.trim_start(),
                _ => return rest,
            }
        }
    }
}

/// Where a line's own text starts: before NCCL's `HOST:PID:TID [DEV] NCCL`, an nccl-tests
/// `#` header, or a bare `NCCL version`.
fn anchor(line: &str) -> Option<usize> {
    if let Some(l) = nccl_line(line) {
        return Some(l.origin);
    }
    if let Some(at) = line.find("NCCL version ") {
        return Some(at);
    }
    if let Some(hash) = line.find('#') {
        let after = line[hash + 1..].trim_start_matches('#').trim();
        if after.is_empty() || HEADER_WORDS.iter().any(|w| after.starts_with(w)) {
            return Some(hash);
        }
    }
    row_start(line)
}

/// The types nccl-tests names in its rows (common.cu's test_typenames, old and new).
const ROW_TYPES: [&str; 14] = [
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
    "f8e4m3", "f8e5m2", "char", "int",
];

/// Where an nccl-tests row starts in `line`: a size and a count, then a type nccl-tests
/// names, then at least seven more columns.
fn row_start(line: &str) -> Option<usize> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                words.push((s, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, &line[s..]));
    }
    let number = |w: &str| all_digits(w);
    (0..words.len().saturating_sub(10))
        .find(|&i| {
            number(words[i].1) && number(words[i + 1].1) && ROW_TYPES.contains(&words[i + 2].1)
        })
        .map(|i| words[i].0)
}

/// One line NCCL wrote, behind whatever prefix: `HOST:PID:TID [DEV] NCCL INFO message`
/// (a warning adds its source file after `[DEV]`: `[0] misc/socket.cc:397 NCCL WARN ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclLine<'a> {
    /// Where `HOST` starts: the text before it is a prefix.
    pub origin: usize,
    pub host: &'a str,
    pub pid: u32,
    pub warn: bool,
    pub message: &'a str,
}

/// NCCL's line in `line`, read backwards from its marker, so any prefix before it stays
/// outside.
pub fn nccl_line(line: &str) -> Option<NcclLine<'_>> {
    let (marker, warn) = marker(line)?;
    let head = &line[..marker];
    let open = head.rfind(" [")?;
    let (rest, tid) = head[..open].rsplit_once(':')?;
    let (rest, pid) = rest.rsplit_once(':')?;
    if !all_digits(tid) || !all_digits(pid) {
        return None;
    }
    let host_len = rest
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        .count();
    if host_len == 0 {
        return None;
    }
    let origin = rest.len() - host_len;
    Some(NcclLine {
        origin,
        host: &rest[origin..],
        pid: pid.parse().ok()?,
        warn,
        message: line[marker + MARKER_LEN..].trim(),
    })
}

/// ` NCCL INFO` and ` NCCL WARN` are this long.
const MARKER_LEN: usize = 10;

/// Where ` NCCL INFO` or ` NCCL WARN` stands, and whether a warning. NCCL's own prefix
/// ends in `[DEV]`, so right after the first `]` is tried before the line is searched.
fn marker(line: &str) -> Option<(usize, bool)> {
    let kind = |at: usize| match line.get(at..at + MARKER_LEN) {
        Some(" NCCL INFO") => Some((at, false)),
        Some(" NCCL WARN") => Some((at, true)),
        _ => None,
    };
    if let Some(found) = line.find(']').and_then(|close| kind(close + 1)) {
        return Some(found);
    }
    let at = line.find(" NCCL ")?;
    kind(at).or_else(|| {
        let rest = at + 1;
        line[rest..].find(" NCCL ").and_then(|a| kind(rest + a))
    })
}

/// A prefix's shape: its digit runs generalised.
fn shape(prefix: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut digits = false;
    for c in prefix.chars() {
        if c.is_ascii_digit() {
            if !digits {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Digits);
                digits = true;
            }
        } else {
            digits = false;
            text.push(c);
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    pieces
}

fn shape_len(s: &[Piece]) -> usize {
    s.iter()
        .map(|p| match p {
            Piece::Text(t) => t.len(),
            Piece::Digits => 1,
        })
        .sum()
}

/// `line` after `shape`, if it starts with it.
fn matches<'a>(shape: &[Piece], line: &'a str) -> Option<&'a str> {
    let mut rest = line;
    for piece in shape {
        match piece {
            Piece::Text(t) => rest = rest.strip_prefix(t.as_str())?,
            Piece::Digits => {
                let n = rest.bytes().take_while(u8::is_ascii_digit).count();
                if n == 0 {
                    return None;
                }
                rest = &rest[n..];
            }
        }
    }
    Some(rest)
}

/// The known launchers' prefixes, one of them.
fn known(line: &str) -> Option<&str> {
    open_mpi(line)
        .or_else(|| srun_label(line))
        .or_else(|| prepend_rank(line))
}

/// `[JOB,RANK]<stdout>:` or `<stderr>:` (`[1,0]<stdout>:text`).
fn open_mpi(line: &str) -> Option<&str> {
    let inner_end = line.strip_prefix('[')?.find(']')? + 1;
    let inside = &line[1..inner_end];
    let (job, rank) = inside.split_once(',')?;
    if !all_digits(job) || !all_digits(rank) {
        return None;
    }
    let rest = &line[inner_end + 1..];
    rest.strip_prefix("<stdout>:")
        .or_else(|| rest.strip_prefix("<stderr>:"))
}

/// srun --label: the task number and a colon at the line's start (`12: text`, or `0:` alone
/// on a line that was empty).
fn srun_label(line: &str) -> Option<&str> {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 6 {
        return None;
    }
    let rest = line[digits..].strip_prefix(':')?;
    (rest.is_empty() || rest.starts_with(' ')).then_some(rest)
}

/// `[RANK] ` at the line's start; not NCCL's own `host:pid:tid [dev]`, which has text before.
fn prepend_rank(line: &str) -> Option<&str> {
    let end = line.strip_prefix('[')?.find(']')? + 1;
    if !all_digits(&line[1..end]) {
        return None;
    }
    line[end + 1..].strip_prefix(' ')
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(line: &str) -> &str {
        Prefixes::default().strip(line)
    }

    #[test]
    fn known_launchers_go_without_learning() {
        assert_eq!(plain("[1,0]<stdout>:#  Rank  0"), "#  Rank  0");
        assert_eq!(
            plain("[1,12]<stderr>:gpu-1:9:9 [0] NCCL INFO x"),
            "gpu-1:9:9 [0] NCCL INFO x"
        );
        assert_eq!(plain("0: # nThread 1"), "# nThread 1");
        assert_eq!(plain(" 12:         8   2"), "8   2");
        assert_eq!(plain(" 0:"), "", "the label of an empty line");
        assert_eq!(
            plain("[3] gpu-1:9:9 [3] NCCL INFO x\r\n"),
            "gpu-1:9:9 [3] NCCL INFO x"
        );
        assert_eq!(plain("0: [1,0]<stdout>:row"), "row");
    }

    #[test]
    fn lines_without_prefix_stay() {
        for line in [
            "gpu-1:9:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
            "#       size         count      type   redop    root     time",
            "8388608       2097152     float     sum      -1   123.4",
            "[a,b]<stdout>:x",
            "[]x",
            "1234567: not a label",
            "12:30 is a time",
            "",
        ] {
            assert_eq!(plain(line), line);
        }
    }

    /// Prefixes as they stand in published captures and in the report, none of
    /// them in the known list: each is learned from the lines it repeats on.
    #[test]
    fn a_files_own_prefix_is_learned() {
        let text = "\
(head, rank=0, pid=3808) [1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8
(head, rank=0, pid=3808) [1,0]<stdout>:#  Rank  0 Group  0 Pid   3808 on ray-head device  0 [0x00] NVIDIA A10G
(head, rank=0, pid=3808) [1,0]<stdout>:           8             2     float     sum      -1    21.10    0.00    0.00      0
    Thu Jun 18 14:28:58 2020[1,0]<stdout>:tf2-horovod-6clzb:30:97 [0] NCCL INFO Bootstrap : Using [0]eth0
    Thu Jun 18 14:28:59 2020[1,5]<stdout>:tf2-horovod-4:241:330 [0] NCCL INFO NET/Plugin : No plugin found
    Thu Jun 18 14:28:59 2020[1,5]<stdout>:NCCL version 2.4.8+cuda10.1
2024-05-01T12:00:00.123456789Z stdout F gpu-1:9:9 [0] NCCL INFO Using network IB
2024-05-01T12:00:01.000000001Z stdout F # Avg bus bandwidth    : 20.5
";
        let p = Prefixes::learn(text);
        let stripped: Vec<&str> = text.lines().map(|l| p.strip(l)).collect();
        assert!(stripped[0].starts_with("# nThread"), "{stripped:?}");
        assert!(stripped[2].starts_with("8 "), "{stripped:?}");
        assert!(stripped[3].starts_with("tf2-horovod-6clzb:30:97 [0] NCCL INFO"));
        assert_eq!(stripped[5], "NCCL version 2.4.8+cuda10.1");
        assert!(stripped[6].starts_with("gpu-1:9:9"), "{stripped:?}");
        assert_eq!(stripped[7], "# Avg bus bandwidth    : 20.5");
        // Rows alone teach their prefix too.
        let rows = "\
job-17 | rank 0 |           8             2     float     sum      -1    21.10    0.00    0.00      0    20.90    0.00    0.00      0
job-17 | rank 0 |          16             4     float     sum      -1    21.30    0.00    0.00      0    21.00    0.00    0.00      0
";
        let p = Prefixes::learn(rows);
        assert!(rows
            .lines()
            .all(|l| p.strip(l).starts_with(|c: char| c.is_ascii_digit())));
        // A shape met once is not the file's: its line keeps it.
        let once = "rank-a| # nThread 1";
        assert_eq!(Prefixes::learn(once).strip(once), once);
    }

    #[test]
    fn nccls_own_prefix_is_read_backwards() {
        let line = "[1,0]<stdout>:gpu-1.cluster:77:78 [3] NCCL INFO x";
        let l = nccl_line(line).unwrap();
        assert_eq!(l.origin, "[1,0]<stdout>:".len());
        assert_eq!(
            (l.host, l.pid, l.warn, l.message),
            ("gpu-1.cluster", 77, false, "x")
        );
        let warn = "node1:30:97 [0] transport/net_ib.cc:117 NCCL WARN NET/IB : Unable";
        assert_eq!(
            nccl_line(warn).map(|l| (l.origin, l.warn)),
            Some((0, true)),
            "a WARN names its source file after [DEV]"
        );
        assert_eq!(nccl_line("x NCCL INFO y"), None);
        assert_eq!(nccl_line(":1:2 [0] NCCL INFO x"), None);
        let stamped = "[2026-04-28 14:14:48] gpu-1:9:10 [4] NCCL INFO Channel 00/0 : 1 -> 2";
        assert_eq!(nccl_line(stamped).unwrap().message, "Channel 00/0 : 1 -> 2");
    }
}
