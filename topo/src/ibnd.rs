//! The ibnetdiscover text format, read: what `ibnetdiscover` prints and what ibsim reads as
//! a topology file (the writer is [`crate::export::ibnd`]).
//!
//! ```text
//! vendid=0x0
//! devid=0x0
//! sysimgguid=0x200000
//! switchguid=0x200000(200000)
//! Switch  8 "S-0000000000200000"      # "Switch1" base port 0 lid 1 lmc 0
//! [1]     "H-0000000000100000"[1](100001)     # "Hca1" lid 2 4xSDR
//!
//! caguid=0x100000
//! Ca      2 "H-0000000000100000"      # "Hca1"
//! [1](100001)     "S-0000000000200000"[1]     # lid 2 lmc 0 "Switch1" lid 1 4xSDR
//! ```
//!
//! GUIDs follow ibsim's rules, so a parsed file describes the fabric ibsim would simulate
//! from it: node GUIDs come from per-type counters (switches from 0x200000, one GUID each;
//! CAs from 0x100000 and routers from 2^64-1, each reserving num_ports + 1), which
//! `switchguid=` / `caguid=` / `rtguid=` lines reset (`=V` absolute, `+V` relative to the last
//! absolute base). ibnetdiscover writes such a line before every node, so its own output
//! parses back to the GUIDs it printed; a node without one whose id has ibnetdiscover's
//! form (`"S-0008f10500200134"`) takes the GUID in its id. GUID values are read strictly:
//! trailing junk (`0x9c05<redacted>`) is an error naming the line. A CA port's GUID is the
//! `(hex)` after its port number when given, else node GUID + port number (ibsim's rule).
//! Switch ports carry the switch GUID. A node with no `# "description"` gets its id as
//! NodeDescription (ibsim).
//!
//! Comments `# ... lid N 4xQDR` give LIDs and the active width/speed (every width and
//! speed, FDR10 and XDR included); link state is not in the format and stays unknown.
//! `w=`/`s=`/`e=` port options (ibsim) and `width=` / `speed=` / `extspeed=` lines fill
//! the enabled sets, except `s=N w=N v=N` at the end of a comment: `ibnetdiscover -f`
//! writes there the active speed and width codes and VLCap, read as active values.
//! `ibnetdiscover -g` lines (`Chassis N (guid …)`, `Non-Chassis Nodes`, `Hostname:`,
//! `[ext N]` port mappings) are read past; `ibnetdiscover -p` output (the ports report) is
//! recognised and read by `ibnd_ports`. `do` and `pdebug` lines are ignored; `include`
//! lines, `module=` prefixes and `@` aliases are reported as unsupported.
//!
//! Stricter than ibsim: unrecognised lines, duplicate port lines and port lines beyond a
//! node's port count are errors rather than silently skipped; a link to a node the file
//! does not have is an error naming both ends. One exception: lines before the first
//! setting or node (a captured stderr line) are skipped with a warning quoting them (see
//! [`parse_with_warnings`]). A cable between two ports of one switch (a loopback) is a
//! link like any other.

use std::collections::HashMap;

use ibscope_mad::attr::link::{Speed, SpeedField, SpeedSet, Width, WidthSet};
use ibscope_mad::attr::NodeType;

use crate::escape;
use crate::ibnd_text::{
    bracketed_number, leading_hex, leading_number, outside_quotes, paren_hex, quoted, skip_ext,
    word_value,
};
use crate::model::{End, Fabric, Node, NodeKind, Port, SwitchFacts};
use crate::parse_error::excerpt;
pub use crate::parse_error::{ParseError, ParseWarning, Parsed};

fn kind_index(kind: NodeKind) -> usize {
    match kind.node_type() {
        NodeType::Switch => 1,
        NodeType::Router => 2,
        _ => 0,
    }
}

/// ibsim's initial GUID bases per node type (CA, switch, router).
const IBSIM_GUID_BASE: [u64; 3] = [0x100000, 0x200000, u64::MAX];

/// "4xQDR" → (4x, QDR); unknown parts are None ("4xFDR10" has a width, no speed).
pub fn parse_width_speed(token: &str) -> (Option<Width>, Option<Speed>) {
    match token.find(['x', 'X']) {
        Some(i) => (
            Width::parse(&token[..i]).filter(|w| w.is_known()),
            Speed::parse(&token[i + 1..]),
        ),
        None => (None, None),
    }
}

/// In the part of a port comment after its last quoted string, find `lid N <w>x<SPEED>`.
fn comment_link(comment: &str) -> (Option<Width>, Option<Speed>) {
    let tail = match comment.rfind('"') {
        Some(i) => &comment[i + 1..],
        None => comment,
    };
    let words: Vec<&str> = tail.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        if *w == "lid" && words.get(i + 1).and_then(|v| leading_number(v)).is_some() {
            if let Some(tok) = words.get(i + 2) {
                let ws = parse_width_speed(tok);
                if ws.0.is_some() || ws.1.is_some() {
                    return ws;
                }
            }
        }
    }
    (None, None)
}

