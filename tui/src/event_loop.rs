//! The event loop: sweep-thread messages into their fabric's state, the fabric shown drawn,
//! keys mapped to actions and applied. Generic over the ratatui backend and over
//! [`Inputs`], so a test drives it with a script on a `TestBackend`.

use std::io;
use std::time::{Duration, Instant};

use crossterm::event::Event as TermEvent;
use ratatui::backend::Backend;
use ratatui::Terminal;

use crate::input;
use crate::plane_findings;
use crate::render;
use crate::state::AppState;
use crate::sweep_thread::SweepMsg;

/// Apply one sweep thread message to the state.
pub fn handle_message(state: &mut AppState, msg: SweepMsg, now: Instant) {
    match msg {
        SweepMsg::Started => state.sweep_started(),
        SweepMsg::Done(prepared) => state.apply_prepared(*prepared, now),
        SweepMsg::Failed { error, at } => state.sweep_failed(error, at),
        SweepMsg::Lost { error } => state.sweep_failed(error, std::time::SystemTime::now()),
    }
}

/// What the event loop waits on: sweeps from the sweep threads (one per fabric), keys from
/// the terminal. [`run`](crate::session::run) gives it the live sweep threads and crossterm; a test gives it a
/// script.
pub trait Inputs {
    /// A sweep thread message that has arrived, if any, with its fabric's index; never waits.
    fn sweep_message(&mut self) -> Option<(usize, SweepMsg)>;
    /// The next terminal event, waiting at most `timeout`; `None` when none came.
    fn terminal_event(&mut self, timeout: Duration) -> io::Result<Option<TermEvent>>;
    /// Ask a fabric's sweep thread for a sweep now.
    fn sweep_now(&mut self, fabric: usize);
    /// A stop signal came (SIGINT, SIGTERM, SIGHUP): leave as for `q`.
    fn stop_requested(&mut self) -> bool {
        false
    }
}

/// Redraw at least this often so "updated 3s ago" keeps counting.
const TICK: Duration = Duration::from_millis(250);

/// Until the user quits (or every fabric is lost): take sweep thread messages into their
/// fabric's state (and, with several fabrics, their planes' findings), draw the fabric
/// shown, map keys to actions and apply them to it.
/// `states` holds one state per fabric (at least one), in the order of their indexes.
pub fn event_loop<B: Backend, E: Inputs>(
    terminal: &mut Terminal<B>,
    states: &mut [AppState],
    events: &mut E,
) -> anyhow::Result<()> {
    if states.is_empty() {
        anyhow::bail!("no fabric to show");
    }
    let mut shown = 0;
    let mut lost = vec![false; states.len()];
    loop {
        let mut swept = false;
        while let Some((i, msg)) = events.sweep_message() {
            let Some(state) = states.get_mut(i) else {
                continue;
            };
            swept |= matches!(msg, SweepMsg::Done(_));
            if let SweepMsg::Lost { error } = msg {
                lost[i] = true;
                // Nothing more can be read from any fabric: leave the UI with the one
                // message (exit 2). With others still there, this one shows it failed.
                if lost.iter().all(|l| *l) {
                    return Err(anyhow::anyhow!(error));
                }
                state.sweep_failed(error, std::time::SystemTime::now());
                continue;
            }
            handle_message(state, msg, Instant::now());
        }
        if swept {
            // A new sweep of one plane can change what the others' planes disagree on.
            plane_findings::refresh(states);
        }
        let state = &mut states[shown];
        state.now = Instant::now();
        terminal.draw(|f| render::draw(f, state))?;
        let mut wait = TICK;
        // Drain what is queued so a held key does not lag behind.
        while let Some(ev) = events.terminal_event(wait)? {
            if let TermEvent::Key(key) = ev {
                if let Some(action) = input::map_key(state, key) {
                    input::apply(state, action);
                }
            }
            if state.quit {
                break;
            }
            wait = Duration::ZERO;
        }
        if state.quit || events.stop_requested() {
            return Ok(());
        }
        if std::mem::take(&mut state.sweep_requested) {
            events.sweep_now(shown);
        }
        let step = std::mem::take(&mut state.fabric_step);
        if step != 0 {
            // The next fabric keeps the view (and help) the user is in.
            let (view, help) = (state.view, state.help);
            shown = (shown as isize + step).rem_euclid(states.len() as isize) as usize;
            states[shown].view = view;
            states[shown].help = help;
        }
    }
}
