//! Defaults where operators keep them, and where each setting in force came from.
//!
//! Layers, lowest first: built-in defaults; files infiniband-diags' users already keep
//! (`/etc/rdma/ib-node-name-map`, `/etc/infiniband-diags/error_thresholds`, else
//! `/etc/rdma/error_thresholds`) when present;
//! the config files (`/etc/ibscope/config.toml`, then `~/.config/ibscope/config.toml`, a key
//! of the second winning over the first; `IBSCOPE_CONFIG=FILE` reads that one file
//! instead); the environment (`IBSCOPE_NODE_NAME_MAP`); command-line flags.
//!
//! `IBSCOPE_ETC` replaces `/etc` in every path above: for tests and packaging, so that
//! nothing depends on the machine's own /etc.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, FromArgMatches, ValueEnum};
use serde::Deserialize;
use serde_json::{json, Value};

use ibscope_host::roce::RoceProfile;

use crate::cli::Global;
use crate::cmd::serve::{self, CounterFamilies};

/// The environment the settings are read from (a value, so tests can give their own).
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// What stands for `/etc` (`IBSCOPE_ETC`, default `/etc`).
    pub etc: PathBuf,
    /// `IBSCOPE_CONFIG`: the one config file to read (empty: none).
    pub config: Option<OsString>,
    /// `$XDG_CONFIG_HOME`, else `$HOME/.config`.
    pub user_config_dir: Option<PathBuf>,
    /// `IBSCOPE_NODE_NAME_MAP` (empty: no map).
    pub node_name_map: Option<OsString>,
}

impl Env {
    pub fn from_process() -> Env {
        let var = |name: &str| std::env::var_os(name);
        let user_config_dir = var("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                var("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".config"))
            });
        Env {
            etc: var("IBSCOPE_ETC")
                .filter(|v| !v.is_empty())
                .map_or_else(|| PathBuf::from("/etc"), PathBuf::from),
            config: var("IBSCOPE_CONFIG"),
            user_config_dir,
            node_name_map: var("IBSCOPE_NODE_NAME_MAP"),
        }
    }

    /// infiniband-diags' default node-name map (IBDIAG_NODENAME_MAP_PATH).
    pub fn default_node_name_map(&self) -> PathBuf {
        self.etc.join("rdma/ib-node-name-map")
    }

    /// The threshold files looked for, first present wins: ibqueryerrors' default
    /// (rdma-core's IBDIAG_CONFIG_PATH/error_thresholds, where Debian's infiniband-diags
    /// installs it), then `/etc/rdma/error_thresholds`, beside the node-name map, where some
    /// sites keep their rdma files although ibqueryerrors never reads it there.
    pub fn default_thresholds(&self) -> [PathBuf; 2] {
        [
            self.etc.join("infiniband-diags/error_thresholds"),
            self.etc.join("rdma/error_thresholds"),
        ]
    }

    /// The config files looked for, in the order they are layered.
    pub fn config_candidates(&self) -> Vec<PathBuf> {
        if let Some(file) = &self.config {
            return if file.is_empty() {
                Vec::new()
            } else {
                vec![PathBuf::from(file)]
            };
        }
        let mut files = vec![self.etc.join("ibscope/config.toml")];
        if let Some(dir) = &self.user_config_dir {
            files.push(dir.join("ibscope/config.toml"));
        }
        files
    }
}

/// A config file: every key is optional and named as the long flag it stands for.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileConfig {
    ca: Option<String>,
    port: Option<u8>,
    timeout_ms: Option<u64>,
    retries: Option<u32>,
    max_outstanding: Option<u32>,
    node_name_map: Option<PathBuf>,
    thresholds: Option<PathBuf>,
    serve: Option<ServeConfig>,
    /// `[[fabric]]` tables: named fabrics (see `crate::fabric_set`).
    fabric: Option<Vec<ibscope_host::fabric_plan::FabricConfig>>,
    /// `[roce]`: the lossless configuration of every RoCE port (`host --check`).
    roce: Option<ibscope_host::roce::RoceProfile>,
}

