//! A request as the engine keeps it while it waits or is in flight: about 80 bytes instead
//! of the 256-byte MAD and its destination (over 320 bytes).
//!
//! Discovery queues its whole breadth-first frontier and a counter sweep two reads per
//! port; at 100k HCAs the queued requests were tens of megabytes, each copied into the
//! queue and read back at its send long after, from memory no cache held. Yet a Get is
//! nearly all zeros: the common header (with an SMP's M_Key and directed-route LIDs), and
//! past it a short stretch at most (a directed route's hops; a PMA template's PortSelect
//! and CounterSelect). That is what is kept; a directed route is read back from the MAD's
//! own HopCount and InitialPath. Anything else (a Set with data, an SA query) is kept
//! whole, boxed.
//!
//! Requests are packed where they are made: a completion's follow-ups go into
//! [`FollowUps`], packed as pushed, and discovery aims a [`DirectedGet`] template into a
//! packed request without framing a MAD at all.

use super::request::Request;
use crate::attr::{PortCounters, PortSelected};
use crate::attribute::{Attribute, SubnMgt};
use crate::header::{MadHeader, MAD_SIZE};
use crate::smp::{aim_smp, DrPath, GmpFrame, SmpFrame, SmpRoute};
use crate::umad::Dest;

/// Bytes kept as they are: the common header (24), and an SMP's M_Key, DrSLID and DrDLID.
const HEAD: usize = 40;
/// The longest stretch of other bytes kept inline: a directed route of up to 15 hops.
const STRETCH: usize = 16;
/// Where a directed-route SMP holds its HopCount, and its InitialPath (whose element 0 is
/// unused: hop `i` leaves by element `i`).
const HOP_COUNT_AT: usize = SmpFrame::hop_count.spec.bit_offset / 8;
const INITIAL_PATH_AT: usize = SmpFrame::initial_path.spec.bit_offset / 8;
const MGMT_CLASS_AT: usize = MadHeader::mgmt_class.spec.bit_offset / 8;
const MODIFIER_AT: usize = MadHeader::attribute_modifier.spec.bit_offset / 8;
const _: () = assert!(HOP_COUNT_AT < HEAD && MODIFIER_AT + 4 <= HEAD);

/// The destination a request counts against: its LID (LID-routed SMPs and GMPs alike), or
/// its directed route. Two routes to one node count apart: discovery asks a known node
/// along one route.
pub(crate) fn dest_key(dest: &Dest) -> u64 {
    match dest {
        Dest::Smp(SmpRoute::Lid(lid)) | Dest::Gsi { lid, .. } => (1 << 63) | u64::from(*lid),
        Dest::Smp(SmpRoute::Directed(path)) => directed_key(path),
    }
}

/// [`dest_key`] of the directed route `path`.
pub(crate) fn directed_key(path: &DrPath) -> u64 {
    // FNV-1a over the hops; a collision only makes two routes share a cap.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in path.hops().iter().chain([path.len() as u8].iter()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h >> 1
}

/// A [`Request`]'s MAD and destination, packed (see the module's comment).
#[derive(Debug, Clone)]
pub(crate) enum PackedMad {
    Inline {
        head: [u8; HEAD],
        /// Where the stretch starts in the MAD and how long it is (0: all zero past the head).
        stretch_at: u8,
        stretch_len: u8,
        stretch: [u8; STRETCH],
        dest: PackedDest,
    },
    Whole(Box<Request>),
}

/// A destination, short of a directed route (read back from the MAD).
#[derive(Debug, Clone, Copy)]
pub(crate) enum PackedDest {
    Lid(u16),
    Directed,
    Gsi { lid: u16, qpn: u32, qkey: u32 },
}

impl PackedMad {
    pub(crate) fn pack(request: &Request) -> PackedMad {
        let mad = &request.mad;
        let dest = match &request.dest {
            Dest::Smp(SmpRoute::Lid(lid)) => PackedDest::Lid(*lid),
            Dest::Smp(SmpRoute::Directed(path)) if route_in_mad(mad, path) => PackedDest::Directed,
            Dest::Gsi { lid, qpn, qkey } => PackedDest::Gsi {
                lid: *lid,
                qpn: *qpn,
                qkey: *qkey,
            },
            Dest::Smp(SmpRoute::Directed(_)) => return PackedMad::Whole(Box::new(request.clone())),
        };
        let (stretch_at, stretch_len) = nonzero_stretch(mad);
        if stretch_len > STRETCH {
            return PackedMad::Whole(Box::new(request.clone()));
        }
        let mut head = [0; HEAD];
        head.copy_from_slice(&mad[..HEAD]);
        let mut stretch = [0; STRETCH];
        stretch[..stretch_len].copy_from_slice(&mad[stretch_at..stretch_at + stretch_len]);
        PackedMad::Inline {
            head,
            // HEAD + 216 at most: a byte holds it.
            stretch_at: stretch_at as u8,
            stretch_len: stretch_len as u8,
            stretch,
            dest,
        }
    }

