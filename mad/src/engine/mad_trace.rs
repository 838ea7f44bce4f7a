//! A time series of the engine's window, for benchmarks and debugging: how many MADs were
//! in flight over time, where the window stood, and how deep the directed routes went.
//!
//! Off unless asked for: [`super::Engine::enable_trace`], or the environment variable
//! `IBSCOPE_MAD_TRACE=FILE` for an engine opened on a umad port (the trace is written to
//! FILE when the engine is dropped, see [`Trace::write_to`]).

use std::io::Write;
use std::time::{Duration, Instant};

/// The environment variable naming the file a umad engine writes its trace to.
pub const TRACE_ENV: &str = "IBSCOPE_MAD_TRACE";

/// Samples closer together than this are merged (the later one wins): a discovery turns
/// the loop hundreds of thousands of times.
const MIN_GAP: Duration = Duration::from_micros(50);

/// One moment of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceSample {
    /// Microseconds since the engine was opened.
    pub at_us: u64,
    pub in_flight: u32,
    pub window: u32,
    /// Requests of the batch not in flight: waiting for the window, for their
    /// destination's cap, or for a resend.
    pub queued: u32,
    /// MADs sent and received so far (the engine's totals).
    pub sent: u64,
    pub received: u64,
}

/// The samples, plus how many sends went along directed routes of each hop count.
#[derive(Debug, Clone)]
pub struct Trace {
    started: Instant,
    /// When the engine was opened, in microseconds since the Unix epoch.
    pub opened_unix_us: u64,
    pub samples: Vec<TraceSample>,
    /// Sends by directed-route hop count (index 0..=63); LID-routed sends are not counted.
    pub dr_hops: [u64; 64],
    /// Sends that were LID-routed (SMPs by LID and every GMP).
    pub lid_routed: u64,
    /// `key value ...` lines written as comments (the engine's totals).
    pub notes: Vec<String>,
}

impl Default for Trace {
    fn default() -> Self {
        Trace::new()
    }
}

impl Trace {
    pub fn new() -> Self {
        let opened_unix_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Trace {
            started: Instant::now(),
            opened_unix_us,
            samples: Vec::new(),
            dr_hops: [0; 64],
            lid_routed: 0,
            notes: Vec::new(),
        }
    }

    /// Note the state at `now` (taken when the engine has sent what it could and is
    /// about to wait for replies).
    pub fn record(
        &mut self,
        now: Instant,
        in_flight: usize,
        window: usize,
        queued: usize,
        sent: u64,
        received: u64,
    ) {
        let at_us = now.saturating_duration_since(self.started).as_micros() as u64;
        let sample = TraceSample {
            at_us,
            in_flight: in_flight as u32,
            window: window as u32,
            queued: queued as u32,
            sent,
            received,
        };
        match self.samples.last_mut() {
            Some(last) if at_us.saturating_sub(last.at_us) < MIN_GAP.as_micros() as u64 => {
                // Keep the first time of the bucket, the latest state.
                *last = TraceSample {
                    at_us: last.at_us,
                    ..sample
                };
            }
            _ => self.samples.push(sample),
        }
    }

    /// Count one send: along a directed route of `hops` hops, or LID-routed (`None`).
    pub fn count_send(&mut self, hops: Option<usize>) {
        match hops {
            Some(h) => self.dr_hops[h.min(63)] += 1,
            None => self.lid_routed += 1,
        }
    }

    /// The text form: `#` comment lines (opened_unix_us, dr_hops as `hops:count`,
    /// lid_routed), a header line, then one line per sample: `t_us in_flight window queued
    /// sent received`.
    pub fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "# ibscope MAD trace")?;
        writeln!(out, "# opened_unix_us {}", self.opened_unix_us)?;
        let hops: Vec<String> = self
            .dr_hops
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(h, n)| format!("{h}:{n}"))
            .collect();
        writeln!(out, "# dr_hops {}", hops.join(" "))?;
        writeln!(out, "# lid_routed {}", self.lid_routed)?;
        for note in &self.notes {
            writeln!(out, "# {note}")?;
        }
        writeln!(out, "t_us in_flight window queued sent received")?;
        for s in &self.samples {
            writeln!(
                out,
                "{} {} {} {} {} {}",
                s.at_us, s.in_flight, s.window, s.queued, s.sent, s.received
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_samples_merge_and_the_text_form_has_every_field() {
        let mut t = Trace::new();
        let t0 = t.started;
        t.record(t0, 1, 8, 0, 1, 0);
        t.record(t0 + Duration::from_micros(10), 5, 8, 2, 5, 0);
        t.record(t0 + Duration::from_micros(100), 3, 9, 0, 6, 3);
        assert_eq!(t.samples.len(), 2);
        assert_eq!(t.samples[0].at_us, 0);
        assert_eq!(t.samples[0].in_flight, 5, "the later state of the bucket");
        t.count_send(Some(3));
        t.count_send(Some(3));
        t.count_send(None);
        let mut text = Vec::new();
        t.write_to(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("# dr_hops 3:2\n"), "{text}");
        assert!(text.contains("# lid_routed 1\n"));
        assert!(text
            .ends_with("t_us in_flight window queued sent received\n0 5 8 2 5 0\n100 3 9 0 6 3\n"));
    }
}
