//! Netlink as this crate speaks it: a request (an `nlmsghdr`, a family header, attributes
//! built from a table of type and value), one socket per exchange with a timeout, and the
//! attributes of an answer walked without trusting their lengths. rtnetlink's DCB
//! (`roce.rs`) and generic netlink's ethtool family (`module_eeprom.rs`) are written on it
//! (linux/netlink.h, linux/genetlink.h).

/// `nlmsghdr.nlmsg_type` of an error or acknowledgement.
pub const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST`.
pub const F_REQUEST: u16 = 1;
/// The nested-attribute flag of `nla_type`; the two top bits are flags.
pub const F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;
/// The length of an `nlmsghdr`.
pub const HEADER_LEN: usize = 16;

/// One attribute, padded to 4 bytes: its length (without the padding), type, value.
pub fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity((4 + value.len()).next_multiple_of(4));
    a.extend(((4 + value.len()) as u16).to_ne_bytes());
    a.extend(kind.to_ne_bytes());
    a.extend(value);
    a.resize(a.len().next_multiple_of(4), 0);
    a
}

/// A NUL-terminated string attribute.
pub fn attr_str(kind: u16, text: &str) -> Vec<u8> {
    let mut v = text.as_bytes().to_vec();
    v.push(0);
    attr(kind, &v)
}

/// A message: the `nlmsghdr` (type, flags, sequence, port 0), the family's header, then
/// the attributes (each already padded).
pub fn message(
    kind: u16,
    flags: u16,
    seq: u32,
    family_header: &[u8],
    attrs: &[Vec<u8>],
) -> Vec<u8> {
    let body: usize = family_header.len() + attrs.iter().map(Vec::len).sum::<usize>();
    let total = HEADER_LEN + body;
    let mut m = Vec::with_capacity(total);
    m.extend((total as u32).to_ne_bytes());
    m.extend(kind.to_ne_bytes());
    m.extend(flags.to_ne_bytes());
    m.extend(seq.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(family_header);
    for a in attrs {
        m.extend(a);
    }
    m
}

/// The attributes in `buf` as (type, value), each padded to 4 bytes; a truncated one ends
/// the list.
pub fn attributes(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([buf[0], buf[1]]));
        let kind = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((kind, &buf[4..len]));
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    out
}

/// The first message of an answer: its type and its body past the `nlmsghdr` (the
/// family header and attributes), or the error an `NLMSG_ERROR` carries, named `what`.
pub fn answer<'a>(buf: &'a [u8], what: &str) -> Result<(u16, &'a [u8]), String> {
    let len = buf
        .get(0..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("short netlink answer")?;
    if len < HEADER_LEN || len > buf.len() {
        return Err(format!("netlink message of {len} bytes in {}", buf.len()));
    }
    let kind = u16::from_ne_bytes([buf[4], buf[5]]);
    if kind == NLMSG_ERROR {
        let code = buf
            .get(16..20)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0);
        return Err(format!(
            "{what}: {}",
            std::io::Error::from_raw_os_error(code.saturating_neg())
        ));
    }
    Ok((kind, &buf[HEADER_LEN..len]))
}

/// A netlink socket of `protocol`, closed when dropped.
pub struct Socket(libc::c_int);

impl Socket {
    pub fn open(protocol: libc::c_int) -> Result<Socket, String> {
        // SAFETY: plain socket(2); the descriptor is closed by Drop.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, protocol) };
        if fd < 0 {
            return Err(format!("netlink: {}", std::io::Error::last_os_error()));
        }
        Ok(Socket(fd))
    }

    /// Send `request` and read one answer (with a 2 s timeout).
    pub fn exchange(&self, request: &[u8]) -> Result<Vec<u8>, String> {
        let timeout = libc::timeval {
            tv_sec: 2,
            tv_usec: 0,
        };
        // SAFETY: setsockopt with a timeval of the size given; send and recv on buffers of
        // the lengths given, on our own descriptor.
        unsafe {
            libc::setsockopt(
                self.0,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                std::ptr::addr_of!(timeout).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
            if libc::send(self.0, request.as_ptr().cast(), request.len(), 0) < 0 {
                return Err(format!("netlink send: {}", std::io::Error::last_os_error()));
            }
            let mut buf = vec![0u8; 16 * 1024];
            let n = libc::recv(self.0, buf.as_mut_ptr().cast(), buf.len(), 0);
            if n < 0 {
                return Err(format!("netlink: {}", std::io::Error::last_os_error()));
            }
            buf.truncate(n as usize);
            Ok(buf)
        }
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Generic netlink (linux/genetlink.h): the controller resolves a family's name to the
/// message type its requests carry.
pub mod generic {
    use super::{answer, attr_str, attributes, message, Socket, F_REQUEST};

    /// `GENL_ID_CTRL`, `CTRL_CMD_GETFAMILY`, `CTRL_ATTR_FAMILY_ID`, `CTRL_ATTR_FAMILY_NAME`.
    const ID_CTRL: u16 = 0x10;
    const CMD_GETFAMILY: u8 = 3;
    const ATTR_FAMILY_ID: u16 = 1;
    const ATTR_FAMILY_NAME: u16 = 2;

    /// A `genlmsghdr`: command, version, two reserved bytes.
    pub fn header(cmd: u8, version: u8) -> [u8; 4] {
        [cmd, version, 0, 0]
    }

    /// The request for family `name`'s ID.
    pub fn family_request(name: &str, seq: u32) -> Vec<u8> {
        message(
            ID_CTRL,
            F_REQUEST,
            seq,
            &header(CMD_GETFAMILY, 1),
            &[attr_str(ATTR_FAMILY_NAME, name)],
        )
    }

    /// The family ID in the controller's answer.
    pub fn decode_family(buf: &[u8], name: &str) -> Result<u16, String> {
        let (_, body) = answer(buf, &format!("generic netlink family {name}"))?;
        attributes(body.get(4..).unwrap_or(&[]))
            .into_iter()
            .find(|(k, v)| *k == ATTR_FAMILY_ID && v.len() >= 2)
            .map(|(_, v)| u16::from_ne_bytes([v[0], v[1]]))
            .ok_or_else(|| format!("generic netlink has no family {name}"))
    }

    /// Family `name`'s ID, asked on `socket` (a NETLINK_GENERIC one).
    pub fn family(socket: &Socket, name: &str) -> Result<u16, String> {
        decode_family(&socket.exchange(&family_request(name, 1))?, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_attributes_round_trip() {
        let m = message(0x10, F_REQUEST, 7, &[3, 1, 0, 0], &[attr_str(2, "ethtool")]);
        // nlmsghdr 16 + genlmsghdr 4 + attribute 4 + "ethtool\0" (8).
        assert_eq!(m.len(), 32);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]), 32);
        let (kind, body) = answer(&m, "x").unwrap();
        assert_eq!(kind, 0x10);
        let attrs = attributes(&body[4..]);
        assert_eq!(attrs, [(2, &b"ethtool\0"[..])]);
        // A nested flag is not part of the type; a truncated attribute ends the list.
        let nested = attr(1 | F_NESTED, &attr(2, &[9]));
        assert_eq!(attributes(&nested)[0].0, 1);
        assert_eq!(attributes(&nested[..5]), []);
    }

    #[test]
    fn an_error_answer_is_named() {
        let mut e = message(NLMSG_ERROR, 0, 1, &(-95i32).to_ne_bytes(), &[]);
        assert!(answer(&e, "module EEPROM")
            .unwrap_err()
            .starts_with("module EEPROM: "));
        e.truncate(10);
        assert!(answer(&e, "x").is_err());
        assert!(answer(&[], "x").is_err());
    }

    #[test]
    fn the_family_id_is_read_from_the_controllers_answer() {
        let reply = message(
            0x10,
            0,
            1,
            &generic::header(1, 2),
            &[attr_str(2, "ethtool"), attr(1, &21u16.to_ne_bytes())],
        );
        assert_eq!(generic::decode_family(&reply, "ethtool"), Ok(21));
        let none = message(0x10, 0, 1, &generic::header(1, 2), &[]);
        assert!(generic::decode_family(&none, "ethtool").is_err());
    }
}
