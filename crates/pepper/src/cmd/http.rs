//! pepper's own HTTP pages (`pepper view`, `pepper serve --profile-addr`), served with
//! hyper: every connection on a task of its own with one request, a deadline to send its
//! request and one to take the answer, so that a client that sends a byte at a time or
//! never reads holds up no other; and on a loopback address a request whose `Host` is not
//! a loopback name is refused (a page elsewhere that rebinds its name to 127.0.0.1 must
//! not read a profile).

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An answer to a request.
pub struct Answer {
    pub status: u16,
    pub kind: &'static str,
    pub body: Vec<u8>,
}

impl Answer {
    /// 200 with `body` of type `kind`.
    pub fn ok(kind: &'static str, body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            status: 200,
            kind,
            body: body.into(),
        }
    }

    /// A plain-text answer.
    pub fn text(status: u16, text: &str) -> Answer {
        Answer {
            status,
            kind: "text/plain; charset=utf-8",
            body: format!("{text}\n").into_bytes(),
        }
    }
}

/// What answers a request: its path and query (it may take a while: it runs on a thread
/// of its own).
pub type Handler = Arc<dyn Fn(&str, Option<&str>) -> Answer + Send + Sync>;

/// When a server stops.
#[derive(Clone, Default)]
pub struct Until {
    /// After this many connections (for tests and scripts).
    pub connections: Option<usize>,
    /// When this is set.
    pub stop: Option<Arc<AtomicBool>>,
    /// The longest a connection may take, request and answer, beyond the head's
    /// [`HEAD_DEADLINE`] (a handler that waits, as a profile of the next N seconds does,
    /// needs longer).
    pub answer: Duration,
}

/// How long a client may take to send a request's head.
const HEAD_DEADLINE: Duration = Duration::from_secs(5);

/// Serves `handler` on `listener` until `until` says to stop; the connections open then
/// are finished first (each within its deadlines).
pub fn serve(listener: std::net::TcpListener, handler: Handler, until: Until) -> Result<()> {
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    // Bound to loopback, the pages are this machine's alone; bound elsewhere, the user
    // chose to offer them to the network.
    let port = local.ip().is_loopback().then_some(local.port());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut open = tokio::task::JoinSet::new();
        let mut accepted = 0usize;
        while until.connections.is_none_or(|n| accepted < n) {
            if until.stop.as_ref().is_some_and(|s| s.load(Ordering::Acquire)) {
                break;
            }
            // Woken now and then to see whether to stop.
            let stream = tokio::select! {
                a = listener.accept() => match a {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
                _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
            };
            accepted += 1;
            let handler = handler.clone();
            let deadline = HEAD_DEADLINE + until.answer;
            open.spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let handler = handler.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(req, handler, port).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEAD_DEADLINE)
                    .keep_alive(false)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                let _ = tokio::time::timeout(deadline, connection).await;
            });
            while open.try_join_next().is_some() {}
        }
        while open.join_next().await.is_some() {}
        Ok(())
    })
}

/// One request's answer: refused unless its `Host` is a loopback name, else `handler`'s.
async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    handler: Handler,
    port: Option<u16>,
) -> hyper::Response<Full<Bytes>> {
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .map(|h| h.to_str().unwrap_or(""));
    let a = if port
        .zip(host)
        .is_some_and(|(port, h)| !is_loopback(h, port))
    {
        Answer::text(403, "not a loopback host")
    } else {
        let (path, query) = (
            req.uri().path().to_string(),
            req.uri().query().map(String::from),
        );
        tokio::task::spawn_blocking(move || handler(&path, query.as_deref()))
            .await
            .unwrap_or_else(|_| Answer::text(500, "the page failed"))
    };
    let mut r = hyper::Response::new(Full::new(Bytes::from(a.body)));
    *r.status_mut() = hyper::StatusCode::from_u16(a.status).unwrap_or(hyper::StatusCode::OK);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(a.kind),
    );
    r
}

/// Whether a `Host` header names this server on the loopback interface: `localhost`,
/// `127.0.0.1` or `[::1]`, with this port or none.
pub fn is_loopback(host: &str, port: u16) -> bool {
    let (name, p) = match host.rsplit_once(':') {
        Some((n, p)) if !n.is_empty() && !p.contains(']') => (n, Some(p)),
        _ => (host, None),
    };
    let name_ok = matches!(
        name.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "[::1]"
    );
    name_ok && p.is_none_or(|p| p == port.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_loopback_names_are_this_host() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "[::1]:8080",
        ] {
            assert!(super::is_loopback(ok, 8080), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "evil.example.com:8080",
            "localhost:9090",
            "127.0.0.1.evil.com",
            "localhost.evil.com",
            "",
        ] {
            assert!(!super::is_loopback(bad, 8080), "{bad}");
        }
    }
}
