//! The key map: one table says what each key does where, and the same table writes the
//! footer's hints and the help screen, so the three cannot drift apart.

use crossterm::event::KeyCode;

use super::state::{AppState, View};
use super::views;

/// What a key does, once mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    GoTo(View),
    NextView,
    PrevView,
    ToggleHelp,
    CloseHelp,
    /// The help one line further down (`true`) or up.
    HelpScroll(bool),
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// Enter outside text input: open a detail pane.
    Open,
    /// Esc outside text input: close the detail pane.
    Back,
    /// `s`: sort by the table's next column; `S`: the other way round.
    CycleSort,
    ReverseSort,
    /// `/` in Nodes, `/` or `e` in Routing.
    StartInput,
    /// `/` in the other views: the find prompt.
    StartFind,
    /// `n`, `N`: the next or previous row that matches what was found.
    FindNext,
    FindPrevious,
    InputChar(char),
    InputBackspace,
    /// Enter while typing.
    InputSubmit,
    /// Esc while typing.
    InputCancel,
    /// Tab while typing in Routing: the other field.
    InputSwitchField,
    /// Swap routing source and destination.
    SwapRoute,
    SweepNow,
    /// The selected finding's link in Links, its port in Counters.
    JumpToLink,
    JumpToCounters,
    /// Several fabrics: show the next (or previous) one.
    NextFabric,
    PrevFabric,
    /// The column to the left / right (the Hosts grid's rails).
    Left,
    Right,
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Every view, outside text input.
    Every,
    /// Every view, outside text input, when the UI watches several fabrics.
    Fabrics,
    /// One view, outside text input.
    In(View),
    /// A view's list with no detail open (the node list, the findings, the hosts grid).
    List(View),
    /// A view's detail pane (a node's, a finding's, a grid cell's, a port's counters).
    Detail(View),
    /// Typing into a view's text field.
    Typing(View),
    /// Typing into the find prompt (`/` in a view that finds).
    Finding,
    /// The help screen.
    Help,
}

/// The footer's hint for a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// Keys and a word: "s sort".
    Text(&'static str),
    /// The arrow keys, named for what the current view's list holds: "↑↓ nodes".
    Moves,
}

#[derive(Debug, Clone, Copy)]
pub struct Binding {
    /// Each key and what it does.
    pub keys: &'static [(KeyCode, Action)],
    pub places: &'static [Place],
    /// The keys as the help screen shows them.
    pub shown: &'static str,
    /// What the binding does, for the help screen.
    pub help: &'static str,
    /// The footer's hint and its rank (lower first: the footer is cut at the screen's
    /// width); `None` when the footer leaves it out.
    pub hint: Option<(u8, Hint)>,
}

use KeyCode::{
    BackTab, Backspace, Down, End, Enter, Esc, Home, Left, PageDown, PageUp, Right, Tab, Up, F,
};

const fn ch(c: char) -> KeyCode {
    KeyCode::Char(c)
}

/// The digit of each view (1 the first of [`View::ALL`]), then Tab and Shift-Tab.
const VIEW_KEYS: [(KeyCode, Action); View::ALL.len() + 2] = view_keys();

const fn view_keys() -> [(KeyCode, Action); View::ALL.len() + 2] {
    let mut keys = [(BackTab, Action::PrevView); View::ALL.len() + 2];
    let mut i = 0;
    while i < View::ALL.len() {
        keys[i] = (ch((b'1' + i as u8) as char), Action::GoTo(View::ALL[i]));
        i += 1;
    }
    keys[i] = (Tab, Action::NextView);
    keys
}

/// How the help and the footer name [`VIEW_KEYS`], by the number of views: digits reach
/// nine views (a tenth fails to compile here).
const VIEW_KEYS_SHOWN: &str = [
    "1, Tab", "1-2, Tab", "1-3, Tab", "1-4, Tab", "1-5, Tab", "1-6, Tab", "1-7, Tab", "1-8, Tab",
    "1-9, Tab",
][View::ALL.len() - 1];
const VIEW_KEYS_HINT: &str = [
    "1/Tab view",
    "1-2/Tab view",
    "1-3/Tab view",
    "1-4/Tab view",
    "1-5/Tab view",
    "1-6/Tab view",
    "1-7/Tab view",
    "1-8/Tab view",
    "1-9/Tab view",
][View::ALL.len() - 1];

