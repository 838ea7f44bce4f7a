//! Checking ibscope's JSON against its published schemas (docs/json/, draft 2020-12) and
//! against what scripts rely on whatever a schema says.

use std::path::PathBuf;

use jsonschema::{Draft, Retrieve, Uri, Validator};
use serde_json::Value;

use super::{json_guid, repo_root};

pub fn schema_dir() -> PathBuf {
    repo_root().join("docs/json")
}

/// Resolves the schemas' relative `$ref`s ("common.schema.json#/...") to docs/json/.
pub struct DocsDir;

impl Retrieve for DocsDir {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let name = uri.path().as_str().rsplit('/').next().unwrap_or_default();
        let text = std::fs::read_to_string(schema_dir().join(name))?;
        Ok(serde_json::from_str(&text)?)
    }
}

pub fn validator(name: &str) -> Validator {
    let path = schema_dir().join(format!("{name}.schema.json"));
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    jsonschema::options()
        .with_draft(Draft::Draft202012)
        .with_base_uri(format!("file:///docs/json/{name}.schema.json"))
        .with_retriever(DocsDir)
        .build(&schema)
        .unwrap_or_else(|e| panic!("schema {name}: {e}"))
}

/// Members that break scripts: GUIDs that are not "0x…" text, integers above 2^53.
pub fn untrustworthy(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                if k.ends_with("guid") && !x.is_null() && json_guid(x).is_none() {
                    out.push(format!("{p} = {x} is not a GUID string"));
                }
                untrustworthy(x, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                untrustworthy(x, &format!("{path}[{i}]"), out);
            }
        }
        Value::Number(n) if n.as_u64().is_some_and(|u| u > (1 << 53)) => {
            out.push(format!("{path} = {n} is above 2^53"));
        }
        _ => {}
    }
}

/// Parse `text` (one document, or for `per_line` one after another) and check each against
/// schema `name`; returns the documents.
pub fn assert_valid(name: &str, what: &str, text: &str, per_line: bool) -> Vec<Value> {
    // `counters --interval` and `counters` on several fabrics write one document per
    // line; a single sample is one (pretty) document.
    let docs: Vec<Value> = if per_line && serde_json::from_str::<Value>(text).is_err() {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .map(|d| d.unwrap_or_else(|e| panic!("{what}: {e}:\n{text}")))
            .collect()
    } else {
        vec![serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}:\n{text}"))]
    };
    assert!(!docs.is_empty(), "{what}: no JSON");
    let v = validator(name);
    for doc in &docs {
        let mut problems: Vec<String> = v
            .iter_errors(doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        untrustworthy(doc, "", &mut problems);
        assert!(
            problems.is_empty(),
            "{what} against docs/json/{name}.schema.json:\n{}\n{}",
            problems.join("\n"),
            serde_json::to_string_pretty(doc).unwrap()
        );
    }
    docs
}
