//! The engine's port: a local umad port, or one served by an agent through a relay.

use std::time::Duration;

use crate::header::MAD_SIZE;
use crate::relay::{AgentCommand, RelayPort};
use crate::umad::{Dest, LocalPort, MadPort, Received, TransportError, UmadPort};

/// A local port opened here, or a port an `ibscope agent` opened in another process.
#[derive(Debug)]
pub enum AnyPort {
    Umad(UmadPort),
    Relay(RelayPort),
}

/// How long a relay command may take to answer (an ssh login included).
pub const RELAY_HELLO_TIMEOUT: Duration = Duration::from_secs(30);

impl AnyPort {
    /// A local CA port (see [`UmadPort::open`] for the defaults).
    pub fn open(ca: Option<&str>, port: Option<u8>) -> Result<AnyPort, TransportError> {
        UmadPort::open(ca, port).map(AnyPort::Umad)
    }

    /// The port of the agent `agent` starts; `stop` returning true gives up waiting for it.
    pub fn relay(agent: &AgentCommand, stop: &dyn Fn() -> bool) -> Result<AnyPort, TransportError> {
        RelayPort::spawn(agent, RELAY_HELLO_TIMEOUT, stop).map(AnyPort::Relay)
    }

    /// The relay command, for a port reached through one.
    pub fn relay_command(&self) -> Option<&str> {
        match self {
            AnyPort::Umad(_) => None,
            AnyPort::Relay(r) => Some(r.command()),
        }
    }
}

impl MadPort for AnyPort {
    fn info(&self) -> &LocalPort {
        match self {
            AnyPort::Umad(p) => p.info(),
            AnyPort::Relay(p) => p.info(),
        }
    }
    fn register(&mut self, mgmt_class: u8, version: u8) -> Result<u32, TransportError> {
        match self {
            AnyPort::Umad(p) => p.register(mgmt_class, version),
            AnyPort::Relay(p) => p.register(mgmt_class, version),
        }
    }
    fn unregister(&mut self, agent: u32) {
        match self {
            AnyPort::Umad(p) => p.unregister(agent),
            AnyPort::Relay(p) => p.unregister(agent),
        }
    }
    fn send(
        &mut self,
        agent: u32,
        mad: &[u8; MAD_SIZE],
        dest: &Dest,
        timeout_ms: u32,
        retries: u32,
    ) -> Result<(), TransportError> {
        match self {
            AnyPort::Umad(p) => p.send(agent, mad, dest, timeout_ms, retries),
            AnyPort::Relay(p) => p.send(agent, mad, dest, timeout_ms, retries),
        }
    }
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        match self {
            AnyPort::Umad(p) => p.recv(timeout_ms),
            AnyPort::Relay(p) => p.recv(timeout_ms),
        }
    }
    fn is_in_process(&self) -> bool {
        match self {
            AnyPort::Umad(p) => p.is_in_process(),
            AnyPort::Relay(p) => p.is_in_process(),
        }
    }
}
