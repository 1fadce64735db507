//! `pepper view`: the HTML report served on localhost.

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::path::PathBuf;

/// Serve a profile's HTML report on this machine and print its address.
///
/// The page is the one `pepper report --format html` writes (flame graph, hot paths,
/// branch biases on the source, control flow, phase time line), served from memory on
/// 127.0.0.1 until Ctrl-C:
///   pepper view prog.pepper.json --source-dir src/
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// A directory to find source files in (DWARF often names them by base name).
    #[arg(long = "source-dir", value_name = "DIR")]
    source_dirs: Vec<PathBuf>,
    /// How many functions, paths and branches the page lists.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Stop after serving this many requests (for tests and scripts).
    #[arg(long, hide = true)]
    requests: Option<usize>,
    /// Profile file written by `pepper run`.
    profile: PathBuf,
}

pub fn run(a: Args) -> Result<i32> {
    let profile = super::load_profile(&a.profile)?;
    let page: std::sync::Arc<str> =
        super::report::html_page(&profile, &a.source_dirs, a.top).into();
    let listener = std::net::TcpListener::bind(("127.0.0.1", a.port))
        .with_context(|| format!("listening on 127.0.0.1:{}", a.port))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "pepper: serving the report of {} (Ctrl-C to stop)",
        a.profile.display()
    );
    // The address alone on stdout, for scripts.
    let mut out = std::io::stdout().lock();
    writeln!(out, "http://{addr}/")?;
    out.flush()?;
    drop(out);
    // One thread per connection, at most `MAX_CLIENTS` at once: a client that sends its
    // request a byte at a time, or never reads the answer, holds its own thread until
    // its deadline, never the others'.
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut served = Vec::new();
    for (k, stream) in listener.incoming().enumerate() {
        // A client that goes away mid-request is its own business, not the server's end.
        if let Ok(stream) = stream {
            if busy.load(std::sync::atomic::Ordering::Acquire) >= MAX_CLIENTS {
                let _ = refuse(stream, "503 Service Unavailable", "too many clients\n");
            } else {
                busy.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                let (page, busy) = (page.clone(), busy.clone());
                served.push(std::thread::spawn(move || {
                    let _ = answer(stream, &page, addr.port());
                    busy.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                }));
            }
        }
        served.retain(|t| !t.is_finished());
        if a.requests.is_some_and(|n| k + 1 >= n) {
            break;
        }
    }
    for t in served {
        let _ = t.join();
    }
    Ok(0)
}

/// Connections served at once; more are answered 503 at once.
const MAX_CLIENTS: usize = 64;
/// The longest a connection may take to send its request, and then to take the answer.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads one request and answers it: the page at `/`, 404 elsewhere, 403 to a request
/// whose `Host` is not this machine's loopback (a page on another site that rebinds its
/// name to 127.0.0.1 must not read the report).
fn answer(mut stream: std::net::TcpStream, page: &str, port: u16) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    stream.set_write_timeout(Some(DEADLINE))?;
    // The request line and headers, which may come in several segments (closing with
    // unread bytes would reset the connection before the client has the answer), within
    // one deadline in all (a read timeout alone restarts at every byte).
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 64 * 1024 {
        let left = DEADLINE.saturating_sub(started.elapsed());
        if left.is_zero() {
            return refuse(stream, "408 Request Timeout", "request too slow\n");
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let request = String::from_utf8_lossy(&buf);
    let host = request.lines().skip(1).find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("host")
            .then(|| value.trim())
    });
    if host.is_some_and(|h| !is_loopback(h, port)) {
        return refuse(stream, "403 Forbidden", "not a loopback host\n");
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let (status, body, kind): (&str, &[u8], &str) = match path {
        "/" | "/index.html" => ("200 OK", page.as_bytes(), "text/html; charset=utf-8"),
        _ => ("404 Not Found", b"not found\n", "text/plain"),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)
}

/// A short plain-text answer, and the connection closed.
fn refuse(mut stream: std::net::TcpStream, status: &str, why: &str) -> std::io::Result<()> {
    stream.set_write_timeout(Some(DEADLINE))?;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}",
        why.len()
    )
}

/// Whether a `Host` header names this server on the loopback interface: `localhost`,
/// `127.0.0.1` or `[::1]`, with this port or none.
fn is_loopback(host: &str, port: u16) -> bool {
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
