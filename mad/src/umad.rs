//! The libibumad transport: a hand-written FFI to the few calls ibscope needs and a safe
//! [`UmadPort`] around one opened CA port.
//!
//! Device facts are read through libibumad (`umad_get_ca`), never from sysfs directly: the
//! simulator shim (libumad2sim) intercepts libc's `open`/`opendir` but not the `open64` Rust's
//! std uses, so a std::fs read of /sys/class/infiniband would see the real (empty) machine.

use std::ffi::{c_char, c_int, c_long, c_uint, c_void, CString};
use std::sync::{Arc, OnceLock};

use thiserror::Error;

use crate::attr::{PhysState, PortState};
use crate::header::MAD_SIZE;
use crate::smp::{SmpRoute, PERMISSIVE_LID};
use crate::wire::HostOrder;
use crate::wire_struct;

/// PortInfo CapabilityMask bit IsSMDisabled (IB spec 14.2.5.6; `CAPMASK_IS_SM_DISABLED`
/// in libibumad/umad.c).
const CAPABILITY_IS_SM_DISABLED: u32 = 0x400;

/// `UMAD_CA_NAME_LEN` in umad.h.
const CA_NAME_LEN: usize = 20;
/// `UMAD_CA_MAX_PORTS` in umad.h (ports 0..=9 of one CA).
const CA_MAX_PORTS: usize = 10;
/// `UMAD_MAX_DEVICES` in umad.h.
const MAX_DEVICES: usize = 32;
/// Queue key of the general services interface (QP1) for every class but SMI (IBA 13.5.3.1).
pub const GSI_QKEY: u32 = 0x8001_0000;

wire_struct! {
    /// `struct ib_user_mad` (umad.h) without its data: the header the kernel and libibumad
    /// put before every MAD. Its five leading words and the P_Key index are the host's
    /// integers ([`HostOrder`]); the address fields (`struct ib_mad_addr`) are big-endian, as on
    /// the wire. Names as in umad.h; offsets as gcc's offsetof gives them (tested).
    pub struct UmadHeader (64) {
        pub agent_id: HostOrder<u32> = 0, 32, "agent_id";
        /// 0, or an errno for a send given back (ETIMEDOUT: nobody answered).
        pub status: HostOrder<u32> = 32, 32, "status";
        pub timeout_ms: HostOrder<u32> = 64, 32, "timeout_ms";
        pub retries: HostOrder<u32> = 96, 32, "retries";
        pub length: HostOrder<u32> = 128, 32, "length";
        pub qpn: u32 = 160, 32, "qpn";
        pub qkey: u32 = 192, 32, "qkey";
        pub lid: u16 = 224, 16, "lid";
        pub sl: u8 = 240, 8, "sl";
        pub path_bits: u8 = 248, 8, "path_bits";
        pub grh_present: u8 = 256, 8, "grh_present";
        pub gid_index: u8 = 264, 8, "gid_index";
        pub hop_limit: u8 = 272, 8, "hop_limit";
        pub traffic_class: u8 = 280, 8, "traffic_class";
        pub gid: [u8; 16] = 288, 128, "gid";
        pub flow_label: u32 = 416, 32, "flow_label";
        pub pkey_index: HostOrder<u16> = 448, 16, "pkey_index";
    }
}

/// The umad header's size: the MAD follows it. libibumad reports the same via `umad_size()`
/// once a port is open.
pub const UMAD_HEADER_LEN: usize = UmadHeader::WIRE_LEN;

/// `struct umad_port` (umad.h). Layout checked against gcc's offsetof: 112 bytes, port_guid
/// at 64, pkeys at 80, link_layer at 88.
#[repr(C)]
struct RawPort {
    ca_name: [c_char; CA_NAME_LEN],
    portnum: c_int,
    base_lid: c_uint,
    lmc: c_uint,
    sm_lid: c_uint,
    sm_sl: c_uint,
    state: c_uint,
    phys_state: c_uint,
    rate: c_uint,
    capmask: u32,
    gid_prefix: u64,
    port_guid: u64,
    pkeys_size: c_uint,
    pkeys: *mut u16,
    link_layer: [c_char; CA_NAME_LEN],
}

/// `struct umad_ca` (umad.h): 208 bytes, node_guid at 112, ports at 128.
#[repr(C)]
struct RawCa {
    ca_name: [c_char; CA_NAME_LEN],
    node_type: c_uint,
    numports: c_int,
    fw_ver: [c_char; 20],
    ca_type: [c_char; 40],
    hw_ver: [c_char; 20],
    node_guid: u64,
    system_guid: u64,
    ports: [*mut RawPort; CA_MAX_PORTS],
}

#[link(name = "ibumad")]
extern "C" {
    fn umad_init() -> c_int;
    fn umad_get_cas_names(cas: *mut [c_char; CA_NAME_LEN], max: c_int) -> c_int;
    fn umad_get_ca(ca_name: *const c_char, ca: *mut RawCa) -> c_int;
    fn umad_release_ca(ca: *mut RawCa) -> c_int;
    fn umad_open_port(ca_name: *const c_char, portnum: c_int) -> c_int;
    fn umad_close_port(portid: c_int) -> c_int;
    fn umad_size() -> usize;
    fn umad_register(
        portid: c_int,
        mgmt_class: c_int,
        mgmt_version: c_int,
        rmpp_version: u8,
        method_mask: *mut c_long,
    ) -> c_int;
    fn umad_unregister(portid: c_int, agentid: c_int) -> c_int;
    fn umad_send(
        portid: c_int,
        agentid: c_int,
        umad: *mut c_void,
        length: c_int,
        timeout_ms: c_int,
        retries: c_int,
    ) -> c_int;
    fn umad_recv(portid: c_int, umad: *mut c_void, length: *mut c_int, timeout_ms: c_int) -> c_int;
}

