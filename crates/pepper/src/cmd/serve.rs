//! `pepper serve`: a `wasi:http/proxy` component served as `wasmtime serve` serves it,
//! profiled all along, with a live profile endpoint.

use super::http::{Answer, Handler, Until};
use super::read_unit;
use anyhow::{Context, Result};
use pepper_profile::{module_hash, ModuleInfo};
use pepper_wasm::component::ModuleSelection;
use pepper_wasm::ContextMode;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Serve a `wasi:http/proxy` component and profile it continuously.
///
/// Each request gets a new instance of the component, as under `wasmtime serve`, and the
/// profile sums every request's. Requests run one at a time, on one thread. Ctrl-C or
/// SIGTERM stops the server: requests already taken finish, and the profile is written.
///   pepper serve app.wasm                   requests on 127.0.0.1:8080, app.pepper.json at exit
///   pepper serve --profile-addr app.wasm    and the live profile on 127.0.0.1:6060:
///   go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=10
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Where to listen for requests.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Serve the live profile here: `/debug/pprof/profile?seconds=N` (pprof of the last N
    /// seconds, for `go tool pprof`, Parca or Pyroscope), `/profile.json` (the whole
    /// profile so far) and `/` (its HTML report). On a loopback address only requests
    /// naming a loopback host are answered.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:6060")]
    profile_addr: Option<SocketAddr>,
    /// What to record: PEP's paths and calling contexts (the default), every path or
    /// branch counted exactly, calling contexts only, or nothing (a baseline).
    #[arg(long, value_enum, default_value = "pep")]
    mode: ServeMode,
    /// The profile file, written when the server stops [default: COMPONENT's stem +
    /// `.pepper.json`].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// While serving, replace the profile file with the profile so far this often (e.g.
    /// `1m`).
    #[arg(long, value_parser = super::run::parse_duration, value_name = "DURATION")]
    snapshot_every: Option<Duration>,
    /// Which core modules to profile (see `pepper run --help`).
    #[arg(long, default_value = "all", value_name = "all|program|NAME,...", value_parser = super::parse_modules)]
    modules: ModuleSelection,
    /// Do not use wasmtime's compilation cache.
    #[arg(long)]
    no_cache: bool,
    /// Stop after this many requests (for tests and scripts).
    #[arg(long, hide = true)]
    requests: Option<u64>,
    /// The component (`.wasm`), exporting `wasi:http/incoming-handler`.
    component: PathBuf,
}

/// What `pepper serve` can record.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ServeMode {
    /// PEP's sampled paths, edges and calling contexts.
    Pep,
    /// Every Ball-Larus path counted.
    ExactPaths,
    /// Every branch outcome counted.
    ExactEdges,
    /// Calling contexts only: native stack samples and call-site counts.
    Calls,
    /// No instrumentation (a baseline).
    None,
}

/// The longest stretch `/debug/pprof/profile?seconds=N` covers.
const MAX_SECONDS: u64 = 600;

pub fn run(a: Args) -> Result<i32> {
    let output = a.output.clone().unwrap_or_else(|| {
        let stem = a
            .component
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy();
        PathBuf::from(format!("{stem}.pepper.json"))
    });
    pepper_profile::check_writable(&output)
        .with_context(|| format!("cannot write the profile to {}", output.display()))?;
    let unit = read_unit(&a.component, &a.modules)?;
    let module = ModuleInfo {
        path: a.component.display().to_string(),
        sha256: module_hash(&unit.core),
        size: unit.core.len() as u64,
    };
    let opts = a.options();
    pepper_runtime::stop_on_signals();
    let server = pepper_runtime::Server::start(&unit, module, &opts, a.addr, &mut |n| {
        super::progress::say(n, false, Duration::ZERO)
    })
    .with_context(|| format!("serving {}", a.component.display()))?;
    let server = Arc::new(server);
    eprintln!(
        "pepper: serving {} on http://{} (Ctrl-C to stop)",
        a.component.display(),
        server.local_addr()
    );
    let stop = Arc::new(AtomicBool::new(false));
    // The addresses alone on stdout, for scripts: the server's, then the endpoint's.
    println!("http://{}/", server.local_addr());
    let endpoint = match a.profile_addr {
        Some(addr) => Some(endpoint(addr, server.clone(), stop.clone())?),
        None => None,
    };
    std::io::Write::flush(&mut std::io::stdout())?;
    let mut next_snapshot = a.snapshot_every.map(|d| Instant::now() + d);
    let why = loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(sig) = pepper_runtime::stop_requested() {
            break format!("signal {sig}");
        }
        if a.requests.is_some_and(|n| server.requests().0 >= n) {
            break "--requests".into();
        }
        if let (Some(at), Some(every)) = (next_snapshot, a.snapshot_every) {
            if Instant::now() >= at {
                next_snapshot = Some(at + every);
                if let Err(e) = server.profile().write_file(&output) {
                    eprintln!(
                        "pepper: warning: writing a snapshot to {}: {e}",
                        output.display()
                    );
                }
            }
        }
    };
    stop.store(true, Ordering::Release);
    if let Some(e) = endpoint {
        let _ = e.join();
    }
    let server = Arc::try_unwrap(server)
        .map_err(|_| anyhow::anyhow!("the profile endpoint still holds the server"))?;
    let (requests, failed) = server.requests();
    let profile = server.stop();
    profile
        .write_file(&output)
        .with_context(|| format!("writing the profile to {}", output.display()))?;
    eprintln!(
        "pepper: stopped by {why} after {requests} requests ({failed} failed); wrote {} \
         ({} mode: {} paths, {} branches)",
        output.display(),
        profile.mode.name(),
        profile.paths.len(),
        profile.branches.len()
    );
    Ok(0)
}

