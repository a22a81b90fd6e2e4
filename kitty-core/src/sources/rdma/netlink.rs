//! Which process owns which queue pair, over RDMA netlink (the resource
//! dump `rdma resource show qp` reads): RDMA_NLDEV_CMD_GET lists the
//! devices, RDMA_NLDEV_CMD_RES_QP_GET per device gives each QP's port and
//! owner pid. The most exact rank -> port mapping where the kernel has it
//! (the nldev attributes are ABI: include/uapi/rdma/rdma_netlink.h). No
//! crate speaks RDMA netlink; netlink-sys carries the socket, the few
//! attributes are read here.

use netlink_sys::{protocols::NETLINK_RDMA, Socket, SocketAddr};

const RDMA_NL_NLDEV: u16 = 5;
const CMD_GET: u16 = 1;
const CMD_RES_QP_GET: u16 = 10;
const ATTR_DEV_INDEX: u16 = 1;
const ATTR_DEV_NAME: u16 = 2;
const ATTR_PORT_INDEX: u16 = 3;
const ATTR_RES_QP: u16 = 19;
const ATTR_RES_QP_ENTRY: u16 = 20;
const ATTR_RES_LQPN: u16 = 21;
const ATTR_RES_PID: u16 = 28;

const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLA_TYPE_MASK: u16 = 0x3fff;
/// Messages read per dump, at most (a machine has a few thousand QPs).
const MAX_MESSAGES: usize = 100_000;

/// A queue pair and the process that created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpOwner {
    pub device: String,
    /// The port it is bound to (absent before the QP is connected).
    pub port: Option<u32>,
    pub pid: u32,
    pub lqpn: u32,
}

const fn nl_type(op: u16) -> u16 {
    (RDMA_NL_NLDEV << 10) + op
}

/// Every QP owned by a process, on every device.
pub fn qp_owners() -> Result<Vec<QpOwner>, String> {
    let mut s = Socket::new(NETLINK_RDMA)
        .map_err(|e| format!("no RDMA netlink ({e}): the kernel has no InfiniBand core loaded"))?;
    s.bind_auto()
        .map_err(|e| format!("RDMA netlink bind: {e}"))?;
    s.connect(&SocketAddr::new(0, 0))
        .map_err(|e| format!("RDMA netlink connect: {e}"))?;
    let devices = dump(&mut s, nl_type(CMD_GET), None)?;
    let mut out = Vec::new();
    for (index, _) in parse_devices(&devices) {
        let msgs = dump(&mut s, nl_type(CMD_RES_QP_GET), Some(index))?;
        out.extend(parse_qps(&msgs));
    }
    Ok(out)
}

/// Sends one dump request and gathers the replies' payloads.
fn dump(s: &mut Socket, ty: u16, dev: Option<u32>) -> Result<Vec<Vec<u8>>, String> {
    let mut msg = Vec::with_capacity(24);
    let len: u32 = 16 + if dev.is_some() { 8 } else { 0 };
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    if let Some(i) = dev {
        msg.extend_from_slice(&8u16.to_ne_bytes());
        msg.extend_from_slice(&ATTR_DEV_INDEX.to_ne_bytes());
        msg.extend_from_slice(&i.to_ne_bytes());
    }
    s.send(&msg, 0)
        .map_err(|e| format!("RDMA netlink send: {e}"))?;
    let mut out = Vec::new();
    let mut rx = vec![0u8; 64 * 1024];
    loop {
        let n = s
            .recv(&mut &mut rx[..], 0)
            .map_err(|e| format!("RDMA netlink recv: {e}"))?;
        for (ty, payload) in messages(&rx[..n]) {
            match ty {
                NLMSG_DONE => return Ok(out),
                NLMSG_ERROR => {
                    let code = payload
                        .get(..4)
                        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    if code == 0 {
                        return Ok(out);
                    }
                    return Err(format!(
                        "RDMA netlink: {}",
                        std::io::Error::from_raw_os_error(-code)
                    ));
                }
                _ => out.push(payload.to_vec()),
            }
        }
        if out.len() > MAX_MESSAGES || n == 0 {
            return Ok(out);
        }
    }
}

/// (type, payload) of each netlink message in a buffer.
pub fn messages(buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(buf[off + 4..off + 6].try_into().unwrap());
        if len < 16 || off + len > buf.len() {
            break;
        }
        out.push((ty, &buf[off + 16..off + len]));
        off += (len + 3) & !3;
    }
    out
}

