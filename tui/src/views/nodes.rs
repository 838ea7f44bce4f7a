//! The Nodes view: every node, filtered and sorted; a node's detail with its port table.

use ibscope_mad::attr::{PhysState, PortState, Rate};
use ibscope_topo::escape::for_terminal;
use ibscope_topo::{End, Fabric};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;

use super::widgets::{
    fill_width, fit, name_and_port, no_data, ViewParts, DIM, HEAD, RED, SELECTED, WARN,
};
use crate::derive::{link_facts, node_name, LinkHealth, NODE_COLUMNS};
use crate::state::{AppState, ListCursor};

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Nodes",
    about: &[],
    draw: draw_nodes,
    list,
    list_noun,
    // Its `/` is its own: the node filter.
    matches: None,
    found: None,
};

/// The node list, or the open node's ports.
fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    match state.nodes.detail {
        Some(guid) => {
            let len = state
                .fabric()
                .and_then(|f| f.node_by_guid(guid).map(|id| f.node(id).ports.len()))
                .unwrap_or(0);
            (&mut state.nodes.detail_ports, len)
        }
        None => (&mut state.nodes.list, state.nodes.visible.len()),
    }
}

fn list_noun(state: &AppState) -> &'static str {
    if state.nodes.detail.is_some() {
        "ports"
    } else {
        "nodes"
    }
}

fn draw_nodes(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(sweep) = &state.sweep else {
        return no_data(frame, area, state);
    };
    let detail = state
        .nodes
        .detail
        .and_then(|g| sweep.fabric.node_by_guid(g));
    let (list_area, detail_area) = match detail {
        None => (Some(area), None),
        Some(_) if area.width >= 140 => {
            let [l, r] =
                Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)])
                    .areas(area);
            (Some(l), Some(r))
        }
        Some(_) => (None, Some(area)),
    };
    if let Some(area) = list_area {
        draw_node_list(frame, area, state);
    }
    if let (Some(area), Some(id)) = (detail_area, detail) {
        draw_node_detail(frame, area, state, &sweep.fabric, &sweep.health, id);
    }
}

