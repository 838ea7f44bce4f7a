//! Slurm hostlists: `gpu-[0001-0064],login[1,3]`, expanded the way `scontrol show
//! hostnames` expands them, and the inverse (a set of names as one expression).
//!
//! The syntax, as Slurm documents it (scontrol(1), slurm.conf(5), hostlist.h):
//! - host expressions are separated by commas or whitespace (commas inside brackets belong
//!   to the brackets);
//! - an expression is literal text with any number of bracket groups, `rack[0-1]_blade[0-2]`;
//!   the groups expand as a cartesian product, the first group varying slowest;
//! - a group is a comma list of numbers and `lo-hi` ranges, `[0-5,12,20-25]`;
//! - each element is zero-padded to the width of its low bound as written: `[0001-0064]` is
//!   0001 to 0064, `[01-100]` is 01 to 99 then 100, `[1-100]` is not padded;
//! - order and duplicates are kept as written.
//!
//! Errors say where the expression is wrong; nothing panics on bad input.

use std::collections::BTreeMap;

/// More names than any fabric has: an expression expanding past this is refused rather
/// than allocated (`x[0-99999999]`).
pub const MAX_HOSTS: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    #[error("{0:?}: unbalanced brackets")]
    Brackets(String),
    #[error("{expr:?}: {what} in [{group}]")]
    Group {
        expr: String,
        group: String,
        what: &'static str,
    },
    #[error("{0:?} expands to more than {MAX_HOSTS} names")]
    TooMany(String),
}

/// One element of a bracket group: `lo..=hi`, printed zero-padded to `width` digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

/// A piece of an expression: literal text or a bracket group.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Group(Vec<Range>),
}

/// Expand a hostlist into names, in order, duplicates kept (`scontrol show hostnames`).
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    for expr in split_expressions(list)? {
        let pieces = pieces(expr)?;
        expand_pieces(expr, &pieces, &mut out)?;
    }
    Ok(out)
}

/// The host expressions of a list: split at commas and whitespace outside brackets.
fn split_expressions(list: &str) -> Result<Vec<&str>, HostlistError> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' => {
                depth += 1;
                if depth > 1 {
                    return Err(HostlistError::Brackets(list.to_string()));
                }
            }
            ']' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| HostlistError::Brackets(list.to_string()))?;
            }
            ',' if depth == 0 => {
                out.push(&list[start..i]);
                start = i + 1;
            }
            c if c.is_whitespace() => {
                if depth > 0 {
                    return Err(HostlistError::Brackets(list.to_string()));
                }
                out.push(&list[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::Brackets(list.to_string()));
    }
    out.push(&list[start..]);
    Ok(out.into_iter().filter(|e| !e.is_empty()).collect())
}

/// An expression (brackets already balanced) as text and groups.
fn pieces(expr: &str) -> Result<Vec<Piece>, HostlistError> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(open) = rest.find('[') {
        if open > 0 {
            out.push(Piece::Text(rest[..open].to_string()));
        }
        let close = rest[open..]
            .find(']')
            .map(|c| c + open)
            .ok_or_else(|| HostlistError::Brackets(expr.to_string()))?;
        out.push(Piece::Group(group(expr, &rest[open + 1..close])?));
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        return Err(HostlistError::Brackets(expr.to_string()));
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_string()));
    }
    Ok(out)
}

/// `0-5,12,020-025` as ranges.
fn group(expr: &str, text: &str) -> Result<Vec<Range>, HostlistError> {
    let bad = |what| HostlistError::Group {
        expr: expr.to_string(),
        group: text.to_string(),
        what,
    };
    let number = |s: &str| -> Result<u64, HostlistError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("not a number"));
        }
        s.parse().map_err(|_| bad("number too large"))
    };
    let mut out = Vec::new();
    for element in text.split(',') {
        let (lo_text, hi_text) = element.split_once('-').unwrap_or((element, element));
        let (lo, hi) = (number(lo_text)?, number(hi_text)?);
        if lo > hi {
            return Err(bad("a range runs backwards"));
        }
        out.push(Range {
            lo,
            hi,
            width: lo_text.len(),
        });
    }
    Ok(out)
}