    /// The MAD into `mad` (every byte written), and its destination.
    pub(crate) fn unpack_into(&self, mad: &mut [u8; MAD_SIZE]) -> Dest {
        match self {
            PackedMad::Inline {
                head,
                stretch_at,
                stretch_len,
                stretch,
                dest,
            } => {
                mad.fill(0);
                mad[..HEAD].copy_from_slice(head);
                let (at, len) = (usize::from(*stretch_at), usize::from(*stretch_len));
                mad[at..at + len].copy_from_slice(&stretch[..len]);
                match *dest {
                    PackedDest::Lid(lid) => Dest::Smp(SmpRoute::Lid(lid)),
                    PackedDest::Directed => Dest::Smp(SmpRoute::Directed(route_of(mad))),
                    PackedDest::Gsi { lid, qpn, qkey } => Dest::Gsi { lid, qpn, qkey },
                }
            }
            PackedMad::Whole(request) => {
                *mad = request.mad;
                request.dest.clone()
            }
        }
    }

    /// The request as it was handed in.
    pub(crate) fn unpack(&self) -> Request {
        let mut mad = [0; MAD_SIZE];
        let dest = self.unpack_into(&mut mad);
        Request { mad, dest }
    }

    pub(crate) fn mgmt_class(&self) -> u8 {
        match self {
            PackedMad::Inline { head, .. } => head[MGMT_CLASS_AT],
            PackedMad::Whole(request) => request.mgmt_class(),
        }
    }

    /// Hops of its directed route; `None` for any other destination.
    pub(crate) fn route_len(&self) -> Option<usize> {
        match self {
            PackedMad::Inline {
                head,
                dest: PackedDest::Directed,
                ..
            } => Some(usize::from(head[HOP_COUNT_AT])),
            PackedMad::Whole(request) => match &request.dest {
                Dest::Smp(SmpRoute::Directed(path)) => Some(path.len()),
                _ => None,
            },
            PackedMad::Inline { .. } => None,
        }
    }
}

/// The head of a request framed to be a template: nothing past the head but what the
/// template adds itself (a route, a PortSelect).
fn template_head(framed: &Request) -> [u8; HEAD] {
    debug_assert!(framed.mad[HEAD..].iter().all(|&b| b == 0));
    let mut head = [0; HEAD];
    head.copy_from_slice(&framed.mad[..HEAD]);
    head
}

/// A Get SMP of one attribute, framed once along the empty route: [`DirectedGet::along`]
/// makes the packed request along a route with a modifier without framing a 256-byte MAD
/// (discovery makes a million of them at 100k HCAs).
#[derive(Debug, Clone)]
pub struct DirectedGet {
    head: [u8; HEAD],
}

impl DirectedGet {
    pub fn new<A: Attribute<Class = SubnMgt>>() -> DirectedGet {
        let framed = Request::get::<A>(&SmpRoute::Directed(DrPath::local()), 0);
        DirectedGet {
            head: template_head(&framed),
        }
    }

    /// The Get along `path` with `modifier`: what `Request::get::<A>` frames for that route
    /// and modifier, packed.
    pub fn along(&self, path: &DrPath, modifier: u32) -> PackedRequest {
        let hops = path.hops();
        let mut head = self.head;
        head[MODIFIER_AT..MODIFIER_AT + 4].copy_from_slice(&modifier.to_be_bytes());
        let request = if hops.len() <= STRETCH {
            // What `aim_smp` writes, kept packed: the hop count in the head, the hops as
            // the stretch.
            head[HOP_COUNT_AT] = hops.len() as u8;
            let mut stretch = [0; STRETCH];
            stretch[..hops.len()].copy_from_slice(hops);
            PackedMad::Inline {
                head,
                stretch_at: (INITIAL_PATH_AT + 1) as u8,
                stretch_len: hops.len() as u8,
                stretch,
                dest: PackedDest::Directed,
            }
        } else {
            let mut mad = [0; MAD_SIZE];
            mad[..HEAD].copy_from_slice(&head);
            aim_smp(&mut mad, path);
            PackedMad::Whole(Box::new(Request {
                mad,
                dest: Dest::Smp(SmpRoute::Directed(path.clone())),
            }))
        };
        PackedRequest {
            dest: directed_key(path),
            request,
        }
    }
}

