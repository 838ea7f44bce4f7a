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
pub mod event_log;
pub mod input;
pub mod keymap;
pub mod plane_findings;
pub mod render;
pub mod source;
pub mod state;
pub mod sweep_thread;
pub mod views;

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

pub use source::{FileSource, Finding, PortCounterSample, Snapshot, Source};
pub use state::{AppState, FabricTag, View};
pub use sweep_thread::{SweepMsg, Sweeper};

/// Options of one UI session.
#[derive(Debug, Clone)]
pub struct Options {
    /// Time between the end of one sweep and the start of the next.
    pub interval: Duration,
    pub names: Option<NameMap>,
    /// Whether a stop signal (SIGINT, SIGTERM, SIGHUP) came: the UI then leaves as for
    /// `q`. The caller installs the handlers before [`run`].
    pub stop_requested: fn() -> bool,
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

/// One fabric the UI watches: its name (`None`: the only one, and the header names none)
/// and where its snapshots come from.
pub struct FabricSource {
    pub name: Option<String>,
    pub source: Box<dyn Source>,
}

/// Run the UI until the user quits. Each fabric is swept on its own background thread
/// (a slow one never holds up another); `f` switches between them.
pub fn run(fabrics: Vec<FabricSource>, options: Options) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !io::stdout().is_terminal() {
        anyhow::bail!("ibscope tui needs a terminal on stdout");
    }
    let count = fabrics.len();
    let mut sweepers = Vec::with_capacity(count);
    let mut states = Vec::with_capacity(count);
    for (index, f) in fabrics.into_iter().enumerate() {
        let mut state = AppState::new(options.names.clone(), options.interval, Instant::now());
        state.status.source = f.source.describe();
        state.status.fabric = f.name.map(|name| FabricTag { name, index, count });
        sweepers.push(Sweeper::spawn(
            f.source,
            options.interval,
            options.names.clone(),
        )?);
        states.push(state);
    }

    install_panic_hook();
    enable_raw_mode()?;
    let _guard = TerminalGuard;
    execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;

    let result = event_loop(
        &mut terminal,
        &mut states,
        &mut LiveEvents {
            sweepers: &sweepers,
            stop_requested: options.stop_requested,
        },
    );
    // A live sweep in progress is cancelled (its MADs fail within one timeout) so the
    // engine closes cleanly; a fabric that holds it longer is left behind at exit.
    for s in &sweepers {
        s.cancel();
    }
    for s in sweepers {
        s.quit(Duration::from_secs(2));
    }
    result
}

/// What the event loop waits on: snapshots from the sweepers (one per fabric), keys from
/// the terminal. [`run`] gives it the live sweepers and crossterm; a test gives it a
/// script.
pub trait Events {
    /// A sweeper message that has arrived, if any, with its fabric's index; never waits.
    fn sweep_message(&mut self) -> Option<(usize, SweepMsg)>;
    /// The next terminal event, waiting at most `timeout`; `None` when none came.
    fn terminal_event(&mut self, timeout: Duration) -> io::Result<Option<TermEvent>>;
    /// Ask a fabric's sweeper for a sweep now.
    fn sweep_now(&mut self, fabric: usize);
    /// A stop signal came (SIGINT, SIGTERM, SIGHUP): leave as for `q`.
    fn stop_requested(&mut self) -> bool {
        false
    }
}

/// The live session's events: the sweepers' channels and the terminal's input.
struct LiveEvents<'a> {
    sweepers: &'a [Sweeper],
    stop_requested: fn() -> bool,
}

impl Events for LiveEvents<'_> {
    fn sweep_message(&mut self) -> Option<(usize, SweepMsg)> {
        self.sweepers
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.messages.try_recv().ok().map(|m| (i, m)))
    }
    fn terminal_event(&mut self, timeout: Duration) -> io::Result<Option<TermEvent>> {
        if event::poll(timeout)? {
            event::read().map(Some)
        } else {
            Ok(None)
        }
    }
    fn sweep_now(&mut self, fabric: usize) {
        if let Some(s) = self.sweepers.get(fabric) {
            s.sweep_now();
        }
    }
    fn stop_requested(&mut self) -> bool {
        (self.stop_requested)()
    }
}

/// Redraw at least this often so "updated 3s ago" keeps counting.
const TICK: Duration = Duration::from_millis(250);

/// Until the user quits (or every fabric is lost): take sweeper messages into their
/// fabric's state (and, with several fabrics, their planes' findings), draw the fabric
/// shown, map keys to actions and apply them to it.
/// `states` holds one state per fabric (at least one), in the order of their indexes.
pub fn event_loop<B: Backend, E: Events>(
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
        let mut snapshots = false;
        while let Some((i, msg)) = events.sweep_message() {
            let Some(state) = states.get_mut(i) else {
                continue;
            };
            snapshots |= matches!(msg, SweepMsg::Done(_));
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
        if snapshots {
            // A new snapshot of one plane can change what the others' planes disagree on.
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