/// Append the cartesian product of `pieces` to `out`, first group slowest.
fn expand_pieces(expr: &str, pieces: &[Piece], out: &mut Vec<String>) -> Result<(), HostlistError> {
    let count = pieces.iter().try_fold(1usize, |acc, p| match p {
        Piece::Text(_) => Some(acc),
        Piece::Group(g) => {
            let n = g.iter().try_fold(0usize, |n, r| {
                n.checked_add(usize::try_from(r.hi - r.lo).ok()? + 1)
            })?;
            acc.checked_mul(n)
        }
    });
    match count {
        Some(n) if n.saturating_add(out.len()) <= MAX_HOSTS => {}
        _ => return Err(HostlistError::TooMany(expr.to_string())),
    }
    let mut names = vec![String::new()];
    for p in pieces {
        names = match p {
            Piece::Text(t) => names.into_iter().map(|n| n + t).collect(),
            Piece::Group(g) => {
                let mut next = Vec::new();
                for n in &names {
                    for r in g {
                        for v in r.lo..=r.hi {
                            next.push(format!("{n}{v:0width$}", width = r.width));
                        }
                    }
                }
                next
            }
        };
    }
    out.extend(names);
    Ok(())
}

/// One hostlist expression for a set of names: names ending in digits that share the rest
/// are bracketed (`gpu-[0001-0003,0007]`), others listed as they are. Groups come in
/// order of their prefix; [`expand`] of the result gives every name once.
///
/// A name's trailing digits keep their width: `n9` and `n010` stay apart (`n9,n[010]`
/// would not do: a bracket's width comes from its first number), and an unpadded number
/// joins a padded group of its own length (`n[0998-1000]`).
pub fn compress<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    // (prefix, width) -> numbers; width 0: numbers printed as they are.
    let mut groups: BTreeMap<(&str, usize), Vec<u64>> = BTreeMap::new();
    let mut plain: Vec<&str> = Vec::new();
    let mut padded_widths: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut numbered: Vec<(&str, &str, u64)> = Vec::new();
    for name in names {
        let digits_at = name
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_digit())
            .last()
            .map(|(i, _)| i);
        let split = digits_at.and_then(|i| {
            let digits = &name[i..];
            // Past u64 (or with no digits) the name is kept as it is.
            digits.parse::<u64>().ok().map(|v| (&name[..i], digits, v))
        });
        match split {
            Some((prefix, digits, value)) => {
                if digits.len() > 1 && digits.starts_with('0') {
                    padded_widths.entry(prefix).or_default().push(digits.len());
                }
                numbered.push((prefix, digits, value));
            }
            None => plain.push(name),
        }
    }
    for (prefix, digits, value) in numbered {
        let padded = digits.len() > 1 && digits.starts_with('0');
        let joins_padded = padded_widths
            .get(prefix)
            .is_some_and(|w| w.contains(&digits.len()));
        let width = if padded || joins_padded {
            digits.len()
        } else {
            0
        };
        groups.entry((prefix, width)).or_default().push(value);
    }
    let mut parts: Vec<String> = Vec::new();
    plain.sort_unstable();
    plain.dedup();
    parts.extend(plain.iter().map(|s| s.to_string()));
    for ((prefix, width), mut values) in groups {
        values.sort_unstable();
        values.dedup();
        let num = |v: u64| format!("{v:0width$}");
        if values.len() == 1 {
            parts.push(format!("{prefix}{}", num(values[0])));
            continue;
        }
        let mut ranges: Vec<String> = Vec::new();
        let mut i = 0;
        while i < values.len() {
            let mut j = i;
            while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
                j += 1;
            }
            ranges.push(if i == j {
                num(values[i])
            } else {
                format!("{}-{}", num(values[i]), num(values[j]))
            });
            i = j + 1;
        }
        parts.push(format!("{prefix}[{}]", ranges.join(",")));
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(list: &str) -> Vec<String> {
        expand(list).unwrap_or_else(|e| panic!("{list}: {e}"))
    }

    /// Examples from Slurm's documentation (scontrol(1), slurm.conf(5), hostlist.h), with
    /// their expansions written out by hand.
    #[test]
    fn slurm_documentation_examples() {
        assert_eq!(names("tux[1-3]"), ["tux1", "tux2", "tux3"]);
        assert_eq!(names("alpha,beta,gamma"), ["alpha", "beta", "gamma"]);
        assert_eq!(
            names("tux[0-5,12,20-25]"),
            [
                "tux0", "tux1", "tux2", "tux3", "tux4", "tux5", "tux12", "tux20", "tux21", "tux22",
                "tux23", "tux24", "tux25"
            ]
        );
        assert_eq!(names("lx[10-20]").len(), 11);
        assert_eq!(names("lx[10-20]")[10], "lx20");
        assert_eq!(names("lx[15,18,32-33]"), ["lx15", "lx18", "lx32", "lx33"]);
        let linux = names("linux[0000-1023]");
        assert_eq!(linux.len(), 1024);
        assert_eq!(
            (linux[0].as_str(), linux[1023].as_str()),
            ("linux0000", "linux1023")
        );
        let blades = names("rack[0-63]_blade[0-41]");
        assert_eq!(blades.len(), 64 * 42);
        assert_eq!(
            &blades[..3],
            ["rack0_blade0", "rack0_blade1", "rack0_blade2"]
        );
        assert_eq!(blades[42], "rack1_blade0");
        assert_eq!(names("node1,node[2-5,12]").len(), 6);
        assert_eq!(
            names("node21 node[27-29]"),
            ["node21", "node27", "node28", "node29"]
        );
    }

    #[test]
    fn padding_follows_the_low_bound_of_each_element() {
        assert_eq!(
            names("gpu-[0001-0003]"),
            ["gpu-0001", "gpu-0002", "gpu-0003"]
        );
        assert_eq!(names("n[08-11]"), ["n08", "n09", "n10", "n11"]);
        assert_eq!(names("n[98-100]"), ["n98", "n99", "n100"]);
        assert_eq!(names("n[098-100]"), ["n098", "n099", "n100"]);
        // Each element of a group has its own width.
        assert_eq!(names("n[005,4,11-12]"), ["n005", "n4", "n11", "n12"]);
        assert_eq!(
            names("rack[01-3]-node[01-2,5]"),
            [
                "rack01-node01",
                "rack01-node02",
                "rack01-node5",
                "rack02-node01",
                "rack02-node02",
                "rack02-node5",
                "rack03-node01",
                "rack03-node02",
                "rack03-node5"
            ]
        );
        assert_eq!(names("[1-2]x"), ["1x", "2x"]);
    }

    #[test]
    fn order_and_duplicates_are_kept() {
        assert_eq!(names("b,a,b"), ["b", "a", "b"]);
        assert_eq!(names("x[3,1,3]"), ["x3", "x1", "x3"]);
        assert_eq!(names(" a , ,b\n c,"), ["a", "b", "c"]);
        assert!(names("").is_empty());
    }

    #[test]
    fn bad_lists_are_errors() {
        for bad in [
            "gpu-[1-2", "gpu-1-2]", "a[[1]]", "a[]", "a[1-]", "a[-1]", "a[x]", "a[5-3]", "a[1 2]",
            "a[1,,2]",
        ] {
            assert!(expand(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            expand("x[0-99999999]"),
            Err(HostlistError::TooMany(_))
        ));
        assert!(matches!(
            expand("x[0-1000]y[0-1000]z[0-1000]"),
            Err(HostlistError::TooMany(_))
        ));
        assert!(expand("a[99999999999999999999999]").is_err());
    }

    #[test]
    fn compress_examples() {
        let list = names("gpu-[0001-0064]");
        assert_eq!(compress(list.iter().map(String::as_str)), "gpu-[0001-0064]");
        assert_eq!(compress(["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(compress(["n0998", "n0999", "n1000"]), "n[0998-1000]");
        assert_eq!(compress(["n9", "n010"]), "n9,n010");
        assert_eq!(
            compress(["login", "gpu-2", "gpu-1", "gpu-5"]),
            "login,gpu-[1-2,5]"
        );
        assert_eq!(compress(["a1b2"]), "a1b2");
        assert_eq!(compress(std::iter::empty()), "");
    }

    /// Names from a small alphabet with optional trailing numbers, padded or not.
    fn name() -> impl Strategy<Value = String> {
        (
            "[a-c][a-c0-9_.-]{0,3}",
            proptest::option::of((0u64..3000, 0usize..5)),
        )
            .prop_map(|(prefix, number)| match number {
                Some((v, width)) => format!("{prefix}{v:0width$}"),
                None => prefix,
            })
    }

    proptest! {
        #[test]
        fn expand_of_compress_is_the_set(set in proptest::collection::btree_set(name(), 0..60)) {
            let text = compress(set.iter().map(String::as_str));
            let back = expand(&text).unwrap();
            prop_assert_eq!(back.len(), set.len(), "{}", text);
            let back: std::collections::BTreeSet<String> = back.into_iter().collect();
            prop_assert_eq!(back, set, "{}", text);
        }

        #[test]
        fn expand_never_panics(text in "[a-c0-9\\[\\],\\- ]{0,24}") {
            let _ = expand(&text);
        }

        #[test]
        fn ranges_expand_to_their_count(prefix in "[a-z]{1,4}", lo in 0u64..500, len in 0u64..300, width in 0usize..5) {
            let hi = lo + len;
            let text = format!("{prefix}[{lo:0width$}-{hi}]");
            let got = expand(&text).unwrap();
            prop_assert_eq!(got.len() as u64, len + 1);
            prop_assert_eq!(&got[0], &format!("{prefix}{lo:0width$}"));
            prop_assert_eq!(got.last().unwrap(), &format!("{prefix}{hi:0width$}"));
        }
    }
}
