//! The contract every command keeps (docs/cli.md), checked on clap's command tree itself so
//! that a command is held to it the day it is added:
//! - every command of the tree is a row of [`CONTRACT`]: a valid run of it (offline on a
//!   saved fabric, on the simulator, or not here and why) and the schema of its JSON;
//! - every file it reads is an argument marked `ValueHint::FilePath` (a HOSTLIST argument
//!   reads `@FILE`; every command but `completions` and `man` reads `$IBSCOPE_CONFIG`), and
//!   each is handed each [`Class`] of bad input: exit 2, one line on stderr that names the
//!   input once, nothing on stdout, within 1 s and 100 MB;
//! - every valid run exits as its row says, into a closed pipe too, writes no escape
//!   sequence into a pipe (its debug log included), and its `--json` document matches its
//!   schema, every `fabric` member in the one shape.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::ValueHint;
use common::schema::assert_valid;
use common::*;

/// Where a valid run of a command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Without a fabric: a saved one (`--topology`), files, this machine's fixtures.
    Offline,
    /// On the contract's simulated fabric.
    Simulator,
    /// Not run here, and why (its own tests run it).
    Elsewhere(&'static str),
}

/// One command: a valid run's arguments after its name (`{ID}` is the valid sample of the
/// file argument ID, see [`kind_of`]), where it runs, the exit code it gives, the schema of
/// its `--json` document (`None`: it has no machine form, or says why in `At`), and the
/// environment it needs.
struct Row {
    command: &'static str,
    args: &'static [&'static str],
    at: At,
    code: i32,
    schema: Option<&'static str>,
    env: &'static [(&'static str, &'static str)],
}

const fn row(
    command: &'static str,
    args: &'static [&'static str],
    at: At,
    code: i32,
    schema: Option<&'static str>,
) -> Row {
    Row {
        command,
        args,
        at,
        code,
        schema,
        env: &[],
    }
}

const SIM_UP: &str = "starts a simulator that runs until `sim down` (tests/it/sim_lifecycle.rs)";
const SIM_RUNNING: &str = "drives a simulator `sim up` started (tests/it/sim_lifecycle.rs)";
/// Node descriptions of the contract's fabric.
const LEAF: &str = "MF0;leaf-r0-001:MQM9700/U1";
const SPINE: &str = "MF0;spine-0001:MQM8790/U1";
// `sa` tables exit 1 under the simulator: its SA answers one MAD of a table (no RMPP), a
// partial table.
const TOPO: &[&str] = &["--topology", "{topology}"];
/// The fixture tree `host` reads instead of this machine's /sys.
const HOST_FIXTURE: &[(&str, &str)] = &[("IBSCOPE_SYSFS_ROOT", "tests/data/sysfs/dgx-h100")];

