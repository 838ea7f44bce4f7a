//! The background thread that takes snapshots, so the UI thread never waits on the fabric.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use ibscope_topo::namemap::NameMap;

use super::snapshot::{Snapshot, Source};
use super::state::{prepare, Prepared};

/// What the sweeper tells the UI.
#[derive(Debug)]
pub enum SweepMsg {
    Started,
    /// A snapshot with its rows and events already derived.
    Done(Box<Prepared>),
    /// The source failed; the text is the error chain.
    Failed {
        error: String,
        at: SystemTime,
    },
}

/// What the UI tells the sweeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    SweepNow,
    Stop,
}

pub struct Sweeper {
    pub messages: Receiver<SweepMsg>,
    control: Sender<Control>,
    handle: Option<JoinHandle<()>>,
}

impl Sweeper {
    /// Start sweeping at once, then every `interval` (measured from the end of a sweep, so
    /// a slow fabric is not swept back to back). `names` are used for the derived rows.
    pub fn spawn(
        mut source: Box<dyn Source>,
        interval: Duration,
        names: Option<NameMap>,
    ) -> std::io::Result<Sweeper> {
        let (msg_tx, messages) = mpsc::channel();
        let (control, ctl_rx) = mpsc::channel::<Control>();
        let handle = std::thread::Builder::new()
            .name("ibscope-sweeper".into())
            .spawn(move || {
                let mut previous: Option<Snapshot> = None;
                loop {
                    if msg_tx.send(SweepMsg::Started).is_err() {
                        return;
                    }
                    let msg = match source.snapshot() {
                        Ok(s) => {
                            let prepared = prepare(previous.as_ref(), s, names.as_ref());
                            previous = Some(prepared.snapshot.clone());
                            SweepMsg::Done(Box::new(prepared))
                        }
                        Err(e) => SweepMsg::Failed {
                            error: format!("{e:#}"),
                            at: SystemTime::now(),
                        },
                    };
                    if msg_tx.send(msg).is_err() {
                        return;
                    }
                    match ctl_rx.recv_timeout(interval) {
                        Ok(Control::SweepNow) | Err(RecvTimeoutError::Timeout) => {}
                        Ok(Control::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                    // Requests that piled up during the sweep mean one more sweep, not several.
                    while let Ok(c) = ctl_rx.try_recv() {
                        if c == Control::Stop {
                            return;
                        }
                    }
                }
            })?;
        Ok(Sweeper {
            messages,
            control,
            handle: Some(handle),
        })
    }

    pub fn sweep_now(&self) {
        let _ = self.control.send(Control::SweepNow);
    }

    /// Ask the thread to stop and wait for it (it finishes a sweep in progress first).
    pub fn stop(mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }

    /// Ask the thread to stop without waiting: a live sweep may take a while, and the
    /// process is exiting anyway.
    pub fn detach(mut self) {
        let _ = self.control.send(Control::Stop);
        self.handle.take();
    }
}
