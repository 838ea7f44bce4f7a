//! Defaults where operators keep them, and where each setting in force came from.
//!
//! Layers, lowest first: built-in defaults; files infiniband-diags' users already keep
//! (`/etc/rdma/ib-node-name-map`, `/etc/infiniband-diags/error_thresholds`, else
//! `/etc/rdma/error_thresholds`) when present;
//! the config files (`/etc/ibscope/config.toml`, then `~/.config/ibscope/config.toml`, a key
//! of the second winning over the first; `IBSCOPE_CONFIG=FILE` reads that one file
//! instead); the environment (`IBSCOPE_NODE_NAME_MAP`); command-line flags. figment merges
//! them and tags every value with its layer, which is what `config show` prints.
//!
//! The keys are declared in `crate::settings`; nothing here names one, except the
//! environment variable and the infiniband-diags files that stand for two of them.
//!
//! `IBSCOPE_ETC` replaces `/etc` in every path above: for tests and packaging, so that
//! nothing depends on the machine's own /etc.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::ArgMatches;
use figment::value::{Dict, Map, Value as Layered};
use figment::{Figment, Metadata, Profile, Provider, Source};
use serde_json::{json, Value};

use crate::settings::{GivenOption, Settings, TABLES};

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

/// The variable that names the node-name map, and its key.
const NODE_NAME_MAP_VAR: (&str, &str) = ("IBSCOPE_NODE_NAME_MAP", "node-name-map");

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
            node_name_map: var(NODE_NAME_MAP_VAR.0),
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

/// Where a value in force came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingSource {
    Default,
    File(PathBuf),
    /// An environment variable, by its name.
    Env(String),
    /// A flag, as `--name`.
    Flag(String),
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
            SettingSource::Flag(f) => Some(f.clone()),
        }
    }

    /// How figment carries it: the kind as the name, the file or the origin as the source.
    fn metadata(&self) -> Metadata {
        let metadata = Metadata::named(self.kind()).interpolater(|_, keys| keys.join("."));
        match self {
            SettingSource::Default => metadata,
            SettingSource::File(p) => metadata.source(Source::File(p.clone())),
            SettingSource::Env(v) => metadata.source(Source::Custom(v.clone())),
            SettingSource::Flag(f) => metadata.source(Source::Custom(f.clone())),
        }
    }

    /// The source of a value tagged with `metadata` (made by [`SettingSource::metadata`]).
    fn of(metadata: Option<&Metadata>) -> SettingSource {
        let Some(m) = metadata else {
            return SettingSource::Default;
        };
        match (&*m.name, &m.source) {
            ("file", Some(Source::File(p))) => SettingSource::File(p.clone()),
            ("env", Some(Source::Custom(v))) => SettingSource::Env(v.clone()),
            ("flag", Some(Source::Custom(f))) => SettingSource::Flag(f.clone()),
            _ => SettingSource::Default,
        }
    }

    /// Where an error about a value from here points.
    fn place(&self) -> String {
        match self {
            SettingSource::File(p) => format!("config file {}", p.display()),
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.origin() {
            Some(origin) => f.write_str(&origin),
            None => f.write_str("default"),
        }
    }
}

/// One setting in force.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The config-file key (`serve.` for the `[serve]` table).
    pub key: String,
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

/// Everything `ibscope config show` prints: the files looked for, every key's value in
/// force and where it came from.
#[derive(Debug, Clone)]
pub struct InForce {
    pub files: Vec<FileState>,
    pub settings: Vec<Setting>,
}

impl InForce {
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
            settings.insert(s.key.clone(), entry);
        }
        json!({"files": files, "settings": settings})
    }
}

/// One layer: values, all from one source.
struct SettingsLayer {
    source: SettingSource,
    values: Dict,
}

impl Provider for SettingsLayer {
    fn metadata(&self) -> Metadata {
        self.source.metadata()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.values.clone()))
    }
}