fn draw_node_list(frame: &mut Frame, area: Rect, state: &AppState) {
    let v = &state.nodes;
    let [filter_area, table_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
    let cursor = if v.editing { "_" } else { "" };
    let filter = Line::from(vec![
        Span::styled("Filter: ", HEAD),
        Span::styled(
            format!("{}{cursor}", for_terminal(&v.filter)),
            if v.editing { SELECTED } else { Style::new() },
        ),
        Span::styled(
            format!(
                "  {}  ({} of {})",
                v.sort.title(&NODE_COLUMNS),
                v.visible.len(),
                state.derived.node_rows.len()
            ),
            DIM,
        ),
    ]);
    frame.render_widget(Paragraph::new(filter), filter_area);
    let height = usize::from(table_area.height.saturating_sub(1));
    let window = v.list.window(v.visible.len(), height);
    let name_w = fill_width(table_area.width, &[6, 18, 5, 7]);
    let rows: Vec<Row> = window
        .map(|i| {
            let r = &state.derived.node_rows[v.visible[i]];
            let row = Row::new(vec![
                fit(&r.name, name_w),
                r.kind.short().to_string(),
                format!("{:#018x}", r.guid),
                r.lid.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
                format!("{}/{}", r.linked, r.ports),
            ]);
            if i == v.list.selected {
                row.style(SELECTED)
            } else {
                row
            }
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(name_w as u16),
            Constraint::Length(6),
            Constraint::Length(18),
            Constraint::Length(5),
            Constraint::Length(7),
        ],
    )
    .header(Row::new(v.sort.headers(&NODE_COLUMNS)).style(HEAD));
    frame.render_widget(table, table_area);
}

fn draw_node_detail(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    fabric: &Fabric,
    health: &LinkHealth,
    id: ibscope_topo::NodeId,
) {
    let names = state.names.as_ref();
    let node = fabric.node(id);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", node_name(node, names)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let facts = node_facts(fabric, health, id);
    let facts_h = (facts.len() as u16).min(inner.height / 2);
    let [facts_area, ports_area] =
        Layout::vertical([Constraint::Length(facts_h), Constraint::Min(1)]).areas(inner);
    frame.render_widget(Paragraph::new(facts), facts_area);
    let height = usize::from(ports_area.height.saturating_sub(1));
    let cursor = &state.nodes.detail_ports;
    let peer_w = fill_width(ports_area.width, &[4, 6, 8, 6, 6, 6, 5]);
    let rows: Vec<Row> = cursor
        .window(node.ports.len(), height)
        .map(|i| {
            let row = port_row(
                fabric,
                health,
                End {
                    node: id,
                    port: node.ports[i].number,
                },
                names,
                peer_w,
            );
            if i == cursor.selected {
                row.selected()
            } else {
                row.row
            }
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(peer_w as u16),
        ],
    )
    .header(
        Row::new(vec![
            "Port", "State", "Phys", "Active", "Supp", "Enab", "LID", "Peer",
        ])
        .style(HEAD),
    );
    frame.render_widget(table, ports_area);
}

/// A node's facts, its query errors, and why each of its degraded links is degraded.
fn node_facts(
    fabric: &Fabric,
    health: &LinkHealth,
    id: ibscope_topo::NodeId,
) -> Vec<Line<'static>> {
    let node = fabric.node(id);
    let mut facts = vec![
        Line::raw(format!(
            "{}  GUID {:#018x}  sysimg {:#018x}",
            node.kind.short(),
            node.guid,
            node.system_image_guid
        )),
        Line::raw(format!(
            "vendor {:#08x} device {:#06x} rev {:#x}  ports {}  LID {}",
            node.vendor_id,
            node.device_id,
            node.revision,
            node.num_ports,
            node.lid()
                .map(|l| l.to_string())
                .unwrap_or_else(|| "-".into())
        )),
        Line::raw(format!(
            "description \"{}\"  DR path {}",
            for_terminal(&node.description),
            node.dr_path
                .as_deref()
                .map(for_terminal)
                .unwrap_or_else(|| "-".into())
        )),
    ];
    if let Some(sw) = &node.switch {
        facts.push(Line::raw(format!(
            "LFT cap {} top {} ({} entries read)  enhanced port 0: {}",
            sw.linear_fdb_cap,
            sw.linear_fdb_top,
            sw.lft.len(),
            if sw.enhanced_port0 { "yes" } else { "no" }
        )));
    }
    for e in &node.errors {
        facts.push(Line::styled(format!("error: {}", for_terminal(e)), RED));
    }
    // Why a port's link is degraded or below the norm (the table only colours it).
    for p in &node.ports {
        let verdict = fabric
            .link_at(End {
                node: id,
                port: p.number,
            })
            .and_then(|link| health.verdict(link))
            .filter(|v| v.degraded() || v.below_norm());
        if let Some(v) = verdict {
            let (what, style) = if v.degraded() {
                ("degraded", RED)
            } else {
                ("below norm", WARN)
            };
            facts.push(Line::styled(
                format!(
                    "port {} {what}: {}",
                    p.number,
                    for_terminal(&v.reasons.join("; "))
                ),
                style,
            ));
        }
    }
    facts
}

/// A row of the port table, and whether its link is down or degraded (then it is red).
struct PortRow {
    row: Row<'static>,
    problem: bool,
}

impl PortRow {
    fn selected(self) -> Row<'static> {
        self.row.style(if self.problem {
            RED.add_modifier(Modifier::REVERSED)
        } else {
            SELECTED
        })
    }
}

fn port_row(
    fabric: &Fabric,
    health: &LinkHealth,
    end: End,
    names: Option<&ibscope_topo::namemap::NameMap>,
    peer_w: usize,
) -> PortRow {
    let Some(p) = fabric.node(end.node).port(end.port) else {
        return PortRow {
            row: Row::new(vec![end.port.to_string()]),
            problem: false,
        };
    };
    let peer = fabric.peer(end);
    let peer_text = match peer {
        Some(e) => name_and_port(&node_name(fabric.node(e.node), names), e.port, peer_w),
        None => "-".into(),
    };
    let peer_port = peer.and_then(|e| fabric.node(e.node).port(e.port));
    let problem = link_facts(Some(p), peer_port).down
        || fabric
            .link_at(end)
            .is_some_and(|link| health.is_degraded(link));
    let row = Row::new(vec![
        p.number.to_string(),
        p.state.map_or("?", PortState::short).to_string(),
        p.phys_state.map_or("?", PhysState::short).to_string(),
        Rate::text(p.width_active, p.speed_active),
        Rate::text(p.width_supported.best(), p.speed_supported.best()),
        Rate::text(p.width_enabled.best(), p.speed_enabled.best()),
        if p.lid == 0 {
            "-".into()
        } else {
            p.lid.to_string()
        },
        peer_text,
    ]);
    let row = if problem { row.style(RED) } else { row };
    PortRow { row, problem }
}
