//! Hosts and rails: the CAs of a GPU cluster grouped into servers by their
//! NodeDescriptions, each HCA's rail and the leaf port it is cabled to (`group`), what is
//! wrong with them (`rails`), the description and device-name rules (`name`), and Slurm
//! hostlists for naming a job's servers (`hostlist`), one HCA port's planes seen in
//! several fabrics (`planes`).

mod group;
pub mod hostlist;
pub mod name;
pub mod planes;
mod rails;
mod select;
mod table;

pub use group::{rail_ranges, Grouping, Hca, Host, Hosts, Leaf, LeafPort};
pub use rails::{check, HcaRef, RailDown, RailIssue};
pub use select::Selection;
pub use table::{table_rows, TableRow};