#[derive(Debug, Default)]
struct RawPort {
    number: u8,
    guid: Option<u64>,
    remote_id: String,
    remote_port: u8,
    lid: u16,
    lmc: u8,
    width: Option<Width>,
    speed: Option<Speed>,
    width_enabled: Option<u8>,
    speed_enabled: Option<u8>,
    speed_ext_enabled: Option<u8>,
    line: usize,
}

#[derive(Debug)]
struct RawNode {
    id: String,
    node: Node,
    ports: Vec<RawPort>,
    line: usize,
}

/// Settings that apply to the next node (ibsim semantics).
#[derive(Debug)]
struct State {
    abs_guid: [u64; 3],
    next_guid: [u64; 3],
    vendor_id: u32,
    device_id: u32,
    system_image_guid: u64,
    net_width_enabled: Option<u8>,
    net_speed_enabled: Option<u8>,
    net_speed_ext_enabled: Option<u8>,
    /// Per node type: a `*guid=` line came after the last node header, so the next node
    /// takes its GUID from the counters (ibsim's rule) rather than from its id.
    guid_line: [bool; 3],
}

impl State {
    fn new() -> State {
        State {
            abs_guid: IBSIM_GUID_BASE,
            next_guid: IBSIM_GUID_BASE,
            vendor_id: 0,
            device_id: 0,
            system_image_guid: 0,
            net_width_enabled: None,
            net_speed_enabled: None,
            net_speed_ext_enabled: None,
            guid_line: [false; 3],
        }
    }
}

/// `(hex)` at the start of `text` (after whitespace) when there is one; a `(` that does
/// not hold a whole hex GUID is an error (ibnetdiscover writes port GUIDs this way).
fn port_guid_in_parens<'a>(
    text: &'a str,
    lineno: usize,
    line: &str,
) -> Result<(Option<u64>, &'a str), ParseError> {
    if !text.trim_start().starts_with('(') {
        return Ok((None, text));
    }
    match paren_hex(text) {
        Some((guid, rest)) => Ok((Some(guid), rest)),
        None => Err(ParseError::new(
            lineno,
            "a port GUID of up to 16 hex digits in parentheses",
            line,
        )),
    }
}

/// A GUID setting (`switchguid=0x2c90200402010(2c90200402010)`, `caguid=0x…`,
/// `switchguid+5`, `sysimgguid=0x…`), read strictly: the value ends at `(`, whitespace
/// or `#` and must be a whole GUID (`0x` and 1-16 hex digits, or decimal), so trailing
/// junk is an error rather than silently cut off. Returns (relative, value).
fn guid_setting(line: &str, lineno: usize, key: &str) -> Result<(bool, u64), ParseError> {
    let after_key = &line[key.len()..];
    let Some(i) = after_key.find(['=', '+']) else {
        return Err(ParseError::new(lineno, format!("{key}=GUID"), line));
    };
    let relative = after_key.as_bytes()[i] == b'+';
    let value = after_key[i + 1..].trim_start();
    let end = value
        .find(|c: char| c == '(' || c == '#' || c.is_whitespace())
        .unwrap_or(value.len());
    let Some(guid) = ibscope_mad::codes::guid::parse(&value[..end]) else {
        return Err(ParseError::new(
            lineno,
            format!("a GUID after {key}= (0x and 1 to 16 hex digits, nothing else)"),
            line,
        ));
    };
    port_guid_in_parens(&value[end..], lineno, line)?;
    Ok((relative, guid))
}

