//! A live session: the terminal set up and restored (on exit, on error, on panic and on a
//! stop signal), a sweep thread per fabric, and the event loop over them and the keys.

use std::io;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event as TermEvent};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use ibscope_topo::namemap::NameMap;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::event_loop::{event_loop, Inputs};
use crate::source::Source;
use crate::state::{AppState, FabricTag};
use crate::sweep_thread::{SweepMsg, SweepThread};

/// Options of one UI session.
#[derive(Debug, Clone)]
pub struct Options {
    /// Time between the end of one sweep and the start of the next.
    pub interval: Duration,
    pub names: Option<NameMap>,
    /// Whether a stop signal (SIGINT, SIGTERM, SIGHUP) came: the UI then leaves as for
    /// `q`. The caller installs the handlers before [`run`].
    pub stop_requested: fn() -> bool,
    /// Events from before this session (a journal), oldest first: the Events view starts
    /// with them.
    pub history: Vec<crate::event_log::LogEntry>,
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
/// and where its sweeps come from.
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
        for e in &options.history {
            state.log(e.clone());
        }
        state.status.source = f.source.describe();
        state.status.fabric = f.name.map(|name| FabricTag { name, index, count });
        sweepers.push(SweepThread::spawn(
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
        &mut LiveInputs {
            sweepers: &sweepers,
            stop_requested: options.stop_requested,
            terminal_gone: false,
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

/// The live session's events: the sweep threads' channels and the terminal's input.
struct LiveInputs<'a> {
    sweepers: &'a [SweepThread],
    stop_requested: fn() -> bool,
    /// The terminal hung up (its window closed, its tmux session killed): leave as for `q`.
    terminal_gone: bool,
}

/// Wait up to `timeout` for the terminal on stdin: `true` when it has hung up (its window
/// closed, its tmux session killed). crossterm's poll and read retry a read that returns
/// end of file without end, at full CPU, so the loop asks the kernel first and lets
/// crossterm read only a terminal that is still there.
fn terminal_hung_up(timeout: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut fd, 1, millis) };
    ready > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

impl Inputs for LiveInputs<'_> {
    fn sweep_message(&mut self) -> Option<(usize, SweepMsg)> {
        self.sweepers
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.messages.try_recv().ok().map(|m| (i, m)))
    }
    fn terminal_event(&mut self, timeout: Duration) -> io::Result<Option<TermEvent>> {
        // What crossterm already holds (several keys from one read, a resize) first; then
        // the terminal itself, waited on here rather than inside crossterm.
        for wait in [Duration::ZERO, timeout] {
            if terminal_hung_up(wait) {
                self.terminal_gone = true;
                return Ok(None);
            }
            if event::poll(Duration::ZERO)? {
                return event::read().map(Some);
            }
        }
        Ok(None)
    }
    fn sweep_now(&mut self, fabric: usize) {
        if let Some(s) = self.sweepers.get(fabric) {
            s.sweep_now();
        }
    }
    fn stop_requested(&mut self) -> bool {
        self.terminal_gone || (self.stop_requested)()
    }
}
