//! NCCL's RAS service (NCCL 2.24+, on by default): a TCP port on each node
//! (NCCL_RAS_ADDR, default localhost:28028) that answers what `ncclras`
//! asks: the handshake `CLIENT PROTOCOL <n>` / `SERVER PROTOCOL <n>`, then
//! `SET FORMAT json` / `OK` (NCCL 2.28+), `TIMEOUT <s>` / `OK`, `STATUS`,
//! and the report until the server closes. The JSON report lists each
//! communicator's ranks with their collective counts and the ranks RAS
//! could not reach (`missing_ranks`, with `unresponsive` /
//! `considered_dead`). kitty's own reader of that report.

use serde::Deserialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The protocol version kitty speaks (what NCCL's own client sends).
const PROTOCOL: u32 = 2;
/// A report larger than this is not read.
const MAX_REPORT: u64 = 16 << 20;
/// The default address of the RAS client port.
pub const DEFAULT_ADDR: &str = "localhost:28028";

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Report {
    #[serde(default)]
    pub nccl_version: String,
    #[serde(default)]
    pub communicators: Vec<Comm>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Comm {
    #[serde(default)]
    pub hash: String,
    #[serde(default)]
    pub size: u32,
    #[serde(default)]
    pub ranks: Vec<RankEntry>,
    #[serde(default)]
    pub missing_ranks: Vec<MissingRank>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct RankEntry {
    pub rank: u32,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub collective_counts: std::collections::BTreeMap<String, u64>,
}

impl RankEntry {
    /// Collectives it has completed, all kinds.
    pub fn collectives(&self) -> u64 {
        self.collective_counts
            .values()
            .fold(0, |a, b| a.saturating_add(*b))
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct MissingRank {
    pub rank: u32,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub status: MissingStatus,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct MissingStatus {
    #[serde(default)]
    pub unresponsive: bool,
    #[serde(default)]
    pub considered_dead: bool,
}

/// Parses a JSON report. NCCL 2.28.9 leaves out the comma before a missing
/// rank's `"status"`; such a report is mended and read.
pub fn parse(text: &str) -> Result<Report, String> {
    match serde_json::from_str(text) {
        Ok(r) => Ok(r),
        Err(first) => serde_json::from_str(&mend_commas(text))
            .map_err(|_| format!("NCCL RAS report is not JSON: {first}")),
    }
}

/// Adds the comma a member line lacks before the next member.
fn mend_commas(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len() + 16);
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        let t = l.trim_end();
        let next = lines[i + 1..]
            .iter()
            .map(|n| n.trim())
            .find(|n| !n.is_empty());
        let ends_value =
            !t.ends_with(',') && !t.ends_with('{') && !t.ends_with('[') && !t.is_empty();
        if ends_value && next.is_some_and(|n| n.starts_with('"')) {
            out.push(',');
        }
        out.push('\n');
    }
    out
}

/// Asks one RAS port for its JSON report (blocking, bounded by `timeout`
/// per step; RAS itself waits `ras_timeout_s` for the other nodes).
pub fn query(addr: &str, timeout: Duration, ras_timeout_s: u32) -> Result<String, String> {
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {addr}"))?;
    let s = TcpStream::connect_timeout(&sa, timeout)
        .map_err(|e| format!("nothing answers on {addr}: {e}"))?;
    let step = |e: std::io::Error| format!("NCCL RAS on {addr}: {e}");
    s.set_read_timeout(Some(timeout)).map_err(step)?;
    s.set_write_timeout(Some(timeout)).map_err(step)?;
    let mut w = s.try_clone().map_err(step)?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut ask = |w: &mut TcpStream, r: &mut BufReader<TcpStream>, cmd: &str| {
        w.write_all(cmd.as_bytes()).map_err(step)?;
        line.clear();
        r.by_ref().take(4096).read_line(&mut line).map_err(step)?;
        Ok::<String, String>(line.trim().to_string())
    };
    let hello = ask(&mut w, &mut r, &format!("CLIENT PROTOCOL {PROTOCOL}\n"))?;
    if !hello.to_ascii_uppercase().starts_with("SERVER PROTOCOL ") {
        return Err(format!(
            "{addr} is not NCCL RAS (it said {:?})",
            short(&hello)
        ));
    }
    let fmt = ask(&mut w, &mut r, "SET FORMAT json\n")?;
    if !fmt.eq_ignore_ascii_case("OK") {
        return Err(format!(
            "NCCL RAS on {addr} has no JSON format (NCCL before 2.28): {:?}",
            short(&fmt)
        ));
    }
    let t = ask(&mut w, &mut r, &format!("TIMEOUT {ras_timeout_s}\n"))?;
    if !t.eq_ignore_ascii_case("OK") {
        return Err(format!(
            "NCCL RAS on {addr} refused TIMEOUT: {:?}",
            short(&t)
        ));
    }
    w.write_all(b"STATUS\n").map_err(step)?;
    // The report takes as long as RAS's own collection.
    r.get_ref()
        .set_read_timeout(Some(timeout + Duration::from_secs(ras_timeout_s as u64)))
        .map_err(step)?;
    let mut body = String::new();
    r.take(MAX_REPORT).read_to_string(&mut body).map_err(step)?;
    Ok(body)
}

fn short(s: &str) -> String {
    crate::model::text::sanitize(s, 80)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of NCCL 2.28.9 with one missing rank, as it writes it
    /// (without the comma before the missing rank's "status").
    pub const DEAD: &str = r#"{
  "nccl_version": "2.28.9",
  "communicators_count": 1,
  "communicators": [
    {
      "hash": "0xa1349768e9517ed7",
      "size": 2,
      "ranks_count": 1,
      "missing_ranks_count": 1,
      "ranks": [
        {
          "rank": 0,
          "host": "10.0.77.184",
          "pid": 10018,
          "cuda_dev": 0,
          "nvml_dev": 0,
          "status": {
            "init_state": 0,
            "async_error": 0,
            "finalize_called": false,
            "destroy_flag": false,
            "abort_flag": false
          },
          "collective_counts": {
            "AllReduce": 4
          }
        }
      ],
      "missing_ranks": [
        {
          "rank": 1,
          "host": "10.0.77.184",
          "pid": 10017,
          "cuda_dev": 1,
          "nvml_dev": 1
          "status": {
            "unresponsive": true,
            "considered_dead": false
          }
        }
      ]
    }
  ],
  "ras": {
    "collection_time_sec": 0.000,
    "timeouts_count": 0
  }
}
"#;

    #[test]
    fn reads_a_report_with_the_missing_comma() {
        assert!(serde_json::from_str::<serde_json::Value>(DEAD).is_err());
        let r = parse(DEAD).unwrap();
        let c = &r.communicators[0];
        assert_eq!(c.ranks[0].collectives(), 4);
        assert_eq!(c.missing_ranks[0].pid, 10017);
        assert!(c.missing_ranks[0].status.unresponsive);
        assert!(parse("STATUS not json").is_err());
    }

    #[test]
    fn speaks_the_protocol_to_a_server() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut got = Vec::new();
            for reply in ["SERVER PROTOCOL 2\n", "OK\n", "OK\n"] {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                got.push(line.trim().to_string());
                w.write_all(reply.as_bytes()).unwrap();
            }
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            got.push(line.trim().to_string());
            w.write_all(DEAD.as_bytes()).unwrap();
            got
        });
        let body = query(&addr, Duration::from_secs(5), 3).unwrap();
        assert_eq!(parse(&body).unwrap().communicators.len(), 1);
        assert_eq!(
            t.join().unwrap(),
            [
                "CLIENT PROTOCOL 2",
                "SET FORMAT json",
                "TIMEOUT 3",
                "STATUS"
            ]
        );
    }

    #[test]
    fn says_why_when_nothing_or_something_else_answers() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = query(&format!("127.0.0.1:{port}"), Duration::from_secs(2), 1).unwrap_err();
        assert!(e.contains("nothing answers"), "{e}");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        });
        let e = query(&addr, Duration::from_secs(2), 1).unwrap_err();
        assert!(e.contains("is not NCCL RAS"), "{e}");
    }
}
