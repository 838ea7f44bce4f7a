//! The RDMA counters the kernel shows for each port (`ports/N/counters/`, the InfiniBand
//! PortCounters; `ports/N/hw_counters/`, the driver's own) and each device
//! (`hw_counters/`), named as the driver names them, grouped as an operator reads them;
//! the RoCE netdev's `carrier_changes`; rates between two reads; and the findings of rates
//! above their limits.

use std::path::Path;
use std::time::Duration;

pub use ibscope_topo::counters::RateLimit;
use ibscope_topo::findings::{Finding, FindingKind};
use serde::Serialize;

use crate::ethtool::{is_lossless_stat, Ioctl, NetdevStats, SavedStats};
use crate::preflight::HostFinding;
use crate::sysfs::Sysfs;

pub use crate::model::{
    CounterFileValue, CounterGroup, CounterSource, RdmaCounter, RdmaCounterSet,
};

/// Known counter names (mlx5, bnxt_re and the InfiniBand core) and their groups; any other
/// name is [`CounterGroup::Other`].
const GROUPS: &[(&str, CounterGroup)] = {
    use CounterGroup::*;
    &[
        // InfiniBand PortCounters (drivers/infiniband/core/sysfs.c).
        ("symbol_error", LinkErrors),
        ("link_error_recovery", LinkErrors),
        ("link_downed", LinkErrors),
        ("port_rcv_errors", LinkErrors),
        ("port_rcv_remote_physical_errors", LinkErrors),
        ("port_rcv_switch_relay_errors", LinkErrors),
        ("port_xmit_discards", LinkErrors),
        ("port_xmit_constraint_errors", LinkErrors),
        ("port_rcv_constraint_errors", LinkErrors),
        ("local_link_integrity_errors", LinkErrors),
        ("excessive_buffer_overrun_errors", LinkErrors),
        ("VL15_dropped", LinkErrors),
        ("port_xmit_wait", Congestion),
        ("port_xmit_data", Data),
        ("port_rcv_data", Data),
        ("port_xmit_packets", Data),
        ("port_rcv_packets", Data),
        ("unicast_xmit_packets", Data),
        ("unicast_rcv_packets", Data),
        ("multicast_xmit_packets", Data),
        ("multicast_rcv_packets", Data),
        // mlx5 (drivers/infiniband/hw/mlx5/counters.c).
        ("out_of_sequence", Transport),
        ("packet_seq_err", Transport),
        ("local_ack_timeout_err", Transport),
        ("rnr_nak_retry_err", Transport),
        ("implied_nak_seq_err", Transport),
        ("duplicate_request", Transport),
        ("resp_local_length_error", Transport),
        ("resp_cqe_error", Transport),
        ("req_cqe_error", Transport),
        ("req_remote_invalid_request", Transport),
        ("req_remote_access_errors", Transport),
        ("resp_remote_access_errors", Transport),
        ("resp_cqe_flush_error", Transport),
        ("req_cqe_flush_error", Transport),
        ("rx_write_requests", Data),
        ("rx_read_requests", Data),
        ("rx_atomic_requests", Data),
        ("out_of_buffer", ReceiveResources),
        ("rx_icrc_encapsulated", Transport),
        ("np_cnp_sent", Congestion),
        ("np_ecn_marked_roce_packets", Congestion),
        ("rp_cnp_handled", Congestion),
        ("rp_cnp_ignored", Congestion),
        ("roce_adp_retrans", Congestion),
        ("roce_adp_retrans_to", Congestion),
        ("roce_slow_restart", Congestion),
        ("roce_slow_restart_cnps", Congestion),
        ("roce_slow_restart_trans", Congestion),
        // bnxt_re (drivers/infiniband/hw/bnxt_re/hw_counters.c).
        ("rx_pkts", Data),
        ("rx_bytes", Data),
        ("tx_pkts", Data),
        ("tx_bytes", Data),
        ("recoverable_errors", LinkErrors),
        ("rx_roce_errors", Transport),
        ("rx_roce_discards", ReceiveResources),
        ("to_retransmits", Transport),
        ("seq_err_naks_rcvd", Transport),
        ("max_retry_exceeded", Transport),
        ("rnr_naks_rcvd", Transport),
        ("missing_resp", Transport),
        ("dup_req", Transport),
        ("res_rx_no_perm", Transport),
        ("res_oos_drop_count", Transport),
        ("res_srq_load_err", ReceiveResources),
        ("res_rx_pci_err", Transport),
        ("rx_cnp_pkts", Congestion),
        ("tx_cnp_pkts", Congestion),
        ("rx_ecn_marked_pkts", Congestion),
        ("carrier_changes", LinkErrors),
    ]
};