/// The settings in force for the command line `matches` holds (the root's matches: a
/// table's flags count only under the command of its name), and where each came from.
pub fn resolve(matches: &ArgMatches, env: &Env) -> Result<(Settings, InForce)> {
    let mut figment = Figment::new().merge(SettingsLayer {
        source: SettingSource::Default,
        values: defaults(env)?,
    });
    let mut states = Vec::new();
    for (path, values) in read_files(env)? {
        states.push(FileState {
            path: path.clone(),
            read: values.is_some(),
        });
        if let Some(values) = values {
            figment = figment.merge(SettingsLayer {
                source: SettingSource::File(path),
                values,
            });
        }
    }
    if let Some(value) = &env.node_name_map {
        let (var, key) = NODE_NAME_MAP_VAR;
        // Empty: no map, whatever a file says.
        let path = (!value.is_empty()).then(|| PathBuf::from(value));
        figment = figment.merge(SettingsLayer {
            source: SettingSource::Env(var.to_string()),
            values: nested(&[key], Layered::serialize(path)?),
        });
    }
    for (table, option) in given_flags(matches) {
        let mut path: Vec<&str> = table.into_iter().collect();
        path.push(&option.key);
        figment = figment.merge(SettingsLayer {
            source: SettingSource::Flag(option.flag),
            values: nested(&path, Layered::serialize(&option.value)?),
        });
    }
    let settings: Settings = figment.extract().map_err(|e| settings_error(&e))?;
    let shown = shown(&figment, &settings, env)?;
    check_as_flags(&shown)?;
    if let Err((key, why)) = settings.check() {
        let source = shown
            .iter()
            .find(|s| s.key == key)
            .map_or(SettingSource::Default, |s| s.source.clone());
        bail!("{}: {why}", source.place());
    }
    Ok((
        settings,
        InForce {
            files: states,
            settings: shown,
        },
    ))
}

/// The built-in defaults, and infiniband-diags' files where they are present.
fn defaults(env: &Env) -> Result<Dict> {
    let mut values = Layered::serialize(Settings::defaults())?
        .into_dict()
        .ok_or_else(|| anyhow!("the settings are not a table"))?;
    let map = env.default_node_name_map();
    if map.exists() {
        values.insert(NODE_NAME_MAP_VAR.1.into(), Layered::serialize(map)?);
    }
    if let Some(file) = env.default_thresholds().into_iter().find(|p| p.exists()) {
        values.insert("thresholds".into(), Layered::serialize(file)?);
    }
    Ok(values)
}

/// The config files looked for, in layering order, each parsed if it exists.
fn read_files(env: &Env) -> Result<Vec<(PathBuf, Option<Dict>)>> {
    let mut files = Vec::new();
    let explicit = env.config.as_ref().is_some_and(|c| !c.is_empty());
    for path in env.config_candidates() {
        let text = match ibscope_topo::input::read_text(&path, "config file") {
            Ok(text) => text,
            Err(ibscope_topo::input::InputError::Missing { .. }) if !explicit => {
                files.push((path, None));
                continue;
            }
            Err(e) if explicit => bail!("{e} (from $IBSCOPE_CONFIG)"),
            Err(e) => return Err(e.into()),
        };
        let mut values: Dict = toml::from_str(&text).map_err(|e| {
            let source = SettingSource::File(path.clone());
            anyhow!("{}: {}", source.place(), toml_error(&text, &e))
        })?;
        drop_empty_tables(&mut values);
        files.push((path, Some(values)));
    }
    Ok(files)
}

/// A TOML error on one line: where, and what.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().lines().collect::<Vec<_>>().join("; ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {what}")
        }
        None => what,
    }
}

/// An empty table declares nothing (`[roce]` with every line commented out).
fn drop_empty_tables(values: &mut Dict) {
    values.retain(|_, v| match v {
        Layered::Dict(_, inner) => {
            drop_empty_tables(inner);
            !inner.is_empty()
        }
        _ => true,
    });
}

/// `value` at `path` (`["serve", "listen"]`) of an otherwise empty table.
fn nested(path: &[&str], value: Layered) -> Dict {
    let mut value = value;
    for key in path.iter().skip(1).rev() {
        value = Layered::from(Dict::from([(key.to_string(), value)]));
    }
    Dict::from([(path.first().copied().unwrap_or_default().to_string(), value)])
}

