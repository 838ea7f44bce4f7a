//! The TUI rendered into ratatui's TestBackend: every view at 80x24 and 160x48 on a small
//! fabric with a degraded link and a hostile NodeDescription, key handling, the event loop
//! driven by a script, the sweeper, and a timing report on a 2,048-host fat tree.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ibscope_topo::gen::{self, FatTreeSpec};
use ibscope_topo::{ibnd, routing, Fabric};
use ibscope_tui::event_log::LogEntryKind;
use ibscope_tui::state::prepare;
use ibscope_tui::{input, render, AppState, PortCounterSample, Source, Sweep, View};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::Terminal;

/// 2 spines, 2 leaves, 4 hosts, every port enabled for 4xHDR; leaf-1[4] <-> spine-2[1]
/// trained at 1xHDR (degraded).
const FIXTURE: &str = r#"
width=3
speed=7
extspeed=7

Switch 8 "S1" # "spine-1" base port 0 lid 1 lmc 0
[1] "L1"[3] # "leaf-1" lid 3 4xHDR
[2] "L2"[3] # "leaf-2" lid 4 4xHDR

Switch 8 "S2" # "spine-2" base port 0 lid 2 lmc 0
[1] "L1"[4] # "leaf-1" lid 3 1xHDR
[2] "L2"[4] # "leaf-2" lid 4 4xHDR

Switch 8 "L1" # "leaf-1" base port 0 lid 3 lmc 0
[1] "H1"[1] # "host-1" lid 5 4xHDR
[2] "H2"[1] # "host-2" lid 6 4xHDR
[3] "S1"[1] # "spine-1" lid 1 4xHDR
[4] "S2"[1] # "spine-2" lid 2 1xHDR

Switch 8 "L2" # "leaf-2" base port 0 lid 4 lmc 0
[1] "H3"[1] # "host-3" lid 7 4xHDR
[2] "H4"[1] # "host-4" lid 8 4xHDR
[3] "S1"[2] # "spine-1" lid 1 4xHDR
[4] "S2"[2] # "spine-2" lid 2 4xHDR

Hca 1 "H1" # "host-1"
[1] "L1"[1] # lid 5 lmc 0 "leaf-1" lid 3 4xHDR

Hca 1 "H2" # "host-2"
[1] "L1"[2] # lid 6 lmc 0 "leaf-1" lid 3 4xHDR

Hca 1 "H3" # "host-3"
[1] "L2"[1] # lid 7 lmc 0 "leaf-2" lid 4 4xHDR

Hca 1 "H4" # "host-4"
[1] "L2"[2] # lid 8 lmc 0 "leaf-2" lid 4 4xHDR
"#;

const HOSTILE: &str = "\x1b[2Jevil\"";

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// The fixture with host-4 renamed to the hostile string and min-hop LFTs filled in.
fn fixture_fabric(text: &str) -> Fabric {
    let mut f = ibnd::parse(text).expect("fixture parses");
    let id = f.nodes_by_description("host-4")[0];
    f.node_mut(id).description = HOSTILE.to_string();
    f.reindex();
    routing::compute_minhop_lfts(&mut f);
    f
}

fn guid_of(f: &Fabric, desc: &str) -> u64 {
    f.node(f.nodes_by_description(desc)[0]).guid
}

fn sample(guid: u64, port: u8, at: SystemTime, symbol: u64, bytes: u64) -> PortCounterSample {
    let mut counters = BTreeMap::new();
    counters.insert("SymbolErrorCounter".to_string(), symbol);
    counters.insert("LinkDownedCounter".to_string(), 0);
    counters.insert("PortXmitWait".to_string(), 7);
    PortCounterSample {
        at: ibscope_topo::PortKey { guid, port },
        counters,
        saturated: Default::default(),
        xmit_data_bytes: Some(bytes),
        rcv_data_bytes: Some(bytes / 2),
        taken_at: at,
    }
}

fn snapshot(fabric: Fabric, at: SystemTime, sm: Option<&str>, errors: u64, bytes: u64) -> Sweep {
    let l1 = guid_of(&fabric, "leaf-1");
    let s2 = guid_of(&fabric, "spine-2");
    let h1 = guid_of(&fabric, "host-1");
    let mut snap = Sweep::from_fabric(fabric, at);
    snap.counters = vec![
        sample(l1, 4, at, errors, bytes),
        sample(s2, 1, at, errors, bytes),
        sample(h1, 1, at, 0, bytes * 3),
    ];
    snap.routes = ibscope_tui::source::check_routes(&snap.fabric);
    snap.sm = sm.map(str::to_string);
    snap.duration = Duration::from_millis(12);
    snap
}

/// Two sweeps five seconds apart: the second has host-2 unplugged, 40 more symbol errors
/// on the degraded link, and an SM. The clock reads 3 s after the second.
fn fixture_state() -> AppState {
    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), start);
    state.status.source = "file fixture.topo".into();
    let first = snapshot(fixture_fabric(FIXTURE), t0(), None, 10, 1_000_000);
    state.apply_sweep(first, start);
    let unplugged: String = FIXTURE
        .lines()
        .filter(|l| !l.starts_with("[2] \"H2\"") && !l.starts_with("[1] \"L1\"[2]"))
        .collect::<Vec<_>>()
        .join("\n");
    let second = snapshot(
        fixture_fabric(&unplugged),
        t0() + Duration::from_secs(5),
        Some("LID 1 spine-1 priority 15"),
        50,
        6_000_000_000,
    );
    state.apply_sweep(second, start + Duration::from_secs(5));
    state.now = start + Duration::from_secs(8);
    state
}

fn render_buffer(state: &AppState, w: u16, h: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| render::draw(f, state)).unwrap();
    terminal.backend().buffer().clone()
}

fn buffer_text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// What a box titled `title` holds (where it is on the screen, over others or not), its
/// lines joined by one space each: its wrapped lines read as the text they came from.
fn boxed_text(screen: &str, title: &str) -> String {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let head: Vec<char> = format!("┌ {title}").chars().collect();
    let found = lines.iter().enumerate().find_map(|(y, l)| {
        let x = l.windows(head.len()).position(|w| w == head.as_slice())?;
        let right = x + l[x..].iter().position(|&c| c == '┐')?;
        Some((y, x, right))
    });
    let Some((top, left, right)) = found else {
        return String::new();
    };
    let mut words: Vec<String> = Vec::new();
    for l in &lines[top + 1..] {
        if l.get(left) == Some(&'└') {
            break;
        }
        let inside: String = l
            .get(left + 1..right.min(l.len()))
            .unwrap_or_default()
            .iter()
            .collect();
        words.extend(inside.split_whitespace().map(str::to_string));
    }
    words.join(" ")
}

/// Foreground colours of the cells of the first line that contains `needle`.
fn line_colors(buf: &Buffer, needle: &str) -> Option<Vec<Color>> {
    let text = buffer_text(buf);
    let y = text.lines().position(|l| l.contains(needle))? as u16;
    Some((0..buf.area.width).map(|x| buf[(x, y)].fg).collect())
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(state: &mut AppState, code: KeyCode) {
    if let Some(a) = input::map_key(state, key(code)) {
        input::apply(state, a);
    }
}

fn type_text(state: &mut AppState, text: &str) {
    for c in text.chars() {
        press(state, KeyCode::Char(c));
    }
}

/// Nodes view, filter on `name`, open the detail of the one match.
fn open_node_detail(state: &mut AppState, name: &str) {
    press(state, KeyCode::Char('2'));
    press(state, KeyCode::Char('/'));
    type_text(state, name);
    press(state, KeyCode::Enter);
    press(state, KeyCode::Enter);
}

/// Every screen the snapshots cover: (name, how to get there).
/// Keys that lead from the start screen to one of the screens under test.
type GoTo = Box<dyn Fn(&mut AppState)>;

fn screens() -> Vec<(&'static str, GoTo)> {
    vec![
        ("overview", Box::new(|_s: &mut AppState| {})),
        (
            "nodes",
            Box::new(|s: &mut AppState| press(s, KeyCode::Char('2'))),
        ),
        (
            "node_detail",
            Box::new(|s: &mut AppState| open_node_detail(s, "leaf-1")),
        ),
        (
            "links",
            Box::new(|s: &mut AppState| press(s, KeyCode::Char('3'))),
        ),
        (
            "counters",
            Box::new(|s: &mut AppState| press(s, KeyCode::Char('4'))),
        ),
        (
            "routing",
            Box::new(|s: &mut AppState| {
                press(s, KeyCode::Char('5'));
                press(s, KeyCode::Char('/'));
                type_text(s, "host-1");
                press(s, KeyCode::Tab);
                type_text(s, "8");
                press(s, KeyCode::Enter);
                press(s, KeyCode::Down);
            }),
        ),
        (
            "events",
            Box::new(|s: &mut AppState| press(s, KeyCode::Char('6'))),
        ),
        (
            "hosts",
            Box::new(|s: &mut AppState| press(s, KeyCode::Char('7'))),
        ),
        (
            "help_nodes",
            Box::new(|s: &mut AppState| {
                press(s, KeyCode::Char('2'));
                press(s, KeyCode::Char('?'));
            }),
        ),
    ]
}

#[test]
fn every_view_renders_at_both_sizes() {
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        for (name, go) in screens() {
            let mut state = fixture_state();
            go(&mut state);
            let buf = render_buffer(&state, w, h);
            let text = buffer_text(&buf);
            assert!(
                !text.contains('\x1b')
                    && buf.content().iter().all(|c| !c.symbol().contains('\x1b')),
                "{name} {w}x{h}: raw ESC reached the screen"
            );
            // The footer with keys is on every screen, the status on the top line.
            let lines: Vec<&str> = text.lines().collect();
            assert!(
                lines[usize::from(h) - 1].contains("quit"),
                "{name} {w}x{h}: footer\n{text}"
            );
            assert!(
                lines[0].contains("updated 3s ago"),
                "{name} {w}x{h}: status\n{text}"
            );
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), text);
        }
    }
}