/// Every command of the tree, in the order `ibscope --help` lists them.
const CONTRACT: &[Row] = &[
    row(
        "demo",
        &["--once"],
        At::Elsewhere("starts its own simulator (tests/it/demo.rs)"),
        1,
        Some("check"),
    ),
    row("check", TOPO, At::Offline, 0, Some("check")),
    row(
        "cables",
        &[],
        At::Elsewhere(
            "reads this host's modules, or a fabric's with --access-register (tests/it/cables.rs)",
        ),
        0,
        Some("cables"),
    ),
    row(
        "cables decode",
        &["{files}"],
        At::Offline,
        0,
        Some("cables"),
    ),
    row("counters", &[], At::Simulator, 0, Some("counters")),
    row(
        "events",
        &["--journal", "{journal}"],
        At::Offline,
        0,
        Some("events"),
    ),
    row("discover", TOPO, At::Offline, 0, Some("discover")),
    row("diff", &["{old}", "{new}"], At::Offline, 1, Some("diff")),
    Row {
        env: HOST_FIXTURE,
        ..row("host", &["--check"], At::Offline, 1, Some("host"))
    },
    row(
        "host compare",
        &["{files}"],
        At::Offline,
        0,
        Some("host-compare"),
    ),
    row("hosts", TOPO, At::Offline, 0, Some("hosts")),
    row("links", TOPO, At::Offline, 0, Some("links")),
    row("port", &["enable", LEAF, "1"], At::Simulator, 0, None),
    row("query", &["nodeinfo", "1"], At::Simulator, 0, Some("query")),
    row(
        "route dump",
        &["--topology", "{topology}", SPINE],
        At::Offline,
        0,
        Some("route-dump"),
    ),
    row(
        "route trace",
        &[
            "--topology",
            "{topology}",
            "gpu-0001 mlx5_0",
            "gpu-0004 mlx5_1",
        ],
        At::Offline,
        0,
        Some("route-trace"),
    ),
    row("route check", TOPO, At::Offline, 0, Some("route-check")),
    row(
        "route load",
        &["--topology", "{topology}", "--hosts", "@{hosts}"],
        At::Offline,
        0,
        Some("route-load"),
    ),
    row(
        "nccl tests",
        &["--topology", "{topology}", "{files}", "--log", "{log}"],
        At::Offline,
        1,
        Some("nccl-tests"),
    ),
    row(
        "nccl log",
        &["--topology", "{topology}", "{files}"],
        At::Offline,
        0,
        Some("nccl-log"),
    ),
    row("sa nodes", &[], At::Simulator, 1, Some("sa")),
    row("sa paths", &[], At::Simulator, 1, Some("sa")),
    row("sa links", &[], At::Simulator, 1, Some("sa")),
    row("sa ports", &[], At::Simulator, 1, Some("sa")),
    row(
        "serve",
        &[],
        At::Elsewhere("runs until stopped (tests/it/serve.rs)"),
        0,
        None,
    ),
    row("sim up", &["{file}"], At::Elsewhere(SIM_UP), 0, None),
    row("sim down", &[], At::Elsewhere(SIM_RUNNING), 0, None),
    row("sim restart", &[], At::Elsewhere(SIM_RUNNING), 0, None),
    row("sim exec", &["true"], At::Elsewhere(SIM_RUNNING), 0, None),
    row(
        "sim fault unlink",
        &["S0001", "1"],
        At::Elsewhere(SIM_RUNNING),
        0,
        None,
    ),
    row(
        "sim fault relink",
        &["S0001", "1"],
        At::Elsewhere(SIM_RUNNING),
        0,
        None,
    ),
    row(
        "sim fault loss",
        &["S0001", "1", "0"],
        At::Elsewhere(SIM_RUNNING),
        0,
        None,
    ),
    row(
        "sim fault set-counter",
        &["S0001", "1", "SymbolErrorCounter", "1"],
        At::Elsewhere(SIM_RUNNING),
        0,
        None,
    ),
    row(
        "sim fault raw",
        &["Dump"],
        At::Elsewhere(SIM_RUNNING),
        0,
        None,
    ),
    row("sim status", &[], At::Offline, 0, None),
    row(
        "sim gen fat-tree",
        &["--hosts", "8", "--radix", "8"],
        At::Offline,
        0,
        None,
    ),
    row("sim gen ring", &["--switches", "3"], At::Offline, 0, None),
    row("sim gen rails", &["--hosts", "4"], At::Offline, 0, None),
    row(
        "sim gen mesh",
        &["--x", "2", "--y", "2"],
        At::Offline,
        0,
        None,
    ),
    row(
        "sim responder",
        &["{topology}"],
        At::Elsewhere(
            "serves a fabric over stdin/stdout until its input ends (tests/it/cables.rs)",
        ),
        0,
        None,
    ),
    row(
        "tui",
        &[],
        At::Elsewhere("needs a terminal (tests/it/tui_e2e.rs)"),
        0,
        None,
    ),
    row("sm", &[], At::Simulator, 0, Some("sm")),
    row("config show", &[], At::Offline, 0, Some("config")),
    row("completions", &["bash"], At::Offline, 0, None),
    row("man", &[], At::Offline, 0, None),
    row(
        "agent",
        &[],
        At::Elsewhere("serves a port over stdin/stdout (tests/it/multifabric.rs)"),
        0,
        None,
    ),
];

/// More documents of a command than its row's: (command, arguments, exit code, schema).
const MORE_DOCUMENTS: &[(&str, &[&str], i32, &str)] = &[
    (
        "check",
        &["--topology", "{topology}", "--plan", "{plan}"],
        0,
        "check-plan",
    ),
    (
        "check",
        &["--topology", "{topology}", "--journal", "{journal}"],
        0,
        "check",
    ),
];