/// The GUID ibnetdiscover writes into a node id: `S-0008f10500200134` (switch), `H-…`
/// (CA), `R-…` (router), 16 hex digits.
fn guid_in_id(id: &str, kind: NodeKind) -> Option<u64> {
    let prefix = match kind.node_type() {
        NodeType::Switch => "S-",
        NodeType::Router => "R-",
        _ => "H-",
    };
    let hex = id.strip_prefix(prefix)?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

fn setting_value(line: &str, lineno: usize, key: &str) -> Result<(bool, u64), ParseError> {
    let after_key = &line[key.len()..];
    let (relative, value) = match after_key.find(['=', '+']) {
        Some(i) => (after_key.as_bytes()[i] == b'+', &after_key[i + 1..]),
        None => return Err(ParseError::new(lineno, format!("{key}=VALUE"), line)),
    };
    match leading_number(value) {
        Some((v, _)) => Ok((relative, v)),
        None => Err(ParseError::new(
            lineno,
            format!("a number after {key}="),
            line,
        )),
    }
}

fn to_u8(v: u64, lineno: usize, what: &str, line: &str) -> Result<u8, ParseError> {
    u8::try_from(v).map_err(|_| ParseError::new(lineno, format!("{what} (0-255)"), line))
}

/// Parse a node header `Switch 36 "id" # "desc" enhanced port 0 lid 1 lmc 0`.
fn parse_header(
    line: &str,
    lineno: usize,
    keyword: &str,
    kind: NodeKind,
    state: &mut State,
) -> Result<RawNode, ParseError> {
    let rest = &line[keyword.len()..];
    let (count, rest) = leading_number(rest)
        .ok_or_else(|| ParseError::new(lineno, format!("{keyword} <port count> \"id\""), line))?;
    if count == 0 || count > 255 {
        return Err(ParseError::new(
            lineno,
            "a port count between 1 and 255",
            line,
        ));
    }
    let (id, rest) = quoted(rest).ok_or_else(|| {
        ParseError::new(
            lineno,
            format!("a quoted node id after {keyword} {count}"),
            line,
        )
    })?;
    if id.is_empty() {
        return Err(ParseError::new(lineno, "a non-empty node id", line));
    }
    if id.contains(['#', '@']) {
        return Err(ParseError::new(
            lineno,
            "a node id without '#' or '@' (reserved by ibsim)",
            line,
        ));
    }
    let (description, tail) = match rest.find('#') {
        None => (id.to_string(), ""),
        Some(i) => {
            let c = rest[i + 1..].trim_start();
            if let Some((d, tail)) = quoted(c) {
                (d.to_string(), tail)
            } else {
                let end = [" enhanced port ", " base port ", " lid ", " lmc "]
                    .iter()
                    .filter_map(|m| c.find(m))
                    .min()
                    .unwrap_or(c.len());
                (c[..end].trim_end().to_string(), &c[end..])
            }
        }
    };
    let description = if description.is_empty() {
        id.to_string()
    } else {
        description
    };
    let kind = NodeKind::classify(kind.node_type(), &description).unwrap_or(kind);
    let k = kind_index(kind);
    let num_ports = count as u8;
    // Without a guid line of its own, a node id in ibnetdiscover's form holds the GUID.
    let id_guid = guid_in_id(id, kind).filter(|_| !state.guid_line[k]);
    state.guid_line = [false; 3];
    let guid = match id_guid {
        Some(guid) => guid,
        None => {
            let guid = state.next_guid[k];
            // Switches use one GUID; CAs and routers reserve one per port plus the node's.
            let reserve = if kind == NodeKind::Switch {
                1
            } else {
                u64::from(num_ports) + 1
            };
            state.next_guid[k] = guid.wrapping_add(reserve);
            guid
        }
    };
    let system_image_guid = if state.system_image_guid != 0 {
        state.system_image_guid
    } else {
        guid
    };
    let mut node = Node {
        guid,
        system_image_guid,
        kind,
        vendor_id: state.vendor_id,
        device_id: state.device_id as u16,
        description,
        num_ports,
        ..Default::default()
    };
    state.vendor_id = 0;
    state.system_image_guid = 0;
    if kind == NodeKind::Switch {
        let lid = word_value(tail, "lid").unwrap_or(0);
        let lmc = word_value(tail, "lmc").unwrap_or(0);
        let mut port0 = Port::new(0);
        port0.guid = guid;
        port0.lid =
            u16::try_from(lid).map_err(|_| ParseError::new(lineno, "a LID below 65536", line))?;
        port0.lmc = to_u8(lmc, lineno, "an LMC", line)?;
        node.set_port(port0);
        node.switch = Some(SwitchFacts {
            enhanced_port0: tail.contains("enhanced port 0"),
            ..Default::default()
        });
    }
    Ok(RawNode {
        id: id.to_string(),
        node,
        ports: Vec::new(),
        line: lineno,
    })
}

/// Parse a port line: `[1] "id"[2] # ...` or `[1](guid) "id"[2] # lid 2 lmc 0 ...`.
fn parse_port_line(
    line: &str,
    lineno: usize,
    owner: &RawNode,
    state: &State,
) -> Result<RawPort, ParseError> {
    let (number, rest) = bracketed_number(line)
        .ok_or_else(|| ParseError::new(lineno, "a port line starting [N]", line))?;
    if number == 0 || number > u64::from(owner.node.num_ports) {
        return Err(ParseError::new(
            lineno,
            format!(
                "a port number between 1 and {} (node \"{}\")",
                owner.node.num_ports,
                escape::for_terminal(&owner.id)
            ),
            line,
        ));
    }
    let rest = skip_ext(rest);
    let (guid, rest) = port_guid_in_parens(rest, lineno, line)?;
    let (remote_id, rest) = quoted(rest).ok_or_else(|| {
        ParseError::new(
            lineno,
            "a quoted remote node id after the port number",
            line,
        )
    })?;
    if remote_id.contains('@') {
        return Err(ParseError::new(
            lineno,
            "a plain remote node id (ibsim '@' aliases are not supported)",
            line,
        ));
    }
    let (remote_port, rest) = match bracketed_number(rest) {
        Some((n, r)) => (n, r),
        // ibsim's default when the remote port is omitted.
        None if !rest.starts_with('[') => (1, rest),
        None => return Err(ParseError::new(lineno, "a remote port [N]", line)),
    };
    if remote_port == 0 || remote_port > 255 {
        return Err(ParseError::new(
            lineno,
            "a remote port number between 1 and 255",
            line,
        ));
    }
    let rest = skip_ext(rest);
    // A remote CA's port GUID; not needed (its own block has it).
    let (_, rest) = port_guid_in_parens(rest, lineno, line)?;

    let mut port = RawPort {
        number: number as u8,
        guid,
        remote_id: remote_id.to_string(),
        remote_port: remote_port as u8,
        width_enabled: state.net_width_enabled,
        speed_enabled: state.net_speed_enabled,
        speed_ext_enabled: state.net_speed_ext_enabled,
        line: lineno,
        ..Default::default()
    };
    let plain = outside_quotes(rest);
    let (before, after) = plain.split_once('#').unwrap_or((&plain, ""));
    let mut active_codes = (None, None);
    set_enabled_options(&mut port, &port_options(before), lineno, line)?;
    let comment_options = port_options(after);
    if comment_options.iter().any(|&(key, _)| key == 'v') {
        // `ibnetdiscover -f` appends "s=N w=N v=N" to the comment: LinkSpeedActive,
        // LinkWidthActive and VLCap codes, i.e. what the port runs at, not what it enables.
        for (key, value) in comment_options {
            let code = value.and_then(|v| u8::try_from(v).ok());
            match key {
                's' => active_codes.1 = code,
                'w' => active_codes.0 = code,
                _ => {}
            }
        }
    } else {
        // ibsim reads its options anywhere on the line, comment included.
        set_enabled_options(&mut port, &comment_options, lineno, line)?;
    }
    if let Some(i) = rest.find('#') {
        let comment = rest[i + 1..].trim_start();
        if owner.node.kind != NodeKind::Switch && comment.starts_with("lid ") {
            // CA port: "# lid <own lid> lmc <own lmc> "remote" lid N 4xQDR".
            let head = match comment.find('"') {
                Some(q) => &comment[..q],
                None => comment,
            };
            if let Some(lid) = word_value(head, "lid") {
                port.lid = u16::try_from(lid)
                    .map_err(|_| ParseError::new(lineno, "a LID below 65536", line))?;
            }
            if let Some(lmc) = word_value(head, "lmc") {
                port.lmc = to_u8(lmc, lineno, "an LMC", line)?;
            }
        }
        let (w, s) = comment_link(comment);
        port.width = w;
        port.speed = s;
    }
    let (width_code, speed_code) = active_codes;
    port.width = port.width.or(width_code.and_then(Width::from_active));
    port.speed = port
        .speed
        .or(speed_code.and_then(|c| Speed::from_field(SpeedField::LinkSpeed, c)));
    Ok(port)
}

/// `key=value` options (the key is the letter before `=`) in text whose quoted parts are
/// already removed.
fn port_options(text: &str) -> Vec<(char, Option<u64>)> {
    text.match_indices('=')
        .filter_map(|(i, _)| {
            let key = text[..i].trim_end().chars().last()?;
            Some((key, leading_number(&text[i + 1..]).map(|(v, _)| v)))
        })
        .collect()
}

/// ibsim's port options: `w=N` enabled width mask, `s=N` speed mask, `e=N` extended speed
/// mask (others are ignored, as ibsim does).
fn set_enabled_options(
    port: &mut RawPort,
    options: &[(char, Option<u64>)],
    lineno: usize,
    line: &str,
) -> Result<(), ParseError> {
    for &(key, value) in options {
        let slot = match key {
            'w' => &mut port.width_enabled,
            's' => &mut port.speed_enabled,
            'e' => &mut port.speed_ext_enabled,
            _ => continue,
        };
        match value {
            Some(v) if v <= 31 => *slot = Some(v as u8),
            _ => {
                return Err(ParseError::new(
                    lineno,
                    "a port option value between 0 and 31 (w=, s=, e=)",
                    line,
                ))
            }
        }
    }
    Ok(())
}

fn model_port(raw: &RawPort, node: &Node) -> Port {
    let mut p = Port::new(raw.number);
    if node.is_switch() {
        p.guid = node.guid;
        // External switch ports repeat the switch's LID.
        if let Some(p0) = node.port(0) {
            p.lid = p0.lid;
            p.lmc = p0.lmc;
        }
    } else {
        p.guid = raw
            .guid
            .unwrap_or_else(|| node.guid.wrapping_add(u64::from(raw.number)));
        p.lid = raw.lid;
        p.lmc = raw.lmc;
    }
    p.width_active = raw.width;
    p.speed_active = raw.speed;
    if let Some(w) = raw.width_enabled {
        p.width_enabled = WidthSet(w);
    }
    if raw.speed_enabled.is_some() || raw.speed_ext_enabled.is_some() {
        p.speed_enabled = SpeedSet::from_masks(
            raw.speed_enabled.unwrap_or(0),
            0,
            raw.speed_ext_enabled.unwrap_or(0),
            0,
        );
    }
    p
}

/// Parse ibnetdiscover output or an ibsim topology file. Never panics; errors name the
/// line and what was expected. Warnings (see [`parse_with_warnings`]) are dropped.
pub fn parse(text: &str) -> Result<Fabric, ParseError> {
    parse_with_warnings(text).map(|p| p.fabric)
}

/// What one line of a topology file is, beyond node headers and port lines.
enum Setting {
    /// Changes the parser's state (or is an ibsim console command with no bearing here).
    Applied,
    /// Part of ibnetdiscover's layout without facts in it (`-g` grouping lines).
    Layout,
    /// Not a line of the format.
    Unknown,
}

/// Parse any file ibnetdiscover writes (plain, `-g`, `-f`, `-p`) or an ibsim topology
/// file, with the warnings a user should see: lines before the topology that are not
/// part of it (a captured stderr line) are skipped and quoted in a warning.
pub fn parse_with_warnings(text: &str) -> Result<Parsed, ParseError> {
    if crate::ibnd_ports::is_ports_report(text) {
        return crate::ibnd_ports::parse(text);
    }
    let mut state = State::new();
    let mut nodes: Vec<RawNode> = Vec::new();
    let mut current: Option<RawNode> = None;
    let mut initiated_from: Option<u64> = None;
    let mut warnings = Vec::new();
    // Lines skipped before the first setting or node, and the error the first one would
    // have been had nothing followed it.
    let mut started = false;
    let mut first_skipped: Option<ParseError> = None;

    for (index, raw_line) in text.lines().enumerate() {
        let lineno = index + 1;
        let line = raw_line.trim();
        if let Some(node) = current.as_mut() {
            if line.starts_with('[') {
                let port = parse_port_line(line, lineno, node, &state)?;
                if node.ports.iter().any(|p| p.number == port.number) {
                    return Err(ParseError::new(
                        lineno,
                        format!("port {} listed once", port.number),
                        line,
                    ));
                }
                node.ports.push(port);
                continue;
            }
            if line.starts_with('@') {
                return Err(ParseError::new(
                    lineno,
                    "a port line (ibsim '@' aliases are not supported)",
                    line,
                ));
            }
            if line.starts_with('#') {
                continue;
            }
            nodes.extend(current.take());
        }
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            // "# Initiated from node 0000000000200000 port 0000000000200000"
            if let Some(i) = c.find("Initiated from node") {
                let after = &c[i + "Initiated from node".len()..];
                if let Some(p) = after.find(" port ") {
                    initiated_from = leading_hex(&after[p + 6..]).map(|(g, _)| g);
                }
            }
            continue;
        }
        let word_end = line
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(line.len());
        let word = &line[..word_end];
        let header_kind = match word {
            "Switch" => Some(NodeKind::Switch),
            "Hca" | "Ca" => Some(NodeKind::Ca),
            "Rt" => Some(NodeKind::Router),
            _ => None,
        };
        if let Some(kind) = header_kind {
            current = Some(parse_header(line, lineno, word, kind, &mut state)?);
            started = true;
            continue;
        }
        match apply_setting(line, lineno, word, &mut state)? {
            Setting::Applied => started = true,
            Setting::Layout => {}
            Setting::Unknown if !started && !is_port_line(line) => {
                warnings.push(ParseWarning {
                    line: lineno,
                    message: format!(
                        "skipped a line before the topology that is not part of it: {}",
                        excerpt(line, 200)
                    ),
                });
                first_skipped.get_or_insert_with(|| unknown_line(line, lineno));
            }
            Setting::Unknown => return Err(unknown_line(line, lineno)),
        }
    }
    nodes.extend(current.take());
    if nodes.is_empty() {
        // Nothing but unknown lines: not a topology at all.
        if let Some(e) = first_skipped {
            return Err(e);
        }
    }
    let node_ids = nodes.iter().map(|n| (n.id.clone(), n.node.guid)).collect();
    let mut fabric = assemble(nodes)?;
    if let Some(port_guid) = initiated_from {
        if let Some(end) = fabric.port_by_guid(port_guid) {
            fabric.local = Some(fabric.node(end.node).port_key(end.port));
        }
    }
    Ok(Parsed {
        fabric,
        warnings,
        node_ids,
    })
}