pub fn group_of(name: &str) -> CounterGroup {
    GROUPS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(CounterGroup::Other, |(_, g)| *g)
}

/// Counters the kernel shows in 4-byte words.
const WORD_COUNTERS: [&str; 2] = ["port_xmit_data", "port_rcv_data"];

/// One counter file: a number, "N/A (no PMA)", or unknown with the reason.
pub fn parse_reading(text: Option<&str>) -> CounterFileValue {
    let Some(text) = text else {
        return CounterFileValue::Unknown("unreadable".into());
    };
    let t = text.trim();
    if t.starts_with("N/A") {
        return CounterFileValue::NotAvailable;
    }
    match t.parse::<u64>() {
        Ok(v) => CounterFileValue::Value(v),
        Err(_) => CounterFileValue::Unknown(format!(
            "not a number: {:?}",
            t.chars().take(40).collect::<String>()
        )),
    }
}

fn read_dir(dir: &Path, source: CounterSource) -> Vec<RdmaCounter> {
    Sysfs::list(dir)
        .into_iter()
        .map(|name| {
            let mut reading = parse_reading(Sysfs::read(&dir.join(&name)).as_deref());
            let mut unit = None;
            if source == CounterSource::Port && WORD_COUNTERS.contains(&name.as_str()) {
                if let CounterFileValue::Value(words) = reading {
                    reading = CounterFileValue::Value(words.saturating_mul(4));
                }
                unit = Some("bytes");
            }
            RdmaCounter {
                group: group_of(&name),
                name,
                source,
                reading,
                unit,
            }
        })
        .collect()
}

impl Sysfs {
    /// Every port's and device's counters, of `only` (a device name) or every device.
    pub fn counters(&self, only: Option<&str>) -> Vec<RdmaCounterSet> {
        let class = self.root().join("sys/class/infiniband");
        let stats = self.netdev_stats();
        let mut sets = Vec::new();
        for device in self.device_names() {
            if only.is_some_and(|o| o != device) {
                continue;
            }
            let dir = class.join(&device);
            for port in Sysfs::list(&dir.join("ports")) {
                let Ok(number) = port.parse::<u8>() else {
                    continue;
                };
                let port_dir = dir.join("ports").join(&port);
                let mut counters = read_dir(&port_dir.join("counters"), CounterSource::Port);
                counters.extend(read_dir(
                    &port_dir.join("hw_counters"),
                    CounterSource::PortHw,
                ));
                // Read as the GID table reads it; a name with a slash would leave
                // /sys/class/net.
                let netdev = Sysfs::read(&port_dir.join("gid_attrs/ndevs/0"))
                    .and_then(|t| crate::parse::version(&t))
                    .filter(|n| !n.contains('/'));
                if let Some(ifname) = &netdev {
                    counters.extend(lossless_stats(stats.as_ref(), ifname));
                    let file = self.root().join("sys/class/net").join(ifname);
                    if let Some(text) = Sysfs::read(&file.join("carrier_changes")) {
                        counters.push(RdmaCounter {
                            name: "carrier_changes".into(),
                            group: CounterGroup::LinkErrors,
                            source: CounterSource::Netdev,
                            reading: parse_reading(Some(&text)),
                            unit: None,
                        });
                    }
                }
                sets.push(RdmaCounterSet {
                    device: device.clone(),
                    port: Some(number),
                    netdev,
                    counters,
                });
            }
            let device_hw = read_dir(&dir.join("hw_counters"), CounterSource::DeviceHw);
            if !device_hw.is_empty() {
                sets.push(RdmaCounterSet {
                    device: device.clone(),
                    port: None,
                    netdev: None,
                    counters: device_hw,
                });
            }
        }
        sets
    }
}

/// A netdev's pause, discard and buffer statistics; none when they cannot be read (not an
/// Ethernet driver with statistics, or no saved copy under a fixture root).
fn lossless_stats(stats: &dyn NetdevStats, netdev: &str) -> Vec<RdmaCounter> {
    let Ok(all) = stats.stats(netdev) else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|(name, _)| is_lossless_stat(name))
        .map(|(name, value)| RdmaCounter {
            group: if name.contains("pause") {
                CounterGroup::Congestion
            } else {
                CounterGroup::ReceiveResources
            },
            name,
            source: CounterSource::Ethtool,
            reading: CounterFileValue::Value(value),
            unit: None,
        })
        .collect()
}

