//! The columns of an nccl-tests row and reading one row under them.
//!
//! A run's column header names its columns: `size count type [redop] [root]`, then for
//! the out-of-place and the in-place measurement `time` (or `cputime`), `algbw`, `busbw`,
//! `#wrong` or `error` where printed, and in newer versions per-iteration columns (`i_min`,
//! `i_max`, `i_p99`, `i_cv%`) and a timestamp after them. Each field is read where its name
//! stands; a run cut before its column header is read by its row's width, against the
//! layouts nccl-tests has printed.

use serde::Serialize;

/// One message size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Bytes per rank (nccl-tests' size column).
    pub size: u64,
    pub count: u64,
    #[serde(rename = "type")]
    pub dtype: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redop: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<i64>,
    pub out_of_place: Option<Measured>,
    pub in_place: Option<Measured>,
    /// Its line in the file.
    pub line: usize,
}

impl Row {
    /// The measurement verdicts judge: out-of-place where measured, else in-place.
    pub fn best(&self) -> Option<&Measured> {
        self.out_of_place.as_ref().or(self.in_place.as_ref())
    }
    /// Wrong values in either measurement (count, or 1 for an `error` above zero).
    pub fn wrong(&self) -> u64 {
        [&self.out_of_place, &self.in_place]
            .into_iter()
            .flatten()
            .filter_map(|m| m.wrong)
            .map(|w| if w > 0.0 { w.ceil() as u64 } else { 0 })
            .sum()
    }
}

/// Time and bandwidth of one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measured {
    pub time_us: f64,
    /// GB/s (10^9 bytes/s).
    pub algbw: f64,
    pub busbw: f64,
    /// `#wrong` (values wrong) or `error` (largest deviation), where printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrong: Option<f64>,
}

/// Where one measurement's fields stand in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fields {
    time: usize,
    algbw: usize,
    busbw: usize,
    wrong: Option<usize>,
}

/// The columns of a row, as a run's column header names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    redop: Option<usize>,
    root: Option<usize>,
    out_of_place: Fields,
    in_place: Option<Fields>,
    /// Columns a row has up to its last measured field.
    width: usize,
    /// Whether columns follow the measured ones (a timestamp): rows may be wider.
    trailing: bool,
}

impl Layout {
    /// From a column header line (`#  size  count  type  redop  root  time ...`).
    pub(crate) fn from_header(text: &str) -> Option<Layout> {
        let names: Vec<&str> = text
            .trim_start_matches('#')
            .split_whitespace()
            .map(|w| w.trim_start_matches('#'))
            .filter(|w| !w.is_empty())
            .collect();
        if names.first() != Some(&"size") {
            return None;
        }
        let is_time = |w: &&str| *w == "time" || *w == "cputime";
        let first = names.iter().position(is_time)?;
        let out_of_place = fields(&names, first)?;
        let second = names[first + 1..]
            .iter()
            .position(is_time)
            .map(|p| p + first + 1);
        let in_place = second.and_then(|s| fields(&names, s));
        let last = in_place.map_or_else(|| out_of_place.last(), |f| f.last());
        let before = &names[..first];
        let at = |name: &str| before.iter().position(|w| *w == name);
        Some(Layout {
            redop: at("redop"),
            root: at("root"),
            out_of_place,
            in_place,
            width: last + 1,
            trailing: names.len() > last + 1,
        })
    }

    /// The layouts nccl-tests printed before per-iteration columns, by a row's width.
    pub(crate) fn from_width(width: usize) -> Option<Layout> {
        let l = |has_redop: bool, has_root: bool, per_measure: usize| {
            let first = 3 + usize::from(has_redop) + usize::from(has_root);
            let f = |at: usize| Fields {
                time: at,
                algbw: at + 1,
                busbw: at + 2,
                wrong: (per_measure == 4).then_some(at + 3),
            };
            Layout {
                redop: has_redop.then_some(3),
                root: has_root.then_some(3 + usize::from(has_redop)),
                out_of_place: f(first),
                in_place: Some(f(first + per_measure)),
                width: first + 2 * per_measure,
                trailing: false,
            }
        };
        [
            l(true, true, 4),
            l(true, false, 4),
            l(false, false, 4),
            l(true, true, 3),
        ]
        .into_iter()
        .find(|l| l.width == width)
    }

