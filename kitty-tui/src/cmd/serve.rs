//! `serve`: Prometheus / OpenMetrics exporter over HTTP (hyper).
//!
//! Each frame goes into the exporter's running totals as it comes, on the
//! sampling thread (the counters integrate over every tick); the text is rendered from the last
//! frame when a request first asks for it, and later requests for the same
//! frame copy that text. Prometheus scrapes every 15-30 s against a tick of
//! 500 ms, so rendering every frame cost as much as sampling. A scrape
//! never waits on a source, and a slow or hostile client never stalls
//! sampling (at most one render per frame and format, a few milliseconds
//! a tick may wait for). Connections are
//! capped, headers are limited in size and must arrive within a few
//! seconds.

use crate::cli::ServeArgs;
use crate::pipeline;
use color_eyre::eyre::{Result, WrapErr};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use kitty_core::engine::{Delivery, Engine};
use kitty_core::model::Frame;
use kitty_core::sinks::exporter::{to_prometheus_text, Exporter, ExporterConfig};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The exporter, the last frame it took, and what was rendered from that
/// frame so far.
struct Latest {
    exporter: Exporter,
    frame: Option<Frame>,
    frames: u64,
    at: Option<Instant>,
    openmetrics: Option<Bytes>,
    text: Option<Bytes>,
    snapshot: Option<Bytes>,
}

impl Latest {
    fn new(exporter: Exporter) -> Self {
        Latest {
            exporter,
            frame: None,
            frames: 0,
            at: None,
            openmetrics: None,
            text: None,
            snapshot: None,
        }
    }

    fn take(&mut self, f: Frame) {
        self.exporter.observe(&f);
        self.frame = Some(f);
        self.frames += 1;
        self.at = Some(Instant::now());
        self.openmetrics = None;
        self.text = None;
        self.snapshot = None;
    }

    /// None until the first frame.
    fn openmetrics(&mut self) -> Option<Bytes> {
        let f = self.frame.as_ref()?;
        let exporter = &self.exporter;
        Some(
            self.openmetrics
                .get_or_insert_with(|| Bytes::from(exporter.render(f)))
                .clone(),
        )
    }

    fn text(&mut self) -> Option<Bytes> {
        if self.text.is_none() {
            let om = self.openmetrics()?;
            let om = std::str::from_utf8(&om).unwrap_or_default();
            self.text = Some(Bytes::from(to_prometheus_text(om)));
        }
        self.text.clone()
    }

    fn snapshot(&mut self) -> Option<Bytes> {
        let f = self.frame.as_ref()?;
        Some(
            self.snapshot
                .get_or_insert_with(|| {
                    Bytes::from(
                        serde_json::to_vec_pretty(&kitty_core::sinks::snapshot::snapshot(f))
                            .unwrap_or_default(),
                    )
                })
                .clone(),
        )
    }
}

const MAX_CONNECTIONS: usize = 512;
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(a: ServeArgs) -> Result<i32> {
    let cfg = pipeline::sampler_config(&a.sampling)?;
    let interval = cfg.interval;
    let listen = a.listen;
    let listener = std::net::TcpListener::bind(listen)
        .wrap_err_with(|| format!("cannot listen on {listen}"))?;
    listener.set_nonblocking(true)?;
    crate::say::line(format_args!(
        "serving /metrics, /healthz and /api/snapshot on http://{listen}"
    ));
    let exporter = Exporter::new(ExporterConfig {
        grace: a.grace,
        socket_series: a.socket_series as usize,
        pid_label: a.pid_labels,
    });
    let shared = Arc::new(Mutex::new(Latest::new(exporter)));
    let stop = super::stop_flag();
    let mut p = pipeline::build(&a.sampling, &cfg);
    // Each frame goes into the exporter on the sampling thread (no thread
    // woken per tick; see `Pipeline::finish_with`). A render holds the
    // lock for a few milliseconds at most once per frame and format, so a
    // tick waits no longer than that.
    let sink = shared.clone();
    p.finish_with(Box::new(move |f| {
        lock(&sink).take(std::mem::take(f));
        true
    }));
    // No frame reaches the queue; it only closes when sampling ends.
    let (mut engine, _frames) = Engine::start(cfg, p, Delivery::Lossless);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("tokio runtime")?;
    // A signal wakes the accept loop (a permit is kept if it is not
    // waiting yet); it then sees the stop flag.
    let stopped = Arc::new(tokio::sync::Notify::new());
    let notify = stopped.clone();
    super::on_stop(move || notify.notify_one());
    let result: std::io::Result<i32> =
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
            loop {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    return Ok(0);
                }
                // Waits for a client or a signal, with no timer: an idle
                // server does not wake between scrapes.
                let accepted = tokio::select! {
                    _ = stopped.notified() => continue,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else {
                    continue;
                };
                // Over the cap, new connections wait for a free slot.
                let permit = tokio::select! {
                    _ = stopped.notified() => continue,
                    permit = slots.clone().acquire_owned() => permit,
                };
                let Ok(permit) = permit else {
                    continue;
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let shared = shared.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(respond(&req, &shared, interval))
                        }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .max_buf_size(16 * 1024)
                        .serve_connection(TokioIo::new(stream), service);
                    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
                    drop(permit);
                });
            }
        });
    engine.stop();
    Ok(result?)
}

fn lock(shared: &Mutex<Latest>) -> std::sync::MutexGuard<'_, Latest> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn respond(
    req: &Request<Incoming>,
    shared: &Mutex<Latest>,
    interval: Duration,
) -> Response<Full<Bytes>> {
    let mut r = lock(shared);
    let reply = |status: StatusCode, ctype: &'static str, body: Bytes| {
        let mut resp = Response::new(Full::new(body));
        *resp.status_mut() = status;
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
        resp
    };
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            Bytes::from_static(b"GET only\n"),
        );
    }
    match req.uri().path() {
        "/metrics" => {
            if r.frames == 0 {
                return reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    Bytes::from_static(b"no sample yet\n"),
                );
            }
            let accept = req
                .headers()
                .get(ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if accept.contains("application/openmetrics-text") {
                reply(
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    r.openmetrics().unwrap_or_default(),
                )
            } else {
                reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    r.text().unwrap_or_default(),
                )
            }
        }
        "/healthz" => {
            // Healthy while frames keep coming (three intervals of slack).
            let fresh =
                r.at.is_some_and(|t| t.elapsed() < interval * 3 + Duration::from_secs(1));
            let body = Bytes::from(format!(
                "{} frames={}\n",
                if fresh { "ok" } else { "stale" },
                r.frames
            ));
            reply(
                if fresh {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                },
                "text/plain",
                body,
            )
        }
        "/api/snapshot" if r.frames > 0 => reply(
            StatusCode::OK,
            "application/json",
            r.snapshot().unwrap_or_default(),
        ),
        "/api/snapshot" => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            Bytes::from_static(b"no sample yet\n"),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"not found: try /metrics, /healthz, /api/snapshot\n"),
        ),
    }
}
