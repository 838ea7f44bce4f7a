//! A MAD relay: one process opens a local umad port and carries raw MADs over a byte
//! stream (its stdin and stdout) for another process, which uses it as a [`MadPort`]
//! ([`RelayPort`]). `ibscope agent` is the serving side ([`serve`]); a fabric reached
//! through `ssh host ibscope agent -C mlx5_1`, or through a second process attached to
//! another simulated fabric, is then watched from one place.
//!
//! The protocol is framed: a big-endian u32 length (of what follows), a kind byte, the
//! payload. The agent speaks first: `HELLO` with the local port's facts, or `OPEN_FAILED`
//! with why not. The client then sends `REGISTER`, `UNREGISTER` and `SEND`; the agent
//! answers `REGISTERED` for each register and `MAD` for every MAD its port receives (and
//! for a send the port refused: the request itself with the errno as status, as the
//! kernel returns an unroutable send). `LOST` says the agent's own transport is gone.
//! Every decoder takes untrusted bytes and returns an error, never panics.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::attr::{PhysState, PortState};
use crate::header::MAD_SIZE;
use crate::umad::{is_transport_gone, Dest, LocalPort, MadPort, Received, TransportError};

/// Raised when the frames change incompatibly; both sides must agree.
pub const PROTOCOL_VERSION: u16 = 1;
/// No frame is longer: a length above it means the stream is not this protocol.
const MAX_FRAME: usize = 4096;

mod kind {
    pub const HELLO: u8 = 0x01;
    pub const OPEN_FAILED: u8 = 0x02;
    pub const REGISTERED: u8 = 0x03;
    pub const MAD: u8 = 0x04;
    pub const LOST: u8 = 0x05;
    pub const REGISTER: u8 = 0x11;
    pub const UNREGISTER: u8 = 0x12;
    pub const SEND: u8 = 0x13;
}

/// What the agent says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromAgent {
    Hello(LocalPort),
    /// The agent could not open its port: the error as it would print it.
    OpenFailed(String),
    /// The answer to a register: the agent id, or the errno.
    Registered {
        mgmt_class: u8,
        result: Result<u32, i32>,
    },
    Mad {
        agent: u32,
        status: i32,
        mad: Box<[u8; MAD_SIZE]>,
    },
    /// The agent's transport is gone; `send` tells which call failed.
    Lost {
        send: bool,
        errno: i32,
    },
}

/// What the client asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToAgent {
    Register {
        mgmt_class: u8,
        version: u8,
    },
    Unregister {
        agent: u32,
    },
    /// The umad address the MAD goes to (LID, QP, Q_Key: all the umad header carries of a
    /// destination), with the kernel's timeout and retries.
    Send {
        agent: u32,
        timeout_ms: u32,
        retries: u32,
        lid: u16,
        qpn: u32,
        qkey: u32,
        mad: Box<[u8; MAD_SIZE]>,
    },
}

/// A frame that is not this protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("relay protocol: {0}")]
pub struct FrameError(String);

fn bad(what: impl Into<String>) -> FrameError {
    FrameError(what.into())
}

/// Big-endian writer of one frame's payload.
struct Out(Vec<u8>);

impl Out {
    fn new(kind: u8) -> Out {
        Out(vec![0, 0, 0, 0, kind])
    }
    fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn text(mut self, s: &str) -> Self {
        // Short by construction (names, one error line); cut rather than fail.
        let mut end = s.len().min(1024);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let bytes = &s.as_bytes()[..end];
        self = self.u16(bytes.len() as u16);
        self.0.extend_from_slice(bytes);
        self
    }
    fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    fn done(mut self) -> Vec<u8> {
        let len = (self.0.len() - 4) as u32;
        self.0[..4].copy_from_slice(&len.to_be_bytes());
        self.0
    }
}