/// A PerfMgt Get of one attribute that selects a port by its PortSelect (PortCounters,
/// PortCountersExtended), framed once: [`PortSelectGet::to`] makes the packed Get of one
/// port at one LID without framing and encoding a 256-byte MAD (a counter sweep makes two
/// per port, 2.4M at 100k HCAs).
#[derive(Debug, Clone)]
pub struct PortSelectGet {
    head: [u8; HEAD],
    qpn: u32,
    qkey: u32,
}

/// Where a PMA attribute's PortSelect is in the MAD (byte 1 of the attribute data; every
/// port-selected attribute has it there, which `PortSelectGet::new` checks).
const PORT_SELECT_AT: usize =
    (GmpFrame::data.spec.bit_offset + PortCounters::port_select.spec.bit_offset) / 8;

impl PortSelectGet {
    /// From the Get of `A` with PortSelect 0 and nothing else set, as `Request::get`
    /// frames it.
    pub fn new<A: PortSelected>() -> PortSelectGet {
        let framed = Request::get::<A>(&0, 0);
        let head = template_head(&framed);
        debug_assert_eq!(
            Request::get_with::<A>(&0, 0, &A::selecting(0xab, 0)).mad[PORT_SELECT_AT],
            0xab
        );
        let (qpn, qkey) = match framed.dest {
            Dest::Gsi { qpn, qkey, .. } => (qpn, qkey),
            Dest::Smp(_) => unreachable!("a PerfMgt request goes to a GSI"),
        };
        PortSelectGet { head, qpn, qkey }
    }

    /// The Get of port `port_select` from the PMA at `lid`: what `Request::get_with`
    /// frames with a template holding only that PortSelect, packed.
    pub fn to(&self, lid: u16, port_select: u8) -> PackedRequest {
        let mut stretch = [0; STRETCH];
        stretch[0] = port_select;
        let dest = Dest::Gsi {
            lid,
            qpn: self.qpn,
            qkey: self.qkey,
        };
        PackedRequest {
            dest: dest_key(&dest),
            request: PackedMad::Inline {
                head: self.head,
                stretch_at: PORT_SELECT_AT as u8,
                stretch_len: 1,
                stretch,
                dest: PackedDest::Gsi {
                    lid,
                    qpn: self.qpn,
                    qkey: self.qkey,
                },
            },
        }
    }
}

/// A request packed where it was made ([`DirectedGet::along`], [`PortSelectGet::to`], or
/// from a [`Request`]), with its destination's key for the caps per destination.
#[derive(Debug, Clone)]
pub struct PackedRequest {
    dest: u64,
    request: PackedMad,
}

impl PackedRequest {
    /// The request, framed whole (for an executor that answers MADs itself).
    pub fn to_request(&self) -> Request {
        self.request.unpack()
    }

    /// Its destination's key and the request, as the ledger keeps them.
    pub(crate) fn into_parts(self) -> (u64, PackedMad) {
        (self.dest, self.request)
    }
}

impl From<Request> for PackedRequest {
    fn from(request: Request) -> PackedRequest {
        PackedRequest::from(&request)
    }
}

impl From<&Request> for PackedRequest {
    fn from(request: &Request) -> PackedRequest {
        PackedRequest {
            dest: dest_key(&request.dest),
            request: PackedMad::pack(request),
        }
    }
}

/// The requests a completion adds to the running batch ([`super::Engine::run`]), packed as
/// they are pushed: a follow-up's MAD is not copied whole on its way to the ledger.
#[derive(Debug)]
pub struct FollowUps<T> {
    items: Vec<(T, PackedRequest)>,
}

impl<T> Default for FollowUps<T> {
    fn default() -> Self {
        FollowUps { items: Vec::new() }
    }
}

impl<T> FollowUps<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A follow-up, `(token, request)` as a list of pairs takes it.
    pub fn push(&mut self, (token, request): (T, Request)) {
        self.items.push((token, PackedRequest::from(&request)));
    }

    /// A follow-up packed already.
    pub fn push_packed(&mut self, token: T, request: PackedRequest) {
        self.items.push((token, request));
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Every follow-up in the order pushed, framed whole: for executors that answer
    /// requests one by one themselves (tests' fakes).
    pub fn drain(&mut self) -> impl Iterator<Item = (T, Request)> + '_ {
        self.items
            .drain(..)
            .map(|(token, packed)| (token, packed.to_request()))
    }

    /// Every follow-up in the order pushed, as packed (for the engine, or a batch of its
    /// own).
    pub fn drain_packed(&mut self) -> std::vec::Drain<'_, (T, PackedRequest)> {
        self.items.drain(..)
    }
}

