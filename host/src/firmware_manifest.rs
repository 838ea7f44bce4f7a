//! `ibscope host --check --firmware MANIFEST`: the firmware each HCA model should run.
//!
//! The manifest is `KEY=VERSION` lines (blank lines and `#` comments skipped), KEY an HCA's
//! board_id (PSID, the most specific), its model (`hca_type`, e.g. MT4129) or its PCI
//! device id in decimal (`vendor_part_id`, e.g. 4129); the first of these the manifest
//! names decides.

use std::collections::BTreeMap;

use ibscope_topo::findings::{Finding, FindingKind};

use crate::model::{Device, LocalHost};
use crate::preflight::HostFinding;

/// A manifest line that is not `KEY=VERSION`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct ManifestError {
    pub line: usize,
    pub reason: String,
}

/// Expected firmware by board_id, model or PCI device id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirmwareManifest {
    expected: BTreeMap<String, String>,
}

impl FirmwareManifest {
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        let mut expected = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let error = |reason: &str| ManifestError {
                line: i + 1,
                reason: reason.into(),
            };
            let (key, version) = line
                .split_once('=')
                .ok_or_else(|| error("expected KEY=VERSION"))?;
            let (key, version) = (key.trim(), version.trim().trim_matches('"'));
            if key.is_empty() || version.is_empty() {
                return Err(error("empty key or version"));
            }
            expected.insert(key.to_string(), version.to_string());
        }
        Ok(FirmwareManifest { expected })
    }

    /// Whether the manifest names no firmware at all.
    pub fn is_empty(&self) -> bool {
        self.expected.is_empty()
    }

    /// The manifest's version for this device and the key that chose it.
    fn expected_for(&self, d: &Device) -> Option<(&str, &str)> {
        let part = d.vendor_part_id.map(|p| p.to_string());
        let keys = [
            d.board_id.as_deref(),
            d.hca_type.as_deref(),
            part.as_deref(),
        ];
        let (key, version) = keys
            .into_iter()
            .flatten()
            .find_map(|k| self.expected.get_key_value(k))?;
        Some((key.as_str(), version.as_str()))
    }

    /// A finding for each device whose firmware differs from (or is unknown against) the
    /// manifest's; devices the manifest does not name are not judged.
    pub fn check(&self, host: &LocalHost) -> Vec<HostFinding> {
        let mut out = Vec::new();
        for d in &host.devices {
            let Some((key, want)) = self.expected_for(d) else {
                continue;
            };
            let have = d.fw_ver.as_deref();
            if have == Some(want) {
                continue;
            }
            let message = format!(
                "runs firmware {} where the manifest expects {want} for {key}",
                have.unwrap_or("unknown")
            );
            out.push(HostFinding {
                device: Some(d.name.clone()),
                finding: Finding::new(FindingKind::FirmwareNotExpected, message),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::tests::host;

    fn device(name: &str, model: &str, board: &str, fw: &str) -> Device {
        let mut d = Device::named(name);
        d.hca_type = Some(model.into());
        d.board_id = Some(board.into());
        d.fw_ver = Some(fw.into());
        d
    }

    #[test]
    fn parses_lines_comments_and_rejects_garbage() {
        let m = FirmwareManifest::parse(
            "# fleet\nMT4129 = 28.40.1000\n\nMT_0000000838=\"28.41.1000\" # PSID\n",
        )
        .unwrap();
        assert_eq!(m.expected.len(), 2);
        assert_eq!(m.expected["MT_0000000838"], "28.41.1000");
        assert_eq!(
            FirmwareManifest::parse("MT4129 28.40").unwrap_err(),
            ManifestError {
                line: 1,
                reason: "expected KEY=VERSION".into()
            }
        );
        assert_eq!(FirmwareManifest::parse("\n=1").unwrap_err().line, 2);
        assert!(FirmwareManifest::parse("\u{0}\u{ff}").is_err());
    }

    #[test]
    fn off_manifest_firmware_is_a_finding_and_board_id_wins_over_model() {
        let m = FirmwareManifest::parse("MT4129=28.40.1000\nMT_SPECIAL=28.41.2000\n").unwrap();
        let h = host(vec![
            device("mlx5_0", "MT4129", "MT_0000000838", "28.40.1000"),
            device("mlx5_1", "MT4129", "MT_0000000838", "28.39.1002"),
            device("mlx5_2", "MT4129", "MT_SPECIAL", "28.40.1000"),
            device("mlx5_3", "MT4125", "MT_OTHER", "22.1.1"),
        ]);
        let f = m.check(&h);
        let messages: Vec<&str> = f.iter().map(|f| f.finding.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "runs firmware 28.39.1002 where the manifest expects 28.40.1000 for MT4129",
                "runs firmware 28.40.1000 where the manifest expects 28.41.2000 for MT_SPECIAL",
            ]
        );
        assert!(f
            .iter()
            .all(|f| f.finding.kind == FindingKind::FirmwareNotExpected));
        // The device is named once, where the text names what a finding is about.
        assert_eq!(
            f[0].text_line(),
            "[firmware-not-expected] mlx5_1: runs firmware 28.39.1002 where the manifest \
             expects 28.40.1000 for MT4129"
        );
    }
}