/// Big-endian reader of one frame's payload: every read checks the length.
struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        if self.0.len() < n {
            return Err(bad("frame too short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FrameError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, FrameError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, FrameError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
    fn text(&mut self) -> Result<String, FrameError> {
        let n = usize::from(self.u16()?);
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
    fn mad(&mut self) -> Result<Box<[u8; MAD_SIZE]>, FrameError> {
        let mut m = Box::new([0u8; MAD_SIZE]);
        m.copy_from_slice(self.take(MAD_SIZE)?);
        Ok(m)
    }
}

impl FromAgent {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            FromAgent::Hello(p) => Out::new(kind::HELLO)
                .u16(PROTOCOL_VERSION)
                .u64(p.node_guid)
                .u64(p.port_guid)
                .u16(p.lid)
                .u16(p.sm_lid)
                .u8(p.lmc)
                .u8(p.port_num)
                .u8(p.state.code())
                .u8(p.phys_state.code())
                .text(&p.ca_name)
                .text(&p.ca_type)
                .text(&p.link_layer)
                .done(),
            FromAgent::OpenFailed(why) => Out::new(kind::OPEN_FAILED).text(why).done(),
            FromAgent::Registered { mgmt_class, result } => {
                let (errno, agent) = match result {
                    Ok(a) => (0, *a),
                    Err(e) => (*e, 0),
                };
                Out::new(kind::REGISTERED)
                    .u8(*mgmt_class)
                    .u32(errno as u32)
                    .u32(agent)
                    .done()
            }
            FromAgent::Mad { agent, status, mad } => Out::new(kind::MAD)
                .u32(*agent)
                .u32(*status as u32)
                .bytes(&mad[..])
                .done(),
            FromAgent::Lost { send, errno } => Out::new(kind::LOST)
                .u8(u8::from(*send))
                .u32(*errno as u32)
                .done(),
        }
    }

    /// One frame's kind and payload (the length prefix already taken off).
    pub fn decode(frame: &[u8]) -> Result<FromAgent, FrameError> {
        let (&k, payload) = frame.split_first().ok_or_else(|| bad("empty frame"))?;
        let mut r = In(payload);
        Ok(match k {
            kind::HELLO => {
                let version = r.u16()?;
                if version != PROTOCOL_VERSION {
                    return Err(bad(format!(
                        "the agent speaks version {version}, this ibscope {PROTOCOL_VERSION}: \
                         run the same ibscope version on both ends"
                    )));
                }
                let node_guid = r.u64()?;
                let port_guid = r.u64()?;
                let lid = r.u16()?;
                let sm_lid = r.u16()?;
                let lmc = r.u8()?;
                let port_num = r.u8()?;
                let state = PortState::from_code(r.u8()?);
                let phys_state = PhysState::from_code(r.u8()?);
                FromAgent::Hello(LocalPort {
                    ca_name: r.text()?,
                    ca_type: r.text()?,
                    node_guid,
                    port_num,
                    lid,
                    sm_lid,
                    lmc,
                    state,
                    phys_state,
                    port_guid,
                    link_layer: r.text()?,
                    sm_disabled: false,
                })
            }
            kind::OPEN_FAILED => FromAgent::OpenFailed(r.text()?),
            kind::REGISTERED => {
                let mgmt_class = r.u8()?;
                let errno = r.u32()? as i32;
                let agent = r.u32()?;
                FromAgent::Registered {
                    mgmt_class,
                    result: if errno == 0 { Ok(agent) } else { Err(errno) },
                }
            }
            kind::MAD => FromAgent::Mad {
                agent: r.u32()?,
                status: r.u32()? as i32,
                mad: r.mad()?,
            },
            kind::LOST => FromAgent::Lost {
                send: r.u8()? != 0,
                errno: r.u32()? as i32,
            },
            other => {
                return Err(bad(format!(
                    "unknown frame kind {other:#04x} from the agent"
                )))
            }
        })
    }
}

impl ToAgent {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ToAgent::Register {
                mgmt_class,
                version,
            } => Out::new(kind::REGISTER).u8(*mgmt_class).u8(*version).done(),
            ToAgent::Unregister { agent } => Out::new(kind::UNREGISTER).u32(*agent).done(),
            ToAgent::Send {
                agent,
                timeout_ms,
                retries,
                lid,
                qpn,
                qkey,
                mad,
            } => Out::new(kind::SEND)
                .u32(*agent)
                .u32(*timeout_ms)
                .u32(*retries)
                .u16(*lid)
                .u32(*qpn)
                .u32(*qkey)
                .bytes(&mad[..])
                .done(),
        }
    }

    pub fn decode(frame: &[u8]) -> Result<ToAgent, FrameError> {
        let (&k, payload) = frame.split_first().ok_or_else(|| bad("empty frame"))?;
        let mut r = In(payload);
        Ok(match k {
            kind::REGISTER => ToAgent::Register {
                mgmt_class: r.u8()?,
                version: r.u8()?,
            },
            kind::UNREGISTER => ToAgent::Unregister { agent: r.u32()? },
            kind::SEND => ToAgent::Send {
                agent: r.u32()?,
                timeout_ms: r.u32()?,
                retries: r.u32()?,
                lid: r.u16()?,
                qpn: r.u32()?,
                qkey: r.u32()?,
                mad: r.mad()?,
            },
            other => {
                return Err(bad(format!(
                    "unknown frame kind {other:#04x} from the client"
                )))
            }
        })
    }
}

