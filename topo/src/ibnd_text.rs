//! The pieces of an ibnetdiscover line: numbers as strtoul reads them, bare and
//! parenthesised hex, quoted names, `[N]` port numbers, `key N` settings. The reader of
//! the format is `ibnd.rs`.

/// Parse a number the way strtoul(…, 0) does for the cases these files use: `0x` hex or
/// decimal, stopping at the first character that is not a digit. Returns the value and
/// the rest.
pub(crate) fn leading_number(text: &str) -> Option<(u64, &str)> {
    let t = text.trim_start();
    let (digits_start, radix) = match t.get(..2) {
        Some("0x") | Some("0X") => (2, 16),
        _ => (0, 10),
    };
    let body = &t[digits_start..];
    let end = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if end == 0 {
        return None;
    }
    let value = u64::from_str_radix(&body[..end], radix).ok()?;
    Some((value, &body[end..]))
}

/// A bare hex number (no `0x`), as in `(100001)` and the "Initiated from" line.
pub(crate) fn leading_hex(text: &str) -> Option<(u64, &str)> {
    let t = text.trim_start();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let end = t.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(t.len());
    if end == 0 {
        return None;
    }
    let value = u64::from_str_radix(&t[..end], 16).ok()?;
    Some((value, &t[end..]))
}

/// `"text"` at the start (after whitespace): the text and the rest after the closing quote.
pub(crate) fn quoted(text: &str) -> Option<(&str, &str)> {
    let t = text.trim_start().strip_prefix('"')?;
    let close = t.find('"')?;
    Some((&t[..close], &t[close + 1..]))
}

/// `[N]` at the start: N and the rest.
pub(crate) fn bracketed_number(text: &str) -> Option<(u64, &str)> {
    let t = text.strip_prefix('[')?;
    let close = t.find(']')?;
    let inner = t[..close].trim();
    let (n, rest) = leading_number(inner)?;
    if !rest.trim().is_empty() {
        return None;
    }
    Some((n, &t[close + 1..]))
}

/// Skip an ibnetdiscover `-g` `[ext N]` mapping if present.
pub(crate) fn skip_ext(text: &str) -> &str {
    if text.starts_with("[ext") {
        if let Some(close) = text.find(']') {
            return &text[close + 1..];
        }
    }
    text
}

/// `(hex)` at the start (after whitespace).
pub(crate) fn paren_hex(text: &str) -> Option<(u64, &str)> {
    let t = text.trim_start().strip_prefix('(')?;
    let close = t.find(')')?;
    let (v, rest) = leading_hex(&t[..close])?;
    if !rest.trim().is_empty() {
        return None;
    }
    Some((v, &t[close + 1..]))
}

/// Text with every `"..."` section removed (for option scanning outside quotes).
pub(crate) fn outside_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut inside = false;
    for c in text.chars() {
        if c == '"' {
            inside = !inside;
            out.push(' ');
        } else if !inside {
            out.push(c);
        }
    }
    out
}

/// `N` after the word `key` (e.g. "lid 3", "lmc 0") in whitespace-separated words.
pub(crate) fn word_value(text: &str, key: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next().and_then(|v| leading_number(v)).map(|(n, _)| n);
        }
    }
    None
}