    /// Whether a row of `columns` words fits.
    pub(crate) fn fits(&self, columns: usize) -> bool {
        columns == self.width || self.trailing && columns > self.width
    }

    /// One data row under this layout; `line` is the row's line number.
    pub(crate) fn row(&self, words: &[&str], line: usize) -> Result<Row, String> {
        let number = |i: usize, what: &str| -> Result<u64, String> {
            words[i]
                .parse()
                .map_err(|_| format!("{what} {:?} is not a number", words[i]))
        };
        let root = match self.root {
            Some(i) => Some(
                words[i]
                    .parse::<i64>()
                    .map_err(|_| format!("root {:?} is not a number", words[i]))?,
            ),
            None => None,
        };
        let out_of_place = measured(words, self.out_of_place)?;
        let in_place = match self.in_place {
            Some(f) => measured(words, f)?,
            None => None,
        };
        if out_of_place.is_none() && in_place.is_none() {
            return Err(format!(
                "neither measurement is a number: {:?}",
                words.join(" ")
            ));
        }
        Ok(Row {
            size: number(0, "size")?,
            count: number(1, "count")?,
            dtype: words[2].to_string(),
            redop: self.redop.map(|i| words[i].to_string()),
            root,
            out_of_place,
            in_place,
            line,
        })
    }
}

impl Fields {
    fn last(&self) -> usize {
        self.wrong.unwrap_or(self.busbw)
    }
}

/// `time algbw busbw [#wrong|error]` from `at` in a header's names.
fn fields(names: &[&str], at: usize) -> Option<Fields> {
    let name = |i: usize| names.get(i).copied();
    if name(at + 1) != Some("algbw") || name(at + 2) != Some("busbw") {
        return None;
    }
    Some(Fields {
        time: at,
        algbw: at + 1,
        busbw: at + 2,
        wrong: matches!(name(at + 3), Some("wrong" | "error")).then_some(at + 3),
    })
}

/// time, algbw, busbw[, wrong]; `N/A` for what the test does not measure.
fn measured(words: &[&str], f: Fields) -> Result<Option<Measured>, String> {
    let value = |w: &str| -> Result<Option<f64>, String> {
        if w == "N/A" {
            return Ok(None);
        }
        match w.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            _ => Err(format!("{w:?} is not a measurement")),
        }
    };
    let (Some(time_us), Some(algbw), Some(busbw)) = (
        value(words[f.time])?,
        value(words[f.algbw])?,
        value(words[f.busbw])?,
    ) else {
        return Ok(None);
    };
    let wrong = match f.wrong {
        Some(i) => value(words[i])?,
        None => None,
    };
    Ok(Some(Measured {
        time_us,
        algbw,
        busbw,
        wrong,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The column headers nccl-tests prints (src/util.cu), with the rows under them.
    #[test]
    fn per_iteration_columns_and_a_timestamp_are_read_by_name() {
        let header = "#       size         count      type   redop    root     time   algbw   busbw \
                      #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw #wrong    \
                      i_min    i_max    i_p99    i_cv%           timestamp";
        let l = Layout::from_header(header).unwrap();
        let row =
            "1048576  262144  float  sum  -1  30.10  34.84  65.32  0  29.0  31.2  30.9  1.2  \
                   29.80  35.19  65.97  0  29.1  30.5  30.2  0.9  2025-01-02 03:04:05";
        let words: Vec<&str> = row.split_whitespace().collect();
        assert!(l.fits(words.len()));
        let r = l.row(&words, 7).unwrap();
        assert_eq!(r.out_of_place.unwrap().busbw, 65.32);
        assert_eq!(r.in_place.unwrap().time_us, 29.80);
        assert_eq!(r.in_place.unwrap().wrong, Some(0.0));
        assert_eq!(r.line, 7);
        let cpu = Layout::from_header(
            "#  size  count  type  redop  root  cputime  algbw  busbw  #wrong  cputime  algbw  busbw  #wrong",
        )
        .unwrap();
        assert_eq!(cpu, Layout::from_width(13).unwrap());
    }
}
