//! The machine's sockets at a snapshot, to find the other end of the one a
//! thread waits on: unix sockets with their peers from the kernel's socket
//! diagnostics (NETLINK_SOCK_DIAG, as `ss -x` asks), TCP and UDP from
//! `/proc/net`. Read in proctrace's own network namespace.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use crate::event::{Peer, Pid, WaitHow};

/// TCP states of `/proc/net/tcp` (include/net/tcp_states.h).
const TCP_SYN_SENT: u8 = 2;
const TCP_LISTEN: u8 = 10;
/// `SOCK_DIAG_BY_FAMILY`, `UDIAG_SHOW_NAME | UDIAG_SHOW_PEER`, and the
/// attributes of the answer (include/uapi/linux/{sock_diag,unix_diag}.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW: u32 = 0x1 | 0x2 | 0x4;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_VFS: u16 = 1;
const UNIX_DIAG_PEER: u16 = 2;

/// A unix socket and its peer's inode (0: none).
#[derive(Debug, Default)]
struct Unix {
    peer: u64,
    name: Option<String>,
    /// The inode and the kernel's device number of the file it is bound
    /// to, for a path socket.
    file: Option<(u32, u32)>,
    listening: bool,
}

/// Where a unix socket connects to: `@name` for an abstract address, or
/// the socket file's device and inode.
#[derive(Debug)]
pub(super) enum UnixAddress {
    Abstract(String),
    File { dev: u64, ino: u64 },
}

/// A TCP or UDP socket of `/proc/net`.
#[derive(Debug)]
struct Inet {
    tcp: bool,
    local: SocketAddr,
    remote: SocketAddr,
    state: u8,
    ino: u64,
}

/// The sockets of the machine, by inode.
#[derive(Debug, Default)]
pub(super) struct Sockets {
    unix: HashMap<u64, Unix>,
    inet: Vec<Inet>,
}

impl Sockets {
    /// The sockets of the network namespace `pid` is in (a test sandbox
    /// such as bazel's or `unshare -n` has its own loopback).
    pub fn read(pid: Pid) -> Sockets {
        let mut inet = Vec::new();
        for (file, tcp) in [
            ("tcp", true),
            ("tcp6", true),
            ("udp", false),
            ("udp6", false),
        ] {
            let path = format!("/proc/{pid}/net/{file}");
            let text = fs::read_to_string(path).unwrap_or_default();
            inet.extend(text.lines().skip(1).filter_map(|l| parse_inet(l, tcp)));
        }
        Sockets {
            unix: unix_sockets(pid).unwrap_or_default(),
            inet,
        }
    }

    /// What socket `ino` is, for people, and who can end a wait on it.
    pub fn peer(&self, ino: u64, how: WaitHow) -> (String, Peer) {
        if let Some(unix) = self.unix.get(&ino) {
            let name = unix.name.as_ref().or_else(|| {
                let peer = self.unix.get(&unix.peer)?;
                peer.name.as_ref()
            });
            let name = name.map(|n| format!(" {n}")).unwrap_or_default();
            let what = format!("unix socket:[{ino}]{name}");
            return match unix {
                Unix {
                    peer: 0,
                    listening: true,
                    ..
                } => (
                    what,
                    Peer::unresolved("a listener: any process may connect"),
                ),
                Unix { peer: 0, .. } => (what, Peer::unresolved("it has no peer")),
                Unix { peer, .. } => (what, Peer::Socket { ino: *peer }),
            };
        }
        let Some(socket) = self.inet.iter().find(|s| s.ino == ino) else {
            let why = "not a unix, TCP or UDP socket of its network namespace";
            return (format!("socket:[{ino}]"), Peer::unresolved(why));
        };
        let proto = if socket.tcp { "TCP" } else { "UDP" };
        let what = format!("{proto} {} -> {}", socket.local, socket.remote);
        if !socket.tcp {
            return self.udp_peer(socket, what);
        }
        if socket.state == TCP_LISTEN {
            let what = format!("TCP listener {}", socket.local);
            return (what, Peer::unresolved("any process may connect"));
        }
        let other_end = (socket.state != TCP_SYN_SENT)
            .then(|| {
                self.inet.iter().find(|s| {
                    s.tcp && s.local == socket.remote && s.remote == socket.local && s.ino != 0
                })
            })
            .flatten();
        if let Some(end) = other_end {
            return (what, Peer::Socket { ino: end.ino });
        }
        match self.listener(socket.remote) {
            Some(listener) => {
                let what = match how {
                    WaitHow::Connect => what,
                    _ => format!("{what} (not yet accepted)"),
                };
                (what, Peer::Socket { ino: listener })
            }
            None if is_local(socket.remote.ip()) => (
                what,
                Peer::unresolved("no socket of this machine has its other end"),
            ),
            None => {
                let why = format!("{} is not on this machine", socket.remote);
                (what, Peer::unresolved(&why))
            }
        }
    }

