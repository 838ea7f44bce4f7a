//! `sa` tables as the command tells them: the line for a table that did not arrive whole.

use ibscope_topo::sa_tables::{Completeness, Counted};

/// The line `sa` prints (on stderr) for a table that did not arrive whole.
pub fn partial_message(received: usize, completeness: &Completeness) -> Option<String> {
    let noun = |n: usize| if n == 1 { "record" } else { "records" };
    match completeness {
        Completeness::Complete => None,
        Completeness::Partial {
            table_size,
            counted,
        } => Some(format!(
            "partial: {received} {} of a table the SA says holds {table_size} ({})",
            noun(received),
            match counted {
                Counted::Rmpp => "its RMPP header announced them",
                Counted::OneByOne =>
                    "the reply was one MAD without RMPP, as under the simulator; the SA \
                     confirmed each record when asked for it alone",
            }
        )),
        Completeness::Unknown { why } => Some(format!(
            "partial: {received} {} arrived in one MAD without RMPP (as under the \
             simulator), and the table may hold more: {why}",
            noun(received)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partial_line_names_both_counts() {
        let p = Completeness::Partial {
            table_size: 16,
            counted: Counted::OneByOne,
        };
        let line = partial_message(3, &p).unwrap();
        assert!(
            line.starts_with("partial: 3 records of a table the SA says holds 16 ("),
            "{line}"
        );
        let one = Completeness::Partial {
            table_size: 4,
            counted: Counted::Rmpp,
        };
        assert!(partial_message(1, &one)
            .unwrap()
            .starts_with("partial: 1 record of a table the SA says holds 4 ("));
        assert_eq!(partial_message(8, &Completeness::Complete), None);
    }
}