/// Where the bytes past the head that are not zero start, and how far they reach: (HEAD,
/// 0) when all are zero. Word by word, as a million requests are packed in a sweep.
fn nonzero_stretch(mad: &[u8; MAD_SIZE]) -> (usize, usize) {
    const WORD: usize = 8;
    const _: () = assert!((MAD_SIZE - HEAD) % WORD == 0);
    let start = |i: usize| HEAD + i * WORD;
    let bytes = |i: usize| &mad[start(i)..start(i + 1)];
    // A word at a time: the compiler makes one load and compare of it.
    let nonzero = |i: usize| u64::from_ne_bytes(std::array::from_fn(|k| bytes(i)[k])) != 0;
    let words = (MAD_SIZE - HEAD) / WORD;
    let Some(first_word) = (0..words).find(|&i| nonzero(i)) else {
        return (HEAD, 0);
    };
    let last_word = (first_word..words).rev().find(|&i| nonzero(i));
    let last_word = last_word.unwrap_or(first_word);
    let first = bytes(first_word).iter().position(|&b| b != 0);
    let last = bytes(last_word).iter().rposition(|&b| b != 0);
    let first = start(first_word) + first.unwrap_or(0);
    let last = start(last_word) + last.unwrap_or(0);
    (first, last - first + 1)
}

/// `mad` carries `path` as its HopCount and InitialPath (as every directed-route SMP this
/// crate frames does), so the route can be read back from it.
fn route_in_mad(mad: &[u8; MAD_SIZE], path: &DrPath) -> bool {
    let hops = path.hops();
    usize::from(mad[HOP_COUNT_AT]) == hops.len()
        && mad.get(INITIAL_PATH_AT + 1..INITIAL_PATH_AT + 1 + hops.len()) == Some(hops)
}

