//! `ibscope counters`: PMA port counters of every port (or one node / port), once or as
//! rates over an interval; `--reset` clears them.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::builder::ArgPredicate;
use clap::ValueEnum;
use ibscope_topo::counters::{self, PortDelta, Sample};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::{for_csv, for_terminal, quoted_for_terminal};
use ibscope_topo::export::{counters_csv, prometheus};
use ibscope_topo::hosts::Hosts;
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::resolve::{NameMatch, Resolver};
use ibscope_topo::{Fabric, FabricId, NodeId};

use crate::cli::{exit, Global};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CountersFormat {
    /// One line per port: data/packet counters and every non-zero error counter.
    Table,
    /// One JSON document per sample (with --interval: one per interval, one per line;
    /// with several fabrics: one per fabric, one per line).
    Json,
    /// A header line, then one line per port (per interval with --interval).
    Csv,
    /// Prometheus text exposition.
    Prom,
}

/// Read port counters (PortCounters and PortCountersExtended) through every port's PMA.
///
/// Ports: switch ports 1..N (port 0 with EnhancedPort0) and every CA port with a LID, or
/// only NODE (a LID, a GUID, a directed route, or any name ibscope prints: NodeDescription,
/// short name, node-name-map name, `NAME[PORT]`; see docs/cli.md) and PORT.
/// Counters are named as in the IBA specification (and perfquery).
///
/// UNITS: PortXmitData and PortRcvData are in BYTES everywhere (table, JSON, CSV, prom).
/// The wire counts 4-octet words; ibscope multiplies by 4 (perfquery prints the words).
/// Where PortCountersExtended is implemented its 64-bit data/packet counters are used for
/// the table, rates and prom output; where its PMA also has
/// IsAdditionalPortCountersExtendedSupported (ClassPortInfo CapabilityMask2) so are its
/// 64-bit error counters, which never stop at 65535 or 255 on a fast link.
///
/// SATURATION: a 32-, 16- or 8-bit counter at its maximum has stopped counting, and its
/// value is only a lower bound: the table shows "≥ 65535", JSON
/// {"value": 65535, "saturated": true} instead of a number (and the port's "saturated"
/// list names it).
///
/// --details also reads, per port, PortRcvErrorDetails (why PortRcvErrors counted) and
/// PortXmitDiscardDetails (why PortXmitDiscards did), and on ports at an extended speed
/// (FDR and up) PortExtendedSpeedsCounters: sync header, unknown block and per-lane error
/// detection and FEC counters, in the RS-FEC layout where the PMA and the port's
/// PortInfoExtended say RS-FEC is active (as perfquery -T picks it). Two to four more MADs
/// per port. JSON: "details" per port, by attribute; CSV: a column per counter; prom: a
/// family per breakdown counter. A PMA that does not implement one is passed over.
///
/// With --interval S: rates per second over each interval (--count N intervals; default
/// until interrupted). A counter that went backwards was reset: it shows as "reset", never
/// as a negative or huge rate.
///
/// Several fabrics (-C all, a list): one sweep of each, labelled: a `## fabric NAME`
/// heading per table, a leading `fabric` CSV column, one JSON document per fabric (one a
/// line), a `fabric` label on every Prometheus series (there always). NODE, --interval
/// and --reset take one fabric.
///
/// --reset clears the counters of NODE PORT (a CA's LID names its port), or with --all
/// every port of NODE, or of the whole fabric without NODE. It is the only command that
/// writes to the fabric (a PortCounters Set, and a PortCountersExtended Set where
/// implemented).
///
/// Examples:
///   ibscope counters
///   ibscope counters sw-leaf-1 17 --interval 1 --count 10
///   ibscope counters 0x0002c903000e0b72 --format json
///   ibscope counters --format prom > counters.prom
///   ibscope counters sw-leaf-1 17 --details
///   ibscope counters 12 1 --reset
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A LID, a GUID (node or port, 0x-hex), a directed route (0,1,3) or a name, as
    /// ibscope prints it (`leaf-r4-001`, `gpu-0001 mlx5_1`, `NAME[PORT]`).
    pub node: Option<String>,
    /// A port number of NODE. (Not `port`: that id belongs to the global -P/--port.)
    #[arg(value_name = "PORT")]
    pub port_number: Option<u8>,
    #[arg(
        long,
        value_enum,
        default_value = "table",
        default_value_if("json", ArgPredicate::IsPresent, Some("json"))
    )]
    pub format: CountersFormat,
    /// JSON output: --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Seconds between samples: print rates instead of totals.
    #[arg(long, value_name = "S")]
    pub interval: Option<f64>,
    /// Number of intervals (with --interval).
    #[arg(long, value_name = "N", requires = "interval")]
    pub count: Option<u64>,
    /// With --interval: append each LinkDowned and LinkErrorRecovery rise to this journal,
    /// as `serve --journal` does (`ibscope events`, `check --journal` read it).
    #[arg(long, value_name = "FILE", requires = "interval", value_hint = clap::ValueHint::AnyPath)]
    pub journal: Option<std::path::PathBuf>,
    /// Clear the counters of NODE PORT (see --all).
    #[arg(long)]
    pub reset: bool,
    /// With --reset: every port of NODE, or of the fabric when no NODE is given.
    #[arg(long, requires = "reset")]
    pub all: bool,
    /// Also read PortRcvErrorDetails, PortXmitDiscardDetails and (at FDR and up)
    /// PortExtendedSpeedsCounters of every port.
    #[arg(long, conflicts_with_all = ["interval", "reset"])]
    pub details: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
}