impl Sysfs {
    /// Netdev statistics: the ethtool ioctl on the real root, the saved `ethtool -S`
    /// texts in `ROOT/ethtool/` under a fixture root.
    pub fn netdev_stats(&self) -> Box<dyn NetdevStats> {
        if self.root() == Path::new("/") {
            Box::new(Ioctl)
        } else {
            Box::new(SavedStats {
                dir: self.root().join("ethtool"),
            })
        }
    }
}

/// How much a counter grew from `old` to `new`. A 32-bit counter that passed its maximum
/// starts again at 0 (wrapped: the distance through 2^32); any other counter that went
/// back was reset, and has no growth to tell.
pub fn growth(old: u64, new: u64) -> Option<u64> {
    const WRAP: u64 = 1 << 32;
    if new >= old {
        Some(new - old)
    } else if old < WRAP && old - new > WRAP / 2 {
        Some(WRAP - old + new)
    } else {
        None
    }
}

/// One counter's change between two reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterRate {
    pub device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u8>,
    pub name: String,
    pub group: CounterGroup,
    /// Growth over the interval (`None`: reset, or unknown in either read).
    pub delta: Option<u64>,
    /// `delta` per second.
    pub per_second: Option<f64>,
}

/// The change of every counter read twice, `interval` apart.
pub fn rates(
    before: &[RdmaCounterSet],
    after: &[RdmaCounterSet],
    interval: Duration,
) -> Vec<CounterRate> {
    let seconds = interval.as_secs_f64();
    let mut out = Vec::new();
    for set in after {
        let earlier = before
            .iter()
            .find(|b| b.device == set.device && b.port == set.port);
        for c in &set.counters {
            let old = earlier.and_then(|b| {
                b.counters
                    .iter()
                    .find(|o| o.name == c.name && o.source == c.source)
            });
            let delta = match (old.map(|o| &o.reading), &c.reading) {
                (Some(CounterFileValue::Value(o)), CounterFileValue::Value(n)) => {
                    // Bytes converted from words wrap at 2^32 words, not bytes.
                    if c.unit == Some("bytes") {
                        growth(o / 4, n / 4).map(|w| w * 4)
                    } else {
                        growth(*o, *n)
                    }
                }
                _ => None,
            };
            out.push(CounterRate {
                device: set.device.clone(),
                port: set.port,
                name: c.name.clone(),
                group: c.group,
                delta,
                per_second: delta.filter(|_| seconds > 0.0).map(|d| d as f64 / seconds),
            });
        }
    }
    out
}

/// A limit in words: "any increase", "120/h".
fn limit_text(limit: &RateLimit) -> String {
    if limit.count == 0 {
        return "any increase".into();
    }
    let unit = match limit.per.as_secs() {
        1 => "s".to_string(),
        60 => "min".to_string(),
        3600 => "h".to_string(),
        s => format!("{s} s"),
    };
    format!("{}/{unit}", limit.count)
}

/// Whether `delta` over `interval` is above the limit.
fn exceeded(limit: &RateLimit, delta: u64, interval: Duration) -> bool {
    if limit.count == 0 {
        return delta > 0;
    }
    let per_second = delta as f64 / interval.as_secs_f64().max(1e-9);
    per_second > limit.count as f64 / limit.per.as_secs_f64()
}

/// A `host-counter-rate` finding for each counter that grew faster than its limit.
pub fn rate_findings(
    rates: &[CounterRate],
    limits: &[RateLimit],
    interval: Duration,
) -> Vec<HostFinding> {
    let mut found = Vec::new();
    for r in rates {
        let Some(limit) = limits.iter().find(|l| l.counter == r.name) else {
            continue;
        };
        let Some(delta) = r.delta.filter(|d| exceeded(limit, *d, interval)) else {
            continue;
        };
        let port = r.port.map_or_else(String::new, |p| format!("port {p}'s "));
        let message = format!(
            "{port}{} rose by {delta} in {:.1} s ({:.2}/s), limit {}",
            r.name,
            interval.as_secs_f64(),
            r.per_second.unwrap_or(0.0),
            limit_text(limit)
        );
        found.push(HostFinding {
            device: Some(r.device.clone()),
            finding: Finding::new(FindingKind::HostCounterRate, message),
        });
    }
    found
}

