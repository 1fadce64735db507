//! `pepper serve`: a `wasi:http/proxy` component (bench/workloads/rust-http, built by
//! bench/workloads/build.sh) served as `wasmtime serve` serves it, profiled over every
//! request, with its live endpoint read by real clients (`go tool pprof`, `wrk`, `curl`
//! where the machine has them; scripts/test.sh installs them).

mod common;
use common::*;
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The handler's hot functions (`mix`, `fnv1a`), as pepper names them.
const HOT: &str = "main::http_hash::";

fn component() -> Option<PathBuf> {
    let p = root().join("bench/workloads/build/http-hash.component.wasm");
    if !p.exists() {
        eprintln!("skipping: {} was not built", p.display());
        return None;
    }
    Some(p)
}

/// Whether `tool` is installed here.
fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

/// `pepper serve` of `component` with `flags`, and the addresses it prints (the server's,
/// then the endpoint's when asked for).
fn serve(component: &Path, out: &Path, flags: &[&str]) -> (Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pepper"))
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "-o",
            out.to_str().unwrap(),
        ])
        .args(flags)
        .arg(component)
        .env("XDG_CACHE_HOME", tempdir().join("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = flags.contains(&"--profile-addr") as usize + 1;
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let addrs = (0..lines)
        .map(|_| {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            let addr = line
                .trim()
                .trim_start_matches("http://")
                .trim_end_matches('/');
            assert!(!addr.is_empty(), "pepper serve printed no address");
            addr.to_string()
        })
        .collect();
    (child, addrs)
}

/// GET `path` from `addr`, one request on its own connection: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = Vec::new();
    s.read_to_end(&mut r).unwrap();
    let r = String::from_utf8_lossy(&r).into_owned();
    let status = (r.split_whitespace().nth(1)).and_then(|c| c.parse().ok());
    let body = r.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status.unwrap_or(0), body.to_string())
}

/// Stops the server as a user would (SIGTERM) and waits for it: its exit status and
/// stderr.
fn stop(mut child: Child) -> (bool, String) {
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "pepper serve did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Requests in the default mode (PEP with calling contexts), driven by `wrk` where the
/// machine has it, while `go tool pprof` fetches the last two seconds from the live
/// endpoint and `curl` the profile so far; then SIGTERM: the server finishes, writes the
/// whole profile, and every view names the handler's hot function.
#[test]
fn a_served_component_is_profiled_over_its_requests_and_live() {
    let Some(c) = component() else { return };
    let out = unique_path("http-hash.pepper.json");
    let (child, addrs) = serve(&c, &out, &["--profile-addr", "127.0.0.1:0"]);
    let (server, endpoint) = (addrs[0].clone(), addrs[1].clone());
    let (status, body) = get(&server, "/hash?n=1000");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("hash="), "{body}");
    let (status, _) = get(&server, "/nowhere");
    assert_eq!(status, 404);
    // Load for a few seconds: wrk if there is one, else requests one after another.
    let load = {
        let server = server.clone();
        std::thread::spawn(move || {
            let url = format!("http://{server}/hash?n=20000");
            if have("wrk") {
                let o = Command::new("wrk")
                    .args(["-t1", "-c4", "-d5s", &url])
                    .output()
                    .unwrap();
                return String::from_utf8_lossy(&o.stdout).into_owned();
            }
            let until = Instant::now() + Duration::from_secs(5);
            let mut n = 0;
            while Instant::now() < until {
                let (status, body) = get(&server, "/hash?n=20000");
                assert_eq!(status, 200, "{body}");
                n += 1;
            }
            format!("{n} requests")
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    if have("go") {
        let url = format!("http://{endpoint}/debug/pprof/profile?seconds=2");
        let o = Command::new("go")
            .args(["tool", "pprof", "-raw", &url])
            .env("HOME", tempdir())
            .output()
            .unwrap();
        let raw = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{raw} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(raw.contains(HOT), "pprof's samples of the last 2 s: {raw}");
    } else {
        eprintln!("no go tool pprof here: the endpoint's pprof is read by pepper's tests only");
        let (status, pb) = get(&endpoint, "/debug/pprof/profile?seconds=1");
        assert_eq!(status, 200);
        assert!(!pb.is_empty());
    }
    let (status, json) = match have("curl") {
        true => {
            let url = format!("http://{endpoint}/profile.json");
            let o = Command::new("curl").args(["-sf", &url]).output().unwrap();
            (
                if o.status.success() { 200 } else { 0 },
                String::from_utf8_lossy(&o.stdout).into_owned(),
            )
        }
        false => get(&endpoint, "/profile.json"),
    };
    assert_eq!(status, 200, "{json}");
    let live = pepper_profile::Profile::read(json.as_bytes()).expect("the live profile reads");
    assert!(
        live.warnings[0].starts_with("served "),
        "{:?}",
        live.warnings
    );
    // A page elsewhere that rebinds its name to 127.0.0.1 gets nothing.
    let mut s = TcpStream::connect(&endpoint).unwrap();
    write!(
        s,
        "GET /profile.json HTTP/1.1\r\nHost: evil.example.com\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    let _ = s.read_to_string(&mut r);
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    let driven = load.join().unwrap();
    let (ok, err) = stop(child);
    assert!(ok, "{err}");
    let p = pepper_profile::Profile::read(std::fs::File::open(&out).unwrap()).unwrap();
    let served: u64 = (p.warnings[0].split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(served > 20, "{:?} ({driven})", p.warnings[0]);
    let hot = (p.functions.iter())
        .find(|f| f.name.as_deref().is_some_and(|n| n.contains(HOT)))
        .unwrap_or_else(|| panic!("no {HOT} among {:?}", p.functions.len()));
    let paths: u64 = (p.paths.iter())
        .filter(|q| q.func == hot.index)
        .map(|q| q.count)
        .sum();
    assert!(paths > 0, "PEP found no path of {HOT}: {err}");
    if pepper_runtime::NATIVE_STACKS {
        let c = p.contexts.as_ref().expect("calling contexts");
        let top = c.hot_functions.iter().max_by_key(|h| h.self_us).unwrap();
        assert!(
            p.function_name(top.func).contains(HOT),
            "{}",
            p.function_name(top.func)
        );
    }
}

/// The exact modes count every request's executions, each in a new instance, and the
/// counts are the sums: `fnv1a` is called once per round, so its paths from its entry
/// add up to the rounds of every request.
#[test]
fn exact_counts_add_up_over_instances() {
    let Some(c) = component() else { return };
    let out = unique_path("http-hash.exact.json");
    let (child, addrs) = serve(&c, &out, &["--mode", "exact-paths"]);
    for _ in 0..5 {
        let (status, body) = get(&addrs[0], "/hash?n=1000");
        assert_eq!(status, 200, "{body}");
    }
    let (ok, err) = stop(child);
    assert!(ok, "{err}");
    let p = pepper_profile::Profile::read(std::fs::File::open(&out).unwrap()).unwrap();
    assert!(
        p.warnings[0].starts_with("served 5 requests (0 failed"),
        "{:?}",
        p.warnings
    );
    let fnv = function_index(&p, "main::http_hash::fnv1a");
    let calls: u64 = (p.paths.iter())
        .filter(|q| q.func == fnv && q.start == pepper_profile::PathPoint::FunctionEntry)
        .map(|q| q.count)
        .sum();
    assert_eq!(calls, 5 * 1000, "fnv1a runs once per round of each request");
}
