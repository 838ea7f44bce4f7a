//! Why an SMP to a port got no reply, when M_Key protection (IBA 14.2.4) explains it: the
//! words `port disable|enable` print instead of a bare timeout.

use ibscope_mad::attr::PortInfo;
use ibscope_mad::engine::MadError;

use crate::PortRef;

/// SubnGet or SubnSet, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmpMethod {
    Get,
    Set,
}

impl std::fmt::Display for SmpMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SmpMethod::Get => "SubnGet",
            SmpMethod::Set => "SubnSet",
        })
    }
}

/// Why an SMP to a port got no reply, when M_Key protection (IBA 14.2.4) explains it.
///
/// `guard` is the PortInfo of the port whose M_Key is checked (a switch's port 0, a CA's
/// own port) as read, or None when it could not be read; `sent` is the M_Key the SMP
/// carried. A port discards a SubnSet with the wrong M_Key whenever it has a non-zero
/// M_Key; with protect bits 1 it answers a SubnGet but shows M_Key 0, with 2 or 3 it
/// discards SubnGets too. Only a timeout is explained; other errors have their own words.
pub fn explain_no_reply(
    method: SmpMethod,
    at: &PortRef,
    guard: Option<&PortInfo>,
    sent: u64,
    node_answered: bool,
    error: &MadError,
) -> Option<String> {
    let at_text = at.report_text();
    if !matches!(error, MadError::Timeout { .. }) {
        return None;
    }
    let head = format!("{method} PortInfo to {at_text} got no reply");
    match guard {
        // Shown as 0 means hidden (a wrong key); shown equal to ours means ours is right.
        Some(info) if info.m_key_protect_bits > 0 && (info.m_key == 0 || info.m_key != sent) => {
            Some(format!(
                "{head}: the port is M_Key protected (protect bits {}); pass the subnet's \
                 M_Key with --m-key",
                info.m_key_protect_bits
            ))
        }
        Some(info) if method == SmpMethod::Set && info.m_key != 0 && info.m_key != sent => {
            Some(format!(
                "{head}: the port has an M_Key (protect bits 0) and the SubnSet carried \
                 another; pass the subnet's M_Key with --m-key"
            ))
        }
        Some(_) => None,
        None if node_answered => Some(format!(
            "{head}, although the node answered during discovery: a port with M_Key protect \
             bits 2 or 3 discards SubnGets carrying the wrong M_Key; if the SM sets M_Keys, \
             pass the subnet's M_Key with --m-key"
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NodeKind, NodeRef};

    fn at() -> PortRef {
        PortRef {
            node: NodeRef {
                guid: 0x20,
                kind: NodeKind::Switch,
                name: "sw\x1b[2J1".into(),
            },
            port: 5,
            lid: 3,
            host: None,
            rail: None,
        }
    }

    fn guard(protect_bits: u8, m_key: u64) -> PortInfo {
        PortInfo {
            m_key_protect_bits: protect_bits,
            m_key,
            ..Default::default()
        }
    }

    const TIMEOUT: MadError = MadError::Timeout { attempts: 4 };

    #[test]
    fn protected_port_that_hides_its_key_explains_a_lost_set() {
        // Protect bits 1: a Get with the wrong key answers with M_Key shown as 0.
        let msg =
            explain_no_reply(SmpMethod::Set, &at(), Some(&guard(1, 0)), 0, true, &TIMEOUT).unwrap();
        assert_eq!(
            msg,
            "SubnSet PortInfo to \"sw\\x1b[2J1\" (0x0000000000000020) port 5 got no reply: \
             the port is M_Key protected (protect bits 1); pass the subnet's M_Key with --m-key"
        );
        // The wrong key sent explicitly: same.
        assert!(explain_no_reply(
            SmpMethod::Set,
            &at(),
            Some(&guard(3, 0)),
            0x99,
            true,
            &TIMEOUT
        )
        .unwrap()
        .contains("protect bits 3"));
    }

    #[test]
    fn right_key_or_no_protection_is_not_blamed() {
        // We sent the key the port shows: something else lost the reply.
        let right = guard(2, 0xabc);
        assert_eq!(
            explain_no_reply(SmpMethod::Set, &at(), Some(&right), 0xabc, true, &TIMEOUT),
            None
        );
        // No M_Key at all.
        assert_eq!(
            explain_no_reply(SmpMethod::Set, &at(), Some(&guard(0, 0)), 0, true, &TIMEOUT),
            None
        );
        // Not a timeout: the port answered, M_Key passed.
        let status = MadError::Status(ibscope_mad::header::MadStatus(0x1c));
        assert_eq!(
            explain_no_reply(SmpMethod::Set, &at(), Some(&guard(1, 0)), 0, true, &status),
            None
        );
    }

    #[test]
    fn unprotected_key_mismatch_explains_a_set_only() {
        let shown = guard(0, 0x1234);
        let msg = explain_no_reply(SmpMethod::Set, &at(), Some(&shown), 0, true, &TIMEOUT).unwrap();
        assert!(msg.contains("has an M_Key (protect bits 0)"), "{msg}");
        assert!(msg.ends_with("--m-key"));
        // A Get at protect bits 0 always succeeds: its timeout is not the key's fault.
        assert_eq!(
            explain_no_reply(SmpMethod::Get, &at(), Some(&shown), 0, true, &TIMEOUT),
            None
        );
    }

    #[test]
    fn unreadable_port_info_of_a_node_that_answers_suggests_the_key() {
        let msg = explain_no_reply(SmpMethod::Get, &at(), None, 0, true, &TIMEOUT).unwrap();
        assert!(
            msg.starts_with("SubnGet PortInfo to \"sw\\x1b[2J1\""),
            "{msg}"
        );
        assert!(msg.contains("protect bits 2 or 3"));
        assert!(!msg.contains('\x1b'), "fabric text escaped");
        assert_eq!(
            explain_no_reply(SmpMethod::Get, &at(), None, 0, false, &TIMEOUT),
            None
        );
    }
}
