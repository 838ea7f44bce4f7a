//! Write a generated NCCL_DEBUG=INFO log (or, with `--perf OP`, nccl-tests output at a
//! constant busbw) of a rail-optimized job to stdout: the benchmark's input.
//!
//!   cargo run --release -p ibscope-nccl --example synthetic_log -- SERVERS GPUS CHANNELS [--perf OP BUSBW]

use std::io::Write;

use ibscope_nccl::synthetic::{self, Job};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number =
        |i: usize, default: u32| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let mut job = Job::new(number(0, 2) as usize, number(1, 8));
    job.channels = number(2, job.gpus);
    let text = match args.iter().position(|a| a == "--perf") {
        Some(i) => {
            let op = args.get(i + 1).map_or("all_reduce", String::as_str);
            let busbw: f64 = args
                .get(i + 2)
                .and_then(|b| b.parse().ok())
                .unwrap_or(100.0);
            let rows: Vec<(u64, f64)> = (3..=33).map(|p| (1u64 << p, busbw)).collect();
            synthetic::perf_text(&job, op, &rows)
        }
        None => synthetic::log_text(&job),
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