/// Commands that name files without reading them, and why.
const NAMES_ONLY: &[(&str, &str)] = &[(
    "config show",
    "prints the settings in force, the files among them as paths",
)];

/// What a file argument holds, for its valid sample and what its bad inputs must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Topology,
    /// Another topology: the same cluster with a server fewer.
    LaterTopology,
    NameMap,
    Thresholds,
    Plan,
    Journal,
    Firmware,
    WebConfig,
    HostDocuments,
    NcclTests,
    NcclLog,
    HostList,
    Config,
    /// A saved module dump (`cables decode`).
    ModuleDump,
}

/// The kind of each file argument, by "command id" where one id means different files in
/// different commands, else by id.
fn kind_of(command: &str, id: &str) -> Option<Kind> {
    Some(match (command, id) {
        ("host compare", "files") | ("nccl tests", "host_json") => Kind::HostDocuments,
        ("cables decode", "files") => Kind::ModuleDump,
        ("nccl tests", "files") => Kind::NcclTests,
        ("nccl log", "files") | ("nccl tests", "log") => Kind::NcclLog,
        ("route load", "file") => Kind::HostList,
        ("sim up", "file") => Kind::Topology,
        ("diff", "new") => Kind::LaterTopology,
        (_, "topology" | "old") => Kind::Topology,
        (_, "node_name_map") => Kind::NameMap,
        (_, "thresholds") => Kind::Thresholds,
        (_, "plan") => Kind::Plan,
        (_, "journal") => Kind::Journal,
        (_, "firmware") => Kind::Firmware,
        (_, "web_config") => Kind::WebConfig,
        (_, "hosts") => Kind::HostList,
        _ => return None,
    })
}

/// A bad input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Missing,
    Empty,
    Directory,
    DevZero,
    RandomBytes,
    CutInHalf,
    /// `-` with standard input an endless stream of NULs.
    StdinZero,
}

const CLASSES: [Class; 7] = [
    Class::Missing,
    Class::Empty,
    Class::Directory,
    Class::DevZero,
    Class::RandomBytes,
    Class::CutInHalf,
    Class::StdinZero,
];

/// What a bad input must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Exit 2, one line on stderr naming the input once, nothing on stdout.
    Refused,
    /// A settings file that sets nothing, or a format whose cut cannot be told from a
    /// shorter file (docs/cli.md): read as it is, or refused as above.
    Either,
}

fn expect(kind: Kind, class: Class) -> Expect {
    use Kind::*;
    let kind = match kind {
        LaterTopology => Topology,
        other => other,
    };
    match class {
        Class::Empty if matches!(kind, NameMap | Thresholds | WebConfig | Config) => Expect::Either,
        Class::CutInHalf
            if matches!(
                kind,
                NameMap
                    | Thresholds
                    | WebConfig
                    | Config
                    | Journal
                    | Firmware
                    | NcclTests
                    | NcclLog
                    | HostList
                    | ModuleDump
            ) =>
        {
            Expect::Either
        }
        _ => Expect::Refused,
    }
}

/// The valid sample of every kind, written once into a directory.
struct Samples {
    dir: tempfile::TempDir,
    files: BTreeMap<Kind, PathBuf>,
}

/// The saved fabric of the offline runs, and of the simulator as ibnetdiscover text: a
/// rail-optimised GPU cluster of 4 servers on 2 rails, up, with min-hop forwarding tables.
fn contract_fabric() -> (String, ibscope_topo::Fabric) {
    cluster(4)
}

/// `servers` servers on 2 rails, up, with min-hop forwarding tables.
fn cluster(servers: usize) -> (String, ibscope_topo::Fabric) {
    use ibscope_topo::gen;
    let text = gen::rails(&gen::RailsSpec::new(servers, 2, 8)).unwrap();
    let mut fabric = ibscope_topo::ibnd::parse(&text).unwrap();
    gen::bring_up(
        &mut fabric,
        ibscope_mad::attr::link::Rate::parse("4xHDR").unwrap(),
    );
    ibscope_topo::routing::compute_minhop_lfts(&mut fabric);
    (text, fabric)
}