/// Splits a byte stream into frames.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame (kind and payload), if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len == 0 || len > MAX_FRAME {
            return Err(bad(format!(
                "a frame of {len} bytes: the other end does not speak this protocol \
                 (does the command print anything else on stdout?)"
            )));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let frame = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(frame))
    }
}

/// Read one frame from a blocking reader (`None` at a clean end of stream).
fn read_frame(input: &mut impl Read, reader: &mut FrameReader) -> std::io::Result<Option<Vec<u8>>> {
    let mut chunk = [0u8; 4096];
    loop {
        match reader.next_frame() {
            Ok(Some(f)) => return Ok(Some(f)),
            Ok(None) => {}
            Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        }
        let n = input.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        reader.push(&chunk[..n]);
    }
}

/// The receiving side of the agent's port, for its receiver thread.
pub trait Receiver: Send {
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError>;
}

impl Receiver for crate::umad::UmadReceiver {
    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        crate::umad::UmadReceiver::recv(self, timeout_ms)
    }
}

/// How long the agent's receiver waits in one call before it looks whether to stop.
const AGENT_POLL_MS: u32 = 100;

/// The agent: `opened` is the port (and a receiver on it) or why it could not be opened.
/// Frames are read from `input` until it ends; what the port receives goes to `output`.
/// Returns when the client is gone or the transport is lost.
pub fn serve<P: MadPort, R: Receiver>(
    opened: Result<(P, R), String>,
    mut input: impl Read,
    output: impl Write + Send,
) -> std::io::Result<()> {
    let output = Mutex::new(output);
    let write = |frame: FromAgent| -> std::io::Result<()> {
        let mut out = output.lock().unwrap_or_else(|p| p.into_inner());
        out.write_all(&frame.encode())?;
        out.flush()
    };
    let (mut port, mut receiver) = match opened {
        Ok(p) => p,
        Err(why) => return write(FromAgent::OpenFailed(why)),
    };
    write(FromAgent::Hello(port.info().clone()))?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                let frame = match receiver.recv(AGENT_POLL_MS) {
                    Ok(Some(r)) => FromAgent::Mad {
                        agent: r.agent,
                        status: r.status,
                        mad: Box::new(r.mad),
                    },
                    Ok(None) => continue,
                    Err(TransportError::Recv { errno }) if is_transport_gone(errno) => {
                        stop.store(true, Ordering::SeqCst);
                        FromAgent::Lost { send: false, errno }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "agent: receive failed");
                        std::thread::sleep(Duration::from_millis(u64::from(AGENT_POLL_MS)));
                        continue;
                    }
                };
                if write(frame).is_err() {
                    stop.store(true, Ordering::SeqCst);
                }
            }
        });
        let result = relay_requests(&mut port, &mut input, &write, &stop);
        stop.store(true, Ordering::SeqCst);
        result
    })
}