    /// The listening unix socket at `to`, which a connect(2) blocked on a
    /// full backlog waits to be accepted by.
    pub fn unix_listener(&self, to: &UnixAddress) -> Peer {
        let at = |unix: &Unix| match to {
            UnixAddress::Abstract(name) => unix.name.as_ref() == Some(name),
            UnixAddress::File { dev, ino } => {
                let dev = libc::major(*dev) << 20 | libc::minor(*dev);
                unix.file == Some((*ino as u32, dev))
            }
        };
        let listener = self.unix.iter().find(|(_, u)| u.listening && at(u));
        match listener {
            Some((&ino, _)) => Peer::Socket { ino },
            // A path socket's listener may be in another network
            // namespace, whose sockets were not read.
            None => Peer::unresolved("its listener is not a socket of this network namespace"),
        }
    }

    /// Who can end a wait on a UDP socket: the holder of the address a
    /// connected one sends to (a test's local server); anybody at all for
    /// one that is not connected.
    fn udp_peer(&self, socket: &Inet, what: String) -> (String, Peer) {
        if socket.remote.port() == 0 {
            return (what, Peer::unresolved("UDP: any process may send to it"));
        }
        let bound = |s: &&Inet| {
            !s.tcp
                && s.ino != socket.ino
                && s.local.port() == socket.remote.port()
                && (s.local.ip() == socket.remote.ip() || s.local.ip().is_unspecified())
        };
        // A socket connected back to this one before any other bound there.
        let to_us = |s: &&Inet| s.remote == socket.local;
        let mut bound: Vec<&Inet> = self.inet.iter().filter(bound).collect();
        bound.sort_by_key(|s| !to_us(s));
        match bound.first() {
            Some(end) => (what, Peer::Socket { ino: end.ino }),
            None if is_local(socket.remote.ip()) => (
                what,
                Peer::unresolved("no socket of this machine is bound to where it sends"),
            ),
            None => {
                let why = format!("{} is not on this machine", socket.remote);
                (what, Peer::unresolved(&why))
            }
        }
    }

    /// The inode of the TCP listener `to` connects to.
    fn listener(&self, to: SocketAddr) -> Option<u64> {
        self.inet
            .iter()
            .filter(|s| s.tcp && s.state == TCP_LISTEN && s.local.port() == to.port())
            .find(|s| s.local.ip() == to.ip() || s.local.ip().is_unspecified())
            .map(|s| s.ino)
    }
}

fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified()
}

/// `0: 0100007F:1F90 0100007F:9C40 01 ... inode ...`
fn parse_inet(line: &str, tcp: bool) -> Option<Inet> {
    let words: Vec<&str> = line.split_whitespace().collect();
    Some(Inet {
        tcp,
        local: parse_addr(words.get(1)?)?,
        remote: parse_addr(words.get(2)?)?,
        state: u8::from_str_radix(words.get(3)?, 16).ok()?,
        ino: words.get(9)?.parse().ok()?,
    })
}