impl Samples {
    fn write() -> Samples {
        let dir = temp_dir();
        let (text, fabric) = contract_fabric();
        let mut snapshot = Vec::new();
        ibscope_topo::export::json::write_to(&mut snapshot, &fabric).unwrap();
        let mut later = Vec::new();
        ibscope_topo::export::json::write_to(&mut later, &cluster(3).1).unwrap();
        let mut plan = Vec::new();
        ibscope_topo::plan::write_csv(&ibscope_topo::plan::from_fabric(&fabric, None), &mut plan)
            .unwrap();
        let leaf = fabric
            .nodes()
            .find(|(_, n)| n.description == LEAF)
            .map(|(_, n)| n.guid)
            .unwrap();
        let job = ibscope_nccl::synthetic::Job::new(4, 2);
        let rows: Vec<(u64, f64)> = (10..=30).map(|p| (1u64 << p, 20.0)).collect();
        let host_doc = |name: &str| {
            format!("{{\"schema_version\": 3, \"hostname\": \"{name}\", \"devices\": []}}\n")
        };
        let event = |time: u64, kind: &str| {
            format!(
                "{{\"time\":{time},\"at\":\"2026-01-0{}T00:00:00Z\",\"kind\":\"{kind}\",\
                 \"a\":{{\"node\":\"R0L001\",\"guid\":\"{}\",\"port\":1}},\"detail\":\"{kind} of R0L001 port 1\"}}\n",
                time % 9 + 1,
                ibscope_mad::codes::guid::text(leaf),
            )
        };
        let contents: Vec<(Kind, Vec<u8>)> = vec![
            (Kind::Topology, snapshot),
            (Kind::LaterTopology, later),
            (
                Kind::NameMap,
                format!("# names\n{} \"leaf-zero\"\n", ibscope_mad::codes::guid::text(leaf))
                    .into_bytes(),
            ),
            (
                Kind::Thresholds,
                b"# thresholds\nSymbolErrorCounter=10\nLinkErrorRecoveryCounter=5\n".to_vec(),
            ),
            (Kind::Plan, plan),
            (
                Kind::Journal,
                [event(1_700_000_000, "link-down"), event(1_700_000_060, "link-up")]
                    .concat()
                    .into_bytes(),
            ),
            (Kind::Firmware, b"# firmware\nMT4129=28.40.1000\n".to_vec()),
            (Kind::WebConfig, b"basic_auth_users:\n  admin: '$2y$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234'\n".to_vec()),
            (
                Kind::HostDocuments,
                // Of unequal length, so that a cut in half falls inside a document: one cut
                // at a document's end is a shorter set, not a cut one.
                [
                    host_doc("gpu-0001"),
                    host_doc("gpu-0002").replace("{", "{\"kernel\": \"6.8.0\", "),
                ]
                .concat()
                .into_bytes(),
            ),
            (
                Kind::NcclTests,
                ibscope_nccl::synthetic::perf_text(&job, "all_reduce", &rows).into_bytes(),
            ),
            (
                Kind::NcclLog,
                ibscope_nccl::synthetic::log_text(&job).into_bytes(),
            ),
            (
                Kind::HostList,
                b"# the job\ngpu-0001\ngpu-0002\ngpu-0003\ngpu-0004\n".to_vec(),
            ),
            (
                Kind::Config,
                b"# settings\ntimeout-ms = 300\nretries = 2\n".to_vec(),
            ),
            (
                Kind::ModuleDump,
                std::fs::read(
                    repo_root().join("tests/data/cables/sonic-sfputil-sff8472-finisar-ftlx8571d3bcl.txt"),
                )
                .unwrap(),
            ),
        ];
        let mut files = BTreeMap::new();
        for (kind, bytes) in contents {
            let path = dir.path().join(format!("{kind:?}").to_lowercase());
            std::fs::write(&path, bytes).unwrap();
            files.insert(kind, path);
        }
        std::fs::write(dir.path().join("fabric.topo"), text).unwrap();
        Samples { dir, files }
    }

    fn path(&self, kind: Kind) -> &Path {
        &self.files[&kind]
    }

