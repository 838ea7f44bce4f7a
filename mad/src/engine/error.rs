//! How a request fails, worded for the person who has to act on it.

use thiserror::Error;

use crate::error::DecodeError;
use crate::header::MadStatus;
use crate::umad::{errno_description, is_transport_gone, TransportError};

/// The libibumad call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UmadCall {
    Send,
    Recv,
}

impl std::fmt::Display for UmadCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UmadCall::Send => "umad send",
            UmadCall::Recv => "umad receive",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MadError {
    #[error(
        "no reply after {attempts} attempt(s): the target is unreachable (dead link, wrong \
         route or LID) or not answering"
    )]
    Timeout { attempts: u32 },
    #[error("the target answered with MAD status {0}")]
    Status(MadStatus),
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The transport itself is gone (device removed, simulator dead): every request of
    /// the engine fails with this from then on, without being sent.
    #[error(
        "lost the connection to the fabric ({call} failed: {}): is the simulator or the \
         ib_umad device still there?",
        errno_description(*errno)
    )]
    TransportLost { call: UmadCall, errno: i32 },
    #[error("malformed reply: {0}")]
    Decode(#[from] DecodeError),
    /// The engine's [`CancelToken`](super::CancelToken) was set: the request was not sent, or was in flight and
    /// its deadline passed without a reply; no retry is made after a cancel.
    #[error("cancelled before a reply came (the engine is being stopped)")]
    Cancelled,
}

impl MadError {
    /// A transport failure as the engine reports it: [`MadError::TransportLost`] when the
    /// errno says the transport is gone (see [`crate::umad::is_transport_gone`]), else
    /// [`MadError::Transport`].
    pub fn from_transport(error: TransportError) -> MadError {
        match error {
            TransportError::Send { errno } if is_transport_gone(errno) => MadError::TransportLost {
                call: UmadCall::Send,
                errno,
            },
            TransportError::Recv { errno } if is_transport_gone(errno) => MadError::TransportLost {
                call: UmadCall::Recv,
                errno,
            },
            other => MadError::Transport(other),
        }
    }

    pub fn is_transport_lost(&self) -> bool {
        matches!(self, MadError::TransportLost { .. })
    }

    pub fn is_cancelled(&self) -> bool {
        matches!(self, MadError::Cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_errors_are_classified() {
        let lost = MadError::from_transport(TransportError::Send { errno: 5 });
        assert_eq!(
            lost,
            MadError::TransportLost {
                call: UmadCall::Send,
                errno: 5
            }
        );
        assert_eq!(
            lost.to_string(),
            "lost the connection to the fabric (umad send failed: Input/output error): is \
             the simulator or the ib_umad device still there?"
        );
        assert!(MadError::from_transport(TransportError::Recv { errno: 19 }).is_transport_lost());
        let one_mad = MadError::from_transport(TransportError::Send { errno: 22 });
        assert!(!one_mad.is_transport_lost());
        assert!(matches!(one_mad, MadError::Transport(_)));
        assert!(!MadError::Timeout { attempts: 4 }.is_transport_lost());
    }
}
