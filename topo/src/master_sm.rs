//! The master subnet manager the local port knows of, as `sminfo` shows it: its SMInfo and
//! NodeDescription read from its port by LID, and the SA's SMInfoRecord for that LID.

use ibscope_mad::attr::{NodeDescription, SmInfo};
use ibscope_mad::engine::{Engine, MadError, MadPort, Request};
use ibscope_mad::error::DecodeError;
use ibscope_mad::sa::{comp_mask, SmInfoRecord};
use ibscope_mad::smp::SmpRoute;
use serde::Serialize;

use crate::sa_tables::sa_error;

/// The local port names no SM.
pub const NO_SM: &str = "no subnet manager: the local port's SM LID is 0 — is opensm running?";

/// Why the master SM could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SmQueryError {
    #[error("{NO_SM}")]
    NoSm,
    #[error("SMInfo query to the SM at LID {lid}")]
    SmInfo {
        lid: u16,
        #[source]
        source: MadError,
    },
}

/// The master SM (the `sm` command's JSON, in this order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MasterSm {
    pub lid: u16,
    /// 0x-hex, 16 digits.
    pub guid: String,
    pub priority: u8,
    pub state: &'static str,
    pub state_code: u8,
    pub act_count: u32,
    /// None when the SM's node does not answer it.
    pub node_description: Option<String>,
    /// The SA's record, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sa_record: Option<SaSmRecord>,
}

/// The SA's SMInfoRecord of the master SM, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum SaSmRecord {
    Found {
        lid: u16,
        guid: String,
        priority: u8,
        state: &'static str,
        state_code: u8,
        act_count: u32,
    },
    Failed {
        /// The error and its causes, as one line.
        error: String,
    },
}

/// Why the SA's SMInfoRecord could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SaRecordError {
    #[error("SA SMInfoRecord query")]
    Query {
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// SMInfo and NodeDescription by SMP, plus the SA's SMInfoRecord when `with_sa`.
pub fn query<P: MadPort>(engine: &mut Engine<P>, with_sa: bool) -> Result<MasterSm, SmQueryError> {
    let sm_lid = engine.local().sm_lid;
    if sm_lid == 0 {
        return Err(SmQueryError::NoSm);
    }
    let route = SmpRoute::Lid(sm_lid);
    let info = engine
        .get::<SmInfo>(&route, 0)
        .map_err(|source| SmQueryError::SmInfo {
            lid: sm_lid,
            source,
        })?;
    // The description is a nicety: an SM whose node does not answer it is still the SM.
    let description = engine
        .get::<NodeDescription>(&route, 0)
        .ok()
        .map(|d| d.text());
    let sa_record = with_sa.then(|| match sa_sm_info_record(engine, sm_lid) {
        Ok(rec) => {
            let s = &rec.sm_info;
            SaSmRecord::Found {
                lid: rec.lid,
                guid: format!("{:#018x}", s.guid),
                priority: s.priority,
                state: s.state_name(),
                state_code: s.sm_state,
                act_count: s.act_count,
            }
        }
        Err(e) => SaSmRecord::Failed {
            error: chain_text(&e),
        },
    });
    Ok(MasterSm {
        lid: sm_lid,
        guid: format!("{:#018x}", info.guid),
        priority: info.priority,
        state: info.state_name(),
        state_code: info.sm_state,
        act_count: info.act_count,
        node_description: description,
        sa_record,
    })
}

/// SubnAdmGet(SMInfoRecord) for the SM at `sm_lid`.
pub fn sa_sm_info_record<P: MadPort>(
    engine: &mut Engine<P>,
    sm_lid: u16,
) -> Result<SmInfoRecord, SaRecordError> {
    let template = SmInfoRecord {
        lid: sm_lid,
        ..Default::default()
    };
    let reply = engine
        .call(Request::sa_get(
            sm_lid,
            comp_mask::sm_info_record::LID,
            &template,
        ))
        .map_err(|e| SaRecordError::Query {
            source: sa_error(e),
        })?;
    Ok(reply.decode::<SmInfoRecord>()?)
}

/// An error and its causes on one line, "outer: inner: ...".
fn chain_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_mad::header::MadStatus;

    #[test]
    fn a_failed_sa_record_reads_as_its_whole_chain() {
        let e = SaRecordError::Query {
            source: sa_error(MadError::Status(MadStatus(0x0300))),
        };
        assert_eq!(
            chain_text(&e),
            "SA SMInfoRecord query: no record matches (SA status 0x0300)"
        );
        let lost = SaRecordError::Query {
            source: sa_error(MadError::Timeout { attempts: 4 }),
        };
        assert_eq!(
            chain_text(&lost),
            format!(
                "SA SMInfoRecord query: {}",
                MadError::Timeout { attempts: 4 }
            )
        );
    }
}