    /// The path standing for `class` of `kind`, and the standard input it needs.
    fn bad(&self, kind: Kind, class: Class) -> (PathBuf, Stdio) {
        let dir = self.dir.path();
        let name = format!("{kind:?}-{class:?}").to_lowercase();
        let path = match class {
            Class::Missing => dir.join(name),
            Class::Empty => {
                let p = dir.join(name);
                std::fs::write(&p, b"").unwrap();
                p
            }
            Class::Directory => {
                let p = dir.join(name);
                std::fs::create_dir_all(&p).unwrap();
                p
            }
            Class::DevZero => PathBuf::from("/dev/zero"),
            Class::RandomBytes => {
                let p = dir.join(name);
                std::fs::write(&p, random_bytes(1 << 20)).unwrap();
                p
            }
            Class::CutInHalf => {
                let whole = std::fs::read(self.path(kind)).unwrap();
                let p = dir.join(name);
                std::fs::write(&p, &whole[..whole.len() / 2]).unwrap();
                p
            }
            Class::StdinZero => {
                let zero = std::fs::File::open("/dev/zero").unwrap();
                return (PathBuf::from("-"), Stdio::from(zero));
            }
        };
        (path, Stdio::null())
    }

    /// `args` with every `{ID}` replaced by the sample of `command`'s argument ID.
    fn fill(&self, command: &str, args: &[&str]) -> Vec<String> {
        args.iter()
            .map(|a| {
                let mut a = a.to_string();
                while let Some(start) = a.find('{') {
                    let end = a[start..].find('}').unwrap() + start;
                    let id = &a[start + 1..end];
                    let kind = kind_of(command, id)
                        .unwrap_or_else(|| panic!("{command}: no sample for {{{id}}}"));
                    let path = self.path(kind).display().to_string();
                    a.replace_range(start..=end, &path);
                }
                a
            })
            .collect()
    }
}

/// Bytes no format takes (a fixed xorshift stream, so a failure repeats).
fn random_bytes(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A command's run: its exit code (`None`: killed by a signal), output, time and peak RSS.
struct Bounded {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
    max_rss_kib: i64,
}

/// The bounds every bad input is refused within.
const TIME_LIMIT: Duration = Duration::from_secs(1);
const RSS_LIMIT_KIB: i64 = 100 * 1024;

/// Run `cmd` to its end (killed after 20 s: far past the bound, so a hang fails rather
/// than blocks), measuring its time and its peak RSS (from the kernel's rusage of it).
// The child is reaped by wait4 (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_bounded(mut cmd: Command) -> Bounded {
    let dir = temp_dir();
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .env_remove("LD_PRELOAD")
        .env_remove("IBSIM_SOCKNAME")
        .env_remove("IBSCOPE_LOG")
        .env("IBSCOPE_ETC", dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .current_dir(repo_root());
    // Its own process group, so that a kill reaches whatever it started.
    cmd.process_group(0);
    let started = Instant::now();
    let child = cmd.spawn().expect("ibscope starts");
    let pid = child.id() as libc::pid_t;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value; wait4 fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child; status and usage are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        if started.elapsed() > Duration::from_secs(20) {
            // SAFETY: signalling our child's process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = started.elapsed();
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Bounded {
        code,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        took,
        max_rss_kib: usage.ru_maxrss,
    }
}

/// The runnable commands of the tree ("route load"), each with its arguments as parsed:
/// globals of its parents included.
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(c: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        let runnable = !c.has_subcommands() || !c.is_subcommand_required_set();
        if runnable && !path.is_empty() {
            out.push((path.to_string(), c.clone()));
        }
        for s in c.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(s, format!("{path} {}", s.get_name()).trim(), out);
        }
    }
    let mut root = ibscope::app::command();
    root.build();
    let mut out = Vec::new();
    walk(&root, "", &mut out);
    out
}

/// The file arguments of a command: those marked as files it reads, and its hostlists
/// (`@FILE`).
fn inputs(cmd: &clap::Command) -> Vec<&clap::Arg> {
    cmd.get_arguments()
        .filter(|a| {
            a.get_value_hint() == ValueHint::FilePath
                || a.get_value_names()
                    .is_some_and(|v| v.iter().any(|n| n == "HOSTLIST"))
        })
        .collect()
}

fn is_hostlist(arg: &clap::Arg) -> bool {
    arg.get_value_names()
        .is_some_and(|v| v.iter().any(|n| n == "HOSTLIST"))
}

fn row_of(command: &str) -> &'static Row {
    CONTRACT
        .iter()
        .find(|r| r.command == command)
        .unwrap_or_else(|| panic!("`{command}` is not in the contract's table"))
}