/// Every binding, in the help screen's order.
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: &[(ch('q'), Action::Quit)],
        places: &[Place::Every, Place::Help],
        shown: "q, Ctrl-C",
        help: "quit",
        hint: Some((0, Hint::Text("q quit"))),
    },
    Binding {
        keys: &VIEW_KEYS,
        places: &[Place::Every],
        shown: VIEW_KEYS_SHOWN,
        help: "switch view (Shift-Tab back)",
        hint: Some((8, Hint::Text(VIEW_KEYS_HINT))),
    },
    Binding {
        keys: &[(ch('?'), Action::ToggleHelp), (F(1), Action::ToggleHelp)],
        places: &[Place::Every],
        shown: "?",
        help: "this help",
        hint: Some((1, Hint::Text("? help"))),
    },
    Binding {
        keys: &[
            (Up, Action::HelpScroll(false)),
            (ch('k'), Action::HelpScroll(false)),
            (Down, Action::HelpScroll(true)),
            (ch('j'), Action::HelpScroll(true)),
        ],
        places: &[Place::Help],
        shown: "↑↓ j k",
        help: "in the help: scroll it; any other key closes it",
        hint: None,
    },
    Binding {
        keys: &[
            (Up, Action::Up),
            (ch('k'), Action::Up),
            (Down, Action::Down),
            (ch('j'), Action::Down),
            (PageUp, Action::PageUp),
            (PageDown, Action::PageDown),
            (ch(' '), Action::PageDown),
            (Home, Action::Top),
            (ch('g'), Action::Top),
            (End, Action::Bottom),
            (ch('G'), Action::Bottom),
        ],
        places: &[Place::Every],
        shown: "↑↓ j k",
        help: "move;  PgUp PgDn Home End",
        hint: Some((7, Hint::Moves)),
    },
    Binding {
        keys: &[(ch('r'), Action::SweepNow)],
        places: &[Place::Every],
        shown: "r",
        help: "sweep now",
        hint: Some((9, Hint::Text("r sweep"))),
    },
    Binding {
        keys: &[(ch('f'), Action::NextFabric), (ch('F'), Action::PrevFabric)],
        places: &[Place::Fabrics],
        shown: "f, F",
        help: "next/previous fabric (with -C all or a list)",
        hint: Some((5, Hint::Text("f fabric"))),
    },
    Binding {
        keys: &[(ch('/'), Action::StartFind)],
        places: &FINDING_VIEWS,
        shown: "/",
        help: "find a node, host or port: any name, GUID, LID",
        hint: Some((5, Hint::Text("/ find"))),
    },
    Binding {
        keys: &[(ch('n'), Action::FindNext), (ch('N'), Action::FindPrevious)],
        places: &FINDING_VIEWS,
        shown: "n, N",
        help: "the next / previous row found",
        hint: None,
    },
    Binding {
        keys: &[(Enter, Action::InputSubmit)],
        places: &[Place::Finding],
        shown: "Enter",
        help: "while finding: keep it (not here: its node in Nodes)",
        hint: Some((1, Hint::Text("Enter keep"))),
    },
    Binding {
        keys: &[(Esc, Action::InputCancel)],
        places: &[Place::Finding],
        shown: "Esc",
        help: "while finding: stop",
        hint: Some((2, Hint::Text("Esc stop"))),
    },
    Binding {
        keys: &[(ch('/'), Action::StartInput)],
        places: &[Place::In(View::Nodes)],
        shown: "/",
        help: "filter by name, GUID or LID",
        hint: Some((2, Hint::Text("/ filter"))),
    },
    Binding {
        keys: &[(ch('s'), Action::CycleSort), (ch('S'), Action::ReverseSort)],
        places: &[
            Place::List(View::Nodes),
            Place::In(View::Links),
            Place::List(View::Counters),
            Place::In(View::Events),
            Place::List(View::Hosts),
        ],
        shown: "s, S",
        help: "sort by the next column, S turns it round",
        hint: Some((3, Hint::Text("s/S sort"))),
    },
    Binding {
        keys: &[(Enter, Action::Open)],
        places: &[Place::List(View::Nodes)],
        shown: "Enter",
        help: "node detail and port table",
        hint: Some((4, Hint::Text("Enter detail"))),
    },
    Binding {
        keys: &[(Esc, Action::Back)],
        places: &[Place::Detail(View::Nodes)],
        shown: "Esc",
        help: "close the detail",
        hint: Some((2, Hint::Text("Esc close"))),
    },
    Binding {
        keys: &[(Enter, Action::Open)],
        places: &[Place::List(View::Overview)],
        shown: "Enter",
        help: "the finding whole: where, what, what to do",
        hint: Some((2, Hint::Text("Enter finding"))),
    },
    Binding {
        keys: &[(Esc, Action::Back)],
        places: &[Place::Detail(View::Overview)],
        shown: "Esc",
        help: "close the finding",
        hint: Some((2, Hint::Text("Esc close"))),
    },
    Binding {
        keys: &[(ch('l'), Action::JumpToLink)],
        places: &[Place::In(View::Overview)],
        shown: "l",
        help: "the finding's link in Links",
        hint: Some((3, Hint::Text("l link"))),
    },
    Binding {
        keys: &[(ch('c'), Action::JumpToCounters)],
        places: &[Place::In(View::Overview)],
        shown: "c",
        help: "the finding's port in Counters",
        hint: Some((4, Hint::Text("c counters"))),
    },
    Binding {
        keys: &[(Enter, Action::Open)],
        places: &[Place::List(View::Counters)],
        shown: "Enter",
        help: "every counter of the port (↑↓ scroll)",
        hint: Some((3, Hint::Text("Enter all counters"))),
    },
    Binding {
        keys: &[(Esc, Action::Back)],
        places: &[Place::Detail(View::Counters)],
        shown: "Esc",
        help: "back to the ports",
        hint: Some((2, Hint::Text("Esc close"))),
    },
    Binding {
        keys: &[(ch('/'), Action::StartInput), (ch('e'), Action::StartInput)],
        places: &[Place::In(View::Routing)],
        shown: "/ or e",
        help: "edit From (Tab: To); Enter traces",
        hint: Some((2, Hint::Text("/ edit"))),
    },
    Binding {
        keys: &[(Enter, Action::Open)],
        places: &[Place::In(View::Routing)],
        shown: "Enter",
        help: "trace the route",
        hint: Some((3, Hint::Text("Enter trace"))),
    },
    Binding {
        keys: &[(ch('x'), Action::SwapRoute)],
        places: &[Place::In(View::Routing)],
        shown: "x",
        help: "swap From and To",
        hint: Some((4, Hint::Text("x swap"))),
    },
    Binding {
        keys: &[
            (Left, Action::Left),
            (ch('h'), Action::Left),
            (Right, Action::Right),
            (ch('l'), Action::Right),
        ],
        places: &[Place::In(View::Hosts)],
        shown: "←→ h l",
        help: "pick a rail",
        hint: Some((3, Hint::Text("←→ rail"))),
    },
    Binding {
        keys: &[(Enter, Action::Open)],
        places: &[Place::List(View::Hosts)],
        shown: "Enter",
        help: "the rail's HCA: its link and counters",
        hint: Some((4, Hint::Text("Enter detail"))),
    },
    Binding {
        keys: &[(Esc, Action::Back)],
        places: &[Place::Detail(View::Hosts)],
        shown: "Esc",
        help: "close the HCA's detail",
        hint: Some((2, Hint::Text("Esc close"))),
    },
    Binding {
        keys: &[(Enter, Action::InputSubmit)],
        places: &[Place::Typing(View::Nodes)],
        shown: "Enter",
        help: "while filtering: keep the filter",
        hint: Some((1, Hint::Text("Enter keep"))),
    },
    Binding {
        keys: &[(Esc, Action::InputCancel)],
        places: &[Place::Typing(View::Nodes)],
        shown: "Esc",
        help: "while filtering: clear it",
        hint: Some((2, Hint::Text("Esc clear"))),
    },
    Binding {
        keys: &[
            (Tab, Action::InputSwitchField),
            (BackTab, Action::InputSwitchField),
        ],
        places: &[Place::Typing(View::Routing)],
        shown: "Tab",
        help: "while editing: the other field",
        hint: Some((1, Hint::Text("Tab other field"))),
    },
    Binding {
        keys: &[(Enter, Action::InputSubmit)],
        places: &[Place::Typing(View::Routing)],
        shown: "Enter",
        help: "while editing: trace",
        hint: Some((2, Hint::Text("Enter trace"))),
    },
    Binding {
        keys: &[(Esc, Action::InputCancel)],
        places: &[Place::Typing(View::Routing)],
        shown: "Esc",
        help: "while editing: stop",
        hint: Some((3, Hint::Text("Esc stop"))),
    },
    Binding {
        keys: &[
            (Backspace, Action::InputBackspace),
            (Up, Action::Up),
            (Down, Action::Down),
        ],
        places: &[
            Place::Typing(View::Nodes),
            Place::Typing(View::Routing),
            Place::Finding,
        ],
        shown: "Backspace ↑↓",
        help: "while typing: delete; move",
        hint: None,
    },
];