#[test]
fn overview_counts_picture_and_findings() {
    let state = fixture_state();
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    assert!(
        text.contains("4 switches, 4 HCAs on 4 servers, 7 links"),
        "{text}"
    );
    assert!(text.contains("1 degraded, 0 down"), "{text}");
    assert!(text.contains("SM: LID 1 spine-1 priority 15"), "{text}");
    // Spines on top, leaves below, hosts last.
    let spine = text.find("[spine-1").expect("spine chip");
    let leaf = text.find("[leaf-1").expect("leaf chip");
    let hosts = text.find(" CA  4 HCAs on 4 servers").expect("host line");
    assert!(spine < leaf && leaf < hosts, "{text}");
    // The degraded link is a finding with health's reason, whole (wrapped in its box),
    // and the switches on it are red.
    assert_eq!(
        boxed_text(&text, "Findings"),
        "warn [degraded-link] \"spine-2\" port 1 <-> \"leaf-1\" port 4: 1xHDR below fabric \
         norm 4xHDR; both ends run other links at 4x"
    );
    // Both switches on the degraded link are drawn red, the others not.
    let column = |line: &str, needle: &str| line[..line.find(needle).unwrap()].chars().count();
    let spine_line = text.lines().find(|l| l.contains("[spine-1")).unwrap();
    let colors = line_colors(&buf, "[spine-1").unwrap();
    assert_eq!(colors[column(spine_line, "[spine-2")], Color::Red, "{text}");
    assert_ne!(colors[column(spine_line, "[spine-1")], Color::Red, "{text}");
    let leaf_line = text.lines().find(|l| l.contains("[leaf-1")).unwrap();
    let colors = line_colors(&buf, "[leaf-1").unwrap();
    assert_eq!(colors[column(leaf_line, "[leaf-1")], Color::Red, "{text}");
    assert_ne!(colors[column(leaf_line, "[leaf-2")], Color::Red, "{text}");
}

#[test]
fn hostile_description_is_escaped() {
    let mut state = fixture_state();
    press(&mut state, KeyCode::Char('2'));
    press(&mut state, KeyCode::Char('/'));
    type_text(&mut state, "evil");
    let text = buffer_text(&render_buffer(&state, 80, 24));
    assert!(text.contains("\\x1b[2Jevil\""), "{text}");
    assert!(text.contains("(1 of 8)"), "{text}");
}

#[test]
fn degraded_link_is_first_and_red() {
    let mut state = fixture_state();
    press(&mut state, KeyCode::Char('3'));
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    let rows: Vec<&str> = text.lines().skip(3).collect();
    assert!(
        rows[0].contains("spine-2[1]") && rows[0].contains("leaf-1[4]"),
        "{text}"
    );
    assert!(rows[0].contains("1xHDR") && rows[0].contains("4xHDR") && rows[0].contains("DEGR"));
    let colors = line_colors(&buf, "DEGR").unwrap();
    assert!(
        colors.iter().take(70).all(|c| *c == Color::Red),
        "{colors:?}"
    );
    let healthy = line_colors(&buf, "spine-1[1]").unwrap();
    assert!(healthy.iter().all(|c| *c != Color::Red));
}

#[test]
fn counters_show_rates_and_jumps() {
    let mut state = fixture_state();
    press(&mut state, KeyCode::Char('4'));
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    // Sorted by error rate: the two ends of the degraded link first, marked and red.
    let rows: Vec<&str> = text.lines().filter(|l| l.contains('▲')).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(text.contains("2 with new errors"), "{text}");
    // 40 errors in 5 s = 8.0/s; 6e9 - 1e6 bytes in 5 s ≈ 1.2 GB/s sent.
    assert!(
        rows[0].contains("50") && rows[0].contains("8.0") && rows[0].contains("1.2 GB/s"),
        "{text}"
    );
    let colors = line_colors(&buf, "▲").unwrap();
    assert_eq!(colors[0], Color::Red);
    let h1 = text.lines().find(|l| l.contains("host-1[1]")).unwrap();
    assert!(!h1.contains('▲'));
}

/// A counter that stopped at its maximum shows as a lower bound in the selected port's
/// counters: "SymbolErrorCounter ≥ 65535", not "= 65535".
#[test]
fn saturated_counter_shows_as_a_lower_bound() {
    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), start);
    let mut snap = snapshot(fixture_fabric(FIXTURE), t0(), None, 65535, 1_000);
    for c in &mut snap.counters {
        if c.counters["SymbolErrorCounter"] == 65535 {
            c.saturated.insert("SymbolErrorCounter".to_string());
        }
    }
    state.apply_sweep(snap, start);
    press(&mut state, KeyCode::Char('4'));
    let text = buffer_text(&render_buffer(&state, 100, 30));
    assert!(text.contains("SymbolErrorCounter ≥ 65535"), "{text}");
    assert!(!text.contains("SymbolErrorCounter = 65535"), "{text}");
    assert!(text.contains("LinkDownedCounter = 0"), "{text}");
}

#[test]
fn routing_traces_hop_by_hop_with_lft() {
    let mut state = fixture_state();
    press(&mut state, KeyCode::Char('5'));
    press(&mut state, KeyCode::Char('e'));
    type_text(&mut state, "host-1");
    press(&mut state, KeyCode::Tab);
    type_text(&mut state, "8");
    press(&mut state, KeyCode::Enter);
    let r = state.routing.result.as_ref().unwrap().as_ref().unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.hops.len(), 5, "host-1, leaf-1, spine, leaf-2, host-4");
    press(&mut state, KeyCode::Down);
    let text = buffer_text(&render_buffer(&state, 160, 48));
    assert!(
        text.contains("host-1[1] -> LID 8 \\x1b[2Jevil\"[1]: 4 links"),
        "{text}"
    );
    assert!(text.contains("LFT of leaf-1"), "{text}");
    assert!(
        text.contains("route balance") || text.contains("Route balance"),
        "{text}"
    );
    // A bad input is reported, not a panic.
    press(&mut state, KeyCode::Char('/'));
    type_text(&mut state, "nosuch");
    press(&mut state, KeyCode::Enter);
    let text = buffer_text(&render_buffer(&state, 80, 24));
    assert!(
        text.contains("from: nothing matches \"host-1nosuch\""),
        "{text}"
    );
}

#[test]
fn events_record_link_down_errors_and_sm() {
    let state = fixture_state();
    let kinds: Vec<LogEntryKind> = state.events.iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&LogEntryKind::LinkDown), "{kinds:?}");
    assert!(kinds.contains(&LogEntryKind::CounterJump));
    assert!(kinds.contains(&LogEntryKind::SmChange));
    let down = state
        .events
        .iter()
        .find(|e| e.kind == LogEntryKind::LinkDown)
        .unwrap();
    assert!(
        down.text.contains("host-2[1]") && down.text.contains("leaf-1[2]"),
        "{}",
        down.text
    );
    assert_eq!(down.at, t0() + Duration::from_secs(5));
    let jump = state
        .events
        .iter()
        .find(|e| e.kind == LogEntryKind::CounterJump)
        .unwrap();
    assert!(
        jump.text.contains("SymbolErrorCounter +40"),
        "{}",
        jump.text
    );
    let text = buffer_text(&render_buffer(
        &{
            let mut s = fixture_state();
            press(&mut s, KeyCode::Char('6'));
            s
        },
        80,
        24,
    ));
    assert!(
        text.contains("22:13:25 link down    host-2[1] <-> leaf-1[2]"),
        "{text}"
    );
}

#[test]
fn keys_move_between_views_and_quit() {
    let mut state = fixture_state();
    assert_eq!(state.view, View::Overview);
    press(&mut state, KeyCode::Char('2'));
    assert_eq!(state.view, View::Nodes);
    press(&mut state, KeyCode::Tab);
    assert_eq!(state.view, View::Links);
    press(&mut state, KeyCode::BackTab);
    press(&mut state, KeyCode::BackTab);
    assert_eq!(state.view, View::Overview);
    press(&mut state, KeyCode::BackTab);
    assert_eq!(state.view, View::Hosts);
    press(&mut state, KeyCode::BackTab);
    assert_eq!(state.view, View::Events);
    press(&mut state, KeyCode::Char('?'));
    assert!(state.help);
    press(&mut state, KeyCode::Char('x'));
    assert!(!state.help && !state.quit, "any key closes help");
    press(&mut state, KeyCode::Char('r'));
    assert!(state.sweep_requested);
    press(&mut state, KeyCode::Char('q'));
    assert!(state.quit);
    let mut state = fixture_state();
    let ctrl_c = input::map_key(
        &state,
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
    );
    input::apply(&mut state, ctrl_c.unwrap());
    assert!(state.quit);
}

#[test]
fn filter_narrows_the_node_list() {
    let mut state = fixture_state();
    press(&mut state, KeyCode::Char('2'));
    assert_eq!(state.nodes.visible.len(), 8);
    press(&mut state, KeyCode::Char('/'));
    type_text(&mut state, "leaf");
    assert_eq!(state.nodes.visible.len(), 2);
    // While typing, q is text, not quit.
    type_text(&mut state, "q");
    assert!(!state.quit);
    assert_eq!(state.nodes.visible.len(), 0);
    press(&mut state, KeyCode::Backspace);
    press(&mut state, KeyCode::Enter);
    assert_eq!(state.nodes.filter, "leaf");
    assert_eq!(state.nodes.visible.len(), 2);
    // By LID too.
    press(&mut state, KeyCode::Char('/'));
    press(&mut state, KeyCode::Esc);
    assert_eq!(state.nodes.visible.len(), 8);
    // Sort by LID (Name, Kind, GUID, LID): spine-1 (LID 1) first once the cursor is at
    // the top (it stays on the node it was on).
    for _ in 0..3 {
        press(&mut state, KeyCode::Char('s'));
    }
    press(&mut state, KeyCode::Home);
    assert_eq!(state.selected_node_row().unwrap().name, "spine-1");
    press(&mut state, KeyCode::Down);
    press(&mut state, KeyCode::Enter);
    assert_eq!(
        state.nodes.detail,
        Some(state.selected_node_row().unwrap().guid)
    );
    press(&mut state, KeyCode::Esc);
    assert_eq!(state.nodes.detail, None);
}

