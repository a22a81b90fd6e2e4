//! The kernel's sock_diag answers decoded from their fixed layout
//! (linux/netlink.h, linux/inet_diag.h): a netlink header, `struct
//! inet_diag_msg`, then attributes, of which only `INET_DIAG_INFO` (the
//! tcp_info) is wanted. Written by hand because netlink-packet-sock-diag
//! parses every message into owned values, every attribute included: for 8
//! ranks of 64 sockets that parse was ~11 % of a tick, more than the
//! kernel's own lookups cost to copy out. Requests are still built with the
//! crate.

use super::sockdiag::decode_tcp_info;
use super::tcp_table::{state_name, SocketRaw};
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6};
use netlink_packet_sock_diag::inet::SocketId;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const NLMSG_HDR: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `struct inet_diag_msg`: family, state, timer, retrans (a byte each), the
/// 48-byte socket id, then expires, rqueue, wqueue, uid, inode (u32 each).
const INET_DIAG_MSG: usize = 72;
const INET_DIAG_INFO: u16 = 2;

/// One message of an answer. Made and taken apart at once, one at a time:
/// a boxed socket would cost an allocation per socket per tick.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum Answer {
    /// The end of a dump.
    Done,
    /// A request failed (a negative errno): an exact lookup of a socket
    /// that closed answers so.
    Error(i32),
    /// A socket, with the id that looks it up exactly next time.
    Socket(SocketRaw, SocketId),
    /// Anything else (an acknowledgement), skipped.
    Other,
}

/// The messages in `buf` (what one `recv` gave), in order; a message cut
/// short or of an impossible length ends them with an error.
pub fn messages(buf: &[u8]) -> impl Iterator<Item = Result<Answer, String>> + '_ {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let rest = buf.get(off..).filter(|r| !r.is_empty())?;
        let Some(len) = u32_at(rest, 0).map(|l| l as usize) else {
            off = buf.len();
            return Some(Err(format!("{} bytes left, no netlink header", rest.len())));
        };
        if len < NLMSG_HDR || len > rest.len() {
            off = buf.len();
            return Some(Err(format!(
                "netlink message of {len} bytes in {}",
                rest.len()
            )));
        }
        off += len.next_multiple_of(4);
        let kind = u16_at(rest, 4).unwrap_or(0);
        Some(decode(kind, &rest[NLMSG_HDR..len]))
    })
}

fn decode(kind: u16, body: &[u8]) -> Result<Answer, String> {
    match kind {
        NLMSG_DONE => Ok(Answer::Done),
        NLMSG_ERROR => {
            let code = i32_at(body, 0).ok_or("netlink error without its code")?;
            Ok(if code == 0 {
                Answer::Other
            } else {
                Answer::Error(code)
            })
        }
        SOCK_DIAG_BY_FAMILY => socket(body).map(|(raw, id)| Answer::Socket(raw, id)),
        _ => Ok(Answer::Other),
    }
}

fn socket(b: &[u8]) -> Result<(SocketRaw, SocketId), String> {
    if b.len() < INET_DIAG_MSG {
        return Err(format!("inet_diag_msg of {} bytes", b.len()));
    }
    let family = b[0];
    let addr = |at: usize| -> Result<IpAddr, String> {
        let a: [u8; 16] = b[at..at + 16].try_into().expect("16 bytes");
        match family {
            AF_INET => Ok(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
            AF_INET6 => Ok(IpAddr::V6(Ipv6Addr::from(a))),
            f => Err(format!("address family {f}")),
        }
    };
    // The socket id: ports in network order, then source, destination,
    // interface (host order) and cookie.
    let id = SocketId {
        source_port: u16::from_be_bytes([b[4], b[5]]),
        destination_port: u16::from_be_bytes([b[6], b[7]]),
        source_address: addr(8)?,
        destination_address: addr(24)?,
        interface_id: u32_at(b, 40).unwrap_or(0),
        cookie: b[44..52].try_into().expect("8 bytes"),
    };
    let mut info = None;
    let mut at = INET_DIAG_MSG;
    while let (Some(len), Some(kind)) = (u16_at(b, at), u16_at(b, at + 2)) {
        let len = len as usize;
        if len < 4 || at + len > b.len() {
            break;
        }
        if kind & 0x3fff == INET_DIAG_INFO {
            info = Some(decode_tcp_info(&b[at + 4..at + len]));
        }
        at += len.next_multiple_of(4);
    }
    let raw = SocketRaw {
        inode: u64::from(u32_at(b, 68).unwrap_or(0)),
        local: SocketAddr::new(id.source_address, id.source_port),
        remote: SocketAddr::new(id.destination_address, id.destination_port),
        state: state_name(b[1]),
        tx_queue: u64::from(u32_at(b, 60).unwrap_or(0)),
        rx_queue: u64::from(u32_at(b, 56).unwrap_or(0)),
        info,
    };
    Ok((raw, id))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    u32_at(b, at).map(|v| v as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Hostile or cut bytes end in an error or a decoded message, never
        /// a panic or a read past the buffer.
        #[test]
        fn any_bytes_decode_or_fail_cleanly(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
            for m in messages(&buf) {
                let _ = m;
            }
        }
    }
}
