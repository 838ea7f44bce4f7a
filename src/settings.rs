//! Every key of the config file, each declared once: a field of [`Settings`] (the top
//! level) or of a table's struct (`[serve]`: [`ServeSettings`]). The field is the key (its
//! name in kebab case), its type is what the file may hold, and unless it is
//! `#[arg(skip)]` it is also the flag of the commands that take it (its doc comment the
//! help, its clap default the built-in default, its value parser the rule a file's value
//! must pass too). `crate::config` layers the values and says where each came from; a
//! command reads them from `Global` (`g.timeout_ms`, `g.serve.listen`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches, ValueEnum};
use serde::{Deserialize, Serialize};

use ibscope_host::fabric_select::FabricConfig;
use ibscope_host::roce::RoceProfile;
use ibscope_topo::counters;

/// The heading the fabric options stand under in each command's help, after its own.
pub const FABRIC_HEADING: &str = "Fabric options";

/// The top level of the config file. Its flags are the fabric options of the commands
/// that read the fabric (`cli::FabricArgs` flattens this struct), accepted before the
/// command's name too.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = FABRIC_HEADING)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Settings {
    /// CA to use (e.g. mlx5_0); default: the first CA found. Several fabrics at once:
    /// `all` (every InfiniBand port of every CA and every [[fabric]] of the config file),
    /// a list (mlx5_0,mlx5_1), a port (mlx5_0:2), or a fabric's name from the config file.
    /// Ports on the same subnet are swept once.
    #[arg(short = 'C', long = "ca", global = true, value_name = "CA")]
    pub ca: Option<String>,

    /// CA port to use; default: the first active port of the CA.
    #[arg(short = 'P', long = "port", global = true, value_name = "PORT")]
    pub port: Option<u8>,

    /// Time to wait for each MAD reply before retrying (1 or more).
    #[arg(long, global = true, default_value_t = 200, value_name = "MS",
          value_parser = parse_timeout_ms)]
    pub timeout_ms: u64,

    /// Retries per MAD after the first attempt times out.
    #[arg(long, global = true, default_value_t = 3, value_name = "N")]
    pub retries: u32,

    /// Maximum MADs in flight at once: the bound of the adaptive window, which starts at 8,
    /// grows while replies come back in time and halves on timeouts; no destination has more
    /// than 4 in flight. Under ibsim more than 128 are clamped to 128 (a few hundred
    /// deadlock its umad shim).
    #[arg(long, global = true, default_value_t = 128, value_name = "N",
          value_parser = parse_max_outstanding)]
    pub max_outstanding: u32,

    /// Node name map: lines of `0xGUID "name"` (# comments), used wherever a node is named.
    /// Default: $IBSCOPE_NODE_NAME_MAP, the config file's node-name-map, else
    /// /etc/rdma/ib-node-name-map when present (as infiniband-diags).
    #[arg(long, global = true, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    #[serde(default, deserialize_with = "relative_to_file")]
    pub node_name_map: Option<PathBuf>,

    /// Counter threshold file in force: the config file's `thresholds`, else
    /// /etc/infiniband-diags/error_thresholds, else /etc/rdma/error_thresholds, when
    /// present. `check --thresholds` overrides.
    #[arg(skip)]
    #[serde(default, deserialize_with = "relative_to_file")]
    pub thresholds: Option<PathBuf>,

    /// `[[fabric]]` tables: names for local ports and fabrics reached through `ibscope
    /// agent` (see `-C`).
    #[arg(skip)]
    #[serde(rename = "fabric")]
    pub fabrics: Vec<FabricConfig>,

    /// `[roce]`: the lossless configuration `host --check` holds every RoCE port to.
    #[arg(skip)]
    pub roce: Option<RoceProfile>,

    /// `[serve]`.
    #[arg(skip = defaults::<ServeSettings>())]
    pub serve: ServeSettings,

    /// `[tui]`.
    #[arg(skip = defaults::<TuiSettings>())]
    pub tui: TuiSettings,
}

/// A table of the config file: its name, which is also the command whose flags set its
/// keys, those flags' definitions, and those given.
pub struct ConfigTable {
    pub name: &'static str,
    pub definitions: fn(clap::Command) -> clap::Command,
    pub given: fn(&ArgMatches) -> Given,
}

/// The config file's tables, each a field of [`Settings`]; the top level is `Settings`
/// itself.
pub const TABLES: &[ConfigTable] = &[
    ConfigTable {
        name: "serve",
        definitions: ServeSettings::augment_args,
        given: given_options::<ServeSettings>,
    },
    ConfigTable {
        name: "tui",
        definitions: TuiSettings::augment_args,
        given: given_options::<TuiSettings>,
    },
];