struct CountingSource {
    n: u64,
}

impl Source for CountingSource {
    fn sweep(&mut self) -> anyhow::Result<Sweep> {
        self.n += 1;
        if self.n == 2 {
            anyhow::bail!("fabric unreachable");
        }
        Ok(Sweep::from_fabric(
            ibnd::parse(FIXTURE)?,
            t0() + Duration::from_secs(self.n),
        ))
    }
    fn describe(&self) -> String {
        "counting".into()
    }
}

/// Keys and sweeper messages fed to the real event loop: `None` in `keys` is a moment
/// with no key (the loop draws a frame), running out of keys is an error.
struct Script {
    /// Each with its fabric's index.
    messages: std::collections::VecDeque<(usize, ibscope_tui::SweepMsg)>,
    keys: std::collections::VecDeque<Option<KeyCode>>,
    /// The fabric of each sweep asked for.
    sweeps_asked: Vec<usize>,
}

impl Script {
    fn new(messages: Vec<ibscope_tui::SweepMsg>, keys: &[Option<KeyCode>]) -> Script {
        Script::of_fabrics(messages.into_iter().map(|m| (0, m)).collect(), keys)
    }

    fn of_fabrics(
        messages: Vec<(usize, ibscope_tui::SweepMsg)>,
        keys: &[Option<KeyCode>],
    ) -> Script {
        Script {
            messages: messages.into(),
            keys: keys.iter().copied().collect(),
            sweeps_asked: Vec::new(),
        }
    }
}

impl ibscope_tui::Inputs for Script {
    fn sweep_message(&mut self) -> Option<(usize, ibscope_tui::SweepMsg)> {
        self.messages.pop_front()
    }
    fn terminal_event(
        &mut self,
        _timeout: Duration,
    ) -> std::io::Result<Option<crossterm::event::Event>> {
        match self.keys.pop_front() {
            Some(k) => Ok(k.map(|code| crossterm::event::Event::Key(key(code)))),
            None => Err(std::io::Error::other("the script ran out of keys")),
        }
    }
    fn sweep_now(&mut self, fabric: usize) {
        self.sweeps_asked.push(fabric);
    }
}

/// The real event loop on a TestBackend: a snapshot arrives, keys switch to the node list,
/// filter it, ask for a sweep and quit; the last frame is the filtered list.
#[test]
fn event_loop_runs_scripted_keys() {
    use ibscope_tui::SweepMsg;
    let snap = snapshot(fixture_fabric(FIXTURE), t0(), None, 10, 1_000_000);
    let messages = vec![
        SweepMsg::Started,
        SweepMsg::Done(Box::new(prepare(None, snap, None))),
    ];
    let mut keys = vec![None, Some(KeyCode::Char('2')), Some(KeyCode::Char('/'))];
    keys.extend("leaf".chars().map(|c| Some(KeyCode::Char(c))));
    keys.extend([
        Some(KeyCode::Enter),
        None,
        Some(KeyCode::Char('r')),
        None,
        Some(KeyCode::Char('q')),
    ]);
    let mut script = Script::new(messages, &keys);
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut state = AppState::new(None, Duration::from_secs(5), Instant::now());
    ibscope_tui::event_loop(&mut terminal, std::slice::from_mut(&mut state), &mut script).unwrap();
    assert!(state.quit && script.keys.is_empty());
    assert_eq!(state.view, View::Nodes);
    assert_eq!(state.nodes.filter, "leaf");
    assert_eq!(script.sweeps_asked, [0], "r asks the sweeper once");
    let text = buffer_text(terminal.backend().buffer());
    assert!(text.contains("leaf-1") && text.contains("leaf-2"), "{text}");
    assert!(!text.contains("spine-1"), "{text}");
    let footer = text.lines().last().unwrap();
    assert!(
        footer.contains("q quit") && footer.contains("↑↓ nodes"),
        "{footer}"
    );

    // A lost fabric ends the loop with its error; a script without q ends in an error too.
    let lost = vec![SweepMsg::Lost {
        error: "lost the connection to the fabric".into(),
    }];
    let mut state = AppState::new(None, Duration::from_secs(5), Instant::now());
    let e = ibscope_tui::event_loop(
        &mut terminal,
        std::slice::from_mut(&mut state),
        &mut Script::new(lost, &[]),
    );
    assert_eq!(
        e.unwrap_err().to_string(),
        "lost the connection to the fabric"
    );
    let mut state = AppState::new(None, Duration::from_secs(5), Instant::now());
    let e = ibscope_tui::event_loop(
        &mut terminal,
        std::slice::from_mut(&mut state),
        &mut Script::new(vec![], &[]),
    );
    assert!(e.unwrap_err().to_string().contains("ran out of keys"));
}

/// Two fabrics' states, "compute" and "storage" (its hosts named disk-N), each with a
/// snapshot message from its own sweeper.
fn two_fabrics() -> (Vec<AppState>, Vec<(usize, ibscope_tui::SweepMsg)>) {
    use ibscope_tui::{FabricTag, SweepMsg};
    let mut states = Vec::new();
    let mut messages = Vec::new();
    for (index, (name, text)) in [
        ("compute", FIXTURE.to_string()),
        ("storage", FIXTURE.replace("host-", "disk-")),
    ]
    .into_iter()
    .enumerate()
    {
        let mut state = AppState::new(None, Duration::from_secs(5), Instant::now());
        state.status.fabric = Some(FabricTag {
            name: name.into(),
            index,
            count: 2,
        });
        states.push(state);
        let snap = Sweep::from_fabric(ibnd::parse(&text).unwrap(), t0());
        messages.push((index, SweepMsg::Started));
        messages.push((index, SweepMsg::Done(Box::new(prepare(None, snap, None)))));
    }
    (states, messages)
}

/// Several fabrics: each sweeper's snapshot goes to its fabric, f shows the next one
/// (in the same view, the header naming it), r sweeps the one shown, F goes back.
#[test]
fn f_switches_fabric_and_the_header_names_it() {
    let (mut states, messages) = two_fabrics();
    let keys = [
        None,
        Some(KeyCode::Char('2')),
        None,
        Some(KeyCode::Char('f')),
        None,
        Some(KeyCode::Char('r')),
        None,
        Some(KeyCode::Char('q')),
    ];
    let mut script = Script::of_fabrics(messages, &keys);
    let mut terminal = Terminal::new(TestBackend::new(100, 24)).unwrap();
    ibscope_tui::event_loop(&mut terminal, &mut states, &mut script).unwrap();
    assert!(states[1].quit, "q was pressed on the storage fabric");
    assert_eq!(
        states[1].view,
        View::Nodes,
        "the view is kept across fabrics"
    );
    assert_eq!(script.sweeps_asked, [1], "r sweeps the fabric shown");
    let text = buffer_text(terminal.backend().buffer());
    let header = text.lines().next().unwrap();
    assert!(header.contains("fabric storage 2/2"), "{header}");
    assert!(
        text.contains("disk-1") && !text.contains("host-1"),
        "{text}"
    );
    let footer = text.lines().last().unwrap();
    assert!(footer.contains("f fabric"), "{footer}");

    // F from the first fabric wraps to the last; a single fabric has no f at all.
    let (mut states, messages) = two_fabrics();
    let keys = [
        None,
        Some(KeyCode::Char('F')),
        None,
        Some(KeyCode::Char('q')),
    ];
    let mut script = Script::of_fabrics(messages, &keys);
    ibscope_tui::event_loop(&mut terminal, &mut states, &mut script).unwrap();
    assert!(states[1].quit);
    let mut single = AppState::new(None, Duration::from_secs(5), Instant::now());
    assert_eq!(input::map_key(&single, key(KeyCode::Char('f'))), None);
    single.view = View::Nodes;
    assert!(!ibscope_tui::keymap::footer(&single, 200).contains("fabric"));
}

/// One fabric lost among several: it shows the failure and the others go on; all lost
/// ends the UI with the error.
#[test]
fn a_lost_fabric_among_several_leaves_the_others() {
    use ibscope_tui::SweepMsg;
    let lost = |i: usize| {
        (
            i,
            SweepMsg::Lost {
                error: format!("fabric {i}: lost the connection to the fabric"),
            },
        )
    };
    let (mut states, mut messages) = two_fabrics();
    messages.push(lost(1));
    let keys = [
        None,
        Some(KeyCode::Char('f')),
        None,
        Some(KeyCode::Char('q')),
    ];
    let mut terminal = Terminal::new(TestBackend::new(100, 24)).unwrap();
    let mut script = Script::of_fabrics(messages, &keys);
    ibscope_tui::event_loop(&mut terminal, &mut states, &mut script).unwrap();
    assert!(states[0].status.last_error.is_none());
    assert!(states[1].status.last_error.is_some());
    let header = buffer_text(terminal.backend().buffer());
    let header = header.lines().next().unwrap();
    assert!(
        header.contains("fabric storage 2/2") && header.contains("sweep failed"),
        "{header}"
    );

    let (mut states, mut messages) = two_fabrics();
    messages.extend([lost(0), lost(1)]);
    let e = ibscope_tui::event_loop(
        &mut terminal,
        &mut states,
        &mut Script::of_fabrics(messages, &[None]),
    );
    assert_eq!(
        e.unwrap_err().to_string(),
        "fabric 1: lost the connection to the fabric"
    );
}

