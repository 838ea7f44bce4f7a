//! The JSON snapshot (`discover --format json`): the model's [`FabricFile`], which
//! `--topology` reads back losslessly.

use std::io::Write;

use crate::model::{Fabric, FabricFile};

/// Write `fabric` as a pretty-printed JSON snapshot, newline-terminated.
pub fn write_to<W: Write>(w: &mut W, fabric: &Fabric) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, &fabric.to_file())?;
    w.write_all(b"\n")
}

/// Read a snapshot written by [`write_to`] (or an older schema version).
pub fn read(text: &str) -> Result<Fabric, SnapshotError> {
    Ok(Fabric::from_file(FabricFile::from_json(text)?)?)
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a valid ibscope JSON snapshot: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::diff;
    use crate::ibnd::parse;
    use crate::test_fixtures::NET_IBND;

    #[test]
    fn snapshot_round_trip() {
        let f = parse(NET_IBND).unwrap();
        let mut text = Vec::new();
        write_to(&mut text, &f).unwrap();
        assert!(text.ends_with(b"}\n"));
        let back = read(std::str::from_utf8(&text).unwrap()).unwrap();
        let d = diff(&f, &back);
        assert!(d.is_empty(), "{d}");
        assert_eq!(back.to_file(), f.to_file());
        assert!(read("{\"schema_version\": 99, \"nodes\": [], \"links\": []}").is_err());
    }
}
