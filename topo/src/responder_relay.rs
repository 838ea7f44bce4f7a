//! The in-process fabric ([`crate::responder`]) served over the agent protocol
//! (`ibscope_mad::relay::serve`), so that a whole `ibscope` run, its command line to its
//! output, can work on it: `ibscope sim responder` is the agent a `[[fabric]]` table starts.
//! The relay sends from one thread and receives on another; both share the one port.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ibscope_mad::engine::{Dest, LocalPort, MadPort, Received, TransportError};
use ibscope_mad::header::{class, MadHeader, MAD_SIZE};
use ibscope_mad::relay::Receiver;
use ibscope_mad::smp::{DrPath, SmpFrame, SmpRoute};

use crate::responder::FabricPort;

/// The sending side: the port the relay's main loop sends through.
pub struct SharedPort {
    port: Arc<Mutex<FabricPort>>,
    info: LocalPort,
}

/// The receiving side, for the relay's receiver thread.
pub struct SharedReceiver {
    port: Arc<Mutex<FabricPort>>,
}

/// The two sides of `port`.
pub fn split(port: FabricPort) -> (SharedPort, SharedReceiver) {
    let info = port.info().clone();
    let port = Arc::new(Mutex::new(port));
    (
        SharedPort {
            port: port.clone(),
            info,
        },
        SharedReceiver { port },
    )
}

impl MadPort for SharedPort {
    fn info(&self) -> &LocalPort {
        &self.info
    }
    fn register(&mut self, mgmt_class: u8, version: u8) -> Result<u32, TransportError> {
        let mut port = self.port.lock().unwrap_or_else(PoisonError::into_inner);
        port.register(mgmt_class, version)
    }
    fn unregister(&mut self, agent: u32) {
        let mut port = self.port.lock().unwrap_or_else(PoisonError::into_inner);
        port.unregister(agent);
    }
    fn send(
        &mut self,
        agent: u32,
        mad: &[u8; MAD_SIZE],
        dest: &Dest,
        timeout_ms: u32,
        retries: u32,
    ) -> Result<(), TransportError> {
        let dest = smp_dest(mad, dest);
        let mut port = self.port.lock().unwrap_or_else(PoisonError::into_inner);
        port.send(agent, mad, &dest, timeout_ms, retries)
    }
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        SharedReceiver {
            port: self.port.clone(),
        }
        .recv(timeout_ms)
    }
}

/// Where a relayed MAD goes: the relay carries only a umad address (a LID), so an SMP's
/// route is read back from the MAD itself, as the kernel's SMI does: a directed route from
/// its HopCount and InitialPath, a LID-routed one from the address.
fn smp_dest(mad: &[u8; MAD_SIZE], dest: &Dest) -> Dest {
    let lid = match dest {
        Dest::Gsi { lid, .. } => *lid,
        other => return other.clone(),
    };
    match MadHeader::mgmt_class.read(&mad[..]) {
        Ok(class::SMI_DIRECT) => {
            let hops = usize::from(SmpFrame::hop_count.read(&mad[..]).unwrap_or(0));
            let initial = SmpFrame::initial_path.bytes(&mad[..]).unwrap_or(&[]);
            match initial.get(1..=hops).map(DrPath::from_hops) {
                Some(Ok(path)) => Dest::Smp(SmpRoute::Directed(path)),
                _ => dest.clone(),
            }
        }
        Ok(class::SMI_LID) => Dest::Smp(SmpRoute::Lid(lid)),
        _ => dest.clone(),
    }
}

impl Receiver for SharedReceiver {
    /// Polls the shared port without holding it while waiting, so sends go on meanwhile.
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        let until = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
        loop {
            let got = {
                let mut port = self.port.lock().unwrap_or_else(PoisonError::into_inner);
                port.recv(0)?
            };
            if got.is_some() || Instant::now() >= until {
                return Ok(got);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