#[test]
fn sweeper_delivers_snapshots_and_failures() {
    use ibscope_tui::{handle_message, SweepMsg, SweepThread};
    let sweeper = SweepThread::spawn(
        Box::new(CountingSource { n: 0 }),
        Duration::from_secs(60),
        None,
    )
    .unwrap();
    let mut state = AppState::new(None, Duration::from_secs(60), Instant::now());
    let recv = |s: &SweepThread| s.messages.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(recv(&sweeper), SweepMsg::Started));
    handle_message(&mut state, SweepMsg::Started, Instant::now());
    assert!(ibscope_tui::views::widgets::status_text(&state)
        .0
        .starts_with("sweeping…"));
    let done = recv(&sweeper);
    assert!(matches!(done, SweepMsg::Done(_)));
    handle_message(&mut state, done, Instant::now());
    assert_eq!(state.fabric().unwrap().node_count(), 8);
    // The interval is a minute: only sweep_now gets the next one.
    sweeper.sweep_now();
    assert!(matches!(recv(&sweeper), SweepMsg::Started));
    let failed = recv(&sweeper);
    assert!(matches!(&failed, SweepMsg::Failed { error, .. } if error.contains("unreachable")));
    handle_message(&mut state, failed, Instant::now());
    assert!(ibscope_tui::views::widgets::status_text(&state)
        .0
        .starts_with("sweep failed"));
    assert_eq!(
        state.fabric().unwrap().node_count(),
        8,
        "last snapshot kept"
    );
    sweeper.stop();
}

#[test]
fn file_source_reads_topology() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixture.topo");
    std::fs::write(&path, FIXTURE).unwrap();
    let mut source = ibscope_tui::FileSource::new(&path, |p| {
        ibscope::fabric::read_file(p).map(|(fabric, _warnings)| fabric)
    });
    assert_eq!(source.describe(), "file fixture.topo");
    let snap = source.sweep().unwrap();
    assert_eq!(snap.fabric.node_count(), 8);
    assert!(snap.counters.is_empty());
    assert!(snap.routes.is_none(), "no LFTs in an ibnetdiscover file");
    assert_eq!(snap.findings.len(), 1, "{:?}", snap.findings);
    assert_eq!(
        snap.findings[0].kind,
        ibscope_topo::findings::FindingKind::DegradedLink
    );
    std::fs::write(&path, "Switch 8 \"broken\n").unwrap();
    assert!(source.sweep().is_err());
}

/// LIDs in node order: a switch's on port 0 (its external ports repeat it), one per CA port.
/// Not a pass/fail test of speed: prints how long each step takes on a 2,048-host
/// 3-level fat tree (run with --nocapture). Frames must only format visible rows.
#[test]
fn responsiveness_2048_hosts() {
    let text = gen::fat_tree(&FatTreeSpec::new(3, 36, 2048)).unwrap();
    let t = Instant::now();
    let mut fabric = ibnd::parse(&text).unwrap();
    gen::bring_up(
        &mut fabric,
        ibscope_mad::attr::link::Rate::new(
            ibscope_mad::attr::link::Width::X4,
            ibscope_mad::attr::link::Speed::Hdr,
        ),
    );
    routing::compute_minhop_lfts(&mut fabric);
    let build = t.elapsed();
    let guids: Vec<u64> = fabric.nodes().map(|(_, n)| n.guid).collect();
    let mk = |fabric: &Fabric, at: SystemTime, errors: u64| {
        let mut s = Sweep::from_fabric(fabric.clone(), at);
        s.counters = guids
            .iter()
            .take(500)
            .map(|&g| sample(g, 1, at, errors, errors * 1000))
            .collect();
        s
    };
    let now = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), now);
    let t = Instant::now();
    state.apply_sweep(mk(&fabric, t0(), 0), now);
    let first = t.elapsed();
    let t = Instant::now();
    let prepared = prepare(
        state.sweep.as_ref(),
        mk(&fabric, t0() + Duration::from_secs(5), 3),
        None,
    );
    let prep = t.elapsed();
    let t = Instant::now();
    state.apply_prepared(prepared, now);
    let apply = t.elapsed();
    println!(
        "fat tree: {} nodes, {} links; build+LFTs {:?}; first snapshot {:?}; \
         second: prepare (sweeper thread) {:?}, apply (UI thread) {:?}",
        fabric.node_count(),
        fabric.link_count(),
        build,
        first,
        prep,
        apply
    );
    state.routing.from = "gpu-node-0001".into();
    state.routing.to = "gpu-node-2048".into();
    let t = Instant::now();
    state.run_trace();
    println!("trace {:?}", t.elapsed());
    assert!(matches!(&state.routing.result, Some(Ok(r)) if r.error.is_none()));
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
    for &view in View::ALL {
        state.view = view;
        terminal.draw(|f| render::draw(f, &state)).unwrap();
        let t = Instant::now();
        const FRAMES: u32 = 5;
        for _ in 0..FRAMES {
            terminal.draw(|f| render::draw(f, &state)).unwrap();
        }
        println!(
            "{:<9} {:>8.2} ms/frame",
            ibscope_tui::views::parts(view).title,
            t.elapsed().as_secs_f64() * 1000.0 / f64::from(FRAMES)
        );
    }
    let t = Instant::now();
    let report = ibscope_tui::source::check_routes(&Arc::new(fabric));
    println!("route check (sweeper thread) {:?}", t.elapsed());
    assert!(report.is_some());
}

#[test]
fn node_detail_marks_the_degraded_port() {
    let mut state = fixture_state();
    open_node_detail(&mut state, "leaf-1");
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    let row = text
        .lines()
        .find(|l| l.contains("spine-2[1]"))
        .expect("port 4 row");
    assert!(
        row.contains("1xHDR") && row.contains("4xHDR"),
        "active vs enabled: {text}"
    );
    let colors = line_colors(&buf, "spine-2[1]").unwrap();
    assert_eq!(colors[2], Color::Red, "{text}");
    let colors = line_colors(&buf, "spine-1[1]").unwrap();
    assert_ne!(colors[2], Color::Red, "{text}");
}

/// Links of a generated file come up at the best rate their ports enable, as in ibsim: a
/// file names the active rate of the degraded links only, and the fabric norm (like
/// `ibscope check --topology`) counts only links whose active rate is known.
fn come_up(f: &mut Fabric) {
    let ids: Vec<_> = f.nodes().map(|(id, _)| id).collect();
    for id in ids {
        for p in &mut f.node_mut(id).ports {
            if p.number != 0 && p.width_active.is_none() {
                p.width_active = p.width_enabled.best();
                p.speed_active = p.speed_enabled.best();
            }
        }
    }
}

/// A fabric too big to draw switch by switch: layers are summarised on one line each.
#[test]
fn big_fabric_overview_aggregates_layers() {
    let mut spec = FatTreeSpec::new(2, 36, 512);
    spec.options.degraded.push(gen::Degraded {
        node: "L0003".into(),
        port: 20,
        rate: "1xHDR".into(),
    });
    let mut fabric = ibnd::parse(&gen::fat_tree(&spec).unwrap()).unwrap();
    come_up(&mut fabric);
    let now = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), now);
    state.status.source = "file ft2-512.topo".into();
    state.apply_sweep(Sweep::from_fabric(fabric, t0()), now);
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let buf = render_buffer(&state, w, h);
        let text = buffer_text(&buf);
        assert!(
            text.contains("47 switches, 512 HCAs on 512 servers, 1034 links  1 degraded"),
            "{text}"
        );
        if w == 80 {
            // 18 spines, 29 leaves: too many chips for 80 columns, so one line per layer.
            let l2 = text
                .lines()
                .find(|l| l.contains("layer 2: 18 switches"))
                .expect(&text);
            assert!(
                l2.contains("522 links to layer 1, 1 degraded/down"),
                "{text}"
            );
            assert!(
                text.contains("layer 1: 29 switches, 512 links to the CAs, 0 degraded/down"),
                "{text}"
            );
            let colors = line_colors(&buf, "layer 2:").unwrap();
            assert_eq!(colors[6], Color::Red);
        } else {
            // Room for every chip; the shared "MF0;" / ":MQM8790/U1" is shown once.
            assert!(text.contains("[spine-0018 ↓29]"), "{text}");
            assert!(text.contains("[leaf-0029 ↑18 ↓8]"), "{text}");
            assert!(text.contains("names: \"MF0;…:MQM8790/U1\""), "{text}");
            let line = text.lines().find(|l| l.contains("[leaf-0003")).unwrap();
            let x = line[..line.find("[leaf-0003").unwrap()].chars().count();
            assert_eq!(
                line_colors(&buf, "[leaf-0003").unwrap()[x],
                Color::Red,
                "{text}"
            );
        }
        insta::assert_snapshot!(format!("big_overview_{w}x{h}"), text);
    }
}

/// The fixture with its degraded link narrowed the way ibsim and OpenSM leave one: both
/// ends of spine-2[1] <-> leaf-1[4] enable only 1x (`w=1`) and run at 1x, so the link is
/// not below what both ends support and enable; only the fabric norm (`ibscope check`'s
/// second rule) calls it degraded. With `narrowed` false, the same link at 4xHDR.
fn norm_only_fixture(narrowed: bool) -> String {
    let ends = ["[1] \"L1\"[4] #", "[4] \"S2\"[1] #"];
    let mut text = FIXTURE.to_string();
    for end in ends {
        assert!(text.contains(end), "{end}");
        let with = end.replace(" #", " w=1 #");
        text = text.replace(end, if narrowed { &with } else { end });
    }
    if !narrowed {
        text = text.replace("1xHDR", "4xHDR");
    }
    text
}

