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
    let page = super::report::html_page(&profile, &a.source_dirs, a.top);
    let listener = std::net::TcpListener::bind(("127.0.0.1", a.port))
        .with_context(|| format!("listening on 127.0.0.1:{}", a.port))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "pepper: serving the report of {} (Ctrl-C to stop)",
        a.profile.display()
    );
    // The address alone on stdout, for scripts.
    println!("http://{addr}/");
    std::io::stdout().flush()?;
    for (k, stream) in listener.incoming().enumerate() {
        // A client that goes away mid-request is its own business, not the server's end.
        if let Ok(mut stream) = stream {
            let _ = answer(&mut stream, &page);
        }
        if a.requests.is_some_and(|n| k + 1 >= n) {
            break;
        }
    }
    Ok(0)
}

/// Reads one request and answers it: the page at `/`, 404 elsewhere.
fn answer(stream: &mut std::net::TcpStream, page: &str) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    // The request line and headers, which may come in several segments (closing with
    // unread bytes would reset the connection before the client has the answer).
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 64 * 1024 {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let request = String::from_utf8_lossy(&buf);
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
