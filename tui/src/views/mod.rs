//! The views, one file each, and which file draws which [`View`].

pub mod counters;
pub mod events;
pub mod hosts;
pub mod links;
pub mod nodes;
pub mod overview;
pub mod routing;
pub mod widgets;

use crate::state::View;
use widgets::ViewParts;

/// The parts of a view: its title, help, drawing and list.
pub fn parts(view: View) -> &'static ViewParts {
    match view {
        View::Overview => &overview::PARTS,
        View::Nodes => &nodes::PARTS,
        View::Links => &links::PARTS,
        View::Counters => &counters::PARTS,
        View::Routing => &routing::PARTS,
        View::Events => &events::PARTS,
        View::Hosts => &hosts::PARTS,
    }
}
