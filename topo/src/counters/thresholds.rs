//! Error thresholds, in ibqueryerrors' --threshold-file format.

use super::names::{known_counter, ERROR_COUNTERS};
use ibscope_mad::attr::CounterName;

use super::sample::PortSample;
use std::time::Duration;

/// Error thresholds: a counter above its threshold is a finding. The file format is
/// ibqueryerrors' --threshold-file: `Name=value` lines, `#` comments. ibscope's own limits
/// share the file under prefixes ibqueryerrors passes over: `flap.downs`, `flap.window`
/// (seconds), `flap.link-downed-per-day` for link-flapping, `host.COUNTER=N/s|N/min|N/h` for `host --check --interval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thresholds {
    /// (counter name, threshold): a value strictly above is reported.
    pub limits: Vec<(CounterName, u64)>,
    /// When a link flaps.
    pub flap: FlapLimits,
    /// How fast a local RDMA counter may rise.
    pub host_rates: Vec<RateLimit>,
}

/// The `link-flapping` limits: `downs` times down or more within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlapLimits {
    pub downs: u32,
    pub window: Duration,
    /// LinkDowned may rise by this much within 24 hours; more is flapping.
    pub link_downed_per_day: u64,
}

impl Default for FlapLimits {
    /// Twice in ten minutes, or LinkDowned up by more than 10 in a day, as operators
    /// alert on them.
    fn default() -> Self {
        FlapLimits {
            downs: 2,
            window: Duration::from_secs(600),
            link_downed_per_day: 10,
        }
    }
}

/// A local counter's limit: more than `count` in `per` is a finding (`count` 0: any
/// increase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    pub counter: String,
    pub count: u64,
    pub per: Duration,
}

impl RateLimit {
    fn new(counter: &str, count: u64, seconds: u64) -> RateLimit {
        RateLimit {
            counter: counter.to_string(),
            count,
            per: Duration::from_secs(seconds),
        }
    }

    /// The limits used in practice: any increase of a downed link, an overrun or an
    /// integrity error or an RNR retry exhausted; symbol errors above 120 an hour; ACK
    /// timeouts above 1 a second; discards above 100 a second.
    pub fn defaults() -> Vec<RateLimit> {
        vec![
            RateLimit::new("link_downed", 0, 1),
            RateLimit::new("excessive_buffer_overrun_errors", 0, 1),
            RateLimit::new("local_link_integrity_errors", 0, 1),
            RateLimit::new("rnr_nak_retry_err", 0, 1),
            RateLimit::new("symbol_error", 120, 3600),
            RateLimit::new("local_ack_timeout_err", 1, 1),
            RateLimit::new("port_xmit_discards", 100, 1),
        ]
    }

    /// `N/s`, `N/min`, `N/h` or `N` (per second).
    fn parse(counter: &str, text: &str) -> Option<RateLimit> {
        let (count, per) = match text.split_once('/') {
            Some((n, unit)) => (n, unit.trim()),
            None => (text, "s"),
        };
        let seconds = match per {
            "s" => 1,
            "min" | "m" => 60,
            "h" => 3600,
            _ => return None,
        };
        Some(RateLimit::new(counter, count.trim().parse().ok()?, seconds))
    }
}