/// `[N]…`: a port line.
fn is_port_line(line: &str) -> bool {
    bracketed_number(line).is_some()
}

fn unknown_line(line: &str, lineno: usize) -> ParseError {
    if is_port_line(line) {
        return ParseError::new(
            lineno,
            "a node header (Switch/Ca/Hca/Rt) before port lines",
            line,
        );
    }
    ParseError::new(
        lineno,
        "a node header (Switch/Ca/Hca/Rt), a setting (key=value) or a comment",
        line,
    )
}

/// Apply a setting line (`switchguid=…`, `vendid=…`, `width=…` …) to `state`.
fn apply_setting(
    line: &str,
    lineno: usize,
    word: &str,
    state: &mut State,
) -> Result<Setting, ParseError> {
    match word {
        "switchguid" | "caguid" | "hcaguids" | "rtguid" => {
            let k = match word {
                "switchguid" => 1,
                "rtguid" => 2,
                _ => 0,
            };
            let (relative, v) = guid_setting(line, lineno, word)?;
            if !relative {
                state.abs_guid[k] = v;
                state.next_guid[k] = v;
            } else {
                state.next_guid[k] = state.abs_guid[k].wrapping_add(v);
            }
            state.guid_line[k] = true;
        }
        "vendid" => state.vendor_id = setting_value(line, lineno, word)?.1 as u32,
        "devid" => state.device_id = setting_value(line, lineno, word)?.1 as u32,
        "sysimgguid" => state.system_image_guid = guid_setting(line, lineno, word)?.1,
        "width" | "speed" | "extspeed" => {
            let v = setting_value(line, lineno, word)?.1;
            if v > 31 {
                return Err(ParseError::new(lineno, format!("{word}= 0-31"), line));
            }
            let slot = match word {
                "width" => &mut state.net_width_enabled,
                "speed" => &mut state.net_speed_enabled,
                _ => &mut state.net_speed_ext_enabled,
            };
            *slot = Some(v as u8);
        }
        // ibsim console commands and debug switches: no bearing on the topology.
        "do" | "pdebug" => {}
        // ibnetdiscover -g: "Chassis 3 (guid 0x…)", "Non-Chassis Nodes", and for Xsigo
        // chassis "Hostname: …".
        "Chassis" => return Ok(Setting::Layout),
        "Non" if line.starts_with("Non-Chassis Nodes") => return Ok(Setting::Layout),
        "Hostname" if line.starts_with("Hostname:") => return Ok(Setting::Layout),
        "include" => {
            return Err(ParseError::new(
                lineno,
                "a self-contained file (include is not supported; concatenate the files)",
                line,
            ))
        }
        "module" => {
            return Err(ParseError::new(
                lineno,
                "a file without module= prefixes (not supported)",
                line,
            ))
        }
        _ => return Ok(Setting::Unknown),
    }
    Ok(Setting::Applied)
}