/// What typing does in a view's text field (the first hint of the footer); the find
/// prompt is the text typed so far.
fn typing_hint(state: &AppState) -> String {
    if state.find.editing {
        return format!("/{}_", state.find.text);
    }
    match state.view {
        View::Routing => "type name/LID/GUID[port]".into(),
        _ => "type to filter".into(),
    }
}

/// The views whose `/` finds (Nodes filters, Routing edits its ends).
const FINDING_VIEWS: [Place; 5] = [
    Place::In(View::Overview),
    Place::In(View::Links),
    Place::In(View::Counters),
    Place::In(View::Events),
    Place::In(View::Hosts),
];

/// Whether `view`'s detail pane is open.
pub fn detail_open(state: &AppState, view: View) -> bool {
    match view {
        View::Nodes => state.nodes.detail.is_some(),
        View::Hosts => state.hosts.detail,
        View::Overview => state.finding_detail,
        View::Counters => state.counters.detail,
        _ => false,
    }
}

/// True while keys are text for an input field rather than commands.
pub fn typing(state: &AppState) -> bool {
    if state.find.editing {
        return true;
    }
    match state.view {
        View::Nodes => state.nodes.editing,
        View::Routing => state.routing.editing.is_some(),
        _ => false,
    }
}

impl Place {
    fn applies(self, state: &AppState) -> bool {
        let plain = !state.help && !typing(state);
        match self {
            Place::Every => plain,
            Place::Fabrics => plain && state.status.fabric.is_some(),
            Place::In(v) => plain && state.view == v,
            Place::List(v) => plain && state.view == v && !detail_open(state, v),
            Place::Detail(v) => plain && state.view == v && detail_open(state, v),
            Place::Typing(v) => {
                !state.help && typing(state) && !state.find.editing && state.view == v
            }
            Place::Finding => !state.help && state.find.editing,
            Place::Help => state.help,
        }
    }
}

