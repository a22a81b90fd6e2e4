//! A node's own answer for one rank: the cluster view's drill-down reads
//! `/api/snapshot` from the rank's node (its `kitty-tui serve`, at the
//! scrape target Prometheus reports) for what the series do not carry: the
//! rank's pid, sockets, busiest threads and flows. Another system's data:
//! every text goes through [`Text`] as it is parsed.

use crate::model::{FlowFrame, SocketFrame, TcpInfo, Text, ThreadFrame};
use serde::Deserialize;
use std::time::Duration;

/// What the node said about the rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankDetail {
    pub endpoint: Text,
    pub pid: u32,
    pub comm: Text,
    pub state: Text,
    pub sockets: Vec<SocketFrame>,
    pub threads: Vec<ThreadFrame>,
    pub flows: Vec<FlowFrame>,
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    ranks: Vec<DocRank>,
    #[serde(default)]
    flows: Vec<FlowFrame>,
}

#[derive(Deserialize)]
struct DocRank {
    rank: Option<u32>,
    pid: u32,
    comm: Text,
    job: Option<Text>,
    #[serde(default)]
    state: Text,
    #[serde(default)]
    sockets: Vec<DocSocket>,
    #[serde(default)]
    threads: Vec<ThreadFrame>,
}

#[derive(Deserialize)]
struct DocSocket {
    local: Text,
    remote: Text,
    state: Text,
    tx_queue: u64,
    rx_queue: u64,
    rtt_us: Option<u32>,
    total_retrans: Option<u32>,
    #[serde(default)]
    signals: crate::model::Signals,
}

/// Fetches the node's snapshot and picks the rank of `job` numbered `rank`.
pub fn rank_detail(
    endpoint: &str,
    job: Option<&str>,
    rank: Option<u32>,
    timeout: Duration,
) -> Result<RankDetail, String> {
    if endpoint.is_empty() || endpoint.contains(['/', ' ', '?', '#']) {
        return Err(format!("{endpoint:?} is not a host:port"));
    }
    let url = format!("http://{endpoint}/api/snapshot");
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build(),
    );
    let mut resp = agent.get(&url).call().map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(32 << 20)
        .read_to_string()
        .map_err(|e| format!("{url}: {e}"))?;
    if status != 200 {
        return Err(format!(
            "{url}: HTTP {status}: {}",
            Text::capped(body.trim(), 120)
        ));
    }
    pick(endpoint, &body, job, rank).map_err(|e| format!("{url}: {e}"))
}

/// The rank in a snapshot document.
fn pick(
    endpoint: &str,
    body: &str,
    job: Option<&str>,
    rank: Option<u32>,
) -> Result<RankDetail, String> {
    let doc: Doc = serde_json::from_str(body).map_err(|e| format!("not a kitty snapshot: {e}"))?;
    let r = doc
        .ranks
        .into_iter()
        .find(|r| r.rank == rank && (job.is_none() || r.job.as_deref() == job))
        .ok_or_else(|| {
            format!(
                "no rank {} of job {} there now",
                rank.map_or("-".into(), |r| r.to_string()),
                job.unwrap_or("-")
            )
        })?;
    let sockets = r
        .sockets
        .into_iter()
        .map(|s| SocketFrame {
            local: s.local,
            remote: s.remote,
            state: s.state,
            tx_queue: s.tx_queue,
            rx_queue: s.rx_queue,
            info: s.rtt_us.map(|rtt_us| TcpInfo {
                rtt_us,
                total_retrans: s.total_retrans.unwrap_or(0),
                ..Default::default()
            }),
            signals: s.signals,
            ..Default::default()
        })
        .collect();
    Ok(RankDetail {
        endpoint: Text::new(endpoint),
        pid: r.pid,
        comm: r.comm,
        state: r.state,
        sockets,
        threads: r.threads,
        flows: doc.flows.into_iter().filter(|f| f.pid == r.pid).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_rank_of_the_job_and_sanitises_its_text() {
        let body = r#"{"ranks":[
            {"rank":1,"pid":10,"comm":"a","job":"other","state":"R"},
            {"rank":1,"pid":11,"comm":"evil\u001b[2Jname","job":"train","state":"S",
             "sockets":[{"local":"10.0.0.1:1","remote":"10.0.0.2:2","state":"ESTABLISHED",
                         "tx_queue":5,"rx_queue":0,"rtt_us":250,"total_retrans":3,"signals":{}}],
             "threads":[{"tid":12,"comm":"w","run_delay_ms_per_s":1.5,"cpu_pct":90.0}]}],
            "flows":[{"pid":11,"netns":1,"protocol":"tcp","local":"l","remote":"r",
                      "tx_bytes":1,"rx_bytes":2,"tx_bytes_per_s":0.0,"rx_bytes_per_s":0.0},
                     {"pid":10,"netns":1,"protocol":"tcp","local":"l","remote":"r",
                      "tx_bytes":1,"rx_bytes":2,"tx_bytes_per_s":0.0,"rx_bytes_per_s":0.0}]}"#;
        let d = pick("n:9977", body, Some("train"), Some(1)).unwrap();
        assert_eq!(d.pid, 11);
        assert!(!d.comm.as_str().contains('\u{1b}'), "{:?}", d.comm);
        assert_eq!(d.sockets[0].info.as_ref().unwrap().rtt_us, 250);
        assert_eq!(d.threads[0].tid, 12);
        assert_eq!(d.flows.len(), 1);
        let e = pick("n:9977", body, Some("train"), Some(7)).unwrap_err();
        assert!(e.contains("no rank 7"), "{e}");
        assert!(pick("n:9977", "<html>", None, None).is_err());
    }

    #[test]
    fn only_a_host_and_port_is_fetched() {
        let e = rank_detail("a/b", None, None, Duration::from_millis(10)).unwrap_err();
        assert!(e.contains("host:port"), "{e}");
        // Nothing listens on port 1: a clear error, not a hang.
        let e = rank_detail("127.0.0.1:1", None, Some(0), Duration::from_secs(2)).unwrap_err();
        assert!(e.contains("127.0.0.1:1"), "{e}");
    }
}