/// The links of a topology file: each once, (node index, port) at both ends; which end
/// each port is cabled to; and the ports a remote block omits, to add to it.
struct Cabling {
    links: Vec<((usize, u8), (usize, u8))>,
    claimed: HashMap<(usize, u8), (usize, u8)>,
    missing_reverse: Vec<(usize, RawPort)>,
}

/// Every port line resolved to its remote end and checked against the remote node's
/// own line for it.
fn cabling(nodes: &[RawNode]) -> Result<Cabling, ParseError> {
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if by_id.insert(n.id.clone(), i).is_some() {
            return Err(ParseError::new(n.line, "a unique node id", &n.id));
        }
    }
    // Resolve every port line to (remote node index, remote port) and check symmetry.
    let mut links: Vec<((usize, u8), (usize, u8))> = Vec::new();
    let mut claimed: HashMap<(usize, u8), (usize, u8)> = HashMap::new();
    let mut missing_reverse: Vec<(usize, RawPort)> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        for p in &n.ports {
            let Some(&r) = by_id.get(&p.remote_id) else {
                return Err(ParseError::sentence(
                    p.line,
                    format!(
                        "\"{}\"[{}] is cabled to \"{}\"[{}], but no node \"{}\" is in this file",
                        escape::for_terminal(&n.id),
                        p.number,
                        escape::for_terminal(&p.remote_id),
                        p.remote_port,
                        escape::for_terminal(&p.remote_id),
                    ),
                ));
            };
            let remote = &nodes[r];
            if p.remote_port > remote.node.num_ports {
                return Err(ParseError::new(
                    p.line,
                    format!(
                        "a remote port within the {} ports of \"{}\"",
                        remote.node.num_ports,
                        escape::for_terminal(&remote.id)
                    ),
                    &format!("[{}]", p.remote_port),
                ));
            }
            // A cable between two ports of one switch (a loopback) is a link like any
            // other; a port cabled to itself is not.
            if r == i && p.remote_port == p.number {
                return Err(ParseError::sentence(
                    p.line,
                    format!(
                        "\"{}\"[{}] is cabled to itself",
                        escape::for_terminal(&n.id),
                        p.number
                    ),
                ));
            }
            let here = (i, p.number);
            let there = (r, p.remote_port);
            match remote.ports.iter().find(|q| q.number == p.remote_port) {
                Some(q) => {
                    if q.remote_id != n.id || q.remote_port != p.number {
                        return Err(ParseError::new(
                            p.line,
                            format!(
                                "\"{}\"[{}] to list this port back (it names \"{}\"[{}])",
                                escape::for_terminal(&remote.id),
                                p.remote_port,
                                escape::for_terminal(&q.remote_id),
                                q.remote_port
                            ),
                            &format!("[{}] \"{}\"[{}]", p.number, p.remote_id, p.remote_port),
                        ));
                    }
                }
                None => {
                    // The remote block omits this link: accept it, copying the link facts.
                    if let Some(prev) = claimed.get(&there) {
                        if *prev != here {
                            return Err(ParseError::new(
                                p.line,
                                "each remote port used by one link",
                                &format!("\"{}\"[{}]", p.remote_id, p.remote_port),
                            ));
                        }
                    }
                    missing_reverse.push((
                        r,
                        RawPort {
                            number: p.remote_port,
                            remote_id: n.id.clone(),
                            remote_port: p.number,
                            width: p.width,
                            speed: p.speed,
                            line: p.line,
                            ..Default::default()
                        },
                    ));
                }
            }
            claimed.insert(there, here);
            if here < there {
                links.push((here, there));
            } else if !remote.ports.iter().any(|q| q.number == p.remote_port) {
                links.push((there, here));
            }
        }
    }
    Ok(Cabling {
        links,
        claimed,
        missing_reverse,
    })
}