/// The bindings that apply in the current state, in table order.
pub fn active(state: &AppState) -> impl Iterator<Item = &'static Binding> + '_ {
    BINDINGS
        .iter()
        .filter(move |b| b.places.iter().any(|p| p.applies(state)))
}

/// The action a key has in the current state, by the table.
pub fn lookup(state: &AppState, code: KeyCode) -> Option<Action> {
    active(state).find_map(|b| b.keys.iter().find(|(k, _)| *k == code).map(|(_, a)| *a))
}

/// The footer: the hints of the bindings that apply, by rank, as many as fit in `width`
/// columns.
pub fn footer(state: &AppState, width: usize) -> String {
    if state.help {
        return "↑↓ scroll  any key: close help  q quit".to_string();
    }
    if let Some(notice) = &state.notice {
        return notice.chars().take(width).collect();
    }
    let mut hints: Vec<(u8, String)> = active(state)
        .filter_map(|b| {
            let (rank, hint) = b.hint?;
            let text = match hint {
                Hint::Text(t) => t.to_string(),
                Hint::Moves => format!("↑↓ {}", (views::parts(state.view).list_noun)(state)),
            };
            Some((rank, text))
        })
        .collect();
    hints.sort_by_key(|(rank, _)| *rank);
    let mut out = if typing(state) {
        typing_hint(state)
    } else {
        String::new()
    };
    for (_, hint) in hints {
        let sep = if out.is_empty() { "" } else { "  " };
        if out.chars().count() + sep.len() + hint.chars().count() > width {
            break;
        }
        out.push_str(sep);
        out.push_str(&hint);
    }
    out
}

