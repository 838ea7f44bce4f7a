//! Error thresholds, in ibqueryerrors' --threshold-file format.

use super::names::{known_counter, ERROR_COUNTERS};
use ibscope_mad::attr::CounterName;

use super::sample::PortSample;

/// Error thresholds: a counter above its threshold is a finding. The file format is
/// ibqueryerrors' --threshold-file: `Name=value` lines, `#` comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thresholds {
    /// (counter name, threshold): a value strictly above is reported.
    pub limits: Vec<(CounterName, u64)>,
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
}
