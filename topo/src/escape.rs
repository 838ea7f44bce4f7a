//! Sanitizers for untrusted fabric strings (NodeDescriptions, node-name-map names) before
//! they reach a terminal or an output format. Any node on the fabric can set its own
//! NodeDescription, so it may hold terminal escape sequences, quotes, newlines or bidi
//! overrides meant to spoof output.
//!
//! JSON needs nothing here: serde_json escapes strings itself.

use std::fmt::Write;

/// Unicode bidirectional controls that reorder text on display (Trojan Source style).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// C0 controls (ESC included), DEL, C1 controls and bidi controls.
fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

fn push_visible(out: &mut String, c: char) {
    let code = u32::from(c);
    if code < 0x80 {
        let _ = write!(out, "\\x{code:02x}");
    } else {
        let _ = write!(out, "\\u{{{code:x}}}");
    }
}

/// Make a string safe to print on a terminal: C0/C1 control characters (ESC, BEL, CR, LF,
/// TAB ...), DEL and bidi overrides become visible escapes (`\x1b`, `\u{202e}`); everything
/// else, backslashes included, is kept.
pub fn for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unsafe(c) {
            push_visible(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// A fabric string quoted for a terminal line: `"` + [`for_terminal`] + `"`, the one form
/// in which every report names a node (made visible once, never escaped a second time).
pub fn quoted_for_terminal(text: &str) -> String {
    format!("\"{}\"", for_terminal(text))
}

/// Contents of a Graphviz double-quoted label: unsafe characters made visible as in
/// [`for_terminal`], then backslash and double quote escaped so DOT shows them literally.
pub fn for_dot_label(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in for_terminal(text).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            _ => out.push(c),
        }
    }
    out
}

/// A Prometheus text-exposition label value (the part inside `"..."`): backslash, double
/// quote and line feed escaped as the format defines; nothing else needs it.
pub fn for_prometheus_label(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    push_prometheus_label(&mut out, text);
    out
}

/// [`for_prometheus_label`] appended to `out`: a page writes millions of label values,
/// most of which need no escaping and are copied as they are.
pub fn push_prometheus_label(out: &mut String, text: &str) {
    if !text.contains(['\\', '"', '\n']) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
}

/// One CSV field per RFC 4180: quoted (with inner quotes doubled) when it holds a comma,
/// a double quote, CR or LF; otherwise unchanged. Does not defuse spreadsheet formulas.
pub fn for_csv(text: &str) -> String {
    if text.contains([',', '"', '\r', '\n']) {
        let mut out = String::with_capacity(text.len() + 2);
        out.push('"');
        for c in text.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
        out
    } else {
        text.to_string()
    }
}

/// What may go between the double quotes of an ibnetdiscover topology file. The format has
/// no escape syntax, so this is lossy: unsafe characters as in [`for_terminal`], `"` as
/// `\x22`, and `=` as `\x3d` — ibsim reads any `x=N` on a port line as a port option
/// (`w=`, `s=`, `e=` set enabled width/speeds), even inside the quoted description.
pub fn for_ibnd_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unsafe(c) || c == '"' || c == '=' {
            push_visible(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NASTY: &str = "\x1b[2J\x1b]0;pwned\x07";

    #[test]
    fn terminal_escapes_controls() {
        assert_eq!(for_terminal(NASTY), "\\x1b[2J\\x1b]0;pwned\\x07");
        assert_eq!(for_terminal("a\tb\r\nc\x7f"), "a\\x09b\\x0d\\x0ac\\x7f");
        // C1 CSI and a right-to-left override.
        assert_eq!(for_terminal("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(for_terminal("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(for_terminal("\u{2066}i\u{2069}"), "\\u{2066}i\\u{2069}");
        // Ordinary text, backslashes and non-ASCII letters pass.
        assert_eq!(for_terminal("mlx5_0 \\ héllo"), "mlx5_0 \\ héllo");
        assert!(!for_terminal(NASTY).contains('\x1b'));
    }

    /// Quoted once: controls made visible, backslashes kept as they are.
    #[test]
    fn quoted_for_a_terminal() {
        assert_eq!(
            quoted_for_terminal("evil\x1b[2J back\\slash"),
            "\"evil\\x1b[2J back\\slash\""
        );
    }

    #[test]
    fn dot_label() {
        assert_eq!(for_dot_label("a\"b\\c"), "a\\\"b\\\\c");
        assert_eq!(for_dot_label(NASTY), "\\\\x1b[2J\\\\x1b]0;pwned\\\\x07");
        assert_eq!(for_dot_label("two\nlines"), "two\\\\x0alines");
    }

    #[test]
    fn prometheus_label() {
        assert_eq!(for_prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(for_prometheus_label("plain"), "plain");
        // Appended to what is there, copied as is when nothing needs escaping.
        for (text, escaped) in [
            ("plain", "plain"),
            ("q\u{22}uote", "q\\\"uote"),
            ("back\u{5c}slash", "back\\\\slash"),
            ("new\u{a}line", "new\\nline"),
            ("", ""),
        ] {
            let mut s = String::from("x=");
            push_prometheus_label(&mut s, text);
            assert_eq!(s, format!("x={escaped}"));
        }
    }

    #[test]
    fn csv_field() {
        assert_eq!(for_csv("plain"), "plain");
        assert_eq!(for_csv("a,b"), "\"a,b\"");
        assert_eq!(for_csv("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(for_csv("l1\nl2"), "\"l1\nl2\"");
        assert_eq!(for_csv(""), "");
    }

    #[test]
    fn ibnd_quoted() {
        let s = for_ibnd_quoted("node \"x\" w=1\n");
        assert_eq!(s, "node \\x22x\\x22 w\\x3d1\\x0a");
        assert!(!s.contains(['"', '=', '\n']));
        assert_eq!(for_ibnd_quoted(NASTY), "\\x1b[2J\\x1b]0;pwned\\x07");
    }
}