/// Failures of the transport, worded so a user knows what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TransportError {
    #[error(
        "no InfiniBand device found: check that the ib_umad module is loaded and \
         /dev/infiniband/umad* exist"
    )]
    NoDevice,
    #[error("InfiniBand device {name:?} not found (available: {})", available.join(", "))]
    CaNotFound {
        name: String,
        available: Vec<String>,
    },
    #[error("{ca} has no port {port} (ports: {})", list_ports(available))]
    PortNotFound {
        ca: String,
        port: u8,
        available: Vec<u8>,
    },
    #[error("{ca} port {port} is down: check the cable and the peer port")]
    PortDown { ca: String, port: u8 },
    #[error("{ca} port {port} has link layer {link_layer}: subnet management needs InfiniBand")]
    NotInfiniBand {
        ca: String,
        port: u8,
        link_layer: String,
    },
    #[error(
        "permission denied opening {ca} port {port}: run as root or join the group owning \
         /dev/infiniband/umad*"
    )]
    PermissionDenied { ca: String, port: u8 },
    #[error("cannot open {ca} port {port}: {}", errno_text(*errno))]
    Open { ca: String, port: u8, errno: i32 },
    #[error(
        "libibumad reports a {got}-byte umad header, this build expects {UMAD_HEADER_LEN}: \
         unsupported libibumad ABI"
    )]
    HeaderSize { got: usize },
    #[error("cannot register a MAD agent for class {mgmt_class:#04x} version {version}: {}", errno_text(*errno))]
    Register {
        mgmt_class: u8,
        version: u8,
        errno: i32,
    },
    /// A fabric reached through a relay command (`ibscope agent`) that could not be used.
    #[error("fabric command `{command}`: {reason}")]
    Relay { command: String, reason: String },
    #[error("sending a MAD failed: {}", errno_text(*errno))]
    Send { errno: i32 },
    #[error("receiving a MAD failed: {}", errno_text(*errno))]
    Recv { errno: i32 },
}

fn list_ports(ports: &[u8]) -> String {
    let v: Vec<String> = ports.iter().map(u8::to_string).collect();
    v.join(", ")
}

/// strerror text of a (positive) errno.
pub fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

/// strerror text without std's " (os error N)" suffix, for messages meant for people.
pub fn errno_description(errno: i32) -> String {
    let text = errno_text(errno);
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Whether an errno from `umad_send`/`umad_recv` means the transport itself is gone, not
/// one MAD: the kernel answers EIO (or ENODEV/ENXIO) once the device was removed, and the
/// simulator shim's socket to a dead ibsim fails (measured: `umad_send` returns -EIO once
/// ibsim is killed; the socket errors proper are listed for other shim builds).
pub fn is_transport_gone(errno: i32) -> bool {
    [
        libc::EIO,
        libc::ENODEV,
        libc::ENXIO,
        libc::EBADF,
        libc::EPIPE,
        libc::ECONNREFUSED,
        libc::ECONNRESET,
        libc::ENOTCONN,
        libc::ESHUTDOWN,
    ]
    .contains(&errno)
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Facts about the local port an engine talks through.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LocalPort {
    pub ca_name: String,
    /// "simulator" under libumad2sim; the HCA model otherwise.
    pub ca_type: String,
    #[serde(with = "crate::codes::guid")]
    pub node_guid: u64,
    pub port_num: u8,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub state: PortState,
    pub phys_state: PhysState,
    #[serde(with = "crate::codes::guid")]
    pub port_guid: u64,
    /// "IB" or "Ethernet" (RoCE ports cannot carry SMPs).
    pub link_layer: String,
    /// PortInfo CapabilityMask's IsSMDisabled: on a port that shares its port GUID with
    /// others (a planarized HCA port), the GSI-only device, which carries no SMPs
    /// (libibumad/umad.c, `is_smi_disabled` and `umad_get_smi_gsi_pairs`). Not relayed.
    #[serde(skip)]
    pub sm_disabled: bool,
}

impl LocalPort {
    /// A port as libibumad lists it, known only by CA, number, state and link layer; GUIDs,
    /// LIDs and LMC zero, physically LinkUp. What plans and tests of port selection need.
    pub fn listed(ca_name: &str, port_num: u8, state: PortState, link_layer: &str) -> LocalPort {
        LocalPort {
            ca_name: ca_name.into(),
            ca_type: String::new(),
            node_guid: 0,
            port_num,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            state,
            phys_state: PhysState::LinkUp,
            port_guid: 0,
            link_layer: link_layer.into(),
            sm_disabled: false,
        }
    }

    /// True under the ibsim shim, which fakes a CA of type "simulator".
    pub fn is_simulator(&self) -> bool {
        self.ca_type == "simulator"
    }
}

/// Where a MAD goes. SMPs travel on QP0 (LID routed: to the LID; directed route: to the
/// permissive LID), everything else on QP1 with a queue key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dest {
    Smp(SmpRoute),
    Gsi { lid: u16, qpn: u32, qkey: u32 },
}

impl Dest {
    /// Destination LID, QP and Q_Key as the umad address header wants them.
    pub fn address(&self) -> (u16, u32, u32) {
        match self {
            Dest::Smp(SmpRoute::Lid(lid)) => (*lid, 0, 0),
            Dest::Smp(SmpRoute::Directed(_)) => (PERMISSIVE_LID, 0, 0),
            Dest::Gsi { lid, qpn, qkey } => (*lid, *qpn, *qkey),
        }
    }
}

/// One MAD read from the port.
#[derive(Debug, Clone)]
pub struct Received {
    /// Agent the reply was delivered to.
    pub agent: u32,
    /// umad header status: 0, or an errno for a send that failed (110 = ETIMEDOUT: the
    /// request came back unanswered, e.g. a dead directed-route port).
    pub status: i32,
    /// Bytes of MAD received: 256 for a whole MAD; fewer when the sender sent a short one
    /// (an SA reply under the simulator, or a lone RMPP segment the kernel cut to its
    /// payload); more for an RMPP transfer the kernel reassembled.
    pub len: usize,
    /// The first 256 bytes, zero-padded if `len` is shorter.
    pub mad: [u8; MAD_SIZE],
    /// The bytes after the first 256 of a reassembled RMPP transfer (the data of its
    /// further segments, one after the other); empty otherwise (no allocation).
    pub tail: Vec<u8>,
}

/// What `umad_register` is called with for one management class. libibmad registers the
/// SA class, and only it, with RMPP version 1 (rpc.c, `mad_rpc_open_port`): the kernel then
/// answers the segments' ACKs and hands a GetTable reply over whole, however many MADs it
/// took. Without it a real kernel delivers no multi-segment reply at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub mgmt_class: u8,
    pub version: u8,
    pub rmpp_version: u8,
}

