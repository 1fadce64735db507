//! Serving a `wasi:http/proxy` component as `wasmtime serve` does (a new instance per
//! request), profiled continuously over every instance.
//!
//! Connections are accepted and HTTP is spoken on a tokio runtime; each request then runs
//! on the one guest thread, which instantiates the component, calls its
//! `wasi:http/incoming-handler` and goes on to the next. A continuous profile needs one
//! memory of pepper's that lives across instances: the engine's memory creator keeps
//! each instrumented module's memory when its instance goes and hands it to the next one
//! on the thread ([`HostMemories::keep`]). So counters add up over every request, and the
//! profiling threads, started with the first instance, read the same memories all along,
//! as they would in one long run of a program; the guest thread's CPU clock, which
//! spaces PEP's bursts, stands still while it waits for a request.

use crate::attach::{Attached, Collected};
use crate::command::{plan, Modules, Planned};
use crate::hostmem::HostMemories;
use crate::{decode, native, CommandOptions, Note, RunConfig};
use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use pepper_profile::{ModuleInfo, Profile, RunInfo};
use pepper_wasm::component::{ComponentFrame, Unit};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::Store;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::bindings::sync::ProxyPre;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// Requests waiting for the guest thread; more are answered 503 at once.
const QUEUE: usize = 1024;
/// How long a client may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a snapshot waits for the sampler thread's answer.
const SNAPSHOT_PATIENCE: Duration = Duration::from_secs(2);

/// A `wasi:http/proxy` component being served and profiled.
pub struct Server {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Arc<tokio::sync::Notify>,
    jobs: Option<std::sync::mpsc::SyncSender<Job>>,
    guest: Option<std::thread::JoinHandle<Option<Collected>>>,
    shared: Arc<Shared>,
}

/// What the server's threads share.
struct Shared {
    /// The profiling threads, once the first instance made pepper's memories (and
    /// whether they have started: the guest thread looks there without the lock, which
    /// a snapshot holds while it waits for the sampler).
    attached: Mutex<Option<Attached>>,
    profiling: std::sync::atomic::AtomicBool,
    modules: Arc<Modules>,
    cfg: RunConfig,
    settings: decode::Settings,
    module: ModuleInfo,
    frame: Option<ComponentFrame>,
    instrument_ms: f64,
    compile_ms: f64,
    started: Instant,
    requests: AtomicU64,
    failed: AtomicU64,
    memories: Arc<HostMemories>,
}

/// One request for the guest thread: the request, where its response goes, and where
/// an error that left no response goes.
struct Job {
    request: hyper::Request<hyper::body::Incoming>,
    respond: tokio::sync::oneshot::Sender<Result<hyper::Response<HyperOutgoingBody>, ErrorCode>>,
    failed: tokio::sync::oneshot::Sender<String>,
}

/// What a store of the served component holds.
struct Host {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Host {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: Default::default(),
        }
    }
}