impl Settings {
    /// The built-in defaults: the flags' defaults, the rest unset.
    pub fn defaults() -> Settings {
        defaults()
    }

    /// The flags of the top level given on the command line `matches` holds.
    pub fn given(matches: &ArgMatches) -> Given {
        given_options::<Settings>(matches)
    }

    /// What a key left unset means (`config show` says it beside the value).
    pub fn unset_means(key: &str) -> Option<&'static str> {
        Some(match key {
            "ca" => "the first CA found",
            "port" => "the first active port of the CA",
            "node-name-map" => "no map: nodes go by NodeDescription",
            "thresholds" => "every error counter at 0; `check --thresholds` overrides",
            "fabric" => "none: fabrics are named CA:port",
            "roce" => "none: RoCE ports are only checked to agree with each other",
            _ => return None,
        })
    }

    /// The rules a key's type does not state: the key that breaks one, and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        FabricConfig::validate(&self.fabrics).map_err(|e| ("fabric", e))?;
        if let Some(roce) = &self.roce {
            roce.validate()
                .map_err(|e| ("roce", format!("[roce]: {e}")))?;
        }
        Ok(())
    }
}

/// `[serve]`: the settings of `ibscope serve` a config file can hold; the command's other
/// options are its own.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ServeSettings {
    /// Address to listen on (host:port). Must be loopback unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:9315", value_name = "ADDR")]
    pub listen: String,
    /// Seconds between counter sweeps.
    #[arg(long, default_value_t = 10.0, value_name = "S", value_parser = parse_seconds)]
    pub interval: f64,
    /// Counter families on the page: all 31 (default), errors (the 12 PortCounters error
    /// counters, SymbolErrorCounter to VL15Dropped, and the 10 breakdown counters, with
    /// series only for ports whose PortRcvErrors or PortXmitDiscards counted) or data (the
    /// 9 traffic counters: data, packets, unicast/multicast packets, XmitWait).
    /// Trims the page only: one PortCounters MAD carries every counter. Link, node and
    /// sweep families are always there.
    #[arg(long, value_enum, default_value_t = CounterFamilies::All, value_name = "WHICH")]
    #[serde(with = "by_flag_name")]
    pub counters: CounterFamilies,
    /// Only ports that are Active (and physically LinkUp) at the last discovery: only their
    /// counters are read, and other ports have no series at all (a port that goes down
    /// leaves the page at the rediscovery this triggers).
    #[arg(long)]
    pub active_only: bool,
    /// Read the counters of switch ports only (fewer MADs; each CA port's traffic is
    /// also seen at its switch port). CA ports then have no port series, CA nodes keep
    /// theirs.
    #[arg(long)]
    pub switches_only: bool,
    /// Allow a non-loopback --listen address over plain HTTP. Off by default because the
    /// metrics describe every node and link of the fabric (not needed with TLS from
    /// --web-config).
    #[arg(long)]
    pub allow_remote: bool,
    /// Rediscover the fabric every N sweeps even without a sign of change (0: never).
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub rediscover_every: u64,
    /// TLS and basic auth, in the exporter-toolkit's web configuration format (YAML, the
    /// --web.config.file of node_exporter): tls_server_config (cert_file, key_file,
    /// min_version TLS12|TLS13, max_version, client_auth_type with client_ca_file) and
    /// basic_auth_users (user: bcrypt hash). With TLS a non-loopback --listen needs no
    /// --allow-remote. A file that cannot be used fails at start.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    #[serde(default, deserialize_with = "relative_to_file")]
    pub web_config: Option<PathBuf>,
    /// Append what changes between discoveries (links down and up, port state changes,
    /// width and speed downshifts) to this JSON Lines file, rotated at 16 MiB to FILE.1;
    /// `ibscope events` reads it and `check --journal` finds flapping links in it.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::AnyPath)]
    #[serde(default, deserialize_with = "relative_to_file")]
    pub journal: Option<PathBuf>,
}

/// `[tui]`: the settings of `ibscope tui` a config file can hold (none yet: a key added
/// here is a flag of `tui` and a key of the file at once).
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct TuiSettings {}

/// Which counter families `/metrics` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CounterFamilies {
    /// All 31.
    All,
    /// The 12 error counters (as `counters` and thresholds use them) and the 10 that break
    /// PortRcvErrors and PortXmitDiscards down.
    Errors,
    /// The 9 data, packet and wait counters.
    Data,
}

impl CounterFamilies {
    /// The counter names on the page, in page order: PortCounters and the extended-only
    /// ones, then the breakdown counters.
    pub fn names(self) -> Vec<&'static str> {
        counters::all_counter_names()
            .into_iter()
            .chain(counters::detail_counter_names())
            .filter(|n| {
                let error = counters::ERROR_COUNTERS.contains(n)
                    || counters::detail_counter_names().contains(n);
                match self {
                    CounterFamilies::Errors => error,
                    CounterFamilies::Data => !error,
                    CounterFamilies::All => true,
                }
            })
            .collect()
    }
}