/// The `[serve]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ServeConfig {
    listen: Option<String>,
    interval: Option<f64>,
    counters: Option<String>,
    active_only: Option<bool>,
    switches_only: Option<bool>,
    allow_remote: Option<bool>,
    rediscover_every: Option<u64>,
    web_config: Option<PathBuf>,
    journal: Option<PathBuf>,
}

/// Where a value in force came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingSource {
    Default,
    File(PathBuf),
    Env(&'static str),
    Flag(&'static str),
}

impl SettingSource {
    fn kind(&self) -> &'static str {
        match self {
            SettingSource::Default => "default",
            SettingSource::File(_) => "file",
            SettingSource::Env(_) => "env",
            SettingSource::Flag(_) => "flag",
        }
    }

    /// The file, variable or flag; `None` for a built-in default.
    fn origin(&self) -> Option<String> {
        match self {
            SettingSource::Default => None,
            SettingSource::File(p) => Some(p.display().to_string()),
            SettingSource::Env(v) => Some(format!("${v}")),
            SettingSource::Flag(f) => Some(f.to_string()),
        }
    }
}

/// One setting in force.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The config-file key (`serve.` for the `[serve]` table).
    pub key: &'static str,
    /// JSON null: unset (the command picks, e.g. the first CA).
    pub value: Value,
    pub source: SettingSource,
    /// What an unset value means, or why a default file was taken.
    pub note: Option<&'static str>,
}

/// A config file looked for, and whether it was read.
#[derive(Debug, Clone)]
pub struct FileState {
    pub path: PathBuf,
    pub read: bool,
}

/// Everything `ibscope config show` prints.
#[derive(Debug, Clone)]
pub struct Settings {
    pub files: Vec<FileState>,
    pub settings: Vec<Setting>,
}

impl Settings {
    pub fn get(&self, key: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.key == key)
    }

    pub fn to_json(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| json!({"path": f.path.display().to_string(), "read": f.read}))
            .collect();
        let mut settings = serde_json::Map::new();
        for s in &self.settings {
            let mut entry = json!({"value": s.value, "source": s.source.kind()});
            if let Some(origin) = s.source.origin() {
                entry["from"] = Value::String(origin);
            }
            if let Some(note) = s.note {
                entry["note"] = Value::String(note.to_string());
            }
            settings.insert(s.key.to_string(), entry);
        }
        json!({"files": files, "settings": settings})
    }
}

/// The config files that exist, parsed, in layering order.
struct Layers {
    files: Vec<(PathBuf, FileConfig)>,
}

impl Layers {
    fn load(env: &Env) -> Result<(Layers, Vec<FileState>)> {
        let mut files = Vec::new();
        let mut states = Vec::new();
        let explicit = env.config.as_ref().is_some_and(|c| !c.is_empty());
        for path in env.config_candidates() {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                    states.push(FileState { path, read: false });
                    continue;
                }
                Err(e) => {
                    let from = if explicit {
                        " (from $IBSCOPE_CONFIG)"
                    } else {
                        ""
                    };
                    return Err(e).with_context(|| {
                        format!("cannot read config file {}{from}", path.display())
                    });
                }
            };
            let mut config: FileConfig = toml::from_str(&text)
                .map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))?;
            config.resolve_paths(&path);
            states.push(FileState {
                path: path.clone(),
                read: true,
            });
            files.push((path, config));
        }
        Ok((Layers { files }, states))
    }

    /// The value of the last file that sets it, with that file.
    fn get<T>(&self, pick: impl Fn(&FileConfig) -> Option<T>) -> Option<(T, SettingSource)> {
        self.files
            .iter()
            .rev()
            .find_map(|(path, c)| pick(c).map(|v| (v, SettingSource::File(path.clone()))))
    }

    fn serve<T>(&self, pick: impl Fn(&ServeConfig) -> Option<T>) -> Option<(T, SettingSource)> {
        self.get(|c| c.serve.as_ref().and_then(&pick))
    }
}

