//! `pepper view`: the HTML report served on localhost.

use super::http::{Answer, Handler, Until};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

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
    let page: Arc<str> = super::report::html_page(&profile, &a.source_dirs, a.top).into();
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
    let handler: Handler = Arc::new(move |path, _| match path {
        "/" | "/index.html" => Answer::ok("text/html; charset=utf-8", page.as_bytes()),
        _ => Answer::text(404, "not found"),
    });
    let until = Until {
        connections: a.requests,
        ..Default::default()
    };
    super::http::serve(listener, handler, until)?;
    Ok(0)
}
