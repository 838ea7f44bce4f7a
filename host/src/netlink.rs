//! Netlink as this crate speaks it (linux/netlink.h, linux/genetlink.h): a message's
//! header, its error answer and its attributes as tables (`wire_struct!`, host byte order),
//! requests built from them, the attributes of an answer walked without trusting their
//! lengths, one socket per exchange with a timeout, and generic netlink's family lookup.
//! What a family puts inside is its own module's: rtnetlink's DCB in `roce.rs`, the
//! ethtool family's module EEPROM in `module_eeprom.rs`.

use ibscope_mad::wire::HostOrder;
use ibscope_mad::wire_struct;

wire_struct! {
    /// `struct nlmsghdr`: every netlink message starts with it.
    pub struct NlMsgHdr (16) {
        /// The whole message, this header included.
        pub len: HostOrder<u32> = 0, 32, "nlmsg_len";
        pub kind: HostOrder<u16> = 32, 16, "nlmsg_type";
        pub flags: HostOrder<u16> = 48, 16, "nlmsg_flags";
        pub seq: HostOrder<u32> = 64, 32, "nlmsg_seq";
        pub pid: HostOrder<u32> = 96, 32, "nlmsg_pid";
    }
}

wire_struct! {
    /// `struct nlmsgerr`'s first field, after the header of an `NLMSG_ERROR` answer.
    pub struct NlMsgErr (4) {
        /// 0, or a negative errno (two's complement).
        pub error: HostOrder<u32> = 0, 32, "error";
    }
}

wire_struct! {
    /// `struct nlattr`: an attribute's header, its value after it, padded to 4 bytes.
    pub struct NlAttr (4) {
        /// The header and the value, without the padding.
        pub len: HostOrder<u16> = 0, 16, "nla_len";
        /// The type, with the nested and byte-order flags in its two high bits.
        pub kind: HostOrder<u16> = 16, 16, "nla_type";
    }
}

/// `NLMSG_ERROR`.
pub const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST`.
pub const F_REQUEST: u16 = 1;
/// `NLA_F_NESTED`: the flag of `nla_type` that says its value holds attributes.
pub const F_NESTED: u16 = 0x8000;
/// The type bits of `nla_type`, without `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The first message of an answer: its type and its body past the header (the family's
/// header and attributes), or the error the kernel answered with, in words.
fn first_message(buf: &[u8]) -> Result<(u16, &[u8]), String> {
    let header = NlMsgHdr::decode(buf).map_err(|_| "short netlink answer".to_string())?;
    let len = header.len.0 as usize;
    if len < NlMsgHdr::WIRE_LEN || len > buf.len() {
        return Err(format!("netlink message of {len} bytes in {}", buf.len()));
    }
    let body = &buf[NlMsgHdr::WIRE_LEN..len];
    if header.kind.0 == NLMSG_ERROR {
        let code = NlMsgErr::decode(body).map_or(0, |e| e.error.0 as i32);
        return Err(std::io::Error::from_raw_os_error(code.saturating_neg()).to_string());
    }
    Ok((header.kind.0, body))
}

/// The payload of the one message at the start of `buf` (after its header), or the error
/// the kernel answered with, in words.
pub fn payload(buf: &[u8]) -> Result<&[u8], String> {
    first_message(buf).map(|(_, body)| body)
}

/// [`payload`] with the message's type, its error named `what`.
pub fn answer<'a>(buf: &'a [u8], what: &str) -> Result<(u16, &'a [u8]), String> {
    first_message(buf).map_err(|e| format!("{what}: {e}"))
}

/// The attributes in `buf` as (type, value); a truncated one ends the list.
pub fn attributes(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while let Ok(attr) = NlAttr::decode(buf) {
        let len = usize::from(attr.len.0);
        if len < NlAttr::WIRE_LEN || len > buf.len() {
            break;
        }
        out.push((attr.kind.0 & NLA_TYPE_MASK, &buf[NlAttr::WIRE_LEN..len]));
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    out
}

/// One attribute, padded to 4 bytes: its header, then its value.
pub fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = NlAttr::WIRE_LEN + value.len();
    let mut a = vec![0u8; NlAttr::WIRE_LEN];
    let header = NlAttr {
        len: HostOrder(len as u16),
        kind: HostOrder(kind),
    };
    header
        .encode_into(&mut a)
        .expect("an attribute header fits its buffer");
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

/// A message: the header (its length filled in, port 0), the family's own header, then
/// the attributes (each built by [`attr`]).
pub fn message(
    kind: u16,
    flags: u16,
    seq: u32,
    family_header: &[u8],
    attrs: &[Vec<u8>],
) -> Vec<u8> {
    let body = family_header.len() + attrs.iter().map(Vec::len).sum::<usize>();
    let total = NlMsgHdr::WIRE_LEN + body;
    let mut m = vec![0u8; NlMsgHdr::WIRE_LEN];
    let header = NlMsgHdr {
        len: HostOrder(total as u32),
        kind: HostOrder(kind),
        flags: HostOrder(flags),
        seq: HostOrder(seq),
        pid: HostOrder(0),
    };
    header
        .encode_into(&mut m)
        .expect("a header fits its buffer");
    m.extend(family_header);
    for a in attrs {
        m.extend(a);
    }
    m
}

/// A request: [`message`] with `NLM_F_REQUEST`, attributes given as (type, value).
pub fn request(kind: u16, seq: u32, fixed: &[u8], attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let attrs: Vec<Vec<u8>> = attrs.iter().map(|(k, v)| attr(*k, v)).collect();
    message(kind, F_REQUEST, seq, fixed, &attrs)
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

    /// The captured answer of a virtio_net interface to a DCB request
    /// (tests/data/netdev/README.md): an error message, as the kernel wrote it.
    fn captured_error() -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/data/netdev/virtio-eth0/dcb-ieee-get.bin"),
        )
        .unwrap()
    }

    #[test]
    fn a_captured_header_decodes_and_encodes_to_the_same_bytes() {
        let bytes = captured_error();
        let header = NlMsgHdr::decode(&bytes).unwrap();
        assert_eq!(header.kind.0, NLMSG_ERROR);
        assert_eq!(header.len.0 as usize, bytes.len());
        let mut again = [0u8; NlMsgHdr::WIRE_LEN];
        header.encode_into(&mut again).unwrap();
        assert_eq!(again, bytes[..NlMsgHdr::WIRE_LEN]);
        // -EOPNOTSUPP, as strerror words it.
        assert_eq!(
            payload(&bytes).unwrap_err(),
            std::io::Error::from_raw_os_error(libc::EOPNOTSUPP).to_string()
        );
    }

    #[test]
    fn a_request_frames_its_attributes() {
        let r = request(78, 7, &[0, 21, 0, 0], &[(1, b"eth0\0")]);
        assert_eq!(r.len(), 16 + 4 + 4 + 8);
        let header = NlMsgHdr::decode(&r).unwrap();
        assert_eq!((header.len.0, header.kind.0, header.seq.0), (32, 78, 7));
        assert_eq!(attributes(&r[20..]), [(1, &b"eth0\0"[..])]);
    }

    #[test]
    fn cut_or_lying_answers_are_errors_never_panics() {
        let bytes = captured_error();
        for cut in 0..bytes.len() {
            let _ = payload(&bytes[..cut]);
        }
        let mut lying = bytes.clone();
        lying[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(payload(&lying).is_err());
        let attrs = [8u8, 0, 1, 0, 0xff, 0xff, 2, 0];
        for cut in 0..attrs.len() {
            let _ = attributes(&attrs[..cut]);
        }
        assert_eq!(attributes(&attrs).len(), 1);
    }

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
