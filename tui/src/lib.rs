//! `ibscope tui`: the interactive terminal UI, generic over the ratatui backend.
//!
//! - [`state`]: everything shown, as plain data (unit-testable);
//! - [`keymap`]: the one table of keys: what each does where, the footer and the help;
//! - [`input`]: keys to [`keymap::Action`]s, actions applied to the state;
//! - [`query`] / [`find`]: `/` in a view, what the text names and the rows that show it;
//! - [`render`]: the screen: header, the view shown, footer, help;
//! - [`views`]: one file per view (its title, help, drawing and list);
//! - [`source`]: what a [`Sweep`] holds and where sweeps come from ([`Source`]);
//! - [`sweep_thread`]: a thread that turns a [`Source`] into [`Sweep`]s on a channel;
//! - [`derive`](mod@derive) / [`event_log`]: what is computed once per sweep, and what changed;
//! - [`table_sort`]: a table sorted by any column, either way;
//! - [`plane_findings`]: with several fabrics, the planes that disagree;
//! - [`event_loop`](mod@event_loop) and [`session`]: the loop, and the live terminal around it.

pub mod derive;
pub mod event_log;
pub mod event_loop;
pub mod find;
pub mod input;
pub mod keymap;
pub mod plane_findings;
pub mod query;
pub mod render;
pub mod session;
pub mod source;
pub mod state;
pub mod sweep_thread;
pub mod table_sort;
pub mod views;

pub use event_loop::{event_loop, handle_message, Inputs};
pub use session::{run, FabricSource, Options};
pub use source::{FileSource, Finding, PortCounterSample, Source, Sweep};
pub use state::{AppState, FabricTag, View};
pub use sweep_thread::{SweepMsg, SweepThread};