/// A group of options with nothing given: its defaults (every option of a settings table
/// has one, or is optional).
pub fn defaults<T: Args + FromArgMatches>() -> T {
    let matches = T::augment_args(clap::Command::new("defaults"))
        .try_get_matches_from(["defaults"])
        .expect("every option of a settings table has a default");
    T::from_arg_matches(&matches).expect("a group reads its own defaults")
}

/// One option given on the command line: the config key it sets (its id in kebab case,
/// as the config file names it), its value as its group reads it, and the flag.
#[derive(Debug, Clone)]
pub struct GivenOption {
    pub key: String,
    pub value: serde_json::Value,
    pub flag: String,
}

/// The options of a group given on the command line.
pub type Given = Vec<GivenOption>;

/// The options of group `T` that the command line `matches` holds gave (a command's own
/// matches: the global options it was given included), read again through `T`'s own
/// definitions, so a group need not be the one the command flattened (`host -C` sets `ca`).
pub fn given_options<T: Args + FromArgMatches + Serialize>(matches: &ArgMatches) -> Given {
    let definitions = T::augment_args(clap::Command::new("given"));
    let mut line: Vec<OsString> = vec!["given".into()];
    let mut given = Vec::new();
    for arg in definitions.get_arguments() {
        let id = arg.get_id().as_str();
        let (Ok(Some(raw)), Some(long)) = (matches.try_get_raw(id), arg.get_long()) else {
            continue;
        };
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        if arg.get_action().takes_values() {
            for value in raw {
                let mut option = OsString::from(format!("--{long}="));
                option.push(value);
                line.push(option);
            }
        } else {
            line.push(format!("--{long}").into());
        }
        given.push((id.replace('_', "-"), format!("--{long}")));
    }
    // The values passed the same definitions once already.
    let values = definitions
        .try_get_matches_from(line)
        .ok()
        .and_then(|m| T::from_arg_matches(&m).ok())
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_default();
    given
        .into_iter()
        .filter_map(|(key, flag)| {
            let value = values.get(&key)?.clone();
            Some(GivenOption { key, value, flag })
        })
        .collect()
}

/// A number of seconds above 0 (`serve --interval`, and `[serve] interval`).
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err("must be a positive number of seconds".to_string()),
    }
}

/// `--timeout-ms`, and the config file's `timeout-ms`.
fn parse_timeout_ms(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("must be a number of milliseconds, 1 or more".to_string()),
    }
}

/// `--max-outstanding`, and the config file's `max-outstanding`.
fn parse_max_outstanding(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err("must be 1 to 256".to_string()),
    }
}

/// A path as given: on the command line or in the environment as it is, in a config file
/// relative to the file's directory.
fn relative_to_file<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    let path = Option::<figment::value::magic::RelativePathBuf>::deserialize(d)?;
    Ok(path.map(|p| p.relative()))
}

/// A clap value enum in a config file by the name its flag takes (`counters = "errors"`).
mod by_flag_name {
    use clap::ValueEnum;
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<T: ValueEnum, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        match value.to_possible_value() {
            Some(v) => s.serialize_str(v.get_name()),
            None => Err(serde::ser::Error::custom("a value without a name")),
        }
    }

    pub fn deserialize<'de, T: ValueEnum, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let text = String::deserialize(d)?;
        T::from_str(&text, false).map_err(|_| {
            let names: Vec<String> = T::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_string()))
                .collect();
            let (last, rest) = names.split_last().map_or(("", &[][..]), |(l, r)| (l, r));
            match rest {
                [] => de::Error::custom(format!("must be {last}")),
                _ => de::Error::custom(format!("must be {} or {last}", rest.join(", "))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_split_the_counters() {
        let errors = CounterFamilies::Errors.names();
        let data = CounterFamilies::Data.names();
        let all = CounterFamilies::All.names();
        assert_eq!((errors.len(), data.len(), all.len()), (22, 9, 31));
        assert_eq!(&errors[..12], counters::ERROR_COUNTERS);
        assert_eq!(errors[12..], counters::detail_counter_names());
        assert!(data.contains(&"PortXmitData") && data.contains(&"PortMulticastRcvPkts"));
        assert!(data.contains(&"PortXmitWait"));
        assert!(errors.iter().all(|e| !data.contains(e)));
        let mut both: Vec<_> = errors.iter().chain(&data).copied().collect();
        both.sort_unstable();
        let mut every = all.clone();
        every.sort_unstable();
        assert_eq!(both, every);
    }
}
