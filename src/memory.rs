//! How the process hands freed memory back to the kernel.
//!
//! A one-shot command (check, discover, counters without `--interval`, route ...) allocates
//! and frees in waves: a ledger per discovery round, a request and a reply per MAD, the
//! sample of a sweep. By default glibc returns the top of its heap to the kernel after each
//! wave and the next wave faults the same pages in again, zeroed. At 100,000 HCAs (fat
//! tree, medians of 5-6 alternating runs) keeping them took `check` 1.82 -> 1.66 s and
//! discovery 1.04 -> 0.98 s for 32-50 MiB more peak RSS. A one-shot command exits within
//! seconds, so it keeps what it freed for its next wave. Commands that run until stopped
//! (serve, tui, demo, sim, agent, counters --interval) give it back: there, the buffers of
//! a sweep (a page's text and its compressor, a sample) are mapped for it and unmapped
//! after it.

/// Set how this process hands freed memory back, for a command that ends on its own
/// (`one_shot`) or one that runs until stopped (glibc only; a no-op elsewhere). Returns
/// whether every setting took.
pub fn tune_for(one_shot: bool) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // One-shot: blocks under 32 MiB (glibc's largest mmap threshold on 64 bits) come
        // from the heap and are reused after a free; a free leaves up to 1 GiB unused at
        // the top of the heap; the heap grows 64 MiB at a time, fewer brk calls.
        // Running until stopped: blocks of 128 KiB and more mapped on their own, at
        // glibc's initial threshold, which otherwise rises to the largest block freed;
        // then a sweep's big buffers come from the heap, and serve's RSS wandered by a
        // tenth between sweeps (`bench/soak.sh`). Mapping them afresh costs serve's
        // render 15-20% more CPU (bench/README.md).
        let settings: &[(i32, i32)] = match one_shot {
            true => &[
                (libc::M_MMAP_THRESHOLD, 32 << 20),
                (libc::M_TRIM_THRESHOLD, 1 << 30),
                (libc::M_TOP_PAD, 64 << 20),
            ],
            false => &[(libc::M_MMAP_THRESHOLD, 128 << 10)],
        };
        settings
            .iter()
            // SAFETY: mallopt only changes allocator parameters; it is called before the
            // command allocates in earnest, and glibc serialises it with allocation.
            .all(|&(param, value)| unsafe { libc::mallopt(param, value) } == 1)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = one_shot;
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_every_setting() {
        assert!(super::tune_for(true));
        assert!(super::tune_for(false));
    }
}