impl Default for Thresholds {
    /// Every error counter at 0 (any error is reported), as ibqueryerrors does;
    /// PortXmitWait (congestion, not an error) only when a file sets it.
    fn default() -> Self {
        Thresholds {
            limits: ERROR_COUNTERS
                .iter()
                .map(|n| (CounterName::intern(n), 0))
                .collect(),
            flap: FlapLimits::default(),
            host_rates: RateLimit::defaults(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct ThresholdError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl Thresholds {
    /// The defaults, overridden by the lines of `text` (`file` names it in errors).
    pub fn parse(text: &str, file: &str) -> Result<Thresholds, ThresholdError> {
        let mut t = Thresholds::default();
        for (i, raw) in text.lines().enumerate() {
            let err = |message: String| ThresholdError {
                file: file.to_string(),
                line: i + 1,
                message,
            };
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                return Err(err(format!("expected Name=value, got {line:?}")));
            };
            let (name, value) = (name.trim(), value.trim());
            if let Some(key) = name.strip_prefix("flap.") {
                let n: u64 = value
                    .parse()
                    .map_err(|_| err(format!("{value:?} is not a non-negative integer")))?;
                match key {
                    "downs" => t.flap.downs = u32::try_from(n).unwrap_or(u32::MAX).max(1),
                    "window" => t.flap.window = Duration::from_secs(n),
                    "link-downed-per-day" => t.flap.link_downed_per_day = n,
                    _ => {
                        return Err(err(format!(
                            "unknown limit {name:?} (flap.downs, flap.window, \
                             flap.link-downed-per-day)"
                        )))
                    }
                }
                continue;
            }
            if let Some(counter) = name.strip_prefix("host.") {
                let limit = RateLimit::parse(counter, value)
                    .ok_or_else(|| err(format!("{value:?} is not N/s, N/min or N/h")))?;
                t.host_rates.retain(|l| l.counter != counter);
                t.host_rates.push(limit);
                continue;
            }
            if !known_counter(name) {
                return Err(err(format!("unknown counter {name:?}")));
            }
            let value: u64 = value
                .parse()
                .map_err(|_| err(format!("{value:?} is not a non-negative integer")))?;
            match t.limits.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value,
                None => t.limits.push((CounterName::intern(name), value)),
            }
        }
        Ok(t)
    }

    pub fn get(&self, name: &str) -> Option<u64> {
        self.limits
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// (counter, value, threshold) of every counter of `port` above its threshold.
    pub fn exceeded(&self, port: &PortSample) -> Vec<(String, u64, u64)> {
        self.limits
            .iter()
            .filter_map(|(name, limit)| {
                let v = port.reading_of(*name)?.value;
                (v > *limit).then(|| (name.to_string(), v, *limit))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::sample::test_support::port_sample as sample;

    #[test]
    fn thresholds_file() {
        let t = Thresholds::parse(
            "# comment\nSymbolErrorCounter=10\n\n  PortXmitWait = 100 # congestion\n",
            "t.conf",
        )
        .unwrap();
        assert_eq!(t.get("SymbolErrorCounter"), Some(10));
        assert_eq!(t.get("PortXmitWait"), Some(100));
        assert_eq!(t.get("LinkDownedCounter"), Some(0));
        let p = sample(
            &[
                ("SymbolErrorCounter", 10),
                ("LinkDownedCounter", 1),
                ("PortXmitWait", 101),
            ],
            None,
            &[],
        );
        let names: Vec<String> = t.exceeded(&p).into_iter().map(|e| e.0).collect();
        assert_eq!(names, vec!["LinkDownedCounter", "PortXmitWait"]);
        let e = Thresholds::parse("SymbolErrorCounter=10\nBogus=1\n", "t.conf").unwrap_err();
        assert_eq!(e.to_string(), "t.conf:2: unknown counter \"Bogus\"");
        let e = Thresholds::parse("SymbolErrorCounter\n", "f").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(Thresholds::parse("SymbolErrorCounter=-1", "f").is_err());
    }

    #[test]
    fn ibscopes_own_limits_share_the_file() {
        let t = Thresholds::parse(
            "flap.downs=3\nflap.window=3600\nflap.link-downed-per-day=4\nhost.symbol_error=10/min\n\
             host.out_of_buffer=5\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            t.flap,
            FlapLimits {
                downs: 3,
                window: Duration::from_secs(3600),
                link_downed_per_day: 4,
            }
        );
        let of = |c: &str| t.host_rates.iter().find(|l| l.counter == c).cloned();
        assert_eq!(
            of("symbol_error"),
            Some(RateLimit::new("symbol_error", 10, 60))
        );
        assert_eq!(
            of("out_of_buffer"),
            Some(RateLimit::new("out_of_buffer", 5, 1))
        );
        assert_eq!(of("link_downed"), Some(RateLimit::new("link_downed", 0, 1)));
        assert!(Thresholds::parse("flap.often=1", "t").is_err());
        assert!(Thresholds::parse("host.symbol_error=fast", "t").is_err());
    }
}
