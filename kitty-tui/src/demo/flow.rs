//! `demo-flow`: one TCP flow, a sender that writes as fast as the path takes
//! or a sink that reads and discards. The network tests (and later the
//! network stragglers of the demo) run these inside network namespaces.

use clap::Args;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

#[derive(Args, Debug, Clone)]
pub struct FlowArgs {
    /// Send to this address (host:port).
    #[arg(long, conflicts_with = "listen")]
    pub connect: Option<String>,
    /// Accept connections on this address and read them.
    #[arg(long)]
    pub listen: Option<String>,
    /// Pause between 64 KiB writes, in ms (0: as fast as the path takes).
    #[arg(long, default_value_t = 0)]
    pub gap_ms: u64,
    /// Send exactly this many bytes, close, and exit (default: forever).
    #[arg(long)]
    pub bytes: Option<u64>,
}

/// Why a flow could not run.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("demo-flow needs --connect ADDR or --listen ADDR")]
    Args,
    #[error("{0} {1}: {2}")]
    Io(&'static str, String, std::io::Error),
}

pub fn run(a: FlowArgs) -> Result<i32, FlowError> {
    match (a.connect, a.listen) {
        (Some(addr), None) => {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut s = loop {
                match TcpStream::connect(&addr) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() > deadline => {
                        return Err(FlowError::Io("connect", addr, e))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
            let buf = vec![0x5au8; 64 * 1024];
            let mut left = a.bytes.unwrap_or(u64::MAX);
            while left > 0 {
                let n = left.min(buf.len() as u64) as usize;
                if s.write_all(&buf[..n]).is_err() {
                    return Ok(0);
                }
                if a.bytes.is_some() {
                    left -= n as u64;
                }
                if a.gap_ms > 0 {
                    std::thread::sleep(Duration::from_millis(a.gap_ms));
                }
            }
            let _ = s.shutdown(std::net::Shutdown::Both);
            Ok(0)
        }
        (None, Some(addr)) => {
            let l = TcpListener::bind(&addr).map_err(|e| FlowError::Io("bind", addr.clone(), e))?;
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 256 * 1024];
                    while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
                });
            }
            Ok(0)
        }
        _ => Err(FlowError::Args),
    }
}