impl Registration {
    pub fn for_class(mgmt_class: u8, version: u8) -> Registration {
        Registration {
            mgmt_class,
            version,
            rmpp_version: u8::from(mgmt_class == crate::header::class::SUBN_ADM),
        }
    }
}

/// How many bytes of a MAD the simulator's shim delivers intact: its receiver queues each
/// MAD in a buffer of `sizeof(struct sim_request)` (288 bytes) laid out as a umad (64-byte
/// header), so it copies only the first 224 bytes of the MAD, and the read that hands the
/// MAD over copies 320 bytes out of those 288 (umad2sim.c, `__receiver` and
/// `umad2sim_read`): bytes 224 to 255 are whatever lies after that buffer on the heap.
/// Nothing ibscope reads from an SMP or a PMA lies there; an SA reply cut to one MAD does.
pub const SIMULATOR_INTACT_MAD_BYTES: usize = 224;

/// The largest reply a receive buffer grows to (1 GiB): the kernel reports the size a
/// reassembled RMPP reply needs, and anything larger than this is refused rather than
/// allocated (an SA table of a fabric with 4,000 end ports' every path is 1 GiB).
pub const MAX_REPLY_LEN: usize = 1 << 30;

/// A receive buffer of the default size: the umad header and one MAD. u64 elements keep it
/// 8-byte aligned, like calloc's.
fn default_rx() -> Vec<u64> {
    vec![0u64; (UMAD_HEADER_LEN + MAD_SIZE) / 8]
}

/// An opened local CA port with its umad file descriptor.
#[derive(Debug)]
pub struct UmadPort {
    fd: Arc<PortFd>,
    info: LocalPort,
    /// Receive buffer, kept to avoid an allocation per MAD; grows when a reassembled RMPP
    /// reply needs more (see [`recv_growing`]) and shrinks back after it.
    rx: Vec<u64>,
}

/// The umad port id, closed when the last holder ([`UmadPort`], [`UmadReceiver`]) drops.
#[derive(Debug)]
struct PortFd(c_int);

impl Drop for PortFd {
    fn drop(&mut self) {
        // Closing the fd unregisters any agent left; the engine unregisters after draining.
        // SAFETY: the id came from umad_open_port and is closed once, by its last holder.
        unsafe { umad_close_port(self.0) };
    }
}

/// The receiving half of a [`UmadPort`] for another thread (`ibscope agent` reads replies
/// while its main thread sends): `umad_recv` and `umad_send` on one fd may run at once.
#[derive(Debug)]
pub struct UmadReceiver {
    fd: Arc<PortFd>,
    rx: Vec<u64>,
}

impl UmadReceiver {
    /// Wait up to `timeout_ms` (0: just poll) for one MAD.
    pub fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        recv_into(self.fd.0, &mut self.rx, timeout_ms)
    }
}

fn init_library() {
    static INIT: OnceLock<c_int> = OnceLock::new();
    INIT.get_or_init(|| {
        // The first look at the devices is where the simulator's shim attaches to ibsim
        // and announces it on stderr: keep that line off the terminal.
        crate::shim_stderr::capture(|| {
            // umad_init only checks the ABI version today; its failure shows up as "no
            // device" later.
            // SAFETY: no arguments; safe to call at any time, once suffices.
            let ret = unsafe { umad_init() };
            let mut names = [[0 as c_char; CA_NAME_LEN]; MAX_DEVICES];
            // SAFETY: the buffer holds MAX_DEVICES names of CA_NAME_LEN bytes, as the call
            // is told.
            unsafe { umad_get_cas_names(names.as_mut_ptr(), MAX_DEVICES as c_int) };
            ret
        })
    });
}

