//! Stopping an engine from another thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag shared between an [`Engine`](super::Engine) and whoever may want to stop it
/// (clones share it). Setting it is one atomic store, so any thread may do it; the engine
/// reads it once per turn of its loop, a single atomic load.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        CancelToken::default()
    }

    /// Stop every engine holding this token: see [`Engine::run`](super::Engine::run) for what happens to the
    /// requests of the running batch.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Clear the flag: the engines holding the token run requests again.
    pub fn reset(&self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MadError;

    #[test]
    fn cancel_tokens_share_one_flag() {
        let token = CancelToken::new();
        let other = token.clone();
        assert!(!token.is_cancelled());
        other.cancel();
        assert!(token.is_cancelled());
        token.reset();
        assert!(!other.is_cancelled());
        assert!(MadError::Cancelled.is_cancelled());
        assert!(!MadError::Cancelled.is_transport_lost());
    }
}
