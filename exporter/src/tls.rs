//! TLS in front of `serve`'s HTTP server (`--web-config` with a `tls_server_config`):
//! an accept loop on the listening address does each connection's TLS (rustls) and
//! relays the plain bytes to the HTTP server, which listens on a private abstract Unix
//! socket. The HTTP code (tiny_http, the cache, basic auth) is the same with and without
//! TLS. A client speaking plain HTTP to the TLS port gets a 400 saying so, as Go servers
//! answer, and nothing else.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};

/// A handshake must finish within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection with no traffic either way for this long is closed.
const IDLE: Duration = Duration::from_secs(60);
/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;

/// The private socket the HTTP server listens on: abstract (no file to clean up), named
/// after this process and a random number.
pub fn inner_listener() -> Result<(UnixListener, UnixAddr)> {
    let random = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 0u8);
    let name = format!("ibscope-serve-{}-{random:016x}", std::process::id());
    let addr = UnixAddr::from_abstract_name(name.as_bytes())?;
    let listener = UnixListener::bind_addr(&addr).context("cannot listen on a private socket")?;
    Ok((listener, addr))
}

/// Accept TLS connections on `listener` until `stop`, relaying each to `inner`.
pub fn spawn(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    inner: UnixAddr,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("tls-accept".into())
        .spawn(move || {
            let active = Arc::new(AtomicUsize::new(0));
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((tcp, _)) if active.load(Ordering::SeqCst) < MAX_CONNECTIONS => {
                        let (config, inner, active) =
                            (config.clone(), inner.clone(), active.clone());
                        active.fetch_add(1, Ordering::SeqCst);
                        let started =
                            std::thread::Builder::new()
                                .name("tls-conn".into())
                                .spawn(move || {
                                    if let Err(e) = connection(tcp, config, &inner) {
                                        tracing::debug!(error = %e, "TLS connection ended");
                                    }
                                    active.fetch_sub(1, Ordering::SeqCst);
                                });
                        if started.is_err() {
                            tracing::warn!("cannot start a thread for a TLS connection");
                        }
                    }
                    // Too many at once: close this one (the client retries).
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        wait_readable(&listener, Duration::from_millis(200));
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })
}

/// poll(2) for one fd; true when it became readable (or hung up).
fn wait_readable(fd: &impl AsRawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd, as the count says.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// What a plain-HTTP client gets from the TLS port.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n\
Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// One connection: the handshake, then bytes both ways until either side closes.
fn connection(
    mut tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    inner: &UnixAddr,
) -> Result<()> {
    tcp.set_nonblocking(false)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    tcp.set_write_timeout(Some(IDLE))?;
    // A TLS connection starts with a handshake record (content type 22).
    let mut first = [0u8; 1];
    if tcp.peek(&mut first)? == 1 && first[0] != 0x16 {
        if first[0].is_ascii_alphabetic() {
            let _ = tcp.write_all(PLAIN_HTTP_ANSWER);
        }
        return Ok(());
    }
    let mut tls = rustls::ServerConnection::new(config)?;
    while tls.is_handshaking() {
        tls.complete_io(&mut tcp)?;
    }
    let mut http = UnixStream::connect_addr(inner)?;
    http.set_write_timeout(Some(IDLE))?;
    // The client's first request may have come with its last handshake message: it is
    // decrypted already, and the socket will not poll readable for it again.
    if !forward_plaintext(&mut tls, &mut http)? {
        return Ok(());
    }
    relay(&mut tls, &mut tcp, &mut http)
}

/// Everything rustls has decrypted, to the HTTP server; false once the client has closed.
fn forward_plaintext(tls: &mut rustls::ServerConnection, http: &mut UnixStream) -> Result<bool> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tls.reader().read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => http.write_all(&buf[..n])?,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Until either side closes or nothing moves for [`IDLE`]: what the client sends,
/// decrypted, to the HTTP server; what it answers, encrypted, to the client.
fn relay(
    tls: &mut rustls::ServerConnection,
    tcp: &mut TcpStream,
    http: &mut UnixStream,
) -> Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: tcp.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: http.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = i32::try_from(IDLE.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: two valid pollfds, as the count says.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
                continue;
            }
            return Ok(());
        }
        if ready == 0 {
            return Ok(());
        }
        if fds[0].revents != 0 {
            if tls.read_tls(tcp)? == 0 {
                return Ok(());
            }
            tls.process_new_packets()?;
            let open = forward_plaintext(tls, http)?;
            flush_tls(tls, tcp)?;
            if !open {
                return Ok(());
            }
        }
        if fds[1].revents != 0 {
            let n = match http.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                tls.send_close_notify();
                flush_tls(tls, tcp)?;
                return Ok(());
            }
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                let took = tls.writer().write(rest)?;
                flush_tls(tls, tcp)?;
                rest = &rest[took..];
            }
        }
    }
}

fn flush_tls(tls: &mut rustls::ServerConnection, tcp: &mut TcpStream) -> std::io::Result<()> {
    while tls.wants_write() {
        tls.write_tls(tcp)?;
    }
    Ok(())
}