fn c_text(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Names of the CAs libibumad knows, in its order.
pub fn ca_names() -> Vec<String> {
    init_library();
    let mut names = [[0 as c_char; CA_NAME_LEN]; MAX_DEVICES];
    // SAFETY: the buffer holds MAX_DEVICES names of CA_NAME_LEN bytes, as the call is told.
    let n = unsafe { umad_get_cas_names(names.as_mut_ptr(), MAX_DEVICES as c_int) };
    let n = usize::try_from(n).unwrap_or(0).min(MAX_DEVICES);
    names[..n].iter().map(|n| c_text(n)).collect()
}

/// Every port of one CA, in port-number order.
pub fn ca_ports(ca: &str) -> Result<Vec<LocalPort>, TransportError> {
    init_library();
    let not_found = || TransportError::CaNotFound {
        name: ca.to_string(),
        available: ca_names(),
    };
    let name = CString::new(ca).map_err(|_| not_found())?;
    // SAFETY: RawCa is plain data (integers, arrays, raw pointers); all-zero is valid.
    let mut raw: RawCa = unsafe { std::mem::zeroed() };
    // SAFETY: name is NUL-terminated; raw is a correctly laid out umad_ca_t.
    if unsafe { umad_get_ca(name.as_ptr(), &mut raw) } < 0 {
        return Err(not_found());
    }
    let ca_name = c_text(&raw.ca_name);
    let ca_type = c_text(&raw.ca_type);
    let node_guid = u64::from_be(raw.node_guid);
    let mut ports = Vec::new();
    for &p in raw.ports.iter() {
        if p.is_null() {
            continue;
        }
        // SAFETY: non-null entries point to umad_port_t filled by umad_get_ca and stay
        // valid until umad_release_ca below.
        let p = unsafe { &*p };
        ports.push(LocalPort {
            ca_name: ca_name.clone(),
            ca_type: ca_type.clone(),
            node_guid,
            port_num: u8::try_from(p.portnum).unwrap_or(0),
            lid: u16::try_from(p.base_lid).unwrap_or(0),
            sm_lid: u16::try_from(p.sm_lid).unwrap_or(0),
            lmc: u8::try_from(p.lmc).unwrap_or(0),
            state: PortState::from_code(u8::try_from(p.state).unwrap_or(u8::MAX)),
            phys_state: PhysState::from_code(u8::try_from(p.phys_state).unwrap_or(u8::MAX)),
            port_guid: u64::from_be(p.port_guid),
            link_layer: c_text(&p.link_layer),
            // libibumad keeps cap_mask in network order (umad.c converts it with be32toh).
            sm_disabled: u32::from_be(p.capmask) & CAPABILITY_IS_SM_DISABLED != 0,
        });
    }
    // SAFETY: raw was filled by a successful umad_get_ca.
    unsafe { umad_release_ca(&mut raw) };
    ports.sort_by_key(|p| p.port_num);
    Ok(ports)
}

/// Whether a port can carry subnet management traffic at all.
pub fn is_ib(p: &LocalPort) -> bool {
    // Older kernels have no link_layer file: libibumad then leaves it empty, which means IB.
    p.link_layer.is_empty() || p.link_layer == "IB" || p.link_layer == "InfiniBand"
}

/// Pick the port `open` uses: the named one, else the first active InfiniBand port of the
/// named (or any) CA, else the first InfiniBand port of the first CA. `cas` as
/// [`ca_names`] and [`ca_ports`] give them.
pub fn choose_port(
    cas: &[(String, Vec<LocalPort>)],
    ca: Option<&str>,
    port: Option<u8>,
) -> Result<LocalPort, TransportError> {
    let candidates: Vec<&(String, Vec<LocalPort>)> = match ca {
        Some(name) => {
            let found: Vec<_> = cas.iter().filter(|(n, _)| n == name).collect();
            if found.is_empty() {
                return Err(TransportError::CaNotFound {
                    name: name.to_string(),
                    available: cas.iter().map(|(n, _)| n.clone()).collect(),
                });
            }
            found
        }
        None => cas.iter().collect(),
    };
    if candidates.is_empty() {
        return Err(TransportError::NoDevice);
    }
    let chosen = if let Some(number) = port {
        // An explicit port: only look at the first candidate CA (the named one, or the first).
        let (name, ports) = candidates[0];
        let p = ports.iter().find(|p| p.port_num == number).ok_or_else(|| {
            TransportError::PortNotFound {
                ca: name.clone(),
                port: number,
                available: ports.iter().map(|p| p.port_num).collect(),
            }
        })?;
        if !is_ib(p) {
            return Err(TransportError::NotInfiniBand {
                ca: name.clone(),
                port: number,
                link_layer: p.link_layer.clone(),
            });
        }
        p.clone()
    } else {
        let all_ib = || {
            candidates
                .iter()
                .flat_map(|(_, ps)| ps.iter())
                .filter(|p| is_ib(p))
        };
        match all_ib()
            .find(|p| p.state == PortState::Active)
            .or_else(|| all_ib().next())
        {
            Some(p) => p.clone(),
            None => {
                let (name, ports) = candidates[0];
                return match ports.first() {
                    Some(p) => Err(TransportError::NotInfiniBand {
                        ca: name.clone(),
                        port: p.port_num,
                        link_layer: p.link_layer.clone(),
                    }),
                    None => Err(TransportError::NoDevice),
                };
            }
        }
    };
    if chosen.state == PortState::Down {
        return Err(TransportError::PortDown {
            ca: chosen.ca_name.clone(),
            port: chosen.port_num,
        });
    }
    Ok(chosen)
}

impl UmadPort {
    /// Open a CA port. Default: the first CA, its first ACTIVE port; if no port is active,
    /// the first port (its state is in [`UmadPort::info`]; directed-route SMPs work on a
    /// port that is up but not yet configured by an SM).
    pub fn open(ca: Option<&str>, port: Option<u8>) -> Result<UmadPort, TransportError> {
        let names = ca_names();
        if names.is_empty() {
            return Err(TransportError::NoDevice);
        }
        let mut cas = Vec::new();
        for name in &names {
            // A CA that vanished between the two calls is simply skipped.
            if let Ok(ports) = ca_ports(name) {
                cas.push((name.clone(), ports));
            }
        }
        let info = choose_port(&cas, ca, port)?;
        let name = CString::new(info.ca_name.clone()).map_err(|_| TransportError::NoDevice)?;
        // SAFETY: name is NUL-terminated.
        let portid = unsafe { umad_open_port(name.as_ptr(), c_int::from(info.port_num)) };
        if portid < 0 {
            // libibumad folds open(2) failures into -EIO; errno still holds the cause.
            let errno = last_errno();
            let ret = -portid;
            return Err(
                if [libc::EACCES, libc::EPERM].contains(&errno)
                    || [libc::EACCES, libc::EPERM].contains(&ret)
                {
                    TransportError::PermissionDenied {
                        ca: info.ca_name.clone(),
                        port: info.port_num,
                    }
                } else if ret == libc::ENODEV || errno == libc::ENOENT {
                    TransportError::NoDevice
                } else {
                    TransportError::Open {
                        ca: info.ca_name.clone(),
                        port: info.port_num,
                        errno: if errno != 0 { errno } else { ret },
                    }
                },
            );
        }
        // Only meaningful after umad_open_port (before it the shim reports the old 56).
        // SAFETY: no arguments.
        let header = unsafe { umad_size() };
        let port = UmadPort {
            fd: Arc::new(PortFd(portid)),
            info,
            rx: default_rx(),
        };
        if header != UMAD_HEADER_LEN {
            return Err(TransportError::HeaderSize { got: header });
        }
        Ok(port)
    }
}

/// What the request engine needs from a local port: [`UmadPort`], or a scripted fake in
/// tests (no fabric needed).
pub trait MadPort {
    fn info(&self) -> &LocalPort;
    /// Register an agent for a management class; returns the agent id.
    fn register(&mut self, mgmt_class: u8, version: u8) -> Result<u32, TransportError>;
    fn unregister(&mut self, agent: u32);
    /// Hand one MAD to the transport.
    fn send(
        &mut self,
        agent: u32,
        mad: &[u8; MAD_SIZE],
        dest: &Dest,
        timeout_ms: u32,
        retries: u32,
    ) -> Result<(), TransportError>;
    /// Wait up to `timeout_ms` (0: just poll) for one MAD; `Ok(None)` on timeout.
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError>;
    /// Keep the port (and its agents) open when dropped: the process's exit closes it.
    fn leave_open(&mut self) {}
    /// Whether the transport runs in this process, so that a reply arriving after its
    /// agent was unregistered can hurt it (the simulator's shim); a relay's agent is
    /// another process, which looks after its own port.
    fn is_in_process(&self) -> bool {
        true
    }
}

impl MadPort for UmadPort {
    fn info(&self) -> &LocalPort {
        &self.info
    }

    /// Register an agent for a management class; SMI classes (0x01, 0x81) go to QP0, the
    /// rest to QP1. The SA class asks the kernel for RMPP (see [`Registration`]). Returns
    /// the agent id.
    fn register(&mut self, mgmt_class: u8, version: u8) -> Result<u32, TransportError> {
        let r = Registration::for_class(mgmt_class, version);
        // SAFETY: a NULL method mask means "no unsolicited methods": we only take replies.
        let id = unsafe {
            umad_register(
                self.fd.0,
                c_int::from(r.mgmt_class),
                c_int::from(r.version),
                r.rmpp_version,
                std::ptr::null_mut(),
            )
        };
        u32::try_from(id).map_err(|_| TransportError::Register {
            mgmt_class,
            version,
            errno: -id,
        })
    }

    fn unregister(&mut self, agent: u32) {
        // SAFETY: plain integers; an unknown agent id only yields an error code.
        unsafe { umad_unregister(self.fd.0, agent as c_int) };
    }

    /// Send one MAD. `timeout_ms`/`retries` go to the kernel (real hardware); callers keep
    /// their own deadline as well, since the simulator shim ignores both.
    fn send(
        &mut self,
        agent: u32,
        mad: &[u8; MAD_SIZE],
        dest: &Dest,
        timeout_ms: u32,
        retries: u32,
    ) -> Result<(), TransportError> {
        let mut buf = [0u64; (UMAD_HEADER_LEN + MAD_SIZE) / 8];
        let bytes = as_bytes_mut(&mut buf);
        encode_umad(bytes, mad, dest);
        let timeout = c_int::try_from(timeout_ms.max(1)).unwrap_or(c_int::MAX);
        let retries = c_int::try_from(retries).unwrap_or(c_int::MAX);
        // SAFETY: buf holds the 64-byte header plus the 256-byte MAD the length announces.
        let ret = unsafe {
            umad_send(
                self.fd.0,
                agent as c_int,
                buf.as_mut_ptr().cast(),
                MAD_SIZE as c_int,
                timeout,
                retries,
            )
        };
        if ret < 0 {
            Err(TransportError::Send { errno: -ret })
        } else {
            Ok(())
        }
    }

    /// Wait up to `timeout_ms` (0: just poll) for one MAD.
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        recv_into(self.fd.0, &mut self.rx, timeout_ms)
    }

    fn leave_open(&mut self) {
        // One holder of the descriptor that is never dropped: the process's exit closes it.
        std::mem::forget(self.fd.clone());
    }
}

