//! Errors of the wire codecs. Every decoder takes untrusted bytes, so every failure is a value.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The buffer ends before the structure does.
    #[error("{what}: need {need} bytes, got {got}")]
    Truncated {
        what: &'static str,
        need: usize,
        got: usize,
    },
    /// A field holds a value the specification does not allow here.
    #[error("{what}: invalid value {value:#x}")]
    Invalid { what: &'static str, value: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    #[error("{what}: buffer of {got} bytes, need {need}")]
    BufferTooSmall {
        what: &'static str,
        need: usize,
        got: usize,
    },
    #[error("{what}: value {value:#x} does not fit in {bits} bits")]
    Overflow {
        what: &'static str,
        value: u64,
        bits: usize,
    },
}