impl Args {
    /// The flags as the library's options.
    fn options(&self) -> pepper_runtime::CommandOptions {
        let mut opts = pepper_runtime::CommandOptions::default();
        let contexts = match (self.mode, pepper_runtime::NATIVE_STACKS) {
            (ServeMode::Pep | ServeMode::Calls, true) => ContextMode::Native,
            _ => ContextMode::Off,
        };
        opts.instrument.mode = match self.mode {
            ServeMode::Pep => pepper_profile::Mode::Pep,
            ServeMode::ExactPaths => pepper_profile::Mode::ExactPaths,
            ServeMode::ExactEdges => pepper_profile::Mode::ExactEdges,
            ServeMode::Calls | ServeMode::None => pepper_profile::Mode::None,
        };
        opts.instrument.contexts = contexts;
        if self.mode == ServeMode::Pep {
            opts.instrument.switch = Some(pepper_wasm::PEP_PLACEMENT);
        }
        opts.engine.cache_dir = match self.no_cache {
            true => None,
            false => pepper_runtime::default_cache_dir(),
        };
        opts
    }
}

/// The live profile endpoint on `addr`, on a thread of its own until `stop`.
fn endpoint(
    addr: SocketAddr,
    server: Arc<pepper_runtime::Server>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("listening on {addr} for the profile endpoint"))?;
    let local = listener.local_addr()?;
    eprintln!("pepper: live profile on http://{local}/ (pprof: /debug/pprof/profile?seconds=N)");
    println!("http://{local}/");
    let handler: Handler = Arc::new(move |path, query| page(&server, path, query));
    let until = Until {
        stop: Some(stop),
        answer: Duration::from_secs(MAX_SECONDS + 30),
        ..Default::default()
    };
    Ok(std::thread::Builder::new()
        .name("pepper-endpoint".into())
        .spawn(move || {
            if let Err(e) = super::http::serve(listener, handler, until) {
                eprintln!("pepper: warning: the profile endpoint stopped: {e:#}");
            }
        })?)
}

/// One page of the endpoint.
fn page(server: &pepper_runtime::Server, path: &str, query: Option<&str>) -> Answer {
    match path {
        "/debug/pprof/profile" => {
            let seconds = query
                .into_iter()
                .flat_map(|q| q.split('&'))
                .find_map(|kv| kv.strip_prefix("seconds="))
                .map_or(Ok(30), str::parse::<u64>);
            let seconds = match seconds {
                Ok(s) if (1..=MAX_SECONDS).contains(&s) => s,
                _ => return Answer::text(400, &format!("seconds must be 1 to {MAX_SECONDS}")),
            };
            let before = server.profile();
            std::thread::sleep(Duration::from_secs(seconds));
            let last = server.profile().since(&before);
            match pepper_export::pprof(&last) {
                Ok(pb) => Answer::ok("application/octet-stream", pb),
                Err(e) => Answer::text(500, &format!("{e:#}")),
            }
        }
        "/profile.json" => match serde_json::to_vec(&server.profile()) {
            Ok(json) => Answer::ok("application/json", json),
            Err(e) => Answer::text(500, &e.to_string()),
        },
        "/" | "/index.html" => {
            let html = super::report::html_page(&server.profile(), &[], 10);
            Answer::ok("text/html; charset=utf-8", html)
        }
        _ => Answer::text(404, "not found"),
    }
}