/// Pausing the link partner for at least this share of an interval is pausing it without
/// a break.
pub const PFC_STORM_SHARE: f64 = 0.9;
/// ... over at least this long: shorter pauses are flow control doing its work.
pub const PFC_STORM_SECONDS: f64 = 2.0;

/// RoCE ports in a PFC storm between two reads: the NIC's own pause-storm detector fired
/// (mlx5's `tx_pause_storm_warning_events`, `tx_pause_storm_error_events` rose), or a
/// priority's transmitted pause time (`tx_prioN_pause_duration`, microseconds) covers at
/// least [`PFC_STORM_SHARE`] of an interval of at least [`PFC_STORM_SECONDS`]: the port
/// has kept its peer from sending on that priority, the stall spreading back through the
/// fabric (a receiver that cannot drain, or pauses looping).
pub fn pfc_storm_findings(rates: &[CounterRate], interval: Duration) -> Vec<HostFinding> {
    let seconds = interval.as_secs_f64();
    let mut found = Vec::new();
    for r in rates {
        let Some(delta) = r.delta.filter(|d| *d > 0) else {
            continue;
        };
        let port = r.port.map_or_else(String::new, |p| format!("port {p}'s "));
        let message = if r.name.contains("pause_storm") {
            format!(
                "{port}{} rose by {delta} in {seconds:.1} s: the NIC's pause-storm detector \
                 fired",
                r.name
            )
        } else if let Some(priority) = r
            .name
            .strip_prefix("tx_prio")
            .and_then(|rest| rest.strip_suffix("_pause_duration"))
        {
            let share = delta as f64 / (seconds * 1e6);
            if seconds < PFC_STORM_SECONDS || share < PFC_STORM_SHARE {
                continue;
            }
            format!(
                "{port}priority {priority} paused its link partner {:.0}% of the last \
                 {seconds:.1} s (tx_prio{priority}_pause_duration rose by {delta} us): a PFC \
                 storm, a receiver that cannot drain or pauses looping",
                share.min(1.0) * 100.0
            )
        } else {
            continue;
        };
        found.push(HostFinding {
            device: Some(r.device.clone()),
            finding: Finding::new(FindingKind::PfcStorm, message),
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_paused_without_a_break_is_a_pfc_storm() {
        let rate = |name: &str, delta: u64| CounterRate {
            device: "mlx5_0".into(),
            port: Some(1),
            name: name.into(),
            group: CounterGroup::Congestion,
            delta: Some(delta),
            per_second: None,
        };
        let five = Duration::from_secs(5);
        let found = pfc_storm_findings(
            &[
                rate("tx_prio3_pause_duration", 4_800_000),
                rate("tx_prio0_pause_duration", 1_000_000),
                rate("rx_prio3_pause_duration", 5_000_000),
                rate("tx_prio3_pause", 90_000),
                rate("tx_pause_storm_error_events", 1),
            ],
            five,
        );
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found[0]
            .finding
            .message
            .contains("priority 3 paused its link partner 96%"));
        assert!(found[1]
            .finding
            .message
            .contains("pause-storm detector fired"));
        assert!(found
            .iter()
            .all(|f| f.finding.kind == FindingKind::PfcStorm));
        // One second paused of one second read: too short to call a storm.
        let short = pfc_storm_findings(
            &[rate("tx_prio3_pause_duration", 1_000_000)],
            Duration::from_secs(1),
        );
        assert!(short.is_empty());
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// An mlx5 device with one RoCE port: PortCounters, hw_counters, a netdev.
    fn tree(root: &Path, symbol: u64, words: u64, link_downed: &str) {
        let port = "sys/class/infiniband/mlx5_0/ports/1";
        write(
            root,
            &format!("{port}/counters/symbol_error"),
            &format!("{symbol}\n"),
        );
        write(
            root,
            &format!("{port}/counters/port_xmit_data"),
            &format!("{words}\n"),
        );
        write(root, &format!("{port}/counters/link_downed"), link_downed);
        write(
            root,
            &format!("{port}/counters/VL15_dropped"),
            "N/A (no PMA)\n",
        );
        write(root, &format!("{port}/hw_counters/out_of_buffer"), "7\n");
        write(root, &format!("{port}/hw_counters/np_cnp_sent"), "12\n");
        write(root, &format!("{port}/gid_attrs/ndevs/0"), "ens1f0np0\n");
        write(root, "sys/class/net/ens1f0np0/carrier_changes", "4\n");
        write(
            root,
            "sys/class/infiniband/mlx5_0/hw_counters/lifespan",
            "10\n",
        );
    }

    fn value(sets: &[RdmaCounterSet], port: Option<u8>, name: &str) -> CounterFileValue {
        sets.iter()
            .find(|s| s.port == port)
            .and_then(|s| s.counters.iter().find(|c| c.name == name))
            .map(|c| c.reading.clone())
            .unwrap_or_else(|| panic!("{name} missing"))
    }

    #[test]
    fn counters_are_read_grouped_and_data_is_in_bytes() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path(), 3, 1000, "0\n");
        let sets = Sysfs::new(dir.path()).counters(None);
        assert_eq!(sets.len(), 2, "the port and the device");
        assert_eq!(
            value(&sets, Some(1), "port_xmit_data"),
            CounterFileValue::Value(4000)
        );
        assert_eq!(
            value(&sets, Some(1), "VL15_dropped"),
            CounterFileValue::NotAvailable
        );
        assert_eq!(
            value(&sets, Some(1), "carrier_changes"),
            CounterFileValue::Value(4)
        );
        assert_eq!(value(&sets, None, "lifespan"), CounterFileValue::Value(10));
        assert_eq!(sets[0].netdev.as_deref(), Some("ens1f0np0"));
        let cnp = sets[0]
            .counters
            .iter()
            .find(|c| c.name == "np_cnp_sent")
            .unwrap();
        assert_eq!(
            (cnp.group, cnp.source),
            (CounterGroup::Congestion, CounterSource::PortHw)
        );
        assert_eq!(group_of("out_of_buffer"), CounterGroup::ReceiveResources);
        assert_eq!(group_of("something_new"), CounterGroup::Other);
    }

    #[test]
    fn garbage_and_unreadable_files_are_unknown_never_a_number() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path(), 3, 1000, "\u{1b}[2Jgarbage\n");
        let port = dir
            .path()
            .join("sys/class/infiniband/mlx5_0/ports/1/counters");
        std::os::unix::fs::symlink("/nonexistent", port.join("port_rcv_data")).unwrap();
        let sets = Sysfs::new(dir.path()).counters(Some("mlx5_0"));
        assert!(matches!(
            value(&sets, Some(1), "link_downed"),
            CounterFileValue::Unknown(_)
        ));
        assert_eq!(
            value(&sets, Some(1), "port_rcv_data"),
            CounterFileValue::Unknown("unreadable".into())
        );
        assert!(Sysfs::new(dir.path()).counters(Some("mlx5_9")).is_empty());
    }

    #[test]
    fn growth_wraps_32_bit_counters_and_ignores_resets() {
        assert_eq!(growth(5, 9), Some(4));
        assert_eq!(growth(u64::from(u32::MAX) - 1, 3), Some(5));
        assert_eq!(growth(1000, 10), None, "reset");
        assert_eq!(
            growth(1 << 40, 5),
            None,
            "a 64-bit counter does not wrap at 2^32"
        );
    }

    #[test]
    fn rates_and_the_findings_of_their_limits() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path(), 3, 1000, "0\n");
        let before = Sysfs::new(dir.path()).counters(None);
        tree(dir.path(), 3 + 240, 1500, "1\n");
        let after = Sysfs::new(dir.path()).counters(None);
        let interval = Duration::from_secs(10);
        let r = rates(&before, &after, interval);
        let of = |n: &str| r.iter().find(|x| x.name == n).unwrap();
        assert_eq!(of("port_xmit_data").delta, Some(2000));
        assert_eq!(of("port_xmit_data").per_second, Some(200.0));
        assert_eq!(of("VL15_dropped").delta, None);
        let found = rate_findings(&r, &RateLimit::defaults(), interval);
        let names: Vec<&str> = found.iter().map(|f| f.finding.message.as_str()).collect();
        assert_eq!(found.len(), 2, "{names:?}");
        let has = |needles: &[&str]| names.iter().any(|n| needles.iter().all(|x| n.contains(x)));
        assert!(
            has(&["port 1's symbol_error rose by 240", "limit 120/h"]),
            "{names:?}"
        );
        assert!(
            has(&["link_downed rose by 1", "limit any increase"]),
            "{names:?}"
        );
        assert!(found
            .iter()
            .all(|f| f.finding.kind == FindingKind::HostCounterRate));
        // Below the limits: nothing.
        assert!(rate_findings(
            &rates(&before, &before, interval),
            &RateLimit::defaults(),
            interval
        )
        .is_empty());
    }
}