impl UmadPort {
    /// A receiver on the same port for another thread; the port stays open until both
    /// halves are dropped.
    pub fn receiver(&self) -> UmadReceiver {
        UmadReceiver {
            fd: self.fd.clone(),
            rx: default_rx(),
        }
    }
}

/// `umad_recv` on `portid` into `rx` (grown when a reassembled RMPP reply needs more room,
/// see [`recv_growing`]).
fn recv_into(
    portid: c_int,
    rx: &mut Vec<u64>,
    timeout_ms: u32,
) -> Result<Option<Received>, TransportError> {
    let timeout = c_int::try_from(timeout_ms).unwrap_or(c_int::MAX);
    recv_growing(rx, |buf, len| {
        // SAFETY: buf holds the header plus `*len` bytes of MAD space.
        unsafe { umad_recv(portid, buf.as_mut_ptr().cast(), len, timeout) }
    })
}

/// One receive through `umad_recv` (given as `raw`: the buffer and the MAD length it
/// holds in, the MAD length read or needed out; the agent id or a negative errno back), as
/// saquery does it (infiniband-diags ibdiag_sa.c): when a reassembled RMPP reply does not
/// fit, the kernel keeps it queued and libibumad returns -ENOSPC with the length it needs;
/// the buffer grows to that and the read is made again. A buffer grown past the default is
/// given back afterwards, so one large table does not stay allocated.
fn recv_growing(
    rx: &mut Vec<u64>,
    mut raw: impl FnMut(&mut [u64], &mut c_int) -> c_int,
) -> Result<Option<Received>, TransportError> {
    loop {
        let capacity = rx.len() * 8 - UMAD_HEADER_LEN;
        let mut len = c_int::try_from(capacity).unwrap_or(c_int::MAX);
        let ret = raw(rx, &mut len);
        if ret >= 0 {
            let got = usize::try_from(len).unwrap_or(0).min(capacity);
            let bytes = as_bytes(rx);
            let (status, mad) = decode_umad(bytes, got);
            let tail = bytes
                .get(UMAD_HEADER_LEN + MAD_SIZE..UMAD_HEADER_LEN + got)
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            if rx.len() * 8 > UMAD_HEADER_LEN + MAD_SIZE {
                *rx = default_rx();
            }
            return Ok(Some(Received {
                agent: ret as u32,
                status,
                len: got,
                mad,
                tail,
            }));
        }
        let needed = usize::try_from(len).unwrap_or(0);
        match -ret {
            libc::ETIMEDOUT | libc::EAGAIN | libc::EINTR => return Ok(None),
            libc::ENOSPC if needed > capacity && needed <= MAX_REPLY_LEN => {
                *rx = vec![0u64; (UMAD_HEADER_LEN + needed).div_ceil(8)];
            }
            errno => return Err(TransportError::Recv { errno }),
        }
    }
}