/// (type, value) of each attribute in a buffer (the nested flag dropped).
pub fn attrs(buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 4 <= buf.len() {
        let len = u16::from_ne_bytes([buf[off], buf[off + 1]]) as usize;
        let ty = u16::from_ne_bytes([buf[off + 2], buf[off + 3]]) & NLA_TYPE_MASK;
        if len < 4 || off + len > buf.len() {
            break;
        }
        out.push((ty, &buf[off + 4..off + len]));
        off += (len + 3) & !3;
    }
    out
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

fn str_of(v: &[u8]) -> String {
    let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
    crate::model::text::sanitize(&String::from_utf8_lossy(&v[..end]), 64)
}

/// (index, name) of each device in RDMA_NLDEV_CMD_GET replies.
pub fn parse_devices(msgs: &[Vec<u8>]) -> Vec<(u32, String)> {
    msgs.iter()
        .filter_map(|m| {
            let a = attrs(m);
            let idx = a
                .iter()
                .find(|(t, _)| *t == ATTR_DEV_INDEX)
                .and_then(|(_, v)| u32_of(v))?;
            let name = a
                .iter()
                .find(|(t, _)| *t == ATTR_DEV_NAME)
                .map(|(_, v)| str_of(v))?;
            Some((idx, name))
        })
        .collect()
}

/// The owned QPs in RDMA_NLDEV_CMD_RES_QP_GET replies (kernel QPs, which
/// have no pid, are left out).
pub fn parse_qps(msgs: &[Vec<u8>]) -> Vec<QpOwner> {
    let mut out = Vec::new();
    for m in msgs {
        let a = attrs(m);
        let device = a
            .iter()
            .find(|(t, _)| *t == ATTR_DEV_NAME)
            .map(|(_, v)| str_of(v))
            .unwrap_or_default();
        for (_, table) in a.iter().filter(|(t, _)| *t == ATTR_RES_QP) {
            for (_, entry) in attrs(table).iter().filter(|(t, _)| *t == ATTR_RES_QP_ENTRY) {
                let e = attrs(entry);
                let get = |ty| {
                    e.iter()
                        .find(|(t, _)| *t == ty)
                        .and_then(|(_, v)| u32_of(v))
                };
                if let (Some(pid), Some(lqpn)) = (get(ATTR_RES_PID), get(ATTR_RES_LQPN)) {
                    out.push(QpOwner {
                        device: device.clone(),
                        port: get(ATTR_PORT_INDEX),
                        pid,
                        lqpn,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, v: &[u8]) -> Vec<u8> {
        let mut a = ((4 + v.len()) as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(v);
        while !a.len().is_multiple_of(4) {
            a.push(0);
        }
        a
    }

    fn nested(ty: u16, parts: &[Vec<u8>]) -> Vec<u8> {
        attr(ty | 0x8000, &parts.concat())
    }

    fn msg(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut m = ((16 + payload.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(payload);
        m
    }

    /// A reply laid out as the kernel's nldev writes it: device index and
    /// name, then the QP table with one entry per QP.
    #[test]
    fn reads_qp_owners_from_a_reply_in_the_uapi_layout() {
        let qp = |lqpn: u32, port: Option<u32>, pid: Option<u32>| {
            let mut p = vec![attr(ATTR_RES_LQPN, &lqpn.to_ne_bytes())];
            if let Some(port) = port {
                p.push(attr(ATTR_PORT_INDEX, &port.to_ne_bytes()));
            }
            if let Some(pid) = pid {
                p.push(attr(ATTR_RES_PID, &pid.to_ne_bytes()));
            }
            nested(ATTR_RES_QP_ENTRY, &p)
        };
        let payload = [
            attr(ATTR_DEV_INDEX, &3u32.to_ne_bytes()),
            attr(ATTR_DEV_NAME, b"mlx5_3\0"),
            nested(
                ATTR_RES_QP,
                &[
                    qp(1, Some(1), None),
                    qp(77, Some(1), Some(4242)),
                    qp(78, None, Some(4242)),
                ],
            ),
        ]
        .concat();
        let mut buf = msg(nl_type(CMD_RES_QP_GET), &payload);
        buf.extend(msg(NLMSG_DONE, &[0; 4]));
        let ms = messages(&buf);
        assert_eq!(ms.len(), 2);
        assert_eq!(ms[1].0, NLMSG_DONE);
        let owners = parse_qps(&[ms[0].1.to_vec()]);
        assert_eq!(
            owners,
            [
                QpOwner {
                    device: "mlx5_3".into(),
                    port: Some(1),
                    pid: 4242,
                    lqpn: 77
                },
                QpOwner {
                    device: "mlx5_3".into(),
                    port: None,
                    pid: 4242,
                    lqpn: 78
                },
            ],
            "the kernel's own QP (no pid) is left out"
        );
        let devs = parse_devices(std::slice::from_ref(&payload));
        assert_eq!(devs, [(3, "mlx5_3".to_string())]);
        // A cut message is not read past its end.
        assert!(messages(&buf[..10]).is_empty());
        assert!(parse_qps(&[payload[..9].to_vec()]).is_empty());
    }

    #[test]
    fn a_kernel_without_rdma_says_so() {
        match qp_owners() {
            Ok(q) => eprintln!("this kernel has RDMA netlink: {} owned QPs", q.len()),
            Err(e) => assert!(e.contains("RDMA netlink"), "{e}"),
        }
    }
}