/// `text` parsed, with what a live port also reports: every width and speed up to HDR
/// supported, Active and LinkUp.
fn live_like(text: &str) -> Fabric {
    use ibscope_mad::attr::link::{SpeedSet, WidthSet};
    use ibscope_mad::attr::{PhysState, PortState};
    let mut f = ibnd::parse(text).expect("parses");
    let ids: Vec<_> = f.nodes().map(|(id, _)| id).collect();
    for id in ids {
        for p in &mut f.node_mut(id).ports {
            p.width_supported = WidthSet(0x1f);
            p.speed_supported = SpeedSet::from_masks(7, 0, 7, 0);
            p.state = Some(PortState::Active);
            p.phys_state = Some(PhysState::LinkUp);
        }
    }
    f
}

#[test]
fn link_degraded_only_by_the_fabric_norm_is_counted_and_marked() {
    use ibscope_topo::health::{self, HealthOptions};
    let healthy = live_like(&norm_only_fixture(false));
    let narrowed = live_like(&norm_only_fixture(true));
    // What `ibscope check` sees: one degraded link, by the norm rule alone.
    let report = health::assess(&narrowed, None, &HealthOptions::default());
    let degraded: Vec<_> = report.degraded().collect();
    assert_eq!(degraded.len(), 1);
    assert_eq!(degraded[0].reasons, ["1xHDR below fabric norm 4xHDR"]);
    assert_eq!(
        degraded[0].could_be, degraded[0].active,
        "enabled == active"
    );

    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), start);
    state.apply_sweep(Sweep::from_fabric(healthy, t0()), start);
    state.apply_sweep(
        Sweep::from_fabric(narrowed, t0() + Duration::from_secs(5)),
        start + Duration::from_secs(5),
    );
    state.now = start + Duration::from_secs(5);
    assert_eq!(state.derived.summary.degraded, report.degraded().count());

    // Overview: the count in the header line, both switches of the link red.
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    assert!(
        text.contains("4 switches, 4 HCAs on 4 servers, 8 links  1 degraded, 0 down"),
        "{text}"
    );
    assert!(
        boxed_text(&text, "Findings").contains("1xHDR below fabric norm 4xHDR"),
        "finding: {text}"
    );
    for (needle, red) in [("[spine-1", false), ("[spine-2", true), ("[leaf-1", true)] {
        let line = text.lines().find(|l| l.contains(needle)).expect(needle);
        let x = line[..line.find(needle).unwrap()].chars().count();
        let color = line_colors(&buf, needle).unwrap()[x];
        assert_eq!(color == Color::Red, red, "{needle}: {text}");
    }

    // Links: counted in the title, first, flagged, red, held to the norm, reason below.
    press(&mut state, KeyCode::Char('3'));
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    assert!(text.contains(" Links: 8, 1 degraded, 0 down, "), "{text}");
    let row = text.lines().nth(3).unwrap();
    assert!(
        row.contains("spine-2[1]") && row.contains("leaf-1[4]") && row.contains("DEGR"),
        "{text}"
    );
    assert!(
        row.contains("1xHDR  4xHDR"),
        "active, then expected: {text}"
    );
    let colors = line_colors(&buf, "DEGR").unwrap();
    assert!(colors.iter().take(70).all(|c| *c == Color::Red), "{text}");
    assert_eq!(text.matches("DEGR").count(), 1, "{text}");
    assert!(
        text.contains("spine-2[1] <-> leaf-1[4]  degraded: 1xHDR below fabric norm 4xHDR"),
        "{text}"
    );

    // Node detail: the port is red and says why.
    open_node_detail(&mut state, "leaf-1");
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    assert!(
        text.contains("port 4 degraded: 1xHDR below fabric norm 4xHDR"),
        "{text}"
    );
    let colors = line_colors(&buf, "spine-2[1]").unwrap();
    assert_eq!(colors[2], Color::Red, "{text}");
    let colors = line_colors(&buf, "spine-1[1]").unwrap();
    assert_ne!(colors[2], Color::Red, "{text}");

    // Events: the change from the healthy sweep is logged with the reason.
    let event = state
        .events
        .iter()
        .find(|e| e.kind == LogEntryKind::Degraded)
        .expect("degraded event");
    assert_eq!(
        event.text,
        "spine-2[1] <-> leaf-1[4]: 1xHDR below fabric norm 4xHDR"
    );
    assert!(!state
        .events
        .iter()
        .any(|e| e.kind == LogEntryKind::Recovered));
}

/// A rail-optimised fabric of 6 servers x 4 rails (4 servers a leaf) at 4xHDR with min-hop
/// routes and four rail faults: gpu-0002's mlx5_1 gone (its link went down), gpu-0003's
/// mlx5_2 at 1xHDR, gpu-0004's mlx5_0 and mlx5_3 with each other's cables, gpu-0006's
/// mlx5_1 Initialize. Counters on gpu-0003's mlx5_2.
fn rail_state() -> AppState {
    use ibscope_topo::model::{FabricFile, FileLink};
    let spec = gen::RailsSpec {
        hosts_per_leaf: 4,
        ..gen::RailsSpec::new(6, 4, 64)
    };
    let mut f = ibnd::parse(&gen::rails(&spec).unwrap()).unwrap();
    gen::bring_up(
        &mut f,
        ibscope_mad::attr::link::Rate::parse("4xHDR").unwrap(),
    );
    let mut file: FabricFile = f.to_file();
    let guid =
        |file: &FabricFile, d: &str| file.nodes.iter().find(|n| n.description == d).unwrap().guid;
    let link_of = |file: &FabricFile, g: u64| {
        file.links
            .iter()
            .position(|l| l.a_guid == g || l.b_guid == g)
            .unwrap()
    };
    // Gone.
    let g = guid(&file, "gpu-0002 mlx5_1");
    let i = link_of(&file, g);
    file.links.remove(i);
    file.nodes.retain(|n| n.guid != g);
    // Slow: both ends at 1x.
    let g = guid(&file, "gpu-0003 mlx5_2");
    let l = file.links[link_of(&file, g)];
    for (node, port) in [(l.a_guid, l.a_port), (l.b_guid, l.b_port)] {
        let n = file.nodes.iter_mut().find(|n| n.guid == node).unwrap();
        let p = n.ports.iter_mut().find(|p| p.number == port).unwrap();
        p.width_active = Some(ibscope_mad::attr::link::Width::X1);
    }
    // Swapped.
    let (a, b) = (
        guid(&file, "gpu-0004 mlx5_0"),
        guid(&file, "gpu-0004 mlx5_3"),
    );
    let (ia, ib) = (link_of(&file, a), link_of(&file, b));
    let far = |l: FileLink, me: u64| {
        if l.a_guid == me {
            (l.b_guid, l.b_port)
        } else {
            (l.a_guid, l.a_port)
        }
    };
    let (fa, fb) = (far(file.links[ia], a), far(file.links[ib], b));
    file.links[ia] = FileLink {
        a_guid: a,
        a_port: 1,
        b_guid: fb.0,
        b_port: fb.1,
    };
    file.links[ib] = FileLink {
        a_guid: b,
        a_port: 1,
        b_guid: fa.0,
        b_port: fa.1,
    };
    // Not Active.
    let g = guid(&file, "gpu-0006 mlx5_1");
    let n = file.nodes.iter_mut().find(|n| n.guid == g).unwrap();
    n.ports[0].state = Some(ibscope_mad::attr::PortState::Init);
    let mut f = Fabric::from_file(file).unwrap();
    routing::compute_minhop_lfts(&mut f);
    let slow = guid_of(&f, "gpu-0003 mlx5_2");
    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), start);
    for (k, at) in [(0u64, t0()), (1, t0() + Duration::from_secs(5))] {
        let mut snap = Sweep::from_fabric(f.clone(), at);
        snap.counters = vec![sample(
            slow,
            1,
            at,
            3 + 20 * k,
            1_000_000 + k * 5_000_000_000,
        )];
        state.apply_sweep(snap, start + Duration::from_secs(5 * k));
    }
    state.now = start + Duration::from_secs(8);
    state
}

/// The cell of `host`'s row under the column headed `rail N`: its text and colour.
fn grid_cell(buf: &Buffer, host: &str, rail: u8) -> (String, Color) {
    let text = buffer_text(buf);
    let header = text.lines().find(|l| l.contains("rail 0")).unwrap();
    let col = header.find(&format!("rail {rail}")).unwrap();
    let col = header[..col].chars().count() as u16;
    let y = text.lines().position(|l| l.starts_with(host)).unwrap() as u16;
    let cell: String = (col..col + 7).map(|x| buf[(x, y)].symbol()).collect();
    (cell.trim().to_string(), buf[(col, y)].fg)
}

