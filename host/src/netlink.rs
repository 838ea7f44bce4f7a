//! Netlink framing as tables (`wire_struct!`, host byte order; offsets from
//! linux/netlink.h): a message's header, its error answer, its attributes. What a family
//! puts inside is its own module's (`roce.rs`: DCB).

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
pub const NLM_F_REQUEST: u16 = 1;
/// The type bits of `nla_type`, without `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The payload of the one message at the start of `buf` (after its header), or the error
/// the kernel answered with, in words.
pub fn payload(buf: &[u8]) -> Result<&[u8], String> {
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
    Ok(body)
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

/// A request: the header (its length filled in), `fixed` (the family's own header) and
/// the attributes, each padded to 4 bytes.
pub fn request(kind: u16, seq: u32, fixed: &[u8], attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut body = fixed.to_vec();
    for (kind, value) in attrs {
        let len = NlAttr::WIRE_LEN + value.len();
        let mut head = [0u8; NlAttr::WIRE_LEN];
        let attr = NlAttr {
            len: HostOrder(len as u16),
            kind: HostOrder(*kind),
        };
        attr.encode_into(&mut head)
            .expect("an attribute header fits its buffer");
        body.extend(head);
        body.extend(*value);
        body.resize(body.len().next_multiple_of(4), 0);
    }
    let total = NlMsgHdr::WIRE_LEN + body.len();
    let mut m = vec![0u8; NlMsgHdr::WIRE_LEN];
    let header = NlMsgHdr {
        len: HostOrder(total as u32),
        kind: HostOrder(kind),
        flags: HostOrder(NLM_F_REQUEST),
        seq: HostOrder(seq),
        pid: HostOrder(0),
    };
    header
        .encode_into(&mut m)
        .expect("a header fits its buffer");
    m.extend(body);
    m
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
}
