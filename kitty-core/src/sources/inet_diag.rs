//! The kernel's sock_diag answers decoded from their fixed layout
//! (linux/netlink.h, linux/inet_diag.h): a netlink header, `struct
//! inet_diag_msg`, then attributes, of which only `INET_DIAG_INFO` (the
//! tcp_info, decoded here too) is wanted. Written by hand because
//! netlink-packet-sock-diag parses every message into owned values, every
//! attribute included: for 8 ranks of 64 sockets that parse was ~11 % of a
//! tick, more than the kernel's own lookups cost to copy out. Requests are
//! still built with the crate.

use super::tcp_table::{state_name, SocketRaw};
use crate::model::TcpInfo;
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

/// Decodes `struct tcp_info` (linux/tcp.h, `INET_DIAG_INFO`'s bytes) by its
/// fixed ABI offsets; fields a shorter (older kernel) struct lacks come
/// back as None.
pub fn decode_tcp_info(b: &[u8]) -> TcpInfo {
    TcpInfo {
        rtt_us: u32_at(b, 68).unwrap_or(0),
        rttvar_us: u32_at(b, 72).unwrap_or(0),
        snd_cwnd: u32_at(b, 80).unwrap_or(0),
        total_retrans: u32_at(b, 100).unwrap_or(0),
        bytes_acked: u64_at(b, 120),
        bytes_received: u64_at(b, 128),
        segs_out: u32_at(b, 136),
        segs_in: u32_at(b, 140),
        notsent_bytes: u32_at(b, 144),
        min_rtt_us: u32_at(b, 148),
        delivery_rate: u64_at(b, 160),
        busy_time_us: u64_at(b, 168),
        rwnd_limited_us: u64_at(b, 176),
        sndbuf_limited_us: u64_at(b, 184),
        bytes_sent: u64_at(b, 200),
        bytes_retrans: u64_at(b, 208),
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    u32_at(b, at).map(|v| v as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_struct_from_older_kernel() {
        let mut b = vec![0u8; 104];
        b[68..72].copy_from_slice(&1500u32.to_ne_bytes());
        b[100..104].copy_from_slice(&9u32.to_ne_bytes());
        let i = decode_tcp_info(&b);
        assert_eq!((i.rtt_us, i.total_retrans), (1500, 9));
        assert_eq!(i.bytes_acked, None);
        assert_eq!(decode_tcp_info(&[]), TcpInfo::default());
    }

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
