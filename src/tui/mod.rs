//! `ibscope tui`: the interactive terminal UI.
//!
//! - [`state`]: everything shown, as plain data (unit-testable);
//! - [`keymap`]: the one table of keys: what each does where, the footer and the help;
//! - [`input`]: keys to [`keymap::Action`]s, actions applied to the state;
//! - [`render`]: `draw(frame, &state)`, one function per view;
//! - [`sweeper`]: a thread that turns a [`Source`] into [`Snapshot`]s on a channel;
//! - [`derive`](mod@derive) / [`events`](mod@events): what is computed once per snapshot, and what changed.
//!
//! The terminal is restored on exit, on error, on panic and on a stop signal.

pub mod derive;
pub mod events;
pub mod input;
pub mod keymap;
pub mod render;
pub mod snapshot;
pub mod state;
pub mod sweeper;

use std::io;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event as TermEvent};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use ibscope_topo::namemap::NameMap;
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::Terminal;

pub use snapshot::{FileSource, Finding, PortCounterSample, Snapshot, Source};
pub use state::{AppState, View};
pub use sweeper::{SweepMsg, Sweeper};

/// Options of one UI session.
#[derive(Debug, Clone)]
pub struct Options {
    /// Time between the end of one sweep and the start of the next.
    pub interval: Duration,
    pub names: Option<NameMap>,
}

/// Apply one sweeper message to the state.
pub fn handle_message(state: &mut AppState, msg: SweepMsg, now: Instant) {
    match msg {
        SweepMsg::Started => state.sweep_started(),
        SweepMsg::Done(prepared) => state.apply_prepared(*prepared, now),
        SweepMsg::Failed { error, at } => state.sweep_failed(error, at),
        SweepMsg::Lost { error } => state.sweep_failed(error, std::time::SystemTime::now()),
    }
}

fn restore_terminal() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
}

/// Restores the terminal when dropped: on return and on `?` errors alike.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Leave the alternate screen and raw mode before the panic message prints, so it is
/// readable and the shell is usable.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
}

/// Run the UI until the user quits. Sweeps run on a background thread from `source`.
pub fn run(source: Box<dyn Source>, options: Options) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !io::stdout().is_terminal() {
        anyhow::bail!("ibscope tui needs a terminal on stdout");
    }
    let describe = source.describe();
    let sweeper = Sweeper::spawn(source, options.interval, options.names.clone())?;
    let mut state = AppState::new(options.names, options.interval, Instant::now());
    state.status.source = describe;

    install_panic_hook();
    // A signal only asks the loop to leave (within one tick), so the terminal is restored
    // and the sweeper's port closed; a second one changes nothing.
    crate::signals::install(crate::signals::STOP_SIGNALS, crate::signals::Second::Wait);
    enable_raw_mode()?;
    let _guard = TerminalGuard;
    execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;

    let result = event_loop(
        &mut terminal,
        &mut state,
        &mut LiveEvents { sweeper: &sweeper },
    );
    // A live sweep in progress is cancelled (its MADs fail within one timeout) so the
    // engine closes cleanly; a fabric that holds it longer is left behind at exit.
    sweeper.quit(Duration::from_secs(2));
    result
}

/// What the event loop waits on: snapshots from the sweeper, keys from the terminal.
/// [`run`] gives it the live sweeper and crossterm; a test gives it a script.
pub trait Events {
    /// A sweeper message that has arrived, if any; never waits.
    fn sweep_message(&mut self) -> Option<SweepMsg>;
    /// The next terminal event, waiting at most `timeout`; `None` when none came.
    fn terminal_event(&mut self, timeout: Duration) -> io::Result<Option<TermEvent>>;
    /// Ask the sweeper for a sweep now.
    fn sweep_now(&mut self);
    /// A stop signal came (SIGINT, SIGTERM, SIGHUP): leave as for `q`.
    fn stop_requested(&mut self) -> bool {
        false
    }
}

/// The live session's events: the sweeper's channel and the terminal's input.
struct LiveEvents<'a> {
    sweeper: &'a Sweeper,
}

impl Events for LiveEvents<'_> {
    fn sweep_message(&mut self) -> Option<SweepMsg> {
        self.sweeper.messages.try_recv().ok()
    }
    fn terminal_event(&mut self, timeout: Duration) -> io::Result<Option<TermEvent>> {
        if event::poll(timeout)? {
            event::read().map(Some)
        } else {
            Ok(None)
        }
    }
    fn sweep_now(&mut self) {
        self.sweeper.sweep_now();
    }
    fn stop_requested(&mut self) -> bool {
        crate::signals::received().is_some()
    }
}

/// Redraw at least this often so "updated 3s ago" keeps counting.
const TICK: Duration = Duration::from_millis(250);

/// Until the user quits (or the fabric is lost): take sweeper messages, draw, map keys
/// to actions and apply them.
pub fn event_loop<B: Backend, E: Events>(
    terminal: &mut Terminal<B>,
    state: &mut AppState,
    events: &mut E,
) -> anyhow::Result<()> {
    loop {
        while let Some(msg) = events.sweep_message() {
            if let SweepMsg::Lost { error } = msg {
                // Nothing more can be read: leave the UI with the one message (exit 2).
                return Err(anyhow::anyhow!(error));
            }
            handle_message(state, msg, Instant::now());
        }
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
            events.sweep_now();
        }
    }
}