#[test]
fn hosts_grid_marks_down_missing_degraded_and_misplaced() {
    let mut state = rail_state();
    press(&mut state, KeyCode::Char('7'));
    assert_eq!(state.view, View::Hosts);
    let buf = render_buffer(&state, 80, 24);
    let text = buffer_text(&buf);
    assert!(
        text.contains("Hosts: 6 with rails, 4 with rail problems; rails 0-3"),
        "{text}"
    );
    assert_eq!(
        grid_cell(&buf, "gpu-0001", 0),
        ("4xHDR".into(), Color::Reset)
    );
    assert_eq!(
        grid_cell(&buf, "gpu-0002", 1),
        ("missing".into(), Color::Red)
    );
    assert_eq!(grid_cell(&buf, "gpu-0003", 2), ("1xHDR".into(), Color::Red));
    assert_eq!(
        grid_cell(&buf, "gpu-0004", 0),
        ("4xHDR*".into(), Color::Yellow)
    );
    assert_eq!(
        grid_cell(&buf, "gpu-0004", 3),
        ("4xHDR*".into(), Color::Yellow)
    );
    assert_eq!(
        grid_cell(&buf, "gpu-0005", 0),
        ("4xHDR".into(), Color::Reset)
    );
    assert_eq!(grid_cell(&buf, "gpu-0006", 1), ("Init".into(), Color::Red));
    insta::assert_snapshot!("hosts_grid_80x24", text);
    // gpu-0003's rail 2: two rows down, two rails right, Enter.
    press(&mut state, KeyCode::Down);
    press(&mut state, KeyCode::Down);
    press(&mut state, KeyCode::Right);
    press(&mut state, KeyCode::Char('l'));
    press(&mut state, KeyCode::Enter);
    assert!(state.hosts.detail);
    let text = buffer_text(&render_buffer(&state, 160, 48));
    assert!(text.contains(" gpu-0003 rail 2 "), "{text}");
    assert!(text.contains("gpu-0003 mlx5_2[1]"), "{text}");
    // Offline: the physical state was not read; the leaf's name is its NodeDescription.
    assert!(
        text.contains("link: 1xHDR Active/Unknown  <->  MF0;leaf-r2-001:MQM9700/U1[3]"),
        "{text}"
    );
    // Offline, an HCA with one port runs no other link that shows what it can do: below
    // the norm, capability unknown (check's link-below-norm warning), not degraded.
    assert!(
        text.contains("below norm: 1xHDR below fabric norm 4xHDR (capability unknown offline)"),
        "{text}"
    );
    // 20 symbol errors in 5 s.
    assert!(text.contains("counters: errors 23 (4.0/s)"), "{text}");
    assert!(
        text.contains(
            "[rail-slow] gpu-0003 rail 2: \"gpu-0003 mlx5_2\" port 1 <-> \
             \"MF0;leaf-r2-001:MQM9700/U1\" port 3: runs at 1xHDR"
        ),
        "{text}"
    );
    insta::assert_snapshot!("hosts_detail_160x48", text);
    press(&mut state, KeyCode::Esc);
    assert!(!state.hosts.detail);
    // The missing rail: its finding says where it belongs.
    press(&mut state, KeyCode::Up);
    press(&mut state, KeyCode::Left);
    press(&mut state, KeyCode::Enter);
    let text = buffer_text(&render_buffer(&state, 160, 48));
    assert!(text.contains("no HCA of this rail in the fabric"), "{text}");
    assert!(
        text.contains("[rail-down] gpu-0002 rail 1: \"MF0;leaf-r1-001:MQM9700/U1\" port 2: Down"),
        "{text}"
    );
}

/// Two planes of one rail fabric (4 servers x 2 rails, the same GUIDs in both, as a
/// planarized HCA port shows them): in plane "beta" gpu-0002's rail 1 runs at 1x. The
/// planes-disagree finding `check -C all` reports is on beta's overview, and on alpha's
/// nothing; when beta's next snapshot has the port at 4x again, the finding goes.
#[test]
fn planes_that_disagree_are_a_finding_on_that_planes_overview() {
    use ibscope_mad::attr::link::{Rate, Width};
    use ibscope_topo::findings::FindingKind;
    use ibscope_tui::{FabricTag, SweepMsg};

    let plane = |slow: bool| {
        let spec = gen::RailsSpec {
            hosts_per_leaf: 2,
            ..gen::RailsSpec::new(4, 2, 8)
        };
        let mut f = ibnd::parse(&gen::rails(&spec).unwrap()).unwrap();
        gen::bring_up(&mut f, Rate::parse("4xHDR").unwrap());
        if slow {
            let id = f
                .nodes()
                .find(|(_, n)| n.description == "gpu-0002 mlx5_1")
                .unwrap()
                .0;
            f.node_mut(id).port_mut(1).unwrap().width_active = Some(Width::X1);
        }
        f
    };
    let done = |i: usize, f: Fabric| {
        let snap = Sweep::from_fabric(f, t0());
        (i, SweepMsg::Done(Box::new(prepare(None, snap, None))))
    };
    let mut states: Vec<AppState> = ["alpha", "beta"]
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let mut s = AppState::new(None, Duration::from_secs(5), Instant::now());
            s.status.fabric = Some(FabricTag {
                name: name.to_string(),
                index,
                count: 2,
            });
            s
        })
        .collect();
    let planes_of = |s: &AppState| -> Vec<(Option<String>, Option<u8>, String)> {
        s.sweep
            .as_ref()
            .unwrap()
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::PlanesDisagree)
            .map(|f| (f.host.clone(), f.rail, f.message.clone()))
            .collect()
    };

    let messages = vec![done(0, plane(false)), done(1, plane(true))];
    let keys = [
        None,
        Some(KeyCode::Char('f')),
        None,
        Some(KeyCode::Char('q')),
    ];
    let mut script = Script::of_fabrics(messages, &keys);
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
    ibscope_tui::event_loop(&mut terminal, &mut states, &mut script).unwrap();
    assert_eq!(planes_of(&states[0]), vec![]);
    let beta = planes_of(&states[1]);
    assert_eq!(beta.len(), 1, "{beta:?}");
    let (host, rail, message) = &beta[0];
    assert_eq!((host.as_deref(), *rail), (Some("gpu-0002"), Some(1)));
    assert!(
        message.starts_with("plane beta (port GUID 0x")
            && message.ends_with(" runs at 1xHDR, its other planes at 4xHDR"),
        "{message}"
    );
    let text = buffer_text(terminal.backend().buffer());
    assert!(text.lines().next().unwrap().contains("fabric beta 2/2"));
    assert!(
        boxed_text(&text, "Findings").contains(") runs at 1xHDR, its other planes at 4xHDR"),
        "{text}"
    );

    // Beta swept again with the port back at 4x: the planes agree, the finding goes.
    let mut script = Script::of_fabrics(
        vec![done(1, plane(false))],
        &[None, Some(KeyCode::Char('q'))],
    );
    ibscope_tui::event_loop(&mut terminal, &mut states, &mut script).unwrap();
    assert_eq!(planes_of(&states[1]), vec![]);
    assert_eq!(planes_of(&states[0]), vec![]);
}

/// At 80 columns the Links view of the demo's GPU cluster (switch names such as
/// "MF0;leaf-r6-001:MQM9700/U1") shortens the middle of long names and keeps both ends'
/// port numbers.
#[test]
fn links_keep_both_port_numbers_at_80_columns() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fabrics/gpu-cluster.topo"),
    )
    .unwrap();
    let fabric = ibnd::parse(&text).expect("the demo fabric parses");
    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), start);
    state.status.source = "file gpu-cluster.topo".into();
    state.apply_sweep(Sweep::from_fabric(fabric, t0()), start);
    state.now = start + Duration::from_secs(3);
    press(&mut state, KeyCode::Char('3'));
    let text = buffer_text(&render_buffer(&state, 80, 24));
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("End A"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.contains("Selected link"))
        .collect();
    assert!(rows.len() > 10, "{text}");
    for row in &rows {
        let ports = row.matches(']').count();
        assert_eq!(ports, 2, "both ends' ports in {row:?}\n{text}");
    }
    assert!(text.contains('…'), "long names are shortened:\n{text}");
    insta::assert_snapshot!("links_gpu_cluster_80x24", text);
}

/// Enter opens the selected finding whole: its one text with GUIDs and LIDs, what its kind
/// means and what to do; l and c take it to its link in Links and its port in Counters.
#[test]
fn a_finding_opens_whole_and_jumps_to_its_link_and_port() {
    let mut state = fixture_state();
    let f = state.sweep.as_ref().unwrap().findings[0].clone();
    press(&mut state, KeyCode::Enter);
    let text = buffer_text(&render_buffer(&state, 80, 24));
    let facts = f.kind.facts();
    assert_eq!(
        boxed_text(&text, "Finding 1 of 1 (warning)"),
        format!(
            "{} what it means: {} what to do: {}",
            f.text_line(),
            facts.meaning,
            facts.fix
        ),
        "{text}"
    );
    // Its far end is spine-2 port 1 and leaf-1 port 4: the link's row in Links.
    press(&mut state, KeyCode::Char('l'));
    assert_eq!(state.view, View::Links);
    let row = state.selected_link().unwrap();
    assert!(row.verdict.degraded(), "{row:?}");
    let text = buffer_text(&render_buffer(&state, 80, 24));
    let selected = text.lines().find(|l| l.contains("DEGR")).unwrap();
    assert!(selected.contains("spine-2[1]") && selected.contains("leaf-1[4]"));
    // Its port in Counters.
    press(&mut state, KeyCode::Char('1'));
    press(&mut state, KeyCode::Char('c'));
    assert_eq!(state.view, View::Counters);
    let key = state.counters.rows[state.counters.list.selected];
    assert_eq!(key, f.at.as_ref().unwrap().key());
    // Esc closes the finding.
    press(&mut state, KeyCode::Char('1'));
    press(&mut state, KeyCode::Esc);
    assert!(!state.finding_detail);
}

/// A finding at a leaf port with no link (a rail down): l says so in the footer rather
/// than jumping to another link.
#[test]
fn a_finding_without_a_link_says_so() {
    let mut state = rail_state();
    let down = state
        .sweep
        .as_ref()
        .unwrap()
        .findings
        .iter()
        .position(|f| f.kind == ibscope_topo::findings::FindingKind::RailDown && f.at.is_some())
        .expect("the missing rail's finding");
    for _ in 0..down {
        press(&mut state, KeyCode::Down);
    }
    press(&mut state, KeyCode::Char('l'));
    assert_eq!(state.view, View::Overview);
    let text = buffer_text(&render_buffer(&state, 80, 24));
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains("the finding's ports have no link in this sweep"),
        "{text}"
    );
}

/// Every counter a port has, errors that counted first, then PortXmitWait.
fn full_sample(guid: u64, port: u8, at: SystemTime) -> PortCounterSample {
    let mut counters: BTreeMap<String, u64> = ibscope_topo::counters::names::all_counter_names()
        .into_iter()
        .map(|n| (n.to_string(), 0))
        .collect();
    counters.insert("SymbolErrorCounter".into(), 1234);
    counters.insert("LinkDownedCounter".into(), 7);
    counters.insert("PortXmitWait".into(), 99);
    counters.insert("PortXmitData".into(), 4_000_000);
    PortCounterSample {
        at: ibscope_topo::PortKey { guid, port },
        counters,
        saturated: Default::default(),
        xmit_data_bytes: Some(16_000_000),
        rcv_data_bytes: Some(8_000_000),
        taken_at: at,
    }
}

