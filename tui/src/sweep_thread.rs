//! The background thread that takes sweeps, so the UI thread never waits on the fabric.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use ibscope_mad::engine::CancelToken;
use ibscope_topo::namemap::NameMap;

use super::source::{Source, Sweep};
use super::state::{prepare, Prepared};

/// What the sweep thread tells the UI.
#[derive(Debug)]
pub enum SweepMsg {
    Started,
    /// A sweep with its rows and events already derived.
    Done(Box<Prepared>),
    /// The source failed; the text is the error chain.
    Failed {
        error: String,
        at: SystemTime,
    },
    /// The connection to the fabric is gone (the source says so, [`Source::connection_lost`]):
    /// no later sweep can work, the sweep thread has ended and the UI should end with this error.
    Lost {
        error: String,
    },
}

/// What the UI tells the sweep thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    SweepNow,
    Stop,
}

pub struct SweepThread {
    pub messages: Receiver<SweepMsg>,
    control: Sender<Control>,
    handle: Option<JoinHandle<()>>,
    /// Handed to the source: cancels a sweep in progress on quit.
    cancel: CancelToken,
}

impl SweepThread {
    /// Start sweeping at once, then every `interval` (measured from the end of a sweep, so
    /// a slow fabric is not swept back to back). `names` are used for the derived rows.
    pub fn spawn(
        mut source: Box<dyn Source>,
        interval: Duration,
        names: Option<NameMap>,
    ) -> std::io::Result<SweepThread> {
        let (msg_tx, messages) = mpsc::channel();
        let (control, ctl_rx) = mpsc::channel::<Control>();
        let cancel = CancelToken::new();
        source.set_cancel(cancel.clone());
        let cancelled = cancel.clone();
        let handle = std::thread::Builder::new()
            .name("ibscope-sweeper".into())
            .spawn(move || {
                let mut previous: Option<Sweep> = None;
                loop {
                    if msg_tx.send(SweepMsg::Started).is_err() {
                        return;
                    }
                    let result = source.sweep();
                    if cancelled.is_cancelled() {
                        // What a cancelled sweep saw is partial: not worth showing.
                        return;
                    }
                    let msg = match result {
                        Ok(s) => {
                            let prepared = prepare(previous.as_ref(), s, names.as_ref());
                            previous = Some(prepared.sweep.clone());
                            SweepMsg::Done(Box::new(prepared))
                        }
                        Err(e) if source.connection_lost() => {
                            let _ = msg_tx.send(SweepMsg::Lost {
                                error: format!("{e:#}"),
                            });
                            return;
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
        Ok(SweepThread {
            messages,
            control,
            handle: Some(handle),
            cancel,
        })
    }

    /// Cancel a sweep in progress and ask the thread to stop, without waiting (so several
    /// sweep threads stop together; [`SweepThread::quit`] then waits).
    pub fn cancel(&self) {
        self.cancel.cancel();
        let _ = self.control.send(Control::Stop);
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

    /// Stop for good: cancel a sweep in progress, then wait up to `grace` for the thread
    /// (its source, and so its MAD engine, is then closed). Returns whether it ended in
    /// time; if not it is left to the process exit.
    pub fn quit(mut self, grace: Duration) -> bool {
        self.cancel.cancel();
        let _ = self.control.send(Control::Stop);
        let Some(handle) = self.handle.take() else {
            return true;
        };
        let deadline = std::time::Instant::now() + grace;
        while !handle.is_finished() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = handle.join();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_mad::engine::{MadError, UmadCall};

    /// Fails every sweep with a lost transport, counting the attempts.
    struct Gone(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl Source for Gone {
        fn sweep(&mut self) -> anyhow::Result<Sweep> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let lost = MadError::TransportLost {
                call: UmadCall::Send,
                errno: libc::EIO,
            };
            Err(anyhow::Error::new(lost).context("counter sweep"))
        }
        fn describe(&self) -> String {
            "gone".into()
        }
        fn connection_lost(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_lost_transport_ends_the_sweeper_with_one_message() {
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let sweeper = SweepThread::spawn(
            Box::new(Gone(calls.clone())),
            Duration::from_millis(1),
            None,
        )
        .unwrap();
        let recv = || sweeper.messages.recv_timeout(Duration::from_secs(10));
        assert!(matches!(recv(), Ok(SweepMsg::Started)));
        match recv() {
            Ok(SweepMsg::Lost { error }) => {
                assert!(
                    error.starts_with("counter sweep: lost the connection"),
                    "{error}"
                )
            }
            other => panic!("expected Lost, got {other:?}"),
        }
        // The thread has ended: no further sweep, the channel is closed.
        assert!(matches!(
            sweeper.messages.recv_timeout(Duration::from_secs(10)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        ));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        sweeper.stop();
    }

    /// Blocks in `sweep` until its token is cancelled, like an engine waiting on a
    /// frozen fabric; records what happened.
    struct Stuck {
        token: Option<CancelToken>,
        saw_cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
        dropped: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    impl Source for Stuck {
        fn sweep(&mut self) -> anyhow::Result<Sweep> {
            let token = self
                .token
                .clone()
                .expect("the sweeper hands out a token first");
            let give_up = std::time::Instant::now() + Duration::from_secs(30);
            while !token.is_cancelled() && std::time::Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.saw_cancel
                .store(token.is_cancelled(), std::sync::atomic::Ordering::SeqCst);
            anyhow::bail!("cancelled")
        }
        fn describe(&self) -> String {
            "stuck".into()
        }
        fn set_cancel(&mut self, token: CancelToken) {
            self.token = Some(token);
        }
    }

    impl Drop for Stuck {
        fn drop(&mut self) {
            self.dropped
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn quit_cancels_a_sweep_in_progress_and_closes_the_source() {
        let saw_cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sweeper = SweepThread::spawn(
            Box::new(Stuck {
                token: None,
                saw_cancel: saw_cancel.clone(),
                dropped: dropped.clone(),
            }),
            Duration::from_secs(60),
            None,
        )
        .unwrap();
        // The sweep has started (and is stuck in sweep).
        assert!(matches!(
            sweeper.messages.recv_timeout(Duration::from_secs(10)),
            Ok(SweepMsg::Started)
        ));
        assert!(sweeper.quit(Duration::from_secs(10)), "thread did not end");
        assert!(saw_cancel.load(std::sync::atomic::Ordering::SeqCst));
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
    }
}