/// The directed route a MAD's HopCount and InitialPath give.
fn route_of(mad: &[u8; MAD_SIZE]) -> DrPath {
    let hops = usize::from(mad[HOP_COUNT_AT]);
    let path = mad.get(INITIAL_PATH_AT + 1..INITIAL_PATH_AT + 1 + hops);
    // Packed only when the route read back equals the one handed in: it fits.
    path.and_then(|p| DrPath::from_hops(p).ok())
        .unwrap_or_else(DrPath::local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::{NodeInfo, PortCounters, PortInfo};
    use proptest::prelude::*;

    fn round_trip(request: &Request) -> PackedMad {
        let packed = PackedMad::pack(request);
        assert_eq!(&packed.unpack(), request);
        assert_eq!(packed.mgmt_class(), request.mgmt_class());
        packed
    }

    /// The requests the tools send are kept inline, and come back byte for byte.
    #[test]
    fn gets_are_kept_inline() {
        let path = DrPath::from_hops(&[1, 3, 17, 255, 2]).unwrap();
        let template = PortCounters {
            port_select: 7,
            counter_select: 0xffff,
            ..Default::default()
        };
        for request in [
            Request::get::<NodeInfo>(&SmpRoute::Directed(path.clone()), 0),
            Request::get::<NodeInfo>(&SmpRoute::Directed(DrPath::local()), 0),
            Request::get::<PortInfo>(&SmpRoute::Lid(0xbfff), 0x8000_0003),
            Request::get_with::<PortCounters>(&0x1234, 0, &template),
            Request::get::<PortCounters>(&1, 0),
        ] {
            let packed = round_trip(&request);
            assert!(matches!(packed, PackedMad::Inline { .. }), "{request:?}");
        }
        let deep =
            Request::get::<NodeInfo>(&SmpRoute::Directed(DrPath::from_hops(&[9; 15]).unwrap()), 0);
        assert_eq!(round_trip(&deep).route_len(), Some(15));
        assert!(std::mem::size_of::<PackedMad>() <= 80);
    }

    /// What does not fit (a route past 15 hops, data over more than 16 bytes, a route the
    /// MAD does not carry) is kept whole, and comes back as it was too.
    #[test]
    fn the_rest_is_kept_whole() {
        let long = SmpRoute::Directed(DrPath::from_hops(&[2; 20]).unwrap());
        let mut elsewhere = Request::get::<NodeInfo>(&SmpRoute::Directed(DrPath::local()), 0);
        elsewhere.dest = Dest::Smp(SmpRoute::Directed(DrPath::from_hops(&[4]).unwrap()));
        let mut spread = Request::get::<PortInfo>(&SmpRoute::Lid(3), 1);
        spread.mad[70] = 1;
        spread.mad[90] = 2;
        for request in [Request::get::<NodeInfo>(&long, 0), spread, elsewhere] {
            let packed = round_trip(&request);
            assert!(matches!(packed, PackedMad::Whole(_)), "{request:?}");
        }
    }

    /// Follow-ups come out in the order pushed, framed as they went in, each packed with
    /// its destination's key, whether pushed framed or packed.
    #[test]
    fn follow_ups_keep_their_order_and_requests() {
        let along = DrPath::from_hops(&[1, 4]).unwrap();
        let framed = [
            Request::get::<PortInfo>(&SmpRoute::Lid(7), 3),
            Request::get::<NodeInfo>(&SmpRoute::Directed(along.clone()), 0),
        ];
        let filled = || {
            let mut follow_ups = FollowUps::new();
            follow_ups.push((0, framed[0].clone()));
            follow_ups.push_packed(1, DirectedGet::new::<NodeInfo>().along(&along, 0));
            follow_ups.push((2, framed[1].clone()));
            follow_ups
        };
        let keys: Vec<u64> = filled()
            .drain_packed()
            .map(|(_, packed)| packed.dest)
            .collect();
        let want = [&framed[0], &framed[1], &framed[1]].map(|r| dest_key(&r.dest));
        assert_eq!(keys, want);
        let mut follow_ups = filled();
        assert_eq!(follow_ups.len(), 3);
        let out: Vec<(u8, Request)> = follow_ups.drain().collect();
        assert!(follow_ups.is_empty());
        let want = [(0, &framed[0]), (1, &framed[1]), (2, &framed[1])];
        assert_eq!(out, want.map(|(t, r)| (t, r.clone())));
    }

    proptest! {
        /// A Get aimed from a template is the one `Request::get` frames along that route
        /// with that modifier, counted against the same destination; a route too long to
        /// keep inline is kept whole.
        #[test]
        fn directed_gets_are_what_request_get_frames(
            hops in proptest::collection::vec(1u8..=255, 0..40),
            modifier in any::<u32>(),
        ) {
            let path = DrPath::from_hops(&hops).unwrap();
            let route = SmpRoute::Directed(path.clone());
            let templates = [
                (DirectedGet::new::<PortInfo>(), Request::get::<PortInfo>(&route, modifier)),
                (DirectedGet::new::<NodeInfo>(), Request::get::<NodeInfo>(&route, modifier)),
            ];
            for (template, framed) in templates {
                let aimed = template.along(&path, modifier);
                prop_assert_eq!(aimed.to_request(), framed.clone());
                prop_assert_eq!(aimed.dest, dest_key(&framed.dest));
                prop_assert_eq!(aimed.request.route_len(), Some(hops.len()));
                prop_assert_eq!(
                    matches!(aimed.request, PackedMad::Whole(_)),
                    hops.len() > STRETCH
                );
            }
        }

        /// Any MAD to any destination comes back as it was handed in.
        #[test]
        fn any_request_comes_back(
            bytes in proptest::collection::vec(any::<u8>(), MAD_SIZE),
            // Past the head, zero but for a stretch at `at`, as in real requests: up to
            // 16 bytes are kept inline, longer ones whole.
            at in HEAD..MAD_SIZE,
            len in 0usize..24,
            hops in proptest::collection::vec(any::<u8>(), 0..20),
            kind in 0u8..3,
            in_mad in any::<bool>(),
        ) {
            let mut mad = [0u8; MAD_SIZE];
            for (i, &b) in bytes.iter().enumerate() {
                if i < HEAD || (at..at + len).contains(&i) {
                    mad[i] = b;
                }
            }
            let path = DrPath::from_hops(&hops).unwrap();
            if in_mad {
                mad[HOP_COUNT_AT] = hops.len() as u8;
                mad[INITIAL_PATH_AT + 1..INITIAL_PATH_AT + 1 + hops.len()].copy_from_slice(&hops);
            }
            let dest = match kind {
                0 => Dest::Smp(SmpRoute::Lid(u16::from_be_bytes([bytes[0], bytes[1]]))),
                1 => Dest::Smp(SmpRoute::Directed(path)),
                _ => Dest::Gsi { lid: 5, qpn: 1, qkey: 0x8001_0000 },
            };
            round_trip(&Request { mad, dest });
        }
    }
}
