//! How a module's live values moved between two reads (`ibscope cables --interval`): its
//! temperature per minute, each lane's received and transmitted light in dB per minute and
//! bias per minute, and the lane flags the second read has and the first had not. On
//! SFF-8636 and CMIS modules the flags are latched and cleared by reading them, so the
//! second read's flags are those raised during the interval.

use ibscope_mad::cable::model::{LaneFlags, LaneMonitor};
use ibscope_mad::cable::Module;
use serde::Serialize;

/// The rates of one module between two reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuleRates {
    /// Seconds between the two reads.
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature_c_per_min: Option<f64>,
    /// One per lane the module monitors, lane 1 first.
    pub lanes: Vec<LaneRates>,
    /// Lane flags raised in the second read and not in the first: "lane 3 rx_los".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags_raised: Vec<String>,
}

/// One lane's rates. A light rate is absent when either read saw no light at all (a lane
/// that went dark, or lit up, has no rate in dB: its powers say so).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneRates {
    pub lane: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_power_db_per_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_power_db_per_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bias_ma_per_min: Option<f64>,
}

/// The change from `before` to `after` per minute, over `minutes`.
fn per_min(before: Option<f64>, after: Option<f64>, minutes: f64) -> Option<f64> {
    Some((after? - before?) / minutes)
}

/// The change in dB per minute of a power, when both reads saw light.
fn db_per_min(before: Option<f64>, after: Option<f64>, minutes: f64) -> Option<f64> {
    let (b, a) = (before.filter(|v| *v > 0.0)?, after.filter(|v| *v > 0.0)?);
    Some(10.0 * (a / b).log10() / minutes)
}

/// How `after` moved from `before` over `seconds`; `None` when they are not the same
/// module (another serial: it was swapped in between) or no time passed.
pub fn rates(before: &Module, after: &Module, seconds: f64) -> Option<ModuleRates> {
    if before.identity != after.identity || seconds.is_nan() || seconds <= 0.0 {
        return None;
    }
    let minutes = seconds / 60.0;
    let temperature = |m: &Module| m.diagnostics.as_ref().and_then(|d| d.temperature_c);
    let lanes_of = |m: &Module| -> Vec<LaneMonitor> {
        m.diagnostics
            .as_ref()
            .map(|d| d.lanes.clone())
            .unwrap_or_default()
    };
    let (was, now) = (lanes_of(before), lanes_of(after));
    let lanes = now
        .iter()
        .filter_map(|n| {
            let b = was.iter().find(|b| b.lane == n.lane)?;
            Some(LaneRates {
                lane: n.lane,
                rx_power_db_per_min: db_per_min(b.rx_power_mw, n.rx_power_mw, minutes),
                tx_power_db_per_min: db_per_min(b.tx_power_mw, n.tx_power_mw, minutes),
                bias_ma_per_min: per_min(b.bias_ma, n.bias_ma, minutes),
            })
        })
        .collect();
    Some(ModuleRates {
        seconds,
        temperature_c_per_min: per_min(temperature(before), temperature(after), minutes),
        lanes,
        flags_raised: raised(&before.flags.lanes, &after.flags.lanes),
    })
}

/// The lane flags `after` has and `before` had not.
fn raised(before: &[LaneFlags], after: &[LaneFlags]) -> Vec<String> {
    let mut out = Vec::new();
    for a in after {
        let was = before
            .iter()
            .find(|b| b.lane == a.lane)
            .map(LaneFlags::states);
        for (i, (name, on)) in a.states().into_iter().enumerate() {
            if on == Some(true) && was.map_or(true, |w| w[i].1 != Some(true)) {
                out.push(format!("lane {} {name}", a.lane));
            }
        }
    }
    out
}