/// The flags the command line gave for a key: the top level's (`None`) from the command's
/// own options, each table's from the command of its name.
fn given_flags(matches: &ArgMatches) -> Vec<(Option<&'static str>, GivenOption)> {
    let mut out: Vec<_> = Settings::given(deepest(matches))
        .into_iter()
        .map(|o| (None, o))
        .collect();
    for table in TABLES {
        if let Some(m) = matches.subcommand_matches(table.name) {
            out.extend(
                (table.given)(deepest(m))
                    .into_iter()
                    .map(|o| (Some(table.name), o)),
            );
        }
    }
    out
}

/// The matches of the command being run (the deepest subcommand's): its own options and
/// the global options it was given are found there.
pub fn deepest(matches: &ArgMatches) -> &ArgMatches {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    m
}

/// A figment error as one line: the file (or other source), the key, what is wrong.
fn settings_error(e: &figment::Error) -> anyhow::Error {
    use figment::error::Kind;
    let place = SettingSource::of(e.metadata.as_ref()).place();
    // figment's own names for what it reads into a path, not the file's keys.
    let key: Vec<&str> = e
        .path
        .iter()
        .map(String::as_str)
        .filter(|k| !k.starts_with("___figment"))
        .collect();
    let what = match &e.kind {
        Kind::UnknownField(found, []) => format!("no key {found:?} here; this table has none yet"),
        Kind::UnknownField(found, known) => {
            format!("no key {found:?} here; the keys are {}", known.join(", "))
        }
        Kind::InvalidType(found, expected) | Kind::InvalidValue(found, expected) => {
            format!("expected {expected}, found {found}")
        }
        other => other.to_string(),
    };
    match key.join(".") {
        key if key.is_empty() => anyhow!("{place}: {what}"),
        key => anyhow!("{place}: {key}: {what}"),
    }
}

/// Every key in force, in the order of its declaration, with its source and note.
fn shown(figment: &Figment, settings: &Settings, env: &Env) -> Result<Vec<Setting>> {
    let Value::Object(top) = serde_json::to_value(settings)? else {
        bail!("the settings are not a table");
    };
    let mut keys = Vec::new();
    for (key, value) in top {
        match value {
            Value::Object(table) if TABLES.iter().any(|t| t.name == key) => {
                keys.extend(table.into_iter().map(|(k, v)| (format!("{key}.{k}"), v)));
            }
            value => keys.push((key, value)),
        }
    }
    Ok(keys
        .into_iter()
        .map(|(key, value)| {
            let source = SettingSource::of(figment.find_metadata(&key));
            let note = note(&key, &value, &source, env);
            Setting {
                key,
                value,
                source,
                note,
            }
        })
        .collect())
}

/// What `config show` says beside a value its source does not explain.
fn note(key: &str, value: &Value, source: &SettingSource, env: &Env) -> Option<&'static str> {
    let unset = value.is_null() || value.as_array().is_some_and(Vec::is_empty);
    match source {
        SettingSource::Env(_) if unset => Some("empty: no map"),
        SettingSource::Default if unset => Settings::unset_means(key),
        SettingSource::Default if key == NODE_NAME_MAP_VAR.1 => {
            Some("infiniband-diags' default file, present")
        }
        SettingSource::Default if key == "thresholds" => {
            let first = env.default_thresholds()[0].display().to_string();
            Some(if value.as_str() == Some(first.as_str()) {
                "ibqueryerrors' default file, present"
            } else {
                "present; ibqueryerrors itself reads only /etc/infiniband-diags/error_thresholds"
            })
        }
        _ => None,
    }
}