impl FileConfig {
    /// Paths in a file are relative to the file's directory.
    fn resolve_paths(&mut self, file: &Path) {
        let dir = file.parent().unwrap_or(Path::new("."));
        let (web, journal) = match self.serve.as_mut() {
            Some(s) => (s.web_config.as_mut(), s.journal.as_mut()),
            None => (None, None),
        };
        for p in [&mut self.node_name_map, &mut self.thresholds]
            .into_iter()
            .flatten()
            .chain(web)
            .chain(journal)
        {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
    }
}

/// Whether the argument `id` was given on the command line.
fn given(matches: Option<&ArgMatches>, id: &str) -> bool {
    matches.is_some_and(|m| {
        m.try_get_raw(id).is_ok_and(|v| v.is_some())
            && m.value_source(id) == Some(ValueSource::CommandLine)
    })
}

/// Put the layered value into `slot` unless the flag was given; records where it came from.
fn layer<T: Clone + Into<Value>>(
    out: &mut Vec<Setting>,
    key: &'static str,
    flag: Option<&'static str>,
    slot: &mut T,
    from_file: Option<(T, SettingSource)>,
) {
    let source = match (flag, from_file) {
        (Some(f), _) => SettingSource::Flag(f),
        (None, Some((v, source))) => {
            *slot = v;
            source
        }
        (None, None) => SettingSource::Default,
    };
    out.push(Setting {
        key,
        value: slot.clone().into(),
        source,
        note: None,
    });
}

/// Apply the layered defaults to the parsed command line (`matches`: the command's own,
/// with the fabric options it takes, and its `serve` options when that is the command);
/// returns what is in force.
pub fn apply(
    global: &mut Global,
    serve_args: Option<&mut serve::Args>,
    matches: &ArgMatches,
    env: &Env,
) -> Result<Settings> {
    let (layers, files) = Layers::load(env)?;
    let mut out = Vec::new();
    apply_global(global, matches, env, &layers, &mut out)?;
    global.serve_journal = match serve_args {
        Some(a) => {
            apply_serve(a, Some(matches), &layers, &mut out)?;
            a.journal.clone()
        }
        None => {
            // Shown by `config show`; of them, `events` and `check` use the journal.
            let defaults = default_serve_args()?;
            let mut a = defaults;
            apply_serve(&mut a, None, &layers, &mut out)?;
            a.journal
        }
    };
    Ok(Settings {
        files,
        settings: out,
    })
}

fn apply_global(
    g: &mut Global,
    matches: &ArgMatches,
    env: &Env,
    layers: &Layers,
    out: &mut Vec<Setting>,
) -> Result<()> {
    let m = Some(matches);
    let flag = |id: &str, name: &'static str| given(m, id).then_some(name);

    let mut ca = g.ca.clone();
    layer(
        out,
        "ca",
        flag("ca", "--ca"),
        &mut ca,
        layers.get(|c| c.ca.clone().map(Some)),
    );
    g.ca = ca;
    if g.ca.is_none() {
        out.last_mut().expect("just pushed").note = Some("the first CA found");
    }
    let mut port = g.port.map(u32::from);
    layer(
        out,
        "port",
        flag("port", "--port"),
        &mut port,
        layers.get(|c| c.port.map(|p| Some(u32::from(p)))),
    );
    g.port = port.map(|p| p as u8);
    if g.port.is_none() {
        out.last_mut().expect("just pushed").note = Some("the first active port of the CA");
    }
    layer(
        out,
        "timeout-ms",
        flag("timeout_ms", "--timeout-ms"),
        &mut g.timeout_ms,
        layers.get(|c| c.timeout_ms),
    );
    layer(
        out,
        "retries",
        flag("retries", "--retries"),
        &mut g.retries,
        layers.get(|c| c.retries),
    );
    layer(
        out,
        "max-outstanding",
        flag("max_outstanding", "--max-outstanding"),
        &mut g.max_outstanding,
        layers.get(|c| c.max_outstanding),
    );
    if !(1..=256).contains(&g.max_outstanding) {
        bail!(
            "max-outstanding = {} (from {}): must be 1 to 256",
            g.max_outstanding,
            describe(out.last().map(|s| &s.source))
        );
    }

    let (map, source, note) = node_name_map(
        g.node_name_map.take(),
        flag("node_name_map", "--node-name-map"),
        env,
        layers,
    )?;
    g.node_name_map = map;
    out.push(Setting {
        key: "node-name-map",
        value: path_value(g.node_name_map.as_deref()),
        source,
        note,
    });

    let (thresholds, source, note) = match layers.get(|c| c.thresholds.clone()) {
        Some((p, source)) => (Some(p), source, None),
        None => match env
            .default_thresholds()
            .into_iter()
            .position(|p| p.exists())
        {
            Some(i) => (
                Some(env.default_thresholds()[i].clone()),
                SettingSource::Default,
                Some(if i == 0 {
                    "ibqueryerrors' default file, present"
                } else {
                    "present; ibqueryerrors itself reads only /etc/infiniband-diags/error_thresholds"
                }),
            ),
            None => (
                None,
                SettingSource::Default,
                Some("every error counter at 0; `check --thresholds` overrides"),
            ),
        },
    };
    g.thresholds = thresholds;
    out.push(Setting {
        key: "thresholds",
        value: path_value(g.thresholds.as_deref()),
        source,
        note,
    });

    apply_fabrics(g, layers, out)?;
    apply_roce(g, layers, out)
}

/// The `[roce]` table: the last file that has one gives the whole profile (an empty table
/// declares nothing).
fn apply_roce(g: &mut Global, layers: &Layers, out: &mut Vec<Setting>) -> Result<()> {
    g.roce = whole_table(
        layers,
        (
            "roce",
            "none: RoCE ports are only checked to agree with each other",
        ),
        Value::Null,
        |c| c.roce.clone().filter(|p| *p != RoceProfile::default()),
        |p| p.validate().map_err(|e| format!("[roce]: {e}")),
        out,
    )?;
    Ok(())
}

/// The `[[fabric]]` tables: the last file that has any gives the whole list.
fn apply_fabrics(g: &mut Global, layers: &Layers, out: &mut Vec<Setting>) -> Result<()> {
    g.fabrics = whole_table(
        layers,
        ("fabric", "none: fabrics are named CA:port"),
        Value::Array(Vec::new()),
        |c| c.fabric.clone(),
        |list| ibscope_host::fabric_plan::FabricConfig::validate(list).map_err(|e| e.to_string()),
        out,
    )?
    .unwrap_or_default();
    Ok(())
}

/// A table the last file that has it gives whole (`pick`), checked by `validate`; recorded
/// as setting `key`, with `note` and `none` shown when no file has it.
fn whole_table<T: serde::Serialize>(
    layers: &Layers,
    (key, note): (&'static str, &'static str),
    none: Value,
    pick: impl Fn(&FileConfig) -> Option<T>,
    validate: impl Fn(&T) -> std::result::Result<(), String>,
    out: &mut Vec<Setting>,
) -> Result<Option<T>> {
    let (table, source, note) = match layers.get(pick) {
        Some((table, source)) => {
            if let Err(e) = validate(&table) {
                bail!("config file {source}: {e}");
            }
            (Some(table), source, None)
        }
        None => (None, SettingSource::Default, Some(note)),
    };
    out.push(Setting {
        key,
        value: table
            .as_ref()
            .map_or(none, |t| serde_json::to_value(t).unwrap_or(Value::Null)),
        source,
        note,
    });
    Ok(table)
}

/// The node-name map in force: flag, else $IBSCOPE_NODE_NAME_MAP (empty: none), else the
/// config files, else infiniband-diags' default file when it exists.
fn node_name_map(
    from_flag: Option<PathBuf>,
    flag: Option<&'static str>,
    env: &Env,
    layers: &Layers,
) -> Result<(Option<PathBuf>, SettingSource, Option<&'static str>)> {
    if let (Some(f), Some(p)) = (flag, from_flag) {
        return Ok((Some(p), SettingSource::Flag(f), None));
    }
    if let Some(v) = &env.node_name_map {
        let source = SettingSource::Env("IBSCOPE_NODE_NAME_MAP");
        return Ok(if v.is_empty() {
            (None, source, Some("empty: no map"))
        } else {
            (Some(PathBuf::from(v)), source, None)
        });
    }
    if let Some((p, source)) = layers.get(|c| c.node_name_map.clone()) {
        return Ok((Some(p), source, None));
    }
    let p = env.default_node_name_map();
    Ok(if p.exists() {
        (
            Some(p),
            SettingSource::Default,
            Some("infiniband-diags' default file, present"),
        )
    } else {
        (
            None,
            SettingSource::Default,
            Some("no map: nodes go by NodeDescription"),
        )
    })
}

fn apply_serve(
    a: &mut serve::Args,
    matches: Option<&ArgMatches>,
    layers: &Layers,
    out: &mut Vec<Setting>,
) -> Result<()> {
    let flag = |id: &str, name: &'static str| given(matches, id).then_some(name);
    layer(
        out,
        "serve.listen",
        flag("listen", "--listen"),
        &mut a.listen,
        layers.serve(|s| s.listen.clone()),
    );
    layer(
        out,
        "serve.interval",
        flag("interval", "--interval"),
        &mut a.interval,
        layers.serve(|s| s.interval),
    );
    let counters = match layers.serve(|s| s.counters.clone()) {
        Some((text, source)) => Some((
            CounterFamilies::from_str(&text, true).map_err(|_| {
                anyhow::anyhow!(
                    "serve.counters = {text:?} (from {}): must be all, errors or data",
                    describe(Some(&source))
                )
            })?,
            source,
        )),
        None => None,
    };
    let mut name = families_name(a.counters);
    layer(
        out,
        "serve.counters",
        flag("counters", "--counters"),
        &mut name,
        counters.map(|(c, s)| (families_name(c), s)),
    );
    a.counters = CounterFamilies::from_str(&name, true).unwrap_or(a.counters);
    layer(
        out,
        "serve.active-only",
        flag("active_only", "--active-only"),
        &mut a.active_only,
        layers.serve(|s| s.active_only),
    );
    layer(
        out,
        "serve.switches-only",
        flag("switches_only", "--switches-only"),
        &mut a.switches_only,
        layers.serve(|s| s.switches_only),
    );
    layer(
        out,
        "serve.allow-remote",
        flag("allow_remote", "--allow-remote"),
        &mut a.allow_remote,
        layers.serve(|s| s.allow_remote),
    );
    layer(
        out,
        "serve.rediscover-every",
        flag("rediscover_every", "--rediscover-every"),
        &mut a.rediscover_every,
        layers.serve(|s| s.rediscover_every),
    );
    let mut web = a.web_config.as_ref().map(|p| p.display().to_string());
    layer(
        out,
        "serve.web-config",
        flag("web_config", "--web-config"),
        &mut web,
        layers.serve(|s| s.web_config.as_ref().map(|p| Some(p.display().to_string()))),
    );
    a.web_config = web.map(PathBuf::from);
    let mut journal = a.journal.as_ref().map(|p| p.display().to_string());
    layer(
        out,
        "serve.journal",
        flag("journal", "--journal"),
        &mut journal,
        layers.serve(|s| s.journal.as_ref().map(|p| Some(p.display().to_string()))),
    );
    a.journal = journal.map(PathBuf::from);
    Ok(())
}

fn families_name(c: CounterFamilies) -> String {
    c.to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

/// `serve`'s built-in defaults, as clap gives them.
fn default_serve_args() -> Result<serve::Args> {
    let m = <serve::Args as clap::Args>::augment_args(clap::Command::new("serve"))
        .try_get_matches_from(["serve"])?;
    Ok(serve::Args::from_arg_matches(&m)?)
}

fn path_value(p: Option<&Path>) -> Value {
    p.map_or(Value::Null, |p| Value::String(p.display().to_string()))
}

fn describe(source: Option<&SettingSource>) -> String {
    source
        .and_then(SettingSource::origin)
        .unwrap_or_else(|| "the default".to_string())
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.origin() {
            Some(origin) => f.write_str(&origin),
            None => f.write_str("default"),
        }
    }
}
