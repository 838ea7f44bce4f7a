//! What job launchers put before a program's lines: Open MPI's `--tag-output`
//! (`[1,0]<stdout>:`), srun's `--label` (`0: `), MPICH/Intel MPI's `-prepend-rank` (`[0] `).
//! Both readers take lines through [`strip`], so a run captured through any of them reads
//! the same as a plain one.

/// `line` without the launcher's prefixes (one or several, as nested launchers leave them).
pub fn strip(line: &str) -> &str {
    let mut rest = line.trim_end_matches(['\r', '\n']);
    loop {
        let next = open_mpi(rest)
            .or_else(|| srun_label(rest))
            .or_else(|| prepend_rank(rest));
        match next {
            Some(r) => rest = r,
            None => return rest,
        }
    }
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

/// srun --label: the task number, a colon and a space at the line's start (`12: text`).
fn srun_label(line: &str) -> Option<&str> {
    let start = line.len() - line.trim_start_matches(' ').len();
    let digits = line[start..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 6 {
        return None;
    }
    line[start + digits..].strip_prefix(": ")
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
    use super::strip;

    #[test]
    fn launcher_prefixes_go() {
        assert_eq!(strip("[1,0]<stdout>:#  Rank  0"), "#  Rank  0");
        assert_eq!(
            strip("[1,12]<stderr>:gpu-1:9:9 [0] NCCL INFO x"),
            "gpu-1:9:9 [0] NCCL INFO x"
        );
        assert_eq!(strip("0: # nThread 1"), "# nThread 1");
        assert_eq!(strip(" 12:         8   2"), "        8   2");
        assert_eq!(
            strip("[3] gpu-1:9:9 [3] NCCL INFO x\r\n"),
            "gpu-1:9:9 [3] NCCL INFO x"
        );
        assert_eq!(strip("0: [1,0]<stdout>:row"), "row");
    }

    #[test]
    fn lines_without_prefix_stay() {
        for line in [
            "gpu-1:9:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
            "#       size         count      type   redop    root     time",
            "     8388608       2097152     float     sum      -1   123.4",
            "[a,b]<stdout>:x",
            "[]x",
            "1234567: not a label",
            "",
        ] {
            assert_eq!(strip(line), line);
        }
    }
}
