//! TAP devices: an Ethernet interface whose frames this process reads and
//! writes. The device lives as long as its file descriptor.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

pub fn open(name: &str) -> io::Result<File> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::other(format!("interface name too long: {name}")));
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TAP | IFF_NO_PI,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes an ifreq-sized struct.
    if unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF, &mut req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl on our own fd.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Ok(f)
}
