//! How a table is sorted, as htop and k9s users expect: by any of its columns (`s` the
//! next one), either way (`S`), the column marked in the header with which way it goes.

use std::cmp::Ordering;

/// Which way a column sorts before `S` turns it round: names A to Z, counts and rates
/// the largest first (what is wrong first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Natural {
    Ascending,
    Descending,
}

/// A sortable column: its header and its natural direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub header: &'static str,
    pub natural: Natural,
}

impl Column {
    pub const fn up(header: &'static str) -> Column {
        Column {
            header,
            natural: Natural::Ascending,
        }
    }
    pub const fn down(header: &'static str) -> Column {
        Column {
            header,
            natural: Natural::Descending,
        }
    }
}

/// A table's order: the column it is sorted by and whether `S` turned it round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableSort {
    pub column: usize,
    pub reversed: bool,
}

impl TableSort {
    pub const fn by(column: usize) -> TableSort {
        TableSort {
            column,
            reversed: false,
        }
    }
    /// The next of `columns` columns, in its natural direction.
    pub fn next(&mut self, columns: usize) {
        self.column = (self.column + 1) % columns.max(1);
        self.reversed = false;
    }
    pub fn reverse(&mut self) {
        self.reversed = !self.reversed;
    }
    /// The natural direction of the sorted one of `columns`.
    pub fn natural(self, columns: &[Column]) -> Natural {
        columns
            .get(self.column)
            .map_or(Natural::Ascending, |c| c.natural)
    }
    /// Whether the sorted column, of natural direction `natural`, now runs largest first.
    pub fn descending(self, natural: Natural) -> bool {
        (natural == Natural::Descending) != self.reversed
    }
    /// `ordering` (smallest first) turned the way this sort runs.
    pub fn apply(self, natural: Natural, ordering: Ordering) -> Ordering {
        if self.descending(natural) {
            ordering.reverse()
        } else {
            ordering
        }
    }
    /// ▲ (smallest first) or ▼.
    pub fn arrow(self, natural: Natural) -> &'static str {
        if self.descending(natural) {
            "▼"
        } else {
            "▲"
        }
    }
    /// The headers with the sorted one marked.
    pub fn headers(self, columns: &[Column]) -> Vec<String> {
        columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == self.column {
                    format!("{}{}", c.header, self.arrow(c.natural))
                } else {
                    c.header.to_string()
                }
            })
            .collect()
    }
    /// "sort: Errors▼ (s S)" for a table's title: the column, its way, the keys.
    pub fn title(self, columns: &[Column]) -> String {
        let header = columns.get(self.column).map_or("?", |c| c.header);
        Self::title_of(header, self.arrow(self.natural(columns)))
    }
    pub fn title_of(header: &str, arrow: &str) -> String {
        format!("sort: {header}{arrow} (s S)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLUMNS: [Column; 2] = [Column::up("Name"), Column::down("Errors")];

    #[test]
    fn s_goes_round_the_columns_and_capital_s_turns_one_round() {
        let mut sort = TableSort::default();
        assert_eq!(sort.headers(&COLUMNS), ["Name▲", "Errors"]);
        assert_eq!(
            sort.apply(sort.natural(&COLUMNS), Ordering::Less),
            Ordering::Less
        );
        sort.next(COLUMNS.len());
        assert_eq!(sort.headers(&COLUMNS), ["Name", "Errors▼"]);
        assert_eq!(
            sort.apply(sort.natural(&COLUMNS), Ordering::Less),
            Ordering::Greater
        );
        sort.reverse();
        assert_eq!(sort.title(&COLUMNS), "sort: Errors▲ (s S)");
        sort.next(COLUMNS.len());
        assert_eq!(sort, TableSort::default(), "back to the first, its own way");
    }
}