/// The table names every command of the tree and nothing else; every file argument has a
/// sample; every command with a machine form has a schema and `--json`.
#[test]
fn every_command_is_in_the_contract() {
    let tree = commands();
    let named: Vec<&str> = tree.iter().map(|(p, _)| p.as_str()).collect();
    let rows: Vec<&str> = CONTRACT.iter().map(|r| r.command).collect();
    assert_eq!(named, rows, "the contract's table against the command tree");
    for (path, cmd) in &tree {
        for arg in inputs(cmd) {
            assert!(
                kind_of(path, arg.get_id().as_str()).is_some(),
                "{path}: the file argument {} has no sample in `kind_of`",
                arg.get_id()
            );
        }
        let json = cmd.get_arguments().any(|a| a.get_long() == Some("json"));
        let row = row_of(path);
        assert_eq!(
            json,
            row.schema.is_some(),
            "{path}: --json and a schema go together"
        );
        if let Some(schema) = row.schema {
            assert!(
                common::schema::schema_dir()
                    .join(format!("{schema}.schema.json"))
                    .exists(),
                "{path}: no docs/json/{schema}.schema.json"
            );
        }
    }
}

/// One bad input's run and what it must give; the failures it shows.
fn check_bad_input(
    what: &str,
    cmd: Command,
    shown: &str,
    expect: Expect,
    failures: &mut Vec<String>,
) {
    let run = run_bounded(cmd);
    let mut fail = |why: String| {
        failures.push(format!(
            "{what}: {why}\n    exit {:?}, {:?}, {} KiB\n    stderr: {}\n    stdout: {}",
            run.code,
            run.took,
            run.max_rss_kib,
            run.stderr.trim_end(),
            run.stdout.chars().take(200).collect::<String>()
        ))
    };
    if run.took > TIME_LIMIT {
        fail(format!("took {:?}", run.took));
    }
    if run.max_rss_kib > RSS_LIMIT_KIB {
        fail(format!("peak RSS {} KiB", run.max_rss_kib));
    }
    if run.stderr.contains("panicked") || run.code.is_none() {
        fail("panicked or was killed".into());
        return;
    }
    let refused = run.code == Some(2);
    if expect == Expect::Either && !refused {
        if !matches!(run.code, Some(0 | 1)) {
            fail("neither read nor refused".into());
        }
        return;
    }
    if !refused {
        fail("not refused (exit 2)".into());
        return;
    }
    let lines: Vec<&str> = run.stderr.lines().collect();
    if lines.len() != 1 {
        fail(format!("{} lines on stderr, not one", lines.len()));
        return;
    }
    if !lines[0].starts_with("ibscope: error: ") || lines[0][16..].contains("error: ") {
        fail("not one `ibscope: error: ` prefix".into());
    }
    if expect == Expect::Refused {
        if lines[0].matches(shown).count() != 1 {
            fail(format!("the line does not name {shown} once"));
        }
        if !run.stdout.is_empty() {
            fail("wrote to stdout before refusing".into());
        }
    }
}

/// How a path is named in messages.
fn shown(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "(standard input)".to_string()
    } else {
        path.display().to_string()
    }
}