fn assemble(mut nodes: Vec<RawNode>) -> Result<Fabric, ParseError> {
    let Cabling {
        mut links,
        claimed,
        missing_reverse,
    } = cabling(&nodes)?;
    for (r, port) in missing_reverse {
        if !nodes[r].ports.iter().any(|q| q.number == port.number) {
            nodes[r].ports.push(port);
        }
    }
    // Fill a missing width/speed on one end from the other end of the same link.
    let facts: HashMap<(usize, u8), (Option<Width>, Option<Speed>)> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| {
            n.ports
                .iter()
                .map(move |p| ((i, p.number), (p.width, p.speed)))
        })
        .collect();
    let mut fabric = Fabric::new();
    let mut ids = Vec::with_capacity(nodes.len());
    for (i, raw) in nodes.into_iter().enumerate() {
        let mut node = raw.node;
        for p in &raw.ports {
            let mut port = model_port(p, &node);
            if let Some(&peer) = claimed.get(&(i, p.number)) {
                if let Some(&(w, s)) = facts.get(&peer) {
                    port.width_active = port.width_active.or(w);
                    port.speed_active = port.speed_active.or(s);
                }
            }
            node.set_port(port);
        }
        let guid = node.guid;
        let id = fabric.add_node(node).map_err(|_| {
            ParseError::new(
                raw.line,
                format!("a node GUID not used before ({guid:#x} is taken; check the *guid= lines)"),
                &raw.id,
            )
        })?;
        ids.push(id);
    }
    links.sort_unstable();
    links.dedup();
    for ((a, ap), (b, bp)) in links {
        fabric
            .connect(
                End {
                    node: ids[a],
                    port: ap,
                },
                End {
                    node: ids[b],
                    port: bp,
                },
            )
            .map_err(|e| ParseError::new(0, "consistent links", &e.to_string()))?;
    }
    Ok(fabric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{ibnd_fragment, NET_IBND};
    use proptest::prelude::*;

    #[test]
    fn parses_ibnetdiscover_output() {
        let f = parse(NET_IBND).unwrap();
        assert_eq!(f.node_count(), 4);
        assert_eq!(f.link_count(), 4);
        let sw1 = f.node(f.node_by_guid(0x200000).unwrap());
        assert!(sw1.is_switch());
        assert_eq!(sw1.description, "Switch1");
        assert_eq!(sw1.num_ports, 8);
        assert_eq!(sw1.lid(), Some(1));
        assert_eq!(sw1.port(1).unwrap().width_active, Some(Width::X4));
        assert_eq!(sw1.port(1).unwrap().speed_active, Some(Speed::Sdr));
        let hca2 = f.node(f.node_by_guid(0x100003).unwrap());
        assert_eq!(hca2.port(2).unwrap().guid, 0x100005);
        assert_eq!(hca2.port(2).unwrap().lid, 4);
        assert_eq!(
            f.port_by_lid(4).map(|e| f.node(e.node).guid),
            Some(0x100003)
        );
        assert_eq!(f.local.map(|l| (l.guid, l.port)), Some((0x200000, 0)));
        assert_eq!(hca2.system_image_guid, 0x100003);
    }

    #[test]
    fn settings_and_options() {
        let text = "switchguid=0x1000\nvendid=0x2c9\ndevid=0xcf08\nsysimgguid=0x77\n\
Switch 4 \"a\" # \"A\" enhanced port 0 lid 7 lmc 1\n\
[1] \"b\"[2] w=3 s=7 e=4 # \"B\" lid 9 1xHDR\n\
\ncaguid=0x5000\nCa 2 \"b\" # plain desc lid 9\n\
[2](abc) \"a\"[1] # lid 9 lmc 0 \"A\" lid 7 1xHDR\n\
do Unlink \"a\"[1]\npdebug=1\n\
switchguid+5\nSwitch 2 \"c\"\n";
        let f = parse(text).unwrap();
        let a = f.node(f.node_by_guid(0x1000).unwrap());
        assert_eq!(
            (a.vendor_id, a.device_id, a.system_image_guid),
            (0x2c9, 0xcf08, 0x77)
        );
        assert!(a.switch.as_ref().unwrap().enhanced_port0);
        assert_eq!(a.port(0).unwrap().lmc, 1);
        let p1 = a.port(1).unwrap();
        assert_eq!(p1.width_enabled, WidthSet(3));
        assert_eq!(p1.speed_enabled, SpeedSet::from_masks(7, 0, 4, 0));
        assert_eq!(
            (p1.width_active, p1.speed_active),
            (Some(Width::X1), Some(Speed::Hdr))
        );
        let b = f.node(f.node_by_guid(0x5000).unwrap());
        assert_eq!(b.description, "plain desc");
        assert_eq!(b.vendor_id, 0, "vendid applies to one node only (ibsim)");
        assert_eq!(b.device_id, 0xcf08, "devid persists (ibsim)");
        assert_eq!(b.port(2).unwrap().guid, 0xabc);
        // Relative base: absolute 0x1000 + 5.
        assert!(f.node_by_guid(0x1005).is_some());
    }

    #[test]
    fn errors_name_line_and_expectation() {
        let e = parse("Switch 4 \"a\"\n[5] \"b\"[1]\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.expected.contains("between 1 and 4"), "{e}");
        let e = parse("Switch 4 \"a\"\n[1] \"zz\"[1]\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("zz"), "{e}");
        let e = parse("\n\nSwitch x\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse("include \"other\"\n").unwrap_err();
        assert!(e.expected.contains("include"));
        let e = parse("hello world\n").unwrap_err();
        assert_eq!(e.line, 1);
        // Asymmetric links.
        let e =
            parse("Switch 4 \"a\"\n[1] \"b\"[1]\n\nSwitch 4 \"b\"\n[1] \"a\"[2]\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = parse("Switch 4 \"a\"\n[1] \"b\"[1]\n[1] \"b\"[2]\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(parse("Switch 2 \"a\"\n\nSwitch 2 \"a\"\n").is_err());
        // The error display is terminal-safe.
        let e = parse("\x1b]0;pwned\x07\n").unwrap_err();
        assert!(!e.to_string().contains('\x1b'));
    }

    #[test]
    fn one_sided_link_is_accepted() {
        let f = parse("Switch 4 \"a\"\n[1] \"b\"[3] # \"b\" lid 0 4xQDR\n\nHca 3 \"b\"\n").unwrap();
        assert_eq!(f.link_count(), 1);
        let b = f.node(f.node_by_guid(0x100000).unwrap());
        assert_eq!(b.port(3).unwrap().guid, 0x100003);
        assert_eq!(b.port(3).unwrap().speed_active, Some(Speed::Qdr));
    }

    #[test]
    fn width_speed_tokens() {
        assert_eq!(
            parse_width_speed("4xHDR"),
            (Some(Width::X4), Some(Speed::Hdr))
        );
        assert_eq!(
            parse_width_speed("12xQDR"),
            (Some(Width::X12), Some(Speed::Qdr))
        );
        assert_eq!(
            parse_width_speed("4xFDR10"),
            (Some(Width::X4), Some(Speed::Fdr10))
        );
        assert_eq!(parse_width_speed("undefined"), (None, None));
    }

    proptest! {
        #[test]
        fn never_panics(lines in proptest::collection::vec(ibnd_fragment(), 0..30)) {
            let _ = parse(&lines.join("\n"));
        }

        #[test]
        fn arbitrary_bytes_never_panic(text in "\\PC{0,300}") {
            let _ = parse(&text);
        }
    }
}
