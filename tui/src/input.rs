//! Keys to actions (by the [`keymap`]), and actions applied to the state. Pure: tests
//! drive it with synthetic key events.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::keymap;
use super::state::{AppState, ListCursor, RouteField, View};
use super::views;

pub use super::keymap::Action;

/// The action a key means in the current state, if any: the key map's, except that while
/// typing a character is text and in the help any key but its own closes it.
pub fn map_key(state: &AppState, key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('q')) {
        return Some(Action::Quit);
    }
    if state.help {
        return Some(keymap::lookup(state, key.code).unwrap_or(Action::CloseHelp));
    }
    match key.code {
        KeyCode::Char(c) if keymap::typing(state) && !ctrl => Some(Action::InputChar(c)),
        code => keymap::lookup(state, code),
    }
}

/// Apply an action. Returns nothing: effects on the outside world (quit, sweep now) are
/// flags on the state that the event loop reads.
pub fn apply(state: &mut AppState, action: Action) {
    state.notice = None;
    match action {
        Action::Quit => state.quit = true,
        Action::GoTo(v) => state.view = v,
        Action::NextView => state.view = state.view.next(),
        Action::PrevView => state.view = state.view.prev(),
        Action::ToggleHelp => {
            state.help = !state.help;
            state.help_scroll = 0;
        }
        Action::CloseHelp => state.help = false,
        Action::HelpScroll(down) => {
            state.help_scroll = if down {
                state.help_scroll + 1
            } else {
                state.help_scroll.saturating_sub(1)
            };
        }
        Action::SweepNow => state.sweep_requested = true,
        Action::NextFabric => state.fabric_step = 1,
        Action::PrevFabric => state.fabric_step = -1,
        Action::Up => move_cursor(state, |c, _len, _page| c.up(1)),
        Action::Down => move_cursor(state, |c, len, _| c.down(1, len)),
        Action::PageUp => move_cursor(state, |c, _, page| c.up(page)),
        Action::PageDown => move_cursor(state, |c, len, page| c.down(page, len)),
        Action::Top => move_cursor(state, |c, _, _| c.selected = 0),
        Action::Bottom => move_cursor(state, |c, len, _| c.selected = len.saturating_sub(1)),
        Action::Open => match state.view {
            View::Nodes => {
                if let Some(guid) = state.selected_node_row().map(|r| r.guid) {
                    state.nodes.detail = Some(guid);
                    state.nodes.detail_ports.selected = 0;
                }
            }
            View::Routing => state.run_trace(),
            View::Hosts => state.hosts.detail = !state.derived.host_grid.rows.is_empty(),
            View::Overview => state.finding_detail = state.selected_finding().is_some(),
            View::Counters => {
                state.counters.detail = !state.counters.rows.is_empty();
                state.counters.detail_list.selected = 0;
            }
            _ => {}
        },
        Action::Back => match state.view {
            View::Nodes => state.nodes.detail = None,
            View::Hosts => state.hosts.detail = false,
            View::Overview => state.finding_detail = false,
            View::Counters => state.counters.detail = false,
            _ => {}
        },
        Action::JumpToLink => state.jump_to_link(),
        Action::JumpToCounters => state.jump_to_counters(),
        Action::Left => state.hosts.rail = state.hosts.rail.saturating_sub(1),
        Action::Right => {
            let last = state.derived.host_grid.rails.len().saturating_sub(1);
            state.hosts.rail = (state.hosts.rail + 1).min(last);
        }
        Action::CycleSort => state.change_sort(false),
        Action::ReverseSort => state.change_sort(true),
        Action::StartFind => {
            state.find.editing = true;
            state.find.text.clear();
            state.counters.detail = false;
        }
        Action::FindNext => crate::find::next(state, true),
        Action::FindPrevious => crate::find::next(state, false),
        Action::StartInput => match state.view {
            View::Nodes => {
                state.nodes.editing = true;
                state.nodes.detail = None;
            }
            View::Routing => state.routing.editing = Some(RouteField::From),
            _ => {}
        },
        Action::InputChar(c) => {
            if let Some(text) = input_text(state) {
                // Fields are short; keep them so (and printable).
                if text.chars().count() < 64 && !c.is_control() {
                    text.push(c);
                }
            }
            after_edit(state);
        }
        Action::InputBackspace => {
            if let Some(text) = input_text(state) {
                text.pop();
            }
            after_edit(state);
        }
        Action::InputSubmit if state.find.editing => crate::find::submit(state),
        Action::InputSubmit => submit_input(state),
        Action::InputCancel if state.find.editing => state.find.editing = false,
        Action::InputCancel => match state.view {
            View::Nodes => {
                state.nodes.editing = false;
                state.nodes.filter.clear();
                state.refresh_nodes();
            }
            View::Routing => state.routing.editing = None,
            _ => {}
        },
        Action::InputSwitchField => {
            state.routing.editing = match state.routing.editing {
                Some(RouteField::From) => Some(RouteField::To),
                _ => Some(RouteField::From),
            }
        }
        Action::SwapRoute => {
            let r = &mut state.routing;
            std::mem::swap(&mut r.from, &mut r.to);
            if r.result.is_some() {
                state.run_trace();
            }
        }
    }
}

/// Enter while typing: keep the node filter; in Routing go on to the destination, or trace.
fn submit_input(state: &mut AppState) {
    match state.view {
        View::Nodes => state.nodes.editing = false,
        View::Routing => {
            match state.routing.editing {
                Some(RouteField::From) if state.routing.to.is_empty() => {
                    state.routing.editing = Some(RouteField::To);
                    return;
                }
                _ => state.routing.editing = None,
            }
            state.run_trace();
        }
        _ => {}
    }
}

fn input_text(state: &mut AppState) -> Option<&mut String> {
    if state.find.editing {
        return Some(&mut state.find.text);
    }
    match state.view {
        View::Nodes if state.nodes.editing => Some(&mut state.nodes.filter),
        View::Routing => match state.routing.editing {
            Some(RouteField::From) => Some(&mut state.routing.from),
            Some(RouteField::To) => Some(&mut state.routing.to),
            None => None,
        },
        _ => None,
    }
}

/// The node filter applies as you type, and so does a find.
fn after_edit(state: &mut AppState) {
    if state.find.editing {
        crate::find::as_typed(state);
    } else if state.view == View::Nodes {
        state.nodes.list.selected = 0;
        state.refresh_nodes();
    }
}

/// Move the cursor of the list the current view scrolls.
fn move_cursor(state: &mut AppState, f: impl FnOnce(&mut ListCursor, usize, usize)) {
    let (cursor, len) = (views::parts(state.view).list)(state);
    let page = cursor.page();
    f(cursor, len, page);
}
