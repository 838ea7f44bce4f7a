//! What `ibscope cables` reports: each module where it was read, and each fabric's read
//! summary (the JSON document, and what the table and CSV print).

use ibscope_mad::attr::link::Speed;
use ibscope_mad::cable::{dump, Module};
use ibscope_topo::cable_rates::ModuleRates;
use ibscope_topo::cable_reads::ReadCounts;
use ibscope_topo::findings::Finding;
use ibscope_topo::PortRef;
use serde::Serialize;

/// One module as reported: where it was read and what it says.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// "file", "netdev" or "fabric".
    pub source: &'static str,
    /// The file as given, the netdev's name, or the fabric port as `"node"[port]`.
    pub name: String,
    /// The fabric's name, when several are read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fabric: Option<String>,
    /// The fabric port the module is in, and the port at the link's far end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<PortRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<PortRef>,
    /// The link's active lane speed, when it is up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_speed: Option<Speed>,
    /// Which of its node's modules it is (PMLP), and the module lanes the port uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module_index: Option<u8>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<dump::DumpFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<Module>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub findings: Vec<Finding>,
    /// With --interval: how its values moved between the two reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rates: Option<ModuleRates>,
}

impl Entry {
    pub fn new(source: &'static str, name: String) -> Entry {
        Entry {
            source,
            name,
            fabric: None,
            port: None,
            remote: None,
            link_speed: None,
            module_index: None,
            lanes: Vec::new(),
            format: None,
            module: None,
            error: None,
            findings: Vec::new(),
            rates: None,
        }
    }

    pub fn failed(source: &'static str, name: String, error: String) -> Entry {
        Entry {
            error: Some(error),
            ..Entry::new(source, name)
        }
    }
}

/// What one fabric's module reads came to (ports with an empty cage are not listed under
/// `modules`).
#[derive(Debug, Serialize)]
pub struct FabricModuleReads {
    pub fabric: String,
    #[serde(flatten)]
    pub counts: ReadCounts,
    /// SubnSet(AccessRegister) MADs sent.
    pub mads: u64,
}

/// Everything `cables` found.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub modules: Vec<Entry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fabrics: Vec<FabricModuleReads>,
    /// Fabrics that could not be opened or read: name and error.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<crate::fabric_set::Failed>,
}