/// The help screen's key lines for `view`: the bindings of every view, a blank line, then
/// those of this view and its text fields.
pub fn help_lines(view: View) -> Vec<String> {
    let line = |b: &Binding| format!("{:<14}{}", b.shown, b.help);
    let mut lines: Vec<String> = BINDINGS
        .iter()
        .filter(|b| {
            b.places
                .iter()
                .any(|p| matches!(p, Place::Every | Place::Fabrics))
        })
        .map(line)
        .collect();
    lines.push(String::new());
    let here = |p: &Place| match *p {
        Place::In(v) | Place::Typing(v) | Place::List(v) | Place::Detail(v) => v == view,
        Place::Finding => FINDING_VIEWS.contains(&Place::In(view)),
        Place::Every | Place::Fabrics | Place::Help => false,
    };
    let mut shown: Vec<String> = Vec::new();
    for b in BINDINGS.iter().filter(|b| b.places.iter().any(here)) {
        let l = line(b);
        if !shown.contains(&l) {
            shown.push(l);
        }
    }
    lines.extend(shown);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::RouteField;
    use std::time::{Duration, Instant};

    #[test]
    fn digits_go_to_the_views_in_order() {
        for (i, view) in View::ALL.iter().enumerate() {
            let digit = char::from(b'1' + i as u8);
            let goto = BINDINGS[1].keys.iter().find(|(k, _)| *k == ch(digit));
            assert_eq!(goto.map(|(_, a)| *a), Some(Action::GoTo(*view)));
        }
        let last = View::ALL.len().to_string();
        assert!(BINDINGS[1].shown.starts_with(&format!("1-{last},")));
        assert!(
            matches!(BINDINGS[1].hint, Some((8, Hint::Text(t))) if t == format!("1-{last}/Tab view"))
        );
    }

    /// Every state the key map tells apart.
    fn states() -> Vec<AppState> {
        let mut out = Vec::new();
        for &view in View::ALL {
            for (detail, editing, help, several) in [
                (false, false, false, false),
                (true, false, false, false),
                (false, true, false, false),
                (false, false, true, false),
                (false, false, false, true),
                (true, false, false, true),
                (false, true, false, true),
            ] {
                let mut s = AppState::new(None, Duration::from_secs(1), Instant::now());
                s.status.fabric = several.then(|| crate::state::FabricTag {
                    name: "storage".into(),
                    index: 1,
                    count: 2,
                });
                s.view = view;
                s.help = help;
                s.nodes.detail = detail.then_some(1);
                s.hosts.detail = detail;
                s.finding_detail = detail;
                s.counters.detail = detail;
                s.nodes.editing = editing;
                s.routing.editing = editing.then_some(RouteField::From);
                s.find.editing = editing && FINDING_VIEWS.contains(&Place::In(view));
                out.push(s);
            }
        }
        out
    }

    #[test]
    fn no_key_means_two_things_in_one_place() {
        for state in states() {
            let mut seen: Vec<KeyCode> = Vec::new();
            for b in active(&state) {
                for (k, _) in b.keys {
                    assert!(
                        !seen.contains(k),
                        "{k:?} bound twice in {:?} (help {}, typing {})",
                        state.view,
                        state.help,
                        typing(&state)
                    );
                    seen.push(*k);
                }
            }
        }
    }

    #[test]
    fn every_footer_says_how_to_quit_and_fits() {
        for state in states() {
            for width in [40, 80, 160] {
                let f = footer(&state, width);
                assert!(f.chars().count() <= width, "{f}");
                if !typing(&state) {
                    assert!(f.contains("quit"), "{f}");
                }
            }
        }
    }

    #[test]
    fn help_lists_every_binding_of_the_view() {
        for &view in View::ALL {
            let help = help_lines(view).join("\n");
            for b in BINDINGS.iter().filter(|b| {
                b.places.iter().any(|p| match *p {
                    Place::Every | Place::Fabrics => true,
                    Place::In(v) | Place::Typing(v) | Place::List(v) | Place::Detail(v) => {
                        v == view
                    }
                    Place::Finding => FINDING_VIEWS.contains(&Place::In(view)),
                    Place::Help => false,
                })
            }) {
                assert!(help.contains(b.help), "{view:?}: {}", b.help);
            }
        }
    }
}