impl Server {
    /// Instruments `unit` (a `wasi:http/proxy` component) for `opts`, compiles it and
    /// serves it on `addr` until [`Server::stop`]. Requests get a new instance each, run
    /// one at a time on one guest thread.
    pub fn start(
        unit: &Unit,
        module: ModuleInfo,
        opts: &CommandOptions,
        addr: SocketAddr,
        note: &mut dyn FnMut(Note<'_>),
    ) -> Result<Server> {
        anyhow::ensure!(
            unit.component.is_some(),
            "pepper serve runs wasi:http/proxy components; this is a core module"
        );
        anyhow::ensure!(
            !opts.instrument.mode.samples_edges() && opts.sampling.intervals.is_none(),
            "pepper serve profiles in PEP (the default), the exact modes or none; ephemeral \
             windows and time lines are not served"
        );
        let Planned {
            modules,
            cfg,
            settings,
            instrument_ms,
        } = plan(unit, &module, opts, note)?;
        note(Note::Compiling);
        let memories = Arc::new(HostMemories::default());
        let sizes = (cfg.counters_tag.iter().chain(&cfg.module_tags))
            .map(|t| t.bytes)
            .collect();
        memories.keep(sizes);
        let engine = crate::engine_with(&cfg.engine_options(), Some(&memories))?;
        let t0 = Instant::now();
        let wasm = modules.wasm(unit);
        let starts = pepper_wasm::component::module_starts(&wasm)?;
        let component = Component::new(&engine, &*wasm)
            .map_err(anyhow::Error::from)
            .context("compiling the component")?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut linker = Linker::<Host>::new(&engine);
        wasmtime_wasi_http::p2::add_to_linker_sync(&mut linker)?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(ProxyPre::new)
            .map_err(anyhow::Error::from)
            .context("the component is not a wasi:http/proxy (it must export wasi:http/incoming-handler and import only what the proxy world offers)")?;
        let shared = Arc::new(Shared {
            attached: Mutex::new(None),
            profiling: std::sync::atomic::AtomicBool::new(false),
            modules,
            cfg,
            settings,
            module,
            frame: unit.component.clone(),
            instrument_ms,
            compile_ms,
            started: Instant::now(),
            requests: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            memories: memories.clone(),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(addr))
            .with_context(|| format!("listening on {addr}"))?;
        let addr = listener.local_addr()?;
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(QUEUE);
        let guest = {
            let shared_ = shared.clone();
            let primary = (shared.cfg.counters_tag).map_or(0, |t| t.slot() as usize);
            let starts = (primary, starts.get(primary).map_or(0, |&s| s as u64));
            std::thread::Builder::new()
                .name("pepper-guest".into())
                .spawn(move || serve_requests(&pre, &component, starts, &shared_, queue))?
        };
        let stop = Arc::new(tokio::sync::Notify::new());
        runtime.spawn(accept(listener, jobs.clone(), stop.clone()));
        Ok(Server {
            addr,
            runtime: Some(runtime),
            stop,
            jobs: Some(jobs),
            guest: Some(guest),
            shared,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests served so far, and how many of them failed in the guest.
    pub fn requests(&self) -> (u64, u64) {
        let s = &self.shared;
        (
            s.requests.load(Ordering::Relaxed),
            s.failed.load(Ordering::Relaxed),
        )
    }

    /// The profile so far, over every request served (the profiling threads keep
    /// running).
    pub fn profile(&self) -> Profile {
        let collected = (self.shared.attached.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|a| a.snapshot(SNAPSHOT_PATIENCE));
        let mut p = self.shared.decode(collected.unwrap_or_default());
        p.run.trap = Some("a snapshot: the server was still running".into());
        p
    }

    /// Stops accepting, lets the requests already taken finish, stops the profiling
    /// threads and returns the whole profile.
    pub fn stop(mut self) -> Profile {
        self.stop.notify_one();
        drop(self.jobs.take());
        if let Some(rt) = self.runtime.take() {
            // Connections still open are closed; requests queued for the guest thread
            // are answered by it first.
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        let collected = self.guest.take().and_then(|g| g.join().ok()).flatten();
        let p = self.shared.decode(collected.unwrap_or_default());
        self.shared.memories.release_kept();
        p
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.notify_one();
        drop(self.jobs.take());
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        if let Some(g) = self.guest.take() {
            let _ = g.join();
        }
    }
}

impl Shared {
    /// The profile of what was collected.
    fn decode(&self, collected: Collected) -> Profile {
        let (requests, failed) = (
            self.requests.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        );
        let run = RunInfo {
            args: Vec::new(),
            exit_code: None,
            trap: None,
            instrument_ms: self.instrument_ms,
            compile_ms: self.compile_ms,
            run_ms: self.started.elapsed().as_secs_f64() * 1e3,
        };
        let mut p = self.modules.decode(
            self.frame.as_ref(),
            (collected.results(), &collected.module_counters),
            (self.module.clone(), run),
            &self.settings,
            self.cfg.attach.sampler.as_ref(),
            &|_| None,
        );
        p.warnings.insert(
            0,
            format!(
                "served {requests} requests ({failed} failed in the guest), each in a new \
                 instance: counts are sums over them"
            ),
        );
        p
    }
}

/// Accepts connections until `stop`, each served on its own task: a slow client holds
/// its own connection only.
async fn accept(
    listener: tokio::net::TcpListener,
    jobs: std::sync::mpsc::SyncSender<Job>,
    stop: Arc<tokio::sync::Notify>,
) {
    loop {
        let stream = tokio::select! {
            _ = stop.notified() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        let jobs = jobs.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let jobs = jobs.clone();
                async move { Ok::<_, std::convert::Infallible>(respond(&jobs, request).await) }
            });
            // A client has a while to send each request's head (a slow one holds its own
            // connection only).
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Hands `request` to the guest thread and waits for its response.
async fn respond(
    jobs: &std::sync::mpsc::SyncSender<Job>,
    request: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<HyperOutgoingBody> {
    let (respond, response) = tokio::sync::oneshot::channel();
    let (failed, failure) = tokio::sync::oneshot::channel();
    let job = Job {
        request,
        respond,
        failed,
    };
    if let Err(e) = jobs.try_send(job) {
        let why = match e {
            std::sync::mpsc::TrySendError::Full(_) => "too many requests waiting",
            std::sync::mpsc::TrySendError::Disconnected(_) => "the server is stopping",
        };
        return plain(503, why);
    }
    match response.await {
        Ok(Ok(r)) => r,
        Ok(Err(code)) => plain(500, &format!("the guest failed the request: {code:?}")),
        // The guest never set a response: its store went, and with it the sender.
        Err(_) => {
            let why = failure
                .await
                .unwrap_or_else(|_| "the guest thread stopped".into());
            plain(500, &why)
        }
    }
}

/// A plain-text response of pepper's own.
fn plain(status: u16, text: &str) -> hyper::Response<HyperOutgoingBody> {
    let body = Full::new(Bytes::from(format!("pepper serve: {text}\n")))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut r = hyper::Response::new(body);
    *r.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status");
    r
}

/// The guest thread: a new instance of the component for each request, one after the
/// other, until the queue closes; profiling starts with the first instance (which
/// creates pepper's memories) and goes on until the end, when what it collected is
/// returned.
fn serve_requests(
    pre: &ProxyPre<Host>,
    component: &Component,
    (primary, at): (usize, u64),
    shared: &Shared,
    queue: std::sync::mpsc::Receiver<Job>,
) -> Option<Collected> {
    let code_map = OnceLock::new();
    while let Ok(job) = queue.recv() {
        shared.memories.new_instance();
        let mut store = Store::new(
            pre.engine(),
            Host {
                table: ResourceTable::new(),
                wasi: WasiCtx::builder().inherit_stdio().build(),
                http: WasiHttpCtx::new(),
            },
        );
        let handled = (|| -> Result<()> {
            let (request, out) = {
                let mut http = store.data_mut().http();
                let request = http.new_incoming_request(Scheme::Http, job.request)?;
                (request, http.new_response_outparam(job.respond)?)
            };
            let proxy = pre.instantiate(&mut store)?;
            if !shared.profiling.load(Ordering::Acquire) {
                let started = attach(&mut store, shared, component, (primary, at), &code_map)?;
                *shared
                    .attached
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(started);
                shared.profiling.store(true, Ordering::Release);
            }
            proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut store, request, out)?;
            Ok(())
        })();
        shared.requests.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = handled {
            shared.failed.fetch_add(1, Ordering::Relaxed);
            let _ = job.failed.send(format!("{e:#}"));
        }
    }
    let attached = shared
        .attached
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    attached.map(Attached::finish)
}

/// Starts the profiling threads on pepper's memories, which the first instance just
/// created on this thread.
fn attach(
    store: &mut Store<Host>,
    shared: &Shared,
    component: &Component,
    (primary, at): (usize, u64),
    code_map: &OnceLock<native::CodeMap>,
) -> Result<Attached> {
    let find = |t: &crate::MemoryTag| {
        (shared.memories.find_tagged(t.bytes, t.at, &t.tag).first()).copied()
    };
    let memory = shared.cfg.counters_tag.as_ref().and_then(find);
    let modules = shared.cfg.module_tags.iter().map(find).collect();
    Attached::start_with(
        store,
        (memory, modules),
        native::CodeSource::Component(component, primary, at),
        &shared.cfg.attach,
        code_map,
    )
}
