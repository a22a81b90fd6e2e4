//! A Prometheus HTTP API client for the cluster view: instant queries
//! (`POST /api/v1/query`), PromQL only, so it works against Prometheus,
//! Thanos, Mimir and VictoriaMetrics alike. A bearer token file (read again
//! on every refresh: projected tokens rotate), basic auth with a password
//! file, and a CA file for real deployments; every request has a deadline.
//! What comes back is another system's data: label values go through
//! [`Text`] before they reach a frame.

use crate::model::Text;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct PromConfig {
    /// Base URL (`http://prometheus:9090`, with a path prefix if any).
    pub url: String,
    pub bearer_token_file: Option<PathBuf>,
    /// User and password file.
    pub basic_auth: Option<(String, PathBuf)>,
    pub ca_file: Option<PathBuf>,
    /// Per-request deadline.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromError {
    #[error("{0}")]
    Config(String),
    #[error("{url}: {why}")]
    Http { url: String, why: String },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("query {query:?}: {why}")]
    Query { query: String, why: String },
}

/// One element of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, Text>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels.get(k).map(|t| t.as_str())
    }
}

pub struct Prometheus {
    agent: ureq::Agent,
    cfg: PromConfig,
}

impl Prometheus {
    pub fn new(cfg: PromConfig) -> Result<Prometheus, PromError> {
        if !(cfg.url.starts_with("http://") || cfg.url.starts_with("https://")) {
            return Err(PromError::Config(format!(
                "--prometheus {:?}: an http:// or https:// URL",
                cfg.url
            )));
        }
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(ca) = &cfg.ca_file {
            let pem = std::fs::read(ca)
                .map_err(|e| PromError::Config(format!("--ca-file {}: {e}", ca.display())))?;
            let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
                .filter_map(|i| match i {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(PromError::Config(format!(
                    "--ca-file {}: no PEM certificate in it",
                    ca.display()
                )));
            }
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
        }
        let config = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .timeout_global(Some(cfg.timeout))
            .http_status_as_error(false)
            .build();
        // The secrets must be readable now, not at the first refresh.
        let p = Prometheus {
            agent: ureq::Agent::new_with_config(config),
            cfg,
        };
        p.authorization()?;
        Ok(p)
    }

    pub fn url(&self) -> &str {
        &self.cfg.url
    }

    /// The Authorization header, from files read now.
    fn authorization(&self) -> Result<Option<String>, PromError> {
        let read = |p: &PathBuf, what: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .map_err(|e| PromError::Config(format!("{what} {}: {e}", p.display())))
        };
        if let Some(f) = &self.cfg.bearer_token_file {
            return Ok(Some(format!("Bearer {}", read(f, "--bearer-token-file")?)));
        }
        if let Some((user, f)) = &self.cfg.basic_auth {
            let pass = read(f, "--basic-auth-password-file")?;
            return Ok(Some(format!("Basic {}", base64(&format!("{user}:{pass}")))));
        }
        Ok(None)
    }

    /// An instant query; NaN values are dropped.
    pub fn query(&self, promql: &str) -> Result<Vec<Sample>, PromError> {
        let url = format!("{}/api/v1/query", self.cfg.url.trim_end_matches('/'));
        let mut req = self.agent.post(&url);
        if let Some(auth) = self.authorization()? {
            req = req.header("Authorization", &auth);
        }
        let http = |why: String| PromError::Http {
            url: url.clone(),
            why,
        };
        let mut resp = req
            .send_form([("query", promql)])
            .map_err(|e| http(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| http(e.to_string()))?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|_| {
            if status != 200 {
                PromError::Status {
                    url: url.clone(),
                    status,
                    body: Text::capped(body.trim(), 200).to_string(),
                }
            } else {
                http("the answer is not JSON".into())
            }
        })?;
        if v["status"] != "success" {
            return Err(PromError::Query {
                query: promql.to_string(),
                why: Text::capped(v["error"].as_str().unwrap_or("failed"), 300).to_string(),
            });
        }
        let q = |why: &str| PromError::Query {
            query: promql.to_string(),
            why: why.to_string(),
        };
        if v["data"]["resultType"] != "vector" {
            return Err(q("not an instant vector"));
        }
        let result = v["data"]["result"]
            .as_array()
            .ok_or_else(|| q("no result"))?;
        let mut out = Vec::with_capacity(result.len());
        for r in result {
            let value = r["value"][1]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|v| v.is_finite());
            let Some(value) = value else { continue };
            let labels = r["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), Text::new(v.as_str()?))))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Sample { labels, value });
        }
        Ok(out)
    }
}

fn base64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_credentials() {
        assert_eq!(base64("user:pass"), "dXNlcjpwYXNz");
        assert_eq!(base64("a"), "YQ==");
        assert_eq!(base64("ab"), "YWI=");
    }

    #[test]
    fn bad_urls_and_missing_secrets_are_one_line_errors() {
        let cfg = |url: &str| PromConfig {
            url: url.into(),
            bearer_token_file: None,
            basic_auth: None,
            ca_file: None,
            timeout: Duration::from_secs(1),
        };
        assert!(Prometheus::new(cfg("prometheus:9090")).is_err());
        let e = Prometheus::new(PromConfig {
            bearer_token_file: Some("/nonexistent/token".into()),
            ..cfg("http://127.0.0.1:1")
        })
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.starts_with("--bearer-token-file /nonexistent/token"),
            "{e}"
        );
        // Nothing listens on port 1: an HTTP error naming the URL.
        let p = Prometheus::new(cfg("http://127.0.0.1:1")).unwrap();
        let e = p.query("up").err().unwrap().to_string();
        assert!(e.starts_with("http://127.0.0.1:1/api/v1/query: "), "{e}");
    }
}