/// A value from a file or the environment passes its flag's own parser, as it would on
/// the command line (`max-outstanding = 0` is refused as `--max-outstanding 0` is).
fn check_as_flags(shown: &[Setting]) -> Result<()> {
    use clap::Args;
    let tables = std::iter::once(("", Settings::augment_args(clap::Command::new("check")))).chain(
        TABLES
            .iter()
            .map(|t| (t.name, (t.definitions)(clap::Command::new("check")))),
    );
    for (table, definitions) in tables {
        for arg in definitions.get_arguments() {
            let id = arg.get_id().as_str().replace('_', "-");
            let key = if table.is_empty() {
                id
            } else {
                format!("{table}.{id}")
            };
            let Some(s) = shown.iter().find(|s| s.key == key) else {
                continue;
            };
            if matches!(s.source, SettingSource::Default | SettingSource::Flag(_)) {
                continue;
            }
            let (text, Some(long)) = (&s.value, arg.get_long()) else {
                continue;
            };
            let text = match text {
                Value::String(text) => text.clone(),
                Value::Number(n) => n.to_string(),
                _ => continue,
            };
            let line = ["check".to_string(), format!("--{long}={text}")];
            if let Err(e) = definitions.clone().try_get_matches_from(line) {
                let why = std::error::Error::source(&e)
                    .map_or_else(|| e.kind().to_string(), ToString::to_string);
                bail!("{key} = {} (from {}): {why}", s.value, s.source);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings in force for `args` with no file, no environment and an /etc that holds
    /// nothing.
    fn in_force(args: &[&str]) -> InForce {
        let matches = crate::app::parse(args.iter().map(OsString::from)).unwrap();
        let env = Env {
            etc: PathBuf::from("/nonexistent-etc"),
            config: Some(OsString::new()),
            ..Env::default()
        };
        resolve(&matches, &env).unwrap().1
    }

    fn shown(f: &InForce, key: &str) -> (Value, SettingSource) {
        let s = f.get(key).unwrap_or_else(|| panic!("no {key}"));
        (s.value.clone(), s.source.clone())
    }

    #[test]
    fn a_table_takes_the_flags_of_its_command_and_the_top_level_every_command_s() {
        let flag = |f: &str| SettingSource::Flag(f.to_string());
        let f = in_force(&[
            "ibscope",
            "-C",
            "mlx5_1",
            "serve",
            "--listen",
            "127.0.0.1:1",
            "--active-only",
        ]);
        assert_eq!(
            shown(&f, "serve.listen"),
            ("127.0.0.1:1".into(), flag("--listen"))
        );
        assert_eq!(
            shown(&f, "serve.active-only"),
            (true.into(), flag("--active-only"))
        );
        assert_eq!(
            shown(&f, "serve.interval"),
            (10.0.into(), SettingSource::Default)
        );
        assert_eq!(shown(&f, "ca"), ("mlx5_1".into(), flag("--ca")));
        // `host -C` is another group's flag with the same key.
        let f = in_force(&["ibscope", "host", "-C", "mlx5_3"]);
        assert_eq!(shown(&f, "ca"), ("mlx5_3".into(), flag("--ca")));
        // A table's flags count under its own command only.
        let f = in_force(&["ibscope", "route", "-P", "2", "check"]);
        assert_eq!(shown(&f, "port"), (2.into(), flag("--port")));
        assert_eq!(shown(&f, "serve.listen").1, SettingSource::Default);
    }

    #[test]
    fn every_key_with_a_flag_is_named_as_its_long_flag() {
        use clap::Args;
        let keys: Vec<String> = in_force(&["ibscope", "config", "show"])
            .settings
            .into_iter()
            .map(|s| s.key)
            .collect();
        let tables = std::iter::once(("", Settings::augment_args(clap::Command::new("t")))).chain(
            TABLES
                .iter()
                .map(|t| (t.name, (t.definitions)(clap::Command::new("t")))),
        );
        let mut flags = 0;
        for (table, definitions) in tables {
            for arg in definitions.get_arguments() {
                let long = arg.get_long().unwrap();
                let key = if table.is_empty() {
                    long.to_string()
                } else {
                    format!("{table}.{long}")
                };
                assert!(keys.contains(&key), "--{long} has no key {key}: {keys:?}");
                flags += 1;
            }
        }
        assert!(flags > 0);
    }
}