/// Every file argument of every command, each bad input class: refused in one line,
/// within the bounds, before the fabric is touched.
#[test]
fn every_input_of_every_command_refuses_bad_input() {
    let samples = Samples::write();
    let mut failures = Vec::new();
    let mut cases = 0;
    for (path, cmd) in commands() {
        let row = row_of(&path);
        let base = samples.fill(&path, row.args);
        if NAMES_ONLY.iter().any(|(c, _)| *c == path) {
            continue;
        }
        for arg in inputs(&cmd) {
            let id = arg.get_id().as_str();
            let kind = kind_of(&path, id).unwrap();
            for class in CLASSES {
                let (bad, stdin) = samples.bad(kind, class);
                let value = if is_hostlist(arg) {
                    format!("@{}", bad.display())
                } else {
                    bad.display().to_string()
                };
                let args = with_input(row.args, &base, arg, &value);
                let mut c = Command::new(ibscope_bin());
                c.args(path.split(' ')).args(&args).stdin(stdin);
                for (k, v) in row.env {
                    c.env(k, v);
                }
                let what = format!("ibscope {path} {} ({kind:?}, {class:?})", args.join(" "));
                check_bad_input(&what, c, &shown(&bad), expect(kind, class), &mut failures);
                cases += 1;
            }
        }
    }
    assert!(cases > 100, "only {cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} bad inputs not refused as the contract says:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The row's arguments with `arg`'s value replaced by `value` (or added).
fn with_input(template: &[&str], base: &[String], arg: &clap::Arg, value: &str) -> Vec<String> {
    let id = arg.get_id().as_str();
    let mut args = base.to_vec();
    if arg.is_positional() {
        let placeholder = format!("{{{id}}}");
        match template.iter().position(|t| t.contains(&placeholder)) {
            Some(i) => args[i] = value.to_string(),
            None => args.push(value.to_string()),
        }
        return args;
    }
    let long = format!("--{}", arg.get_long().unwrap());
    match args.iter().position(|a| *a == long) {
        Some(i) => args[i + 1] = value.to_string(),
        None => args.extend([long, value.to_string()]),
    }
    args
}

/// Every command reads `$IBSCOPE_CONFIG` (but `completions` and `man`, which describe the
/// command line, not a setup): each bad input class of it is refused the same way.
#[test]
fn every_command_refuses_a_bad_config_file() {
    let samples = Samples::write();
    let mut failures = Vec::new();
    for (path, _) in commands() {
        if path == "completions" || path == "man" {
            continue;
        }
        let row = row_of(&path);
        let base = samples.fill(&path, row.args);
        for class in CLASSES.into_iter().filter(|c| *c != Class::StdinZero) {
            let (bad, _) = samples.bad(Kind::Config, class);
            let mut c = Command::new(ibscope_bin());
            c.args(path.split(' '))
                .args(&base)
                .env("IBSCOPE_CONFIG", &bad)
                .stdin(Stdio::null());
            for (k, v) in row.env {
                c.env(k, v);
            }
            let expect = match row.at {
                // A run that goes on once the file is read (a fabric that is not here).
                At::Offline => expect(Kind::Config, class),
                _ if expect(Kind::Config, class) == Expect::Either => continue,
                _ => Expect::Refused,
            };
            let what = format!(
                "IBSCOPE_CONFIG={} ibscope {path} ({class:?})",
                bad.display()
            );
            check_bad_input(&what, c, &shown(&bad), expect, &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "{} bad config files not refused as the contract says:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `ibscope COMMAND ARGS` (under `sim` when given) with `env`, in the repository, with
/// no settings of this machine's (an empty /etc, no config file, no name map).
fn valid_command(
    sim: Option<&Sim>,
    command: &str,
    args: &[String],
    env: &[(&str, &str)],
    nowhere: &Path,
) -> Command {
    let mut cmd = match sim {
        Some(s) => s.command(ibscope_bin()),
        None => Command::new(ibscope_bin()),
    };
    cmd.args(command.split(' '))
        .args(args)
        .current_dir(repo_root())
        .env("IBSCOPE_ETC", nowhere)
        .env("XDG_CONFIG_HOME", nowhere)
        .env_remove("IBSCOPE_CONFIG")
        .env_remove("IBSCOPE_NODE_NAME_MAP");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Run `cmd` with stdout a pipe whose reader is already gone: the exit code it gives.
fn closed_pipe_code(mut cmd: Command) -> Option<i32> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("ibscope starts");
    drop(child.stdout.take());
    child
        .wait_with_output()
        .expect("ibscope ends")
        .status
        .code()
}

/// Members named `fabric` that are not in the one shape (common.schema.json's fabric_id:
/// an object with its name), wherever they are in a document.
fn fabric_members(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                if k == "fabric" && !x["name"].is_string() {
                    out.push(format!("{p} = {x} is not a fabric_id"));
                }
                fabric_members(x, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                fabric_members(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Each run: its exit code as the row says, the same into a closed pipe, and its JSON
/// document valid against its schema (also into a closed pipe).
/// A valid run: command, arguments, exit code, schema of its JSON, environment.
struct ValidRun<'a> {
    command: &'a str,
    args: Vec<String>,
    code: i32,
    schema: Option<&'a str>,
    env: &'a [(&'a str, &'a str)],
}

fn check_valid_runs(sim: Option<&Sim>, at: At, samples: &Samples) {
    let mut runs: Vec<ValidRun> = CONTRACT
        .iter()
        .filter(|r| r.at == at)
        .map(|r| ValidRun {
            command: r.command,
            args: samples.fill(r.command, r.args),
            code: r.code,
            schema: r.schema,
            env: r.env,
        })
        .collect();
    if at == At::Offline {
        for (command, args, code, schema) in MORE_DOCUMENTS {
            runs.push(ValidRun {
                command,
                args: samples.fill(command, args),
                code: *code,
                schema: Some(schema),
                env: &[],
            });
        }
    }
    let mut failures = Vec::new();
    for ValidRun {
        command,
        args,
        code,
        schema,
        env,
    } in runs
    {
        let mut variants = vec![(args.clone(), None)];
        if let Some(schema) = schema {
            let mut json = args.clone();
            json.push("--json".into());
            variants.push((json, Some(schema)));
        }
        for (args, schema) in variants {
            let what = format!("ibscope {command} {}", args.join(" "));
            let nowhere = samples.dir.path().join("nowhere");
            let mut cmd = valid_command(sim, command, &args, env, &nowhere);
            // Its log too: into a pipe, nothing in colour.
            cmd.env("IBSCOPE_LOG", "debug").env_remove("NO_COLOR");
            let out = run_with_timeout(cmd, client_timeout());
            if out.stdout.contains(&0x1b) || out.stderr.contains(&0x1b) {
                failures.push(format!("{what}: an escape sequence into a pipe"));
            }
            if out.status.code() != Some(code) {
                failures.push(format!(
                    "{what}: exit {:?}, not {code}\n{}",
                    out.status.code(),
                    stderr(&out)
                ));
                continue;
            }
            if let Some(schema) = schema {
                for doc in assert_valid(schema, &what, &stdout(&out), schema == "counters") {
                    let mut odd = Vec::new();
                    // `config show`'s members are settings, one of them named `fabric`.
                    if schema != "config" {
                        fabric_members(&doc, "", &mut odd);
                    }
                    failures.extend(odd.into_iter().map(|o| format!("{what}: {o}")));
                }
            }
            let piped = closed_pipe_code(valid_command(sim, command, &args, env, &nowhere));
            if piped != Some(code) {
                failures.push(format!(
                    "{what}: exit {piped:?} into a closed pipe, not {code}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The commands that run offline: their exit codes, closed pipes and documents.
#[test]
fn offline_runs_keep_the_contract() {
    let samples = Samples::write();
    check_valid_runs(None, At::Offline, &samples);
}

/// The commands that need a fabric, on the simulated one.
#[test]
fn live_runs_keep_the_contract() {
    let samples = Samples::write();
    let sim = sim(samples.dir.path().join("fabric.topo").to_str().unwrap());
    check_valid_runs(Some(&sim), At::Simulator, &samples);
}

/// Lines a command skips are counted and said, in text (stderr) and in JSON: the journal's
/// in `events` and in `check --journal`.
#[test]
fn skipped_lines_are_counted_and_said() {
    let samples = Samples::write();
    let journal = samples.dir.path().join("journal-with-garbage");
    let mut text = std::fs::read(samples.path(Kind::Journal)).unwrap();
    text.extend_from_slice(b"{\"time\": 1, \"cut short by a cra\nnot an event\n");
    std::fs::write(&journal, text).unwrap();
    let journal = journal.to_str().unwrap();
    let topology = samples.path(Kind::Topology).to_str().unwrap().to_string();
    let warning = format!("warning: 2 line(s) of the journal {journal} are not events (skipped)");
    let runs: [(&[&str], &str, &str); 2] = [
        (&["events", "--journal", journal], "events", "skipped_lines"),
        (
            &["check", "--topology", &topology, "--journal", journal],
            "check",
            "journal_skipped_lines",
        ),
    ];
    for (args, schema, member) in runs {
        let text = ibscope_plain(args, &[]);
        assert_exit(&text, 0);
        let err = stderr(&text);
        assert!(err.lines().any(|l| l == warning), "{args:?}: {err}");
        let mut json_args = args.to_vec();
        json_args.push("--json");
        let out = ibscope_plain(&json_args, &[]);
        let docs = assert_valid(schema, &json_args.join(" "), &assert_exit(&out, 0), false);
        assert_eq!(docs[0][member], 2, "{:#}", docs[0]);
    }
}