fn as_bytes(buf: &[u64]) -> &[u8] {
    // SAFETY: u8 has no alignment or validity requirements; the length covers the same bytes.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), buf.len() * 8) }
}

fn as_bytes_mut(buf: &mut [u64]) -> &mut [u8] {
    // SAFETY: as above, and the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), buf.len() * 8) }
}

/// Fill a umad buffer: the header with the destination's address (sl, path bits, GRH and
/// P_Key index 0: the default partition; agent, timeout, retries and length are set by
/// umad_send), then the MAD.
pub(crate) fn encode_umad(buf: &mut [u8], mad: &[u8; MAD_SIZE], dest: &Dest) {
    let (lid, qpn, qkey) = dest.address();
    let header = UmadHeader {
        qpn,
        qkey,
        lid,
        ..Default::default()
    };
    if header.encode_into(buf).is_err() {
        return;
    }
    if let Some(m) = buf.get_mut(UMAD_HEADER_LEN..UMAD_HEADER_LEN + MAD_SIZE) {
        m.copy_from_slice(mad);
    }
}

/// Split a received umad buffer into the header status and the (padded) MAD.
pub(crate) fn decode_umad(buf: &[u8], mad_len: usize) -> (i32, [u8; MAD_SIZE]) {
    // The kernel's status word holds a (positive) errno.
    let status = UmadHeader::status
        .read(buf)
        .map(|s| s.0 as i32)
        .unwrap_or(0);
    let mut mad = [0u8; MAD_SIZE];
    let n = mad_len.min(MAD_SIZE);
    if let Some(src) = buf.get(UMAD_HEADER_LEN..UMAD_HEADER_LEN + n) {
        mad[..n].copy_from_slice(src);
    }
    (status, mad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smp::DrPath;

    /// Sizes and offsets as gcc reports them for umad.h on x86_64 (offsetof).
    #[test]
    fn raw_layouts_match_umad_h() {
        assert_eq!(std::mem::size_of::<RawPort>(), 112);
        assert_eq!(std::mem::offset_of!(RawPort, portnum), 20);
        assert_eq!(std::mem::offset_of!(RawPort, state), 40);
        assert_eq!(std::mem::offset_of!(RawPort, gid_prefix), 56);
        assert_eq!(std::mem::offset_of!(RawPort, port_guid), 64);
        assert_eq!(std::mem::offset_of!(RawPort, pkeys), 80);
        assert_eq!(std::mem::offset_of!(RawPort, link_layer), 88);
        assert_eq!(std::mem::size_of::<RawCa>(), 208);
        assert_eq!(std::mem::offset_of!(RawCa, numports), 24);
        assert_eq!(std::mem::offset_of!(RawCa, node_guid), 112);
        assert_eq!(std::mem::offset_of!(RawCa, ports), 128);
    }

    /// Every field of `struct ib_user_mad` at the offset gcc's offsetof gives for umad.h
    /// (agent_id 0, status 4, timeout_ms 8, retries 12, length 16, qpn 20, qkey 24, lid 28,
    /// sl 30, path_bits 31, grh_present 32, gid_index 33, hop_limit 34, traffic_class 35,
    /// gid 36, flow_label 52, pkey_index 56, reserved 58-63), each with a distinct value.
    #[test]
    fn golden_umad_header() {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[15] = 0x21;
        let h = UmadHeader {
            agent_id: HostOrder(0x0102_0304),
            status: HostOrder(110),
            timeout_ms: HostOrder(200),
            retries: HostOrder(3),
            length: HostOrder(256),
            qpn: 1,
            qkey: GSI_QKEY,
            lid: 0x1234,
            sl: 5,
            path_bits: 6,
            grh_present: 1,
            gid_index: 2,
            hop_limit: 64,
            traffic_class: 7,
            gid,
            flow_label: 0x000a_bcde,
            pkey_index: HostOrder(0x0203),
        };
        let mut want = [0u8; 64];
        want[0..4].copy_from_slice(&0x0102_0304u32.to_ne_bytes());
        want[4..8].copy_from_slice(&110u32.to_ne_bytes());
        want[8..12].copy_from_slice(&200u32.to_ne_bytes());
        want[12..16].copy_from_slice(&3u32.to_ne_bytes());
        want[16..20].copy_from_slice(&256u32.to_ne_bytes());
        want[20..24].copy_from_slice(&[0, 0, 0, 1]);
        want[24..28].copy_from_slice(&[0x80, 0x01, 0, 0]);
        want[28..30].copy_from_slice(&[0x12, 0x34]);
        want[30..36].copy_from_slice(&[5, 6, 1, 2, 64, 7]);
        want[36] = 0xfe;
        want[51] = 0x21;
        want[52..56].copy_from_slice(&[0x00, 0x0a, 0xbc, 0xde]);
        want[56..58].copy_from_slice(&0x0203u16.to_ne_bytes());
        assert_eq!(h.to_bytes(), want);
        assert_eq!(UmadHeader::decode(&want).unwrap(), h);
        assert_eq!(UMAD_HEADER_LEN, 64);
    }

    #[test]
    fn umad_header_address_fields_are_big_endian() {
        let mut buf = [0xaau8; UMAD_HEADER_LEN + MAD_SIZE];
        let mut mad = [0u8; MAD_SIZE];
        mad[0] = 1;
        mad[255] = 7;
        let dest = Dest::Gsi {
            lid: 0x1234,
            qpn: 1,
            qkey: GSI_QKEY,
        };
        encode_umad(&mut buf, &mad, &dest);
        assert_eq!(&buf[0..20], &[0u8; 20]);
        assert_eq!(&buf[20..30], &[0, 0, 0, 1, 0x80, 0x01, 0, 0, 0x12, 0x34]);
        assert_eq!(&buf[30..64], &[0u8; 34]);
        assert_eq!(buf[64], 1);
        assert_eq!(buf[64 + 255], 7);

        encode_umad(
            &mut buf,
            &mad,
            &Dest::Smp(SmpRoute::Directed(DrPath::local())),
        );
        assert_eq!(&buf[20..30], &[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        encode_umad(&mut buf, &mad, &Dest::Smp(SmpRoute::Lid(9)));
        assert_eq!(&buf[28..30], &[0, 9]);
    }

    #[test]
    fn umad_status_is_host_order_and_short_mads_are_padded() {
        let mut buf = [0u8; UMAD_HEADER_LEN + MAD_SIZE];
        buf[4..8].copy_from_slice(&110i32.to_ne_bytes());
        buf[64] = 0x01;
        buf[64 + 100] = 0x55;
        let (status, mad) = decode_umad(&buf, 50);
        assert_eq!(status, 110);
        assert_eq!(mad[0], 1);
        assert_eq!(mad[100], 0, "bytes past the received length are zero");
        let (_, full) = decode_umad(&buf, 256);
        assert_eq!(full[100], 0x55);
        // A truncated buffer yields zeros rather than a panic.
        assert_eq!(decode_umad(&buf[..6], 256), (0, [0u8; MAD_SIZE]));
    }

    #[test]
    fn transport_gone_errnos() {
        assert!(is_transport_gone(libc::EIO));
        assert!(is_transport_gone(libc::ECONNREFUSED));
        assert!(is_transport_gone(libc::ENODEV));
        // One bad MAD or a busy queue is not the transport going away.
        assert!(!is_transport_gone(libc::EINVAL));
        assert!(!is_transport_gone(libc::ENOMEM));
        assert!(!is_transport_gone(libc::ETIMEDOUT));
        assert!(!is_transport_gone(0));
        assert_eq!(errno_description(libc::EIO), "Input/output error");
    }

    /// libibmad's choice (rpc.c: `rmpp_version = 1` for IB_SA_CLASS, 0 for every other
    /// class), with the class version the engine passes through.
    #[test]
    fn only_the_sa_class_registers_for_rmpp() {
        use crate::header::{class, class_version};
        let sa = Registration::for_class(class::SUBN_ADM, class_version(class::SUBN_ADM));
        assert_eq!(
            sa,
            Registration {
                mgmt_class: 0x03,
                version: 2,
                rmpp_version: 1
            }
        );
        for c in [class::SMI_LID, class::SMI_DIRECT, class::PERF] {
            let r = Registration::for_class(c, class_version(c));
            assert_eq!((r.mgmt_class, r.rmpp_version), (c, 0), "class {c:#04x}");
            assert_eq!(r.version, 1);
        }
    }

    /// libibumad's `umad_recv` over the kernel's umad read, for a queue of replies (agent,
    /// status, MAD bytes): a reply longer than the buffer stays queued, the call returns
    /// -ENOSPC and sets the length to what the reply needs (user_mad.c copy_recv_mad,
    /// umad.c umad_recv); one that fits is copied after its header.
    struct KernelQueue {
        replies: std::collections::VecDeque<(u32, u32, Vec<u8>)>,
        /// (buffer capacity, result) of every call.
        calls: Vec<(usize, c_int)>,
    }

    impl KernelQueue {
        fn recv(&mut self, buf: &mut [u64], len: &mut c_int) -> c_int {
            let capacity = usize::try_from(*len).unwrap();
            let bytes = as_bytes_mut(buf);
            let ret = match self.replies.front() {
                None => -libc::ETIMEDOUT,
                Some((agent, status, mad)) => {
                    let header = UmadHeader {
                        agent_id: HostOrder(*agent),
                        status: HostOrder(*status),
                        length: HostOrder((UMAD_HEADER_LEN + mad.len()) as u32),
                        ..Default::default()
                    };
                    header.encode_into(bytes).unwrap();
                    *len = mad.len() as c_int;
                    if mad.len() > capacity {
                        -libc::ENOSPC
                    } else {
                        bytes[UMAD_HEADER_LEN..UMAD_HEADER_LEN + mad.len()].copy_from_slice(mad);
                        let agent = *agent as c_int;
                        self.replies.pop_front();
                        agent
                    }
                }
            };
            self.calls.push((capacity, ret));
            ret
        }
    }

    #[test]
    fn a_reassembled_reply_grows_the_buffer_then_it_shrinks_back() {
        // A three-segment SA reply as the kernel hands it over: the first MAD whole, then
        // the 200 data bytes of each further segment.
        let mut reply = vec![0u8; MAD_SIZE + 2 * 200];
        reply[0] = 0x01;
        reply[MAD_SIZE - 1] = 0xaa;
        reply[MAD_SIZE] = 0xbb;
        *reply.last_mut().unwrap() = 0xcc;
        let mut short = vec![0u8; 120];
        short[0] = 0x01;
        let mut kernel = KernelQueue {
            replies: [(7, 0, reply.clone()), (7, 0, short)].into(),
            calls: Vec::new(),
        };
        let mut rx = default_rx();
        let got = recv_growing(&mut rx, |b, l| kernel.recv(b, l))
            .unwrap()
            .unwrap();
        assert_eq!((got.agent, got.status, got.len), (7, 0, 656));
        assert_eq!(&got.mad[..], &reply[..MAD_SIZE]);
        assert_eq!(got.tail, reply[MAD_SIZE..]);
        // Asked once with room for one MAD, told 656 bytes are needed, asked again.
        assert_eq!(
            kernel.calls,
            vec![(MAD_SIZE, -libc::ENOSPC), (656, 7)],
            "one retry with the length the kernel asked for"
        );
        assert_eq!(rx.len() * 8, UMAD_HEADER_LEN + MAD_SIZE, "shrunk back");

        // A short single MAD (the simulator's SA replies): its length, zero padding, no tail.
        let got = recv_growing(&mut rx, |b, l| kernel.recv(b, l))
            .unwrap()
            .unwrap();
        assert_eq!((got.len, got.tail.len()), (120, 0));
        assert_eq!(got.mad[0], 0x01);
        assert!(got.mad[120..].iter().all(|&b| b == 0));
        // Nothing queued: a timeout, not an error.
        assert!(recv_growing(&mut rx, |b, l| kernel.recv(b, l))
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_reply_larger_than_the_cap_is_refused_not_allocated() {
        let mut rx = default_rx();
        let mut calls = 0;
        let r = recv_growing(&mut rx, |_, len| {
            calls += 1;
            *len = c_int::try_from(MAX_REPLY_LEN + 1).unwrap();
            -libc::ENOSPC
        });
        assert_eq!(
            r.unwrap_err(),
            TransportError::Recv {
                errno: libc::ENOSPC
            }
        );
        assert_eq!((calls, rx.len() * 8), (1, UMAD_HEADER_LEN + MAD_SIZE));
    }

    fn port(ca: &str, n: u8, state: PortState, ll: &str) -> LocalPort {
        LocalPort::listed(ca, n, state, ll)
    }

    #[test]
    fn port_choice() {
        let cas = vec![
            (
                "mlx5_0".to_string(),
                vec![port("mlx5_0", 1, PortState::Init, "IB")],
            ),
            (
                "mlx5_1".to_string(),
                vec![
                    port("mlx5_1", 1, PortState::Active, "Ethernet"),
                    port("mlx5_1", 2, PortState::Active, "IB"),
                ],
            ),
        ];
        let p = choose_port(&cas, None, None).unwrap();
        assert_eq!((p.ca_name.as_str(), p.port_num), ("mlx5_1", 2));
        let p = choose_port(&cas, Some("mlx5_0"), None).unwrap();
        assert_eq!((p.ca_name.as_str(), p.port_num), ("mlx5_0", 1));
        assert!(matches!(
            choose_port(&cas, Some("mlx5_1"), Some(1)),
            Err(TransportError::NotInfiniBand { .. })
        ));
        assert!(matches!(
            choose_port(&cas, Some("mlx5_1"), Some(3)),
            Err(TransportError::PortNotFound { port: 3, .. })
        ));
        let e = choose_port(&cas, Some("qib0"), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "InfiniBand device \"qib0\" not found (available: mlx5_0, mlx5_1)"
        );
        assert_eq!(choose_port(&[], None, None), Err(TransportError::NoDevice));
        let down = vec![("a".to_string(), vec![port("a", 1, PortState::Down, "IB")])];
        assert!(matches!(
            choose_port(&down, None, None),
            Err(TransportError::PortDown { port: 1, .. })
        ));
    }
}