/// The demo's GPU cluster read from its topology file, with every counter of leaf-r4-001
/// port 4 (a long switch name) swept twice.
fn demo_counters_state() -> (AppState, u64) {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fabrics/gpu-cluster.topo"),
    )
    .unwrap();
    let fabric = ibnd::parse(&text).expect("the demo fabric parses");
    let leaf = guid_of(&fabric, "MF0;leaf-r4-001:MQM9700/U1");
    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), start);
    for k in 0..2u64 {
        let at = t0() + Duration::from_secs(5 * k);
        let mut sweep = Sweep::from_fabric(fabric.clone(), at);
        sweep.counters = vec![full_sample(leaf, 4, at)];
        state.apply_sweep(sweep, start + Duration::from_secs(5 * k));
    }
    state.now = start + Duration::from_secs(8);
    (state, leaf)
}

/// At 80x24 the selected port keeps its `[4]` beside a long name, its counters that
/// counted errors come first (then PortXmitWait), and Enter lists every one of them,
/// reachable with the arrow keys.
#[test]
fn a_ports_counters_put_errors_first_and_all_are_reachable() {
    let (mut state, _) = demo_counters_state();
    press(&mut state, KeyCode::Char('4'));
    let text = buffer_text(&render_buffer(&state, 80, 24));
    // 1234 symbol errors and 7 downs.
    let row = text
        .lines()
        .find(|l| l.contains(" 1241 "))
        .expect("the port's row");
    assert!(row.contains("…") && row.contains("/U1[4]"), "{text}");
    let panel = text
        .lines()
        .skip_while(|l| !l.contains("Selected port"))
        .collect::<Vec<_>>()
        .join("\n");
    let at = |needle: &str| {
        panel
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}: {panel}"))
    };
    assert!(at("SymbolErrorCounter = 1234") < at("LinkDownedCounter = 7"));
    assert!(at("LinkDownedCounter = 7") < at("PortXmitWait = 99"));
    assert!(panel.contains("more: Enter"), "{panel}");
    // Every counter, scrolling.
    press(&mut state, KeyCode::Enter);
    let names = ibscope_topo::counters::names::all_counter_names();
    let mut seen: std::collections::BTreeSet<String> = Default::default();
    for _ in 0..=names.len() {
        let text = buffer_text(&render_buffer(&state, 80, 24));
        seen.extend(
            names
                .iter()
                .filter(|n| text.contains(&format!("{n} = ")))
                .map(|n| n.to_string()),
        );
        press(&mut state, KeyCode::Down);
    }
    assert_eq!(seen.len(), names.len(), "{seen:?}");
    press(&mut state, KeyCode::Esc);
    assert!(!state.counters.detail);
}

/// A port whose node went from the fabric keeps the name it had, not its GUID.
#[test]
fn a_gone_port_keeps_its_last_name() {
    let (mut state, leaf) = demo_counters_state();
    let mut file = state.sweep.as_ref().unwrap().fabric.to_file();
    file.nodes.retain(|n| n.guid != leaf);
    file.links.retain(|l| l.a_guid != leaf && l.b_guid != leaf);
    let fabric = Fabric::from_file(file).unwrap();
    let start = state.now;
    state.apply_sweep(
        Sweep::from_fabric(fabric, t0() + Duration::from_secs(10)),
        start,
    );
    press(&mut state, KeyCode::Char('4'));
    let text = buffer_text(&render_buffer(&state, 160, 48));
    assert!(text.contains("MF0;leaf-r4-001:MQM9700/U1[4]"), "{text}");
    assert!(text.contains("(not in the last sweep)"), "{text}");
    assert!(!text.contains("0x0000"), "{text}");
}

/// The header counts servers and HCAs as such, and its down counts tell the findings'
/// story: the rail fabric has 6 servers of 4 HCAs with one HCA gone (23 HCAs), one HCA's
/// link Initialize (a link down, a rail down) and the gone one (a rail down, no link).
#[test]
fn the_header_counts_servers_hcas_and_what_is_down_as_the_findings_do() {
    use ibscope_topo::findings::FindingKind;
    let state = rail_state();
    let text = buffer_text(&render_buffer(&state, 100, 30));
    let counts = text.lines().nth(1).unwrap();
    assert!(counts.contains("23 HCAs on 6 servers"), "{counts}");
    assert!(counts.contains("1 down, 2 rails down"), "{counts}");
    let findings = &state.sweep.as_ref().unwrap().findings;
    let rails_down = findings
        .iter()
        .filter(|f| f.kind == FindingKind::RailDown)
        .count();
    assert_eq!(rails_down, 2, "{findings:#?}");
    assert!(text.contains(" CA  23 HCAs on 6 servers ("), "{text}");
}

/// The cells of the first column, headed `header` (its text up to where the column headed
/// `next` starts), one per row below the header line.
fn column(text: &str, header: &str, next: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let h = lines
        .iter()
        .position(|l| l.starts_with(header) && l.contains(next))
        .expect(header);
    let chars = |l: &str| l.chars().collect::<Vec<char>>();
    let head = chars(lines[h]);
    let find = |needle: &str| {
        let n: Vec<char> = needle.chars().collect();
        head.windows(n.len())
            .position(|w| w == n.as_slice())
            .unwrap()
    };
    let (from, to) = (find(header), find(next));
    lines[h + 1..]
        .iter()
        .map(|l| chars(l))
        .take_while(|c| c.len() > from && !c[from..].iter().all(|c| *c == ' '))
        .map(|c| {
            c[from..to.min(c.len())]
                .iter()
                .collect::<String>()
                .trim()
                .to_string()
        })
        .collect()
}

/// Every table sorts by any of its columns (s, marked ▲ or ▼ in its header) and either
/// way (S), as htop and k9s do: Links by its first end, the Hosts grid by a rail's cells,
/// the worst first.
#[test]
fn tables_sort_by_any_column_either_way() {
    let mut state = fixture_state();
    press(&mut state, KeyCode::Char('3'));
    press(&mut state, KeyCode::Char('s'));
    let text = buffer_text(&render_buffer(&state, 100, 30));
    assert!(text.contains("sort: End A▲ (s S)"), "{text}");
    let ends = column(&text, "End A▲", "End B");
    assert!(
        ends.len() > 3 && ends.windows(2).all(|w| w[0] <= w[1]),
        "{ends:?}"
    );
    press(&mut state, KeyCode::Char('S'));
    let text = buffer_text(&render_buffer(&state, 100, 30));
    let ends = column(&text, "End A▼", "End B");
    assert!(ends.windows(2).all(|w| w[0] >= w[1]), "{ends:?}");

    // The rail grid: rail 0's worst cell is gpu-0004's (on another rail's leaf), rail 1's
    // gpu-0002's (missing), then gpu-0006's (Initialize).
    let mut state = rail_state();
    press(&mut state, KeyCode::Char('7'));
    press(&mut state, KeyCode::Char('s'));
    let text = buffer_text(&render_buffer(&state, 100, 30));
    assert!(text.contains("sort: rail 0▼ (s S)"), "{text}");
    let hosts = column(&text, "Host", "rail 0");
    assert_eq!(hosts[0], "gpu-0004", "{text}");
    press(&mut state, KeyCode::Char('s'));
    let text = buffer_text(&render_buffer(&state, 100, 30));
    let hosts = column(&text, "Host", "rail 0");
    assert_eq!(hosts[..2], ["gpu-0002", "gpu-0006"], "{text}");
}

/// `/` in a view finds a node, host or port by any name it is shown under and puts the
/// cursor on it (as typed; n and N go on); what no row of the view shows opens in Nodes.
#[test]
fn slash_finds_a_node_host_or_port_by_any_name_in_every_view() {
    let find = |state: &mut AppState, text: &str| {
        press(state, KeyCode::Char('/'));
        type_text(state, text);
        press(state, KeyCode::Enter);
    };
    let mut state = fixture_state();
    let guid = |s: &AppState, d: &str| guid_of(s.fabric().unwrap(), d);
    let ends = |s: &AppState| {
        let r = s.selected_link().unwrap();
        (r.name_a.clone(), r.a.port, r.name_b.clone(), r.b.port)
    };
    // Links, by name: host-3's link.
    press(&mut state, KeyCode::Char('3'));
    find(&mut state, "host-3");
    assert_eq!(ends(&state), ("leaf-2".into(), 1, "host-3".into(), 1));
    // By GUID: a link of spine-2; n goes to its other one, N back.
    let spine2 = guid(&state, "spine-2");
    find(&mut state, &format!("{spine2:#x}"));
    let first = ends(&state);
    assert!(first.0 == "spine-2" || first.2 == "spine-2", "{first:?}");
    press(&mut state, KeyCode::Char('n'));
    let second = ends(&state);
    assert_ne!(first, second);
    assert!(second.0 == "spine-2" || second.2 == "spine-2", "{second:?}");
    press(&mut state, KeyCode::Char('N'));
    assert_eq!(ends(&state), first);
    // As typed, before Enter: the prompt is in the footer.
    press(&mut state, KeyCode::Char('/'));
    type_text(&mut state, "leaf-2[4");
    let footer = buffer_text(&render_buffer(&state, 80, 24));
    assert!(
        footer.lines().last().unwrap().starts_with("/leaf-2[4_"),
        "{footer}"
    );
    press(&mut state, KeyCode::Esc);
    // Counters, by LID: host-1 is LID 5 in the fixture.
    press(&mut state, KeyCode::Char('4'));
    find(&mut state, "5");
    let key = state.counters.rows[state.counters.list.selected];
    assert_eq!(key.guid, guid(&state, "host-1"));
    // What no counter row shows (spine-1 has none): its node opens in Nodes.
    find(&mut state, "spine-1");
    assert_eq!(state.view, View::Nodes);
    assert_eq!(state.nodes.detail, Some(guid(&state, "spine-1")));
    let text = buffer_text(&render_buffer(&state, 80, 24));
    assert!(text
        .lines()
        .last()
        .unwrap()
        .contains("not in Counters: shown in Nodes"));
    // Nothing at all by that name: said so.
    press(&mut state, KeyCode::Char('6'));
    find(&mut state, "nosuch");
    let text = buffer_text(&render_buffer(&state, 80, 24));
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains("nothing in Events matches"),
        "{text}"
    );
    // Events: host-2's link went down.
    find(&mut state, "host-2");
    let order = ibscope_tui::event_log::event_order(&state.events, state.events_sort);
    let selected = &state.events[order[state.event_list.selected]];
    assert_eq!(selected.kind, LogEntryKind::LinkDown);
    assert!(selected.text.contains("host-2[1]"), "{}", selected.text);
    // The Overview: the finding about leaf-1.
    press(&mut state, KeyCode::Char('1'));
    find(&mut state, "leaf-1");
    assert_eq!(state.overview_findings.selected, 0);

    // Hosts, by an HCA's name: its host's row and its rail.
    let mut state = rail_state();
    press(&mut state, KeyCode::Char('7'));
    find(&mut state, "gpu-0003 mlx5_2");
    let grid = &state.derived.host_grid;
    assert_eq!(state.hosts.selected_row(grid).unwrap().name, "gpu-0003");
    assert_eq!(grid.rails[state.hosts.rail], 2);
}

