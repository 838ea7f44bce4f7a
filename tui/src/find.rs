//! `/` in a view: find a node, host or port by any name it is shown under (its name-map
//! name, NodeDescription, host, `name[port]`, GUID or LID) and put the cursor on it; `n`
//! and `N` go to the next and previous match. What the text names in the fabric is
//! topo's resolver's answer; which of the view's rows show it is the view's.

use crate::query::Query;
use crate::state::{AppState, View};
use crate::views;

/// The rows of the view shown that match `q`, in its order.
fn matching(state: &mut AppState, q: &Query) -> Vec<usize> {
    let parts = views::parts(state.view);
    let Some(matches) = parts.matches else {
        return Vec::new();
    };
    let len = (parts.list)(state).1;
    (0..len).filter(|&i| matches(state, i, q)).collect()
}

fn query(state: &AppState) -> Query {
    Query::new(&state.find.text, state.fabric(), state.names.as_ref())
}

/// Put the view's cursor on row `row`.
fn select(state: &mut AppState, row: usize) {
    let parts = views::parts(state.view);
    (parts.list)(state).0.selected = row;
    if let Some(after) = parts.found {
        after(state, &query(state));
    }
}

/// As the text is typed: the first row that matches, from the top.
pub fn as_typed(state: &mut AppState) {
    let q = query(state);
    if let Some(&row) = matching(state, &q).first() {
        select(state, row);
    }
}

/// `n` (forward) or `N`: the next match after the cursor (before it), round the end.
pub fn next(state: &mut AppState, forward: bool) {
    let q = query(state);
    if q.text.is_empty() {
        state.notice = Some("nothing to find: / first".into());
        return;
    }
    let rows = matching(state, &q);
    let at = (views::parts(state.view).list)(state).0.selected;
    let next = if forward {
        rows.iter().find(|&&r| r > at).or(rows.first())
    } else {
        rows.iter().rev().find(|&&r| r < at).or(rows.last())
    };
    match next.copied() {
        Some(row) => select(state, row),
        None => not_here(state, &q),
    }
}

/// Enter: keep the text for `n` and `N`; if no row of this view shows what it names,
/// the node it names opens in Nodes.
pub fn submit(state: &mut AppState) {
    state.find.editing = false;
    let q = query(state);
    if q.text.is_empty() || !matching(state, &q).is_empty() {
        return;
    }
    not_here(state, &q);
}

/// Nothing in this view matches: the node the text names in Nodes, else a notice.
fn not_here(state: &mut AppState, q: &Query) {
    let title = views::parts(state.view).title;
    let Some(guid) = q.node else {
        state.notice = Some(format!("nothing in {title} matches {:?}", state.find.text));
        return;
    };
    let view = state.view;
    state.view = View::Nodes;
    state.nodes.filter.clear();
    state.refresh_nodes();
    let rows = &state.derived.node_rows;
    if let Some(i) = state
        .nodes
        .visible
        .iter()
        .position(|&v| rows[v].guid == guid)
    {
        state.nodes.list.selected = i;
    }
    state.nodes.detail = Some(guid);
    let port = q.port.and_then(|p| {
        let f = state.fabric()?;
        let node = f.node(f.node_by_guid(guid)?);
        node.ports.iter().position(|x| x.number == p)
    });
    state.nodes.detail_ports.selected = port.unwrap_or(0);
    if view != View::Nodes {
        state.notice = Some(format!(
            "not in {}: shown in Nodes",
            views::parts(view).title
        ));
    }
}