/// An address of `/proc/net/tcp`: 32-bit words in the machine's order.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).map(u32::from_be))
        .collect::<Result<_, _>>()
        .ok()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The request of a unix socket dump (`struct unix_diag_req` after its
/// netlink header).
#[repr(C)]
struct UnixDiagRequest {
    header: libc::nlmsghdr,
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

/// The network namespace `pid` is in, as its inode.
pub(super) fn netns_of(pid: Pid) -> Option<u64> {
    fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// A socket diagnostics socket in the network namespace of `pid`: made
/// there by a thread that joins it, as a socket answers for the
/// namespace it was made in.
fn diag_socket(pid: Pid) -> io::Result<OwnedFd> {
    if netns_of(pid) == netns_of(std::process::id() as Pid) {
        return diag_socket_here();
    }
    let ns = fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || {
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
        diag_socket_here()
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("the namespace thread failed")))
}

fn diag_socket_here() -> io::Result<OwnedFd> {
    // SAFETY: socket() has no preconditions; the fd is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Every unix socket of the network namespace of `pid`, by inode.
fn unix_sockets(pid: Pid) -> io::Result<HashMap<u64, Unix>> {
    let socket = diag_socket(pid)?;
    let request = UnixDiagRequest {
        header: libc::nlmsghdr {
            nlmsg_len: size_of::<UnixDiagRequest>() as u32,
            nlmsg_type: SOCK_DIAG_BY_FAMILY,
            nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        },
        family: libc::AF_UNIX as u8,
        protocol: 0,
        pad: 0,
        states: u32::MAX,
        ino: 0,
        show: UDIAG_SHOW,
        cookie: [u32::MAX; 2],
    };
    // SAFETY: the request is a plain repr(C) value of the given size.
    let sent = unsafe {
        libc::send(
            socket.as_raw_fd(),
            (&request as *const UnixDiagRequest).cast(),
            size_of::<UnixDiagRequest>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sockets = HashMap::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: the buffer is writable for its length.
        let got = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                0,
            )
        };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        if !parse_dump(&buffer[..got as usize], &mut sockets) {
            return Ok(sockets);
        }
    }
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Adds the sockets of one datagram of the dump; false once it is done.
fn parse_dump(mut bytes: &[u8], sockets: &mut HashMap<u64, Unix>) -> bool {
    const HEADER: usize = size_of::<libc::nlmsghdr>();
    while let (Some(len), Some(kind)) = (u32_at(bytes, 0), u16_at(bytes, 4)) {
        let len = len as usize;
        if len < HEADER || len > bytes.len() {
            return false;
        }
        match i32::from(kind) {
            libc::NLMSG_DONE | libc::NLMSG_ERROR => return false,
            _ => {
                if let Some((ino, unix)) = parse_unix(&bytes[HEADER..len]) {
                    sockets.insert(ino, unix);
                }
            }
        }
        bytes = &bytes[len.next_multiple_of(4).min(bytes.len())..];
    }
    true
}

/// One `struct unix_diag_msg` and its attributes.
fn parse_unix(msg: &[u8]) -> Option<(u64, Unix)> {
    // family, type, state, pad, ino, cookie[2]: 16 bytes.
    let state = *msg.get(2)?;
    let ino = u64::from(u32_at(msg, 4)?);
    let mut unix = Unix {
        listening: state == TCP_LISTEN,
        ..Unix::default()
    };
    let mut attrs = msg.get(16..)?;
    while let (Some(len), Some(kind)) = (u16_at(attrs, 0), u16_at(attrs, 2)) {
        let len = usize::from(len);
        let value = attrs.get(4..len)?;
        match kind {
            UNIX_DIAG_PEER => unix.peer = u64::from(u32_at(value, 0)?),
            UNIX_DIAG_NAME => unix.name = Some(socket_name(value)),
            UNIX_DIAG_VFS => unix.file = Some((u32_at(value, 0)?, u32_at(value, 4)?)),
            _ => {}
        }
        attrs = attrs.get(len.next_multiple_of(4).min(attrs.len())..)?;
    }
    Some((ino, unix))
}

/// A path, or `@name` for an abstract one.
fn socket_name(value: &[u8]) -> String {
    match value.split_first() {
        Some((0, name)) => format!("@{}", String::from_utf8_lossy(name)),
        _ => String::from_utf8_lossy(value.split(|&b| b == 0).next().unwrap_or(value)).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_addresses_read_in_the_machines_order() {
        let line = "   1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4242 1";
        let socket = parse_inet(line, true).unwrap();
        assert_eq!(socket.local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(socket.remote, "127.0.0.1:40000".parse().unwrap());
        assert_eq!((socket.state, socket.ino), (1, 4242));
        let v6 = parse_addr("00000000000000000000000001000000:0050").unwrap();
        assert_eq!(v6, "[::1]:80".parse().unwrap());
    }

    #[test]
    fn a_socketpair_is_found_with_its_peer() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let ino = |s: &std::os::unix::net::UnixStream| {
            use std::os::unix::fs::MetadataExt;
            let path = format!("/proc/self/fd/{}", s.as_raw_fd());
            fs::metadata(path).unwrap().ino()
        };
        let sockets = Sockets::read(std::process::id() as Pid);
        let (what, peer) = sockets.peer(ino(&a), WaitHow::Read);
        assert_eq!(what, format!("unix socket:[{}]", ino(&a)));
        assert_eq!(peer, Peer::Socket { ino: ino(&b) });
    }
}