/// `?` explains every key of the view, the new ones too (find, sort, a finding's detail
/// and its jumps), scrolled with the arrow keys where the screen is too short for it.
#[test]
fn the_help_explains_every_key_and_scrolls() {
    let wanted: [(char, &[&str]); 5] = [
        (
            '1',
            &[
                "find a node, host or port",
                "the next / previous row found",
                "the finding whole",
                "the finding's link in Links",
                "the finding's port in Counters",
                "and what to do; l and c jump to its link and port.",
            ],
        ),
        (
            '3',
            &["find a node, host or port", "sort by the next column"],
        ),
        (
            '4',
            &["every counter of the port", "sort by the next column"],
        ),
        (
            '6',
            &["find a node, host or port", "sort by the next column"],
        ),
        (
            '7',
            &["find a node, host or port", "sort by the next column"],
        ),
    ];
    for (view, lines) in wanted {
        let mut state = fixture_state();
        press(&mut state, KeyCode::Char(view));
        press(&mut state, KeyCode::Char('?'));
        let mut seen = String::new();
        for _ in 0..40 {
            let text = buffer_text(&render_buffer(&state, 80, 24));
            seen.push_str(&text);
            if !text.lines().nth(1).unwrap_or("").contains('▼') {
                break;
            }
            press(&mut state, KeyCode::Down);
            assert!(state.help, "the arrow keys scroll the help");
        }
        for line in lines {
            assert!(seen.contains(line), "view {view}: {line:?} not in\n{seen}");
        }
    }
}

/// The demo fabric as the live TUI sees it, from the simulator: ibsim and OpenSM on the
/// demo's topology with its counters planted, discovered (with LFTs) once, then four times
/// more while the flapping link goes down and up twice (ibsim's Unlink and ReLink, the SM
/// told each time), as the interactive demo does. The last sweep carries `check`'s
/// findings on that fabric, the link-flapping finding topo's flap history makes of the
/// five discoveries (as the live source adds it), and the counters ibsim holds still
/// (error counters and PortXmitWait: ibsim counts its own MADs as data). Times are fixed.
fn demo_state() -> AppState {
    use crate::common::{assert_exit, assert_success, ibscope, sim};
    use ibscope::cmd::demo::faults;
    let sim = sim("gpu-cluster.topo");
    ibscope::cmd::demo::plant_counters(&sim).unwrap();
    let (flap_node, flap_port, _) = faults::FLAPPING;
    let discover = || {
        let out = ibscope(&sim, &["discover", "--format", "json", "--lft"]);
        Arc::new(ibscope_topo::export::json::read(&assert_success(&out)).unwrap())
    };
    let mut fabrics = vec![discover()];
    for down in [true, false, true, false] {
        if down {
            sim.unlink(flap_node, flap_port).unwrap();
        } else {
            sim.relink(flap_node, flap_port).unwrap();
        }
        sim.resweep().unwrap();
        fabrics.push(discover());
    }
    let check: serde_json::Value =
        serde_json::from_str(&assert_exit(&ibscope(&sim, &["check", "--json"]), 1)).unwrap();
    let mut findings: Vec<ibscope_topo::findings::Finding> =
        serde_json::from_value(check["findings"].clone()).unwrap();
    let counters: serde_json::Value = serde_json::from_str(&assert_success(&ibscope(
        &sim,
        &["counters", "--format", "json"],
    )))
    .unwrap();
    let at = |k: usize| t0() + Duration::from_secs(60 * k as u64);
    let mut history = ibscope_topo::journal::FlapHistory::default();
    for (k, f) in fabrics.iter().enumerate() {
        history.record(f, "", None, None, at(k));
    }
    findings.extend(history.flapping(Default::default()));
    let still = |name: &str| {
        use ibscope_mad::attr::{perf_attrs::counter_kind, CounterKind};
        !matches!(
            counter_kind(name),
            Some(CounterKind::Data | CounterKind::Packets) | None
        )
    };
    let last = fabrics.len() - 1;
    let samples: Vec<PortCounterSample> = counters["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let p: ibscope_topo::counters::PortSample = serde_json::from_value(p.clone()).unwrap();
            let mut s = PortCounterSample::from_port_sample(&p, at(last));
            s.counters.retain(|name, _| still(name));
            (s.xmit_data_bytes, s.rcv_data_bytes) = (None, None);
            s
        })
        .collect();
    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(2), start);
    state.status.source = "ibsim0/1".into();
    for (k, f) in fabrics.into_iter().enumerate() {
        let mut sweep = Sweep::from_fabric((*f).clone(), at(k));
        if k == last {
            sweep.findings = findings.clone();
            sweep.counters = samples.clone();
        }
        sweep.sm = Some("LID 1".into());
        sweep.routes = ibscope_tui::source::check_routes(&sweep.fabric);
        sweep.duration = Duration::from_millis(40);
        state.apply_sweep(sweep, start + Duration::from_secs(60 * k as u64));
    }
    state.now = start + Duration::from_secs(60 * last as u64 + 1);
    state
}

/// From the view shown, every finding's whole text (its one text, every port with GUID and
/// LID) is on the screen when its detail is open: the Overview, the finding selected, Enter.
fn assert_every_finding_reachable(state: &mut AppState, w: u16, h: u16, from: &str) {
    let back = state.view;
    let findings = state.sweep.as_ref().unwrap().findings.clone();
    press(state, KeyCode::Char('1'));
    press(state, KeyCode::Home);
    for (i, f) in findings.iter().enumerate() {
        press(state, KeyCode::Enter);
        let text = buffer_text(&render_buffer(state, w, h));
        let title = format!("Finding {} of {}", i + 1, findings.len());
        let shown = boxed_text(&text, &title);
        assert!(
            shown.starts_with(&f.text_line()),
            "{from} {w}x{h}: finding {i} not whole:\n{}\n{text}",
            f.text_line()
        );
        press(state, KeyCode::Esc);
        press(state, KeyCode::Down);
    }
    press(state, KeyCode::Home);
    state.view = back;
}

/// Each view of the demo fabric at 80x24 and 200x50, snapshotted; from each, every
/// finding can be read whole. At 80x24 the first screen, the Overview, shows what is wrong
/// with each planted fault and where: every finding whole (ports named short).
#[test]
fn the_demo_fabric_in_every_view_at_80x24_and_200x50() {
    use ibscope_topo::findings::{FindingKind, PortNaming};
    let mut state = demo_state();
    let findings = state.sweep.as_ref().unwrap().findings.clone();
    // The planted faults and the flap the TUI sees happen.
    let kinds: Vec<FindingKind> = findings.iter().map(|f| f.kind).collect();
    for kind in [
        FindingKind::DegradedLink,
        FindingKind::RailMisaligned,
        FindingKind::RailDown,
        FindingKind::CounterAboveThreshold,
        FindingKind::LinkFlapping,
    ] {
        assert!(kinds.contains(&kind), "{kind:?} missing: {kinds:?}");
    }
    let first = buffer_text(&render_buffer(&state, 80, 24));
    let listed = boxed_text(&first, "Findings");
    for f in &findings {
        assert!(
            listed.contains(&f.text(PortNaming::Short)),
            "not whole on the first screen: {}\n{first}",
            f.text(PortNaming::Short)
        );
    }
    for (w, h) in [(80u16, 24u16), (200, 50)] {
        for (view, go) in [
            ("overview", '1'),
            ("nodes", '2'),
            ("links", '3'),
            ("counters", '4'),
            ("routing", '5'),
            ("events", '6'),
            ("hosts", '7'),
        ] {
            press(&mut state, KeyCode::Char(go));
            if view == "routing" && state.routing.result.is_none() {
                press(&mut state, KeyCode::Char('/'));
                type_text(&mut state, "gpu-0001 mlx5_0");
                press(&mut state, KeyCode::Tab);
                type_text(&mut state, "gpu-0008 mlx5_7");
                press(&mut state, KeyCode::Enter);
            }
            let text = buffer_text(&render_buffer(&state, w, h));
            insta::assert_snapshot!(format!("demo_{view}_{w}x{h}"), text);
            assert_every_finding_reachable(&mut state, w, h, view);
        }
    }
}