/// The agent's main loop: the client's requests, until its stream ends.
fn relay_requests<P: MadPort>(
    port: &mut P,
    input: &mut impl Read,
    write: &dyn Fn(FromAgent) -> std::io::Result<()>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut reader = FrameReader::default();
    while !stop.load(Ordering::SeqCst) {
        let Some(frame) = read_frame(input, &mut reader)? else {
            return Ok(());
        };
        let request = ToAgent::decode(&frame)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        match request {
            ToAgent::Register {
                mgmt_class,
                version,
            } => {
                let result = port.register(mgmt_class, version).map_err(|e| match e {
                    TransportError::Register { errno, .. } => errno,
                    _ => libc::EINVAL,
                });
                write(FromAgent::Registered { mgmt_class, result })?;
            }
            ToAgent::Unregister { agent } => port.unregister(agent),
            ToAgent::Send {
                agent,
                timeout_ms,
                retries,
                lid,
                qpn,
                qkey,
                mad,
            } => {
                // The umad header carries only this address of a destination.
                let dest = Dest::Gsi { lid, qpn, qkey };
                match port.send(agent, &mad, &dest, timeout_ms, retries) {
                    Ok(()) => {}
                    Err(TransportError::Send { errno }) if is_transport_gone(errno) => {
                        write(FromAgent::Lost { send: true, errno })?;
                        return Ok(());
                    }
                    // One MAD refused: given back with the errno, as the kernel returns
                    // an unroutable send, so the client's engine fails that request only.
                    Err(e) => {
                        let errno = match e {
                            TransportError::Send { errno } => errno,
                            _ => libc::EINVAL,
                        };
                        write(FromAgent::Mad {
                            agent,
                            status: errno,
                            mad,
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// How an agent is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCommand {
    /// An operator's command line, run by `sh -c` (`ssh -T mgmt2 ibscope agent -C mlx5_1`,
    /// from a `[[fabric]]` table).
    Shell(String),
    /// A program and its arguments, run in `dir` with nothing in between (the agent a
    /// command starts for a local port of its own).
    Program {
        argv: Vec<std::ffi::OsString>,
        dir: std::path::PathBuf,
    },
}

impl AgentCommand {
    /// The process to start.
    fn command(&self) -> Command {
        match self {
            AgentCommand::Shell(line) => {
                let mut cmd = Command::new("sh");
                cmd.arg("-c").arg(line);
                cmd
            }
            AgentCommand::Program { argv, dir } => {
                let mut cmd = Command::new(argv.first().map_or("".as_ref(), |p| p.as_os_str()));
                cmd.args(argv.iter().skip(1)).current_dir(dir);
                cmd
            }
        }
    }
}

impl std::fmt::Display for AgentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentCommand::Shell(line) => f.write_str(line),
            AgentCommand::Program { argv, .. } => {
                let words: Vec<_> = argv.iter().map(|a| a.to_string_lossy()).collect();
                f.write_str(&words.join(" "))
            }
        }
    }
}

/// A [`MadPort`] served by an agent in a child process (see the module docs).
#[derive(Debug)]
pub struct RelayPort {
    command: String,
    child: Child,
    to_agent: Option<std::io::BufWriter<ChildStdin>>,
    from_agent: ChildStdout,
    reader: FrameReader,
    /// MADs read while waiting for something else (a register's answer).
    queued: VecDeque<Received>,
    info: LocalPort,
}

/// How long an agent gets to exit once its input ended, before it is killed: closing its
/// port takes it a moment, but the simulator's shim waits at exit for a frozen ibsim
/// forever.
const AGENT_EXIT: Duration = Duration::from_secs(1);

/// How long a register waits for the agent's answer.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

impl RelayPort {
    /// Start `agent` (in a process group of its own) and wait up to `hello_timeout` for
    /// its hello; `stop` returning true gives up at once.
    pub fn spawn(
        agent: &AgentCommand,
        hello_timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<RelayPort, TransportError> {
        let command = agent.to_string();
        let failed = |reason: String| TransportError::Relay {
            command: command.clone(),
            reason,
        };
        let mut cmd = agent.command();
        cmd.process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: sigemptyset, sigprocmask and prctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                // The starting thread may block the stop signals (they are its process's
                // main thread's to take); the mask survives exec, and the agent needs them.
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                // The agent ends with the thread that started it, even when it never reads
                // the end of its input (an agent opening a port inside the simulator's
                // shim waits for a lost ibsim forever).
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(format!("cannot start it: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed("no pipes to it".into()));
        };
        let mut port = RelayPort {
            command: command.clone(),
            child,
            to_agent: Some(std::io::BufWriter::new(stdin)),
            from_agent: stdout,
            reader: FrameReader::default(),
            queued: VecDeque::new(),
            info: LocalPort {
                ca_name: String::new(),
                ca_type: String::new(),
                node_guid: 0,
                port_num: 0,
                lid: 0,
                sm_lid: 0,
                lmc: 0,
                state: PortState::Down,
                phys_state: PhysState::Disabled,
                port_guid: 0,
                link_layer: String::new(),
                sm_disabled: false,
            },
        };
        let deadline = Instant::now() + hello_timeout;
        let hello = loop {
            // In slices, so a stop is seen soon.
            let slice = (Instant::now() + Duration::from_millis(100)).min(deadline);
            match port.read_frame(slice) {
                Ok(None) if Instant::now() < deadline && !stop() => continue,
                other => break other,
            }
        };
        match hello {
            Ok(Some(FromAgent::Hello(info))) => {
                port.info = info;
                Ok(port)
            }
            Ok(Some(FromAgent::OpenFailed(why))) => Err(failed(why)),
            Ok(Some(_)) => Err(failed("it did not start with a hello".into())),
            Ok(None) if stop() => Err(failed("stopped before it answered".into())),
            Ok(None) => Err(failed(format!(
                "no answer within {} s",
                hello_timeout.as_secs_f64()
            ))),
            Err(TransportError::Recv { errno }) if errno == libc::EPROTO => Err(failed(
                "it printed something that is not the agent protocol; is it `ibscope agent` \
                 (and does the login print nothing on stdout)?"
                    .into(),
            )),
            Err(TransportError::Recv { .. }) => {
                let how = match port.wait_briefly() {
                    Some(code) => format!("exit code {code}"),
                    None => "it was killed".to_string(),
                };
                Err(failed(format!(
                    "it ended before answering ({how}); is it `ibscope agent`?"
                )))
            }
            Err(e) => Err(e),
        }
    }

    /// The child's exit code once it ended (waiting up to 2 s after closing its input;
    /// then its process group is killed: an agent stuck in its transport, or a shell's
    /// children, are not left behind).
    fn wait_briefly(&mut self) -> Option<i32> {
        drop(self.to_agent.take());
        let deadline = Instant::now() + AGENT_EXIT;
        let mut code = None;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                code = Some(status.code());
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Ok(group) = i32::try_from(self.child.id()) {
            // SAFETY: a plain syscall; the group is the child's own (process_group(0)).
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.child.wait();
        code.flatten()
    }

    /// The command this port runs.
    pub fn command(&self) -> &str {
        &self.command
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        match self.to_agent.as_mut() {
            Some(w) => w.flush().map_err(|e| TransportError::Send {
                errno: e.raw_os_error().unwrap_or(libc::EPIPE),
            }),
            None => Err(TransportError::Send { errno: libc::EPIPE }),
        }
    }

    fn write(&mut self, request: &ToAgent) -> Result<(), TransportError> {
        let w = self
            .to_agent
            .as_mut()
            .ok_or(TransportError::Send { errno: libc::EPIPE })?;
        w.write_all(&request.encode())
            .map_err(|e| TransportError::Send {
                errno: e.raw_os_error().unwrap_or(libc::EPIPE),
            })
    }

    /// The next frame, waiting until `deadline`; `Ok(None)` when it passed. The end of the
    /// agent's output is a lost transport (`Recv` with EPIPE).
    fn read_frame(&mut self, deadline: Instant) -> Result<Option<FromAgent>, TransportError> {
        let garbled = |e: FrameError| {
            tracing::error!(command = %self.command, error = %e, "relay");
            TransportError::Recv {
                errno: libc::EPROTO,
            }
        };
        loop {
            if let Some(frame) = self.reader.next_frame().map_err(garbled)? {
                return FromAgent::decode(&frame).map(Some).map_err(garbled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
            let mut fds = libc::pollfd {
                fd: self.from_agent.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, as the count says.
            let ready = unsafe { libc::poll(&mut fds, 1, ms) };
            if ready < 0 {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if errno == libc::EINTR {
                    continue;
                }
                return Err(TransportError::Recv { errno });
            }
            if ready == 0 {
                return Ok(None);
            }
            let mut chunk = [0u8; 8192];
            match self.from_agent.read(&mut chunk) {
                Ok(0) => return Err(TransportError::Recv { errno: libc::EPIPE }),
                Ok(n) => self.reader.push(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(TransportError::Recv {
                        errno: e.raw_os_error().unwrap_or(libc::EPIPE),
                    })
                }
            }
        }
    }

    /// A frame the client did not wait for: queue a MAD, turn a loss into an error.
    fn take(&mut self, frame: FromAgent) -> Result<(), TransportError> {
        match frame {
            FromAgent::Mad { agent, status, mad } => {
                self.queued.push_back(Received {
                    agent,
                    status,
                    len: MAD_SIZE,
                    mad: *mad,
                    // A MAD frame carries one MAD: the rest of a reassembled RMPP reply
                    // does not cross the relay (its first MAD's RMPP header still says how
                    // much the table held, so an SA query can say it got part of it).
                    tail: Vec::new(),
                });
                Ok(())
            }
            FromAgent::Lost { send: true, errno } => Err(TransportError::Send { errno }),
            FromAgent::Lost { send: false, errno } => Err(TransportError::Recv { errno }),
            // Out of turn: the agent is confused; treat it as gone.
            _ => Err(TransportError::Recv {
                errno: libc::EPROTO,
            }),
        }
    }
}

impl MadPort for RelayPort {
    fn info(&self) -> &LocalPort {
        &self.info
    }

    fn is_in_process(&self) -> bool {
        false
    }

    fn register(&mut self, mgmt_class: u8, version: u8) -> Result<u32, TransportError> {
        self.write(&ToAgent::Register {
            mgmt_class,
            version,
        })?;
        self.flush()?;
        let deadline = Instant::now() + REGISTER_TIMEOUT;
        loop {
            match self.read_frame(deadline)? {
                Some(FromAgent::Registered {
                    mgmt_class: c,
                    result,
                }) if c == mgmt_class => {
                    return result.map_err(|errno| TransportError::Register {
                        mgmt_class,
                        version,
                        errno,
                    })
                }
                Some(other) => self.take(other)?,
                None => {
                    return Err(TransportError::Register {
                        mgmt_class,
                        version,
                        errno: libc::ETIMEDOUT,
                    })
                }
            }
        }
    }

    fn unregister(&mut self, agent: u32) {
        if self.write(&ToAgent::Unregister { agent }).is_ok() {
            let _ = self.flush();
        }
    }

    fn send(
        &mut self,
        agent: u32,
        mad: &[u8; MAD_SIZE],
        dest: &Dest,
        timeout_ms: u32,
        retries: u32,
    ) -> Result<(), TransportError> {
        let (lid, qpn, qkey) = dest.address();
        // Buffered: a burst of sends goes out in one write, flushed before the next wait.
        self.write(&ToAgent::Send {
            agent,
            timeout_ms,
            retries,
            lid,
            qpn,
            qkey,
            mad: Box::new(*mad),
        })
    }

    fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
        self.flush()?;
        if let Some(r) = self.queued.pop_front() {
            return Ok(Some(r));
        }
        let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
        loop {
            match self.read_frame(deadline)? {
                Some(frame) => {
                    self.take(frame)?;
                    if let Some(r) = self.queued.pop_front() {
                        return Ok(Some(r));
                    }
                }
                None => return Ok(None),
            }
        }
    }
}

impl Drop for RelayPort {
    fn drop(&mut self) {
        // The end of its input stops the agent; give it a moment to close its port.
        self.wait_briefly();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn local() -> LocalPort {
        LocalPort {
            ca_name: "mlx5_1".into(),
            ca_type: "MT4129".into(),
            node_guid: 0x0002_c903_0000_1001,
            port_num: 1,
            lid: 12,
            sm_lid: 1,
            lmc: 0,
            state: PortState::Active,
            phys_state: PhysState::LinkUp,
            port_guid: 0x0002_c903_0000_1002,
            link_layer: "InfiniBand".into(),
            sm_disabled: false,
        }
    }

    #[test]
    fn frames_round_trip() {
        let mut mad = Box::new([0u8; MAD_SIZE]);
        mad[0] = 0x81;
        mad[255] = 7;
        let from = [
            FromAgent::Hello(local()),
            FromAgent::OpenFailed("InfiniBand device \"mlx5_9\" not found".into()),
            FromAgent::Registered {
                mgmt_class: 0x81,
                result: Ok(3),
            },
            FromAgent::Registered {
                mgmt_class: 0x04,
                result: Err(libc::EPERM),
            },
            FromAgent::Mad {
                agent: 3,
                status: 110,
                mad: mad.clone(),
            },
            FromAgent::Lost {
                send: true,
                errno: libc::EIO,
            },
        ];
        for f in from {
            let bytes = f.encode();
            let mut r = FrameReader::default();
            r.push(&bytes);
            let frame = r.next_frame().unwrap().unwrap();
            assert_eq!(FromAgent::decode(&frame).unwrap(), f);
            assert_eq!(r.next_frame().unwrap(), None);
        }
        let to = [
            ToAgent::Register {
                mgmt_class: 0x81,
                version: 1,
            },
            ToAgent::Unregister { agent: 2 },
            ToAgent::Send {
                agent: 2,
                timeout_ms: 200,
                retries: 0,
                lid: 0xffff,
                qpn: 1,
                qkey: crate::umad::GSI_QKEY,
                mad,
            },
        ];
        for t in to {
            assert_eq!(ToAgent::decode(&t.encode()[4..]).unwrap(), t);
        }
    }

    #[test]
    fn frames_arrive_in_pieces_and_garbage_is_an_error() {
        let a = FromAgent::Lost {
            send: false,
            errno: 5,
        }
        .encode();
        let b = FromAgent::OpenFailed("x".into()).encode();
        let mut r = FrameReader::default();
        let all: Vec<u8> = a.iter().chain(&b).copied().collect();
        for byte in &all {
            r.push(&[*byte]);
        }
        assert!(r.next_frame().unwrap().is_some());
        assert!(r.next_frame().unwrap().is_some());
        assert_eq!(r.next_frame().unwrap(), None);
        // Text on stdout (a login banner, say) is not a frame.
        let mut r = FrameReader::default();
        r.push(b"Welcome to mgmt2\n");
        assert!(r.next_frame().is_err());
        // Truncated payloads and unknown kinds fail, they do not panic.
        assert!(FromAgent::decode(&[kind::HELLO, 0]).is_err());
        assert!(FromAgent::decode(&[kind::MAD, 0, 0, 0, 1]).is_err());
        assert!(FromAgent::decode(&[0x7f]).is_err());
        assert!(FromAgent::decode(&[]).is_err());
        assert!(ToAgent::decode(&[kind::SEND, 1, 2]).is_err());
        let mut old = FromAgent::Hello(local()).encode();
        old[5..7].copy_from_slice(&99u16.to_be_bytes());
        let e = FromAgent::decode(&old[4..]).unwrap_err().to_string();
        assert!(e.contains("same ibscope version"), "{e}");
    }

    /// A port that answers each send with the MAD itself, R bit set, through a channel the
    /// receiver half reads; agent ids are the class.
    struct Echo {
        info: LocalPort,
        replies: mpsc::Sender<Received>,
        refuse: bool,
    }

    struct EchoRx(mpsc::Receiver<Received>);

    impl MadPort for Echo {
        fn info(&self) -> &LocalPort {
            &self.info
        }
        fn register(&mut self, mgmt_class: u8, _version: u8) -> Result<u32, TransportError> {
            Ok(u32::from(mgmt_class))
        }
        fn unregister(&mut self, _agent: u32) {}
        fn send(
            &mut self,
            agent: u32,
            mad: &[u8; MAD_SIZE],
            dest: &Dest,
            _timeout_ms: u32,
            _retries: u32,
        ) -> Result<(), TransportError> {
            if self.refuse {
                return Err(TransportError::Send {
                    errno: libc::EINVAL,
                });
            }
            let mut reply = *mad;
            reply[3] |= 0x80;
            // The address made it across: the LID goes into the reply's last bytes.
            let (lid, _, _) = dest.address();
            reply[254..].copy_from_slice(&lid.to_be_bytes());
            let _ = self.replies.send(Received {
                agent,
                status: 0,
                len: MAD_SIZE,
                mad: reply,
                tail: Vec::new(),
            });
            Ok(())
        }
        fn recv(&mut self, _timeout_ms: u32) -> Result<Option<Received>, TransportError> {
            unreachable!("the agent reads through its receiver")
        }
    }

    impl Receiver for EchoRx {
        fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
            match self
                .0
                .recv_timeout(Duration::from_millis(u64::from(timeout_ms)))
            {
                Ok(r) => Ok(Some(r)),
                Err(_) => Ok(None),
            }
        }
    }

    /// Run the agent over in-memory pipes: the client's frames in, what it wrote out.
    fn run_agent(port: Result<(Echo, EchoRx), String>, requests: &[ToAgent]) -> Vec<FromAgent> {
        let input: Vec<u8> = requests.iter().flat_map(ToAgent::encode).collect();
        // The input ends right away; the receiver thread gets one poll to hand back
        // replies before the agent stops, which is plenty for a channel.
        let slow_input = SlowEnd {
            data: std::io::Cursor::new(input),
            wait: Duration::from_millis(300),
        };
        let mut out = Vec::new();
        serve(port, slow_input, &mut out).unwrap();
        let mut r = FrameReader::default();
        r.push(&out);
        let mut frames = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            frames.push(FromAgent::decode(&f).unwrap());
        }
        frames
    }

    /// A reader that waits a while before saying "end of stream".
    struct SlowEnd {
        data: std::io::Cursor<Vec<u8>>,
        wait: Duration,
    }

    impl Read for SlowEnd {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.data.read(buf)?;
            if n == 0 {
                std::thread::sleep(self.wait);
            }
            Ok(n)
        }
    }

    fn echo(refuse: bool) -> (Echo, EchoRx) {
        let (tx, rx) = mpsc::channel();
        (
            Echo {
                info: local(),
                replies: tx,
                refuse,
            },
            EchoRx(rx),
        )
    }

    #[test]
    fn the_agent_relays_registers_sends_and_replies() {
        let mut mad = Box::new([0u8; MAD_SIZE]);
        mad[1] = 0x81;
        let frames = run_agent(
            Ok(echo(false)),
            &[
                ToAgent::Register {
                    mgmt_class: 0x81,
                    version: 1,
                },
                ToAgent::Send {
                    agent: 0x81,
                    timeout_ms: 200,
                    retries: 0,
                    lid: 0xffff,
                    qpn: 0,
                    qkey: 0,
                    mad,
                },
            ],
        );
        assert_eq!(frames[0], FromAgent::Hello(local()));
        assert_eq!(
            frames[1],
            FromAgent::Registered {
                mgmt_class: 0x81,
                result: Ok(0x81)
            }
        );
        let FromAgent::Mad { agent, status, mad } = &frames[2] else {
            panic!("{:?}", frames[2]);
        };
        assert_eq!((*agent, *status, mad[3] & 0x80), (0x81, 0, 0x80));
        assert_eq!(&mad[254..], &[0xff, 0xff]);
        assert_eq!(frames.len(), 3);
    }

    #[test]
    fn a_refused_send_comes_back_with_its_errno_and_open_failures_are_said() {
        let frames = run_agent(
            Ok(echo(true)),
            &[ToAgent::Send {
                agent: 1,
                timeout_ms: 1,
                retries: 0,
                lid: 3,
                qpn: 1,
                qkey: 1,
                mad: Box::new([9u8; MAD_SIZE]),
            }],
        );
        assert_eq!(
            frames[1],
            FromAgent::Mad {
                agent: 1,
                status: libc::EINVAL,
                mad: Box::new([9u8; MAD_SIZE])
            }
        );
        let frames = run_agent(Err("no InfiniBand device found".into()), &[]);
        assert_eq!(
            frames,
            vec![FromAgent::OpenFailed("no InfiniBand device found".into())]
        );
    }

    #[test]
    fn a_command_that_is_not_an_agent_fails_with_one_line() {
        let e = RelayPort::spawn(&shell("exit 3"), Duration::from_secs(5), &|| false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "fabric command `exit 3`: it ended before answering (exit code 3); is it `ibscope agent`?"
        );
        let e = RelayPort::spawn(
            &shell("echo 'Welcome to mgmt2'; sleep 5"),
            Duration::from_secs(5),
            &|| false,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not the agent protocol"), "{e}");
        let e = RelayPort::spawn(&shell("sleep 5"), Duration::from_millis(100), &|| false)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("no answer within 0.1 s"), "{e}");
        let t = Instant::now();
        let e = RelayPort::spawn(&shell("sleep 5"), Duration::from_secs(30), &|| true)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("stopped before it answered"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    }

    fn shell(line: &str) -> AgentCommand {
        AgentCommand::Shell(line.to_string())
    }

    #[test]
    fn a_program_runs_in_its_directory_with_its_arguments_as_given() {
        // A directory and an argument no shell word would carry unquoted.
        let base = crate::runtime_dir::RuntimeDir::create("relaytest").unwrap();
        let dir = base.path().join("it's $HOME; here");
        std::fs::create_dir(&dir).unwrap();
        let argument = "a 'b' \"c\" $d; e";
        // Exit code 4 only when both arrived as they were.
        let script = "[ \"$(pwd)\" = \"$1\" ] && [ \"$2\" = \"$3\" ] && exit 4; exit 5";
        let argv = ["sh", "-c", script, "sh"]
            .into_iter()
            .map(std::ffi::OsString::from)
            .chain([
                dir.clone().into_os_string(),
                argument.into(),
                argument.into(),
            ])
            .collect();
        let agent = AgentCommand::Program { argv, dir };
        let e = RelayPort::spawn(&agent, Duration::from_secs(5), &|| false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(exit code 4)"), "{e}");
    }
}