/// The node and port NODE and PORT name (any name the resolver takes; a port named twice
/// must agree).
fn selected(
    fabric: &Fabric,
    names: Option<&NameMap>,
    a: &Args,
) -> Result<(Option<NodeId>, Option<u8>)> {
    let Some(text) = &a.node else {
        if a.port_number.is_some() {
            bail!("PORT needs a NODE");
        }
        return Ok((None, None));
    };
    let resolver = Resolver::new(fabric, names);
    let target = resolver.resolve(text, NameMatch::Exact)?;
    let port = match a.port_number {
        Some(p) => Some(resolver.port(target.node(), p)?.port),
        None => target.named_port(fabric),
    };
    Ok((Some(target.node()), port))
}

/// Why there is nothing to read: the port NODE PORT named has no LID, or no port has one.
fn no_targets(
    fabric: &Fabric,
    names: Option<&NameMap>,
    only: Option<NodeId>,
    port: Option<u8>,
) -> String {
    match (only, port) {
        (Some(node), Some(p)) => format!(
            "port {p} of {} has no LID to read its counters by (a CA port gets one when its \
             link is up and the SM assigns it)",
            quoted_for_terminal(display_name(fabric.node(node), names))
        ),
        _ => "no port with a LID to read (is an SM running?)".to_string(),
    }
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if let Some(s) = a.interval {
        if !(s.is_finite() && s > 0.0) {
            bail!("--interval must be a positive number of seconds");
        }
    }
    let names = crate::fabric::names(g)?;
    if crate::fabric_set::is_multi(g.ca.as_deref()) {
        if a.reset || a.interval.is_some() || a.node.is_some() {
            bail!(
                "NODE, --reset and --interval work on one fabric at a time: pick one with -C \
                 (a CA, CA:PORT or a [[fabric]] name)"
            );
        }
        return run_each(g, a, names.as_ref());
    }
    let mut engine = crate::fabric::open_engine(g)?;
    let fabric_id = crate::fabric::id_of(g, &engine);
    let fabric = crate::fabric::discover_live(&mut engine, DiscoverOptions::default())?;
    let (only, port) = selected(&fabric, names.as_ref(), a)?;
    if a.reset {
        if !a.all && port.is_none() {
            bail!("--reset clears one port: give NODE PORT, or --all for every port of NODE (or of the fabric without NODE)");
        }
        let targets = counters::targets(&fabric, only, if a.all { None } else { port });
        if targets.is_empty() {
            bail!("no port with a LID to reset there");
        }
        let results = counters::reset(&mut engine, &fabric, &targets, names.as_ref());
        engine.ensure_connected()?;
        let mut failed = 0;
        for r in &results {
            if r.errors.is_empty() {
                eprintln!("reset {}", r.at.report_text());
            } else {
                failed += 1;
                for e in &r.errors {
                    eprintln!("error: {}: {}", r.at.report_text(), for_terminal(e));
                }
            }
        }
        eprintln!(
            "{} of {} ports reset",
            results.len() - failed,
            results.len()
        );
        return Ok(ExitCode::from(crate::output::verdict(if failed == 0 {
            exit::OK
        } else {
            exit::FINDINGS
        })));
    }

    let targets = counters::targets(&fabric, only, port);
    if targets.is_empty() {
        bail!(no_targets(&fabric, names.as_ref(), only, port));
    }
    // JSON names each HCA port's host and rail.
    let hosts = Hosts::group(&fabric, names.as_ref());
    let mut out = std::io::stdout().lock();
    let mut any_errors = false;
    let options = sweep_options(a.details, engine.local().is_simulator());
    let mut sample = counters::sweep_with(&mut engine, &fabric, &targets, names.as_ref(), options);
    hosts.annotate_sample(&mut sample);
    let mut sampled_at = Instant::now();
    engine.ensure_connected()?;
    report_errors(&sample, &mut any_errors);
    match a.interval {
        None => print_sample(&mut out, a.format, &sample, &fabric_id, a.details)?,
        Some(secs) => {
            let interval = Duration::from_secs_f64(secs);
            let mut done = 0u64;
            let mut header = true;
            while a.count.map_or(true, |c| done < c) {
                let next = sampled_at + interval;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                let mut cur = counters::sweep(&mut engine, &fabric, &targets, names.as_ref());
                let now = Instant::now();
                hosts.annotate_sample(&mut cur);
                engine.ensure_connected()?;
                report_errors(&cur, &mut any_errors);
                if let Some(path) = &a.journal {
                    journal_rises(path, &sample, &cur, &fabric_id)?;
                }
                let deltas = counters::diff(&sample, &cur, now - sampled_at);
                print_deltas(&mut out, a.format, &cur, &deltas, header, &fabric_id)?;
                out.flush()?;
                header = false;
                sample = cur;
                sampled_at = now;
                done += 1;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::from(if any_errors {
        exit::FINDINGS
    } else {
        exit::OK
    }))
}

/// Append the LinkDowned and LinkErrorRecovery rises from `before` to `after` to the
/// journal at `path`.
fn journal_rises(
    path: &std::path::Path,
    before: &counters::Sample,
    after: &counters::Sample,
    fabric: &FabricId,
) -> Result<()> {
    let mut events =
        ibscope_topo::journal::counter_changes(before, after, std::time::SystemTime::now());
    for e in &mut events {
        e.fabric = Some(fabric.clone());
    }
    ibscope_topo::journal::JournalFile::new(path.to_path_buf())
        .append(&events)
        .with_context(|| format!("cannot write the journal {}", path.display()))
}

/// `-C all` (or a list): one sweep of every fabric, each labelled. Table: a heading per
/// fabric; CSV: a leading fabric column; JSON: one document per fabric, one a line; prom:
/// one page.
fn run_each(
    g: &Global,
    a: &Args,
    names: Option<&ibscope_topo::namemap::NameMap>,
) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let mut samples: Vec<(String, Sample)> = Vec::new();
    let mut first = true;
    let ran = crate::fabric_set::each(g, |opened, _| {
        let fabric = crate::fabric::discover_live(&mut opened.engine, DiscoverOptions::default())?;
        let targets = counters::targets(&fabric, None, None);
        let options = sweep_options(a.details, opened.engine.local().is_simulator());
        let sample = counters::sweep_with(&mut opened.engine, &fabric, &targets, names, options);
        opened.engine.ensure_connected()?;
        let mut any_errors = false;
        for p in &sample.ports {
            for e in &p.errors {
                any_errors = true;
                crate::output::verdict(exit::FINDINGS);
                eprintln!(
                    "warning: {}: {}: {}",
                    for_terminal(&opened.id.name),
                    p.at.report_text(),
                    for_terminal(e)
                );
            }
        }
        let name = &opened.id.name;
        match a.format {
            CountersFormat::Prom => samples.push((name.clone(), sample)),
            // One document per line, as for --interval: a stream any JSON-lines reader
            // (and jq) takes apart.
            CountersFormat::Json => write_labelled_json(&mut out, &sample, &opened.id, false)?,
            CountersFormat::Table => {
                writeln!(
                    out,
                    "## fabric {}: {}",
                    for_terminal(name),
                    opened.id.identity_text()
                )?;
                out.write_all(counters::text::sample_table(&sample).as_bytes())?;
            }
            CountersFormat::Csv => {
                if first {
                    writeln!(out, "fabric,{}", counters_csv::header(a.details))?;
                }
                counters_csv::write_rows(&mut out, &sample, Some(name), a.details)?;
            }
        }
        first = false;
        Ok(if any_errors { exit::FINDINGS } else { exit::OK })
    })?;
    if a.format == CountersFormat::Prom {
        let pages: Vec<(&str, &Sample)> = samples.iter().map(|(n, s)| (n.as_str(), s)).collect();
        out.write_all(prometheus::counters_page(&pages).as_bytes())?;
    }
    out.flush()?;
    Ok(ran.exit_code())
}

/// Write a sample's JSON document and a newline, pretty or on one line: `schema_version`
/// and its fabric's name first, then the sample's fields (what
/// [`crate::output::json_document`] makes of it). Written straight from the sample: at 100k
/// HCAs a `serde_json::Value` of it takes gigabytes and seconds.
fn write_labelled_json(
    out: &mut impl Write,
    sample: &Sample,
    fabric: &FabricId,
    pretty: bool,
) -> Result<()> {
    // The counters' own writer: what serde_json writes, byte for byte, in about half the
    // time at 100k HCAs. It buffers what it writes (stdout flushes at every newline).
    let head = [
        (
            "schema_version",
            serde_json::json!(ibscope_topo::model::SCHEMA_VERSION),
        ),
        ("fabric", serde_json::to_value(fabric)?),
    ];
    ibscope_topo::counters::json::write_sample(out, &head, sample, pretty)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// The detail attributes to read: none, or with --details all of them. ibsim implements
/// no PortExtendedSpeedsCounters: it hands such a request to the subnet manager attached at
/// that node, which does not survive it, so under the simulator it is not sent.
fn sweep_options(details: bool, simulator: bool) -> counters::SweepOptions {
    if !details {
        return counters::SweepOptions::default();
    }
    if simulator {
        eprintln!("note: PortExtendedSpeedsCounters not read: the simulator does not implement it");
    }
    counters::SweepOptions {
        details: counters::DetailReads::All {
            extended_speeds: !simulator,
        },
    }
}

/// The ports that could not be read, on stderr; any is a finding (recorded as the
/// command's verdict before the sample is printed).
fn report_errors(sample: &Sample, any: &mut bool) {
    for p in &sample.ports {
        for e in &p.errors {
            *any = true;
            crate::output::verdict(exit::FINDINGS);
            eprintln!("warning: {}: {}", p.at.report_text(), for_terminal(e));
        }
    }
}

fn print_sample(
    out: &mut impl Write,
    format: CountersFormat,
    sample: &Sample,
    fabric: &FabricId,
    details: bool,
) -> Result<()> {
    match format {
        CountersFormat::Json => write_labelled_json(out, sample, fabric, true)?,
        CountersFormat::Table => out.write_all(counters::text::sample_table(sample).as_bytes())?,
        CountersFormat::Csv => counters_csv::write(out, sample, details)?,
        CountersFormat::Prom => {
            out.write_all(prometheus::counters_page(&[(fabric.name.as_str(), sample)]).as_bytes())?
        }
    }
    Ok(())
}

fn print_deltas(
    out: &mut impl Write,
    format: CountersFormat,
    sample: &Sample,
    deltas: &[PortDelta],
    header: bool,
    fabric: &FabricId,
) -> Result<()> {
    match format {
        CountersFormat::Json => {
            let doc = serde_json::json!({
                "schema_version": ibscope_topo::model::SCHEMA_VERSION,
                "fabric": fabric,
                "time_ms": sample.time_ms,
                "duration_ms": sample.duration_ms,
                "mads_sent": sample.mads_sent,
                "data_unit": "bytes",
                "ports": deltas,
            });
            writeln!(out, "{}", serde_json::to_string(&doc)?)?;
        }
        CountersFormat::Prom => {
            out.write_all(prometheus::counters_page(&[(fabric.name.as_str(), sample)]).as_bytes())?
        }
        CountersFormat::Csv => {
            if header {
                writeln!(
                    out,
                    "time_ms,node,node_guid,lid,port,counter,delta,per_second,reset,saturated"
                )?;
            }
            for d in deltas {
                for c in &d.counters {
                    writeln!(
                        out,
                        "{},{},{:#018x},{},{},{},{},{},{},{}",
                        sample.time_ms,
                        for_csv(&d.at.node.name),
                        d.at.node.guid,
                        d.at.lid,
                        d.at.port,
                        c.name,
                        c.delta.map_or(String::new(), |v| v.to_string()),
                        c.per_second.map_or(String::new(), |v| format!("{v:.3}")),
                        c.reset,
                        c.saturated
                    )?;
                }
            }
        }
        CountersFormat::Table => out.write_all(counters::text::deltas_table(deltas).as_bytes())?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_topo::counters::PortSample;

    /// What the document was when built as a `serde_json::Value`: the reference the
    /// direct writer must match byte for byte.
    fn labelled_json_by_value(sample: &Sample, fabric: &FabricId, pretty: bool) -> String {
        let mut doc = serde_json::Map::new();
        doc.insert("fabric".into(), serde_json::to_value(fabric).unwrap());
        if let serde_json::Value::Object(rest) = serde_json::to_value(sample).unwrap() {
            doc.extend(rest);
        }
        let doc = crate::output::json_document(&doc).unwrap();
        if pretty {
            serde_json::to_string_pretty(&doc).unwrap() + "\n"
        } else {
            serde_json::to_string(&doc).unwrap() + "\n"
        }
    }

    #[test]
    fn json_is_written_as_the_value_document_was() {
        use ibscope_mad::attr::CounterName;
        use ibscope_topo::counters::{CounterSet, Details, Reading};
        use ibscope_topo::model::refs::{NodeRef, PortRef};
        use ibscope_topo::model::NodeKind;
        let at = |name: &str, kind, port| PortRef {
            node: NodeRef {
                guid: 0x0002_c903_0000_0001 + u64::from(port),
                kind,
                name: name.into(),
            },
            port,
            lid: 7,
            host: None,
            rail: None,
        };
        let saturated = CounterSet::from_readings(vec![
            Reading {
                name: CounterName::intern("SymbolErrorCounter"),
                value: 65535,
                saturated: true,
            },
            Reading {
                name: CounterName::intern("X"),
                value: 0,
                saturated: false,
            },
        ]);
        let mut details = Details::default();
        details.insert("PortRcvErrorDetails", CounterSet::from_pairs([("A", 1)]));
        let read = PortSample {
            capability_mask: Some(0x1300),
            capability_mask2: Some(2),
            counters: Some(saturated),
            extended: Some(CounterSet::default()),
            saturated: vec!["SymbolErrorCounter".into()],
            details,
            errors: vec!["PortCountersExtended: \"timeout\"\n".into()],
            ..PortSample::new(
                PortRef {
                    host: Some("gpu-1".into()),
                    rail: Some(3),
                    ..at("ca \"q\" \u{7}", NodeKind::Ca, 1)
                },
                Some(at("sw", NodeKind::Switch, 9)),
            )
        };
        let unread = PortSample::new(at("sw", NodeKind::Switch, 2), None);
        let sample = Sample {
            time_ms: 1,
            duration_ms: 2,
            mads_sent: 3,
            data_unit: "bytes".into(),
            ports: vec![read, unread],
        };
        let empty = Sample {
            ports: Vec::new(),
            ..sample.clone()
        };
        for s in [&sample, &empty] {
            for pretty in [true, false] {
                let mut out = Vec::new();
                let fabric = FabricId {
                    subnet_prefix: Some(0xfe80_0000_0000_0000),
                    ..FabricId::named("fab\"ric")
                };
                write_labelled_json(&mut out, s, &fabric, pretty).unwrap();
                let out = String::from_utf8(out).unwrap();
                assert_eq!(out, labelled_json_by_value(s, &fabric, pretty));
            }
        }
    }
}
