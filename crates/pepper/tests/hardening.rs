//! What careless use and hostile neighbours must not break: a profile never overwrites
//! the module, a bad command line or an unusable module fails before anything runs, and a
//! reader that closes its end is no failure.

mod common;
use common::*;
use std::io::Read;
use std::process::{Command, Stdio};

/// `-o` naming the module itself, directly or through another path to the same file, is
/// refused before the guest runs, and the module is left as it was.
#[test]
fn a_profile_never_overwrites_its_module() {
    let dir = tempdir().join("own-module");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let module = dir.join("prog.wat");
    std::fs::copy(fixture("exit.wat"), &module).unwrap();
    let before = std::fs::read(&module).unwrap();
    let through_parent = dir.join("sub/../prog.wat");
    let linked = dir.join("link.wat");
    std::fs::hard_link(&module, &linked).unwrap();
    for output in [&module, &through_parent, &linked] {
        let o = pepper(&[
            "run",
            "-o",
            output.to_str().unwrap(),
            module.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{err}");
        assert!(err.contains("would overwrite the module"), "{err}");
        assert_eq!(std::fs::read(&module).unwrap(), before);
    }
}

/// An import pepper cannot provide, or a memory its engine does not run, is pepper's
/// failure (125, saying it could not instantiate the module), never a guest trap (134),
/// and leaves no profile that looks like a run.
#[test]
fn a_module_pepper_cannot_instantiate_is_its_failure() {
    let cases = [
        (
            "import",
            r#"(module (import "env" "nope" (func)) (func (export "_start") call 0))"#,
            "env::nope",
        ),
        (
            "shared",
            r#"(module (memory 1 1 shared) (func (export "_start")))"#,
            "shared",
        ),
    ];
    for (name, wat, says) in cases {
        let module = unique_path(format!("{name}.wat"));
        std::fs::write(&module, wat).unwrap();
        let out = unique_path(format!("{name}.json"));
        let o = pepper(&["run", "-o", out.to_str().unwrap(), module.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{name}: {err}");
        assert!(
            err.contains("cannot instantiate") && err.contains(says),
            "{name}: {err}"
        );
        assert!(!err.contains("guest trapped"), "{name}: {err}");
        assert!(!out.exists(), "{name}: a profile was written");
    }
}

/// A `--dir` option word pepper does not know is a command-line error (2), not a
/// read-write directory under a guest path that ends in the typo.
#[test]
fn an_unknown_dir_option_is_a_usage_error() {
    let dir = tempdir();
    for bad in ["::/d::RO", "::/d::rw", "::/d::ro::x"] {
        let arg = format!("{}{bad}", dir.display());
        let o = pepper(&["run", "--dir", &arg, fixture("exit.wat").to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--dir"), "{bad}: {err}");
    }
    // The documented forms still run (exit.wat exits 3).
    for good in ["", "::/d", "::/d::ro", "::ro"] {
        let arg = format!("{}{good}", dir.display());
        let out = unique_path("dir.json");
        let o = pepper(&[
            "run",
            "-o",
            out.to_str().unwrap(),
            "--dir",
            &arg,
            fixture("exit.wat").to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(3),
            "{good}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A profile that cannot be written is found out before the guest runs, even where
/// opening the file succeeds and only writing fails (`/dev/full`).
#[test]
fn a_full_device_is_refused_before_the_guest_runs() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let o = pepper(&[
        "run",
        "-o",
        "/dev/full",
        fixture("exit.wat").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("cannot write the profile"), "{err}");
    assert!(!err.contains("exited with code"), "the guest ran: {err}");
}

/// A reader that closes its end before pepper writes (`pepper report p.json | head -c1`
/// with a report larger than the pipe holds) ends every writing subcommand quietly with
/// status 0, as it does other Unix tools.
#[test]
fn a_closed_stdout_is_no_failure() {
    let (_, _, _, _, prof) = run_to("exact-paths", &fixture("mod3.wat"), &[], &[]);
    let p = prof.to_str().unwrap();
    let commands: [&[&str]; 6] = [
        &["report", p],
        &["report", "--format", "json", p],
        &["compare", p, p],
        &["compare", "--format", "json", p, p],
        &["export", "--format", "folded", "-o", "-", p],
        &["export", "-o", "-", p],
    ];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pepper"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A loop whose every iteration takes another path through 300 `if`/`else` diamonds:
/// exact paths keep the hottest paths up to the cap and say how many were left out, and
/// the branch counts still count every path, as exact edges count them.
#[test]
fn a_path_explosion_is_capped_and_its_branches_still_counted() {
    let mut wat = String::from(
        "(module (func (export \"_start\") (local $i i32) (local $x i32) (local $s i32)\n\
         i32.const 12345 local.set $x\nblock $b loop $l\n",
    );
    for k in 0..300 {
        wat += &format!(
            "local.get $x i32.const 1103515245 i32.mul i32.const 12345 i32.add local.tee $x \
             i32.const 16 i32.shr_u i32.const 1 i32.and\n\
             if local.get $s i32.const {} i32.add local.set $s \
             else local.get $s i32.const {} i32.xor local.set $s end\n",
            k + 1,
            k + 3
        );
    }
    wat += "local.get $i i32.const 1 i32.add local.tee $i i32.const 20000 i32.lt_u br_if $l \
            end end))";
    let module = unique_path("diamonds.wat");
    std::fs::write(&module, wat).unwrap();
    let (_, _, _, paths, file) = run_to("exact-paths", &module, &[], &[]);
    let (_, _, _, edges) = run("exact-edges", &module, &[], &[]);
    assert!(paths.lost.capped_paths > 0, "{:?}", paths.lost);
    assert!(
        paths.warnings.iter().any(|w| w.contains("colder paths")),
        "{:?}",
        paths.warnings
    );
    let steps: usize = paths
        .paths
        .iter()
        .map(|p| p.steps.len() + p.blocks.len() + 1)
        .sum();
    assert!(steps <= pepper_profile::MAX_PATH_STEPS);
    assert!(paths.lost.capped_executions >= paths.lost.capped_paths);
    let counts = |p: &pepper_profile::Profile| -> Vec<Vec<u64>> {
        p.branches.iter().map(|b| b.counts.clone()).collect()
    };
    assert_eq!(counts(&paths), counts(&edges));
    // What was written reads back and merges within the cap.
    let merged = unique_path("merged.json");
    let o = pepper(&[
        "merge",
        file.to_str().unwrap(),
        file.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A switch of hundreds of cases, each returning (more returns than a function records
/// at one shared exit, so each records its path where it returns): every mode computes
/// what `--mode none` does, PEP recording every path end counts what exact paths count,
/// and exact paths count each case's path as often as it ran.
#[test]
fn a_switch_of_many_returns_counts_each_case_where_it_returns() {
    let n = 300;
    let mut wat = String::from(
        "(module (import \"wasi_snapshot_preview1\" \"proc_exit\" (func $exit (param i32)))\n\
         (memory (export \"memory\") 1)\n(func $sw (param i32) (result i32)\n",
    );
    wat += &"block\n".repeat(n);
    wat += "local.get 0 br_table";
    for i in 0..n {
        wat += &format!(" {i}");
    }
    wat += &format!(" {}\n", n - 1);
    for i in 0..n {
        wat += &format!("end local.get 0 i32.const {} i32.mul return\n", i * 7 + 3);
    }
    wat += "unreachable)\n(func (export \"_start\") (local $i i32) (local $s i32)\n\
            loop\nlocal.get $s local.get $i i32.const 300 i32.rem_u call $sw i32.add local.set $s\n\
            local.get $i i32.const 1 i32.add local.tee $i i32.const 3000 i32.lt_u br_if 0\nend\n\
            local.get $s i32.const 127 i32.and call $exit))";
    let module = unique_path("switch.wat");
    std::fs::write(&module, wat).unwrap();
    let (c0, _, _, _) = run("none", &module, &[], &[]);
    assert_ne!(c0, 0, "the sum decides the exit status");
    let (c, _, err, exact) = run("exact-paths", &module, &[], &[]);
    assert_eq!(c, c0, "{err}");
    let sw = function_index(&exact, "sw");
    let cases: Vec<u64> = (exact.paths.iter())
        .filter(|p| p.func == sw)
        .map(|p| p.count)
        .collect();
    assert_eq!(cases, vec![3000 / n as u64; n], "one path per case");
    for mode in ["exact-edges", "staged", "ephemeral", "calls"] {
        let (c, _, err, _) = run(mode, &module, &[], &[]);
        assert_eq!(c, c0, "{mode}: {err}");
    }
    assert_pep_matches_exact(&module, &[], &[], &exact);
}

/// `pepper view` serves each client on its own: one that sends its request a byte at a
/// time, or never reads the page, does not hold up another, and a request naming a host
/// other than this machine's loopback (DNS rebinding) is refused.
#[test]
fn view_serves_clients_apart_and_only_to_loopback_names() {
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::Duration;
    let (_, _, _, _, profile) = run_to("exact-paths", &fixture("mod3.wat"), &[], &[]);
    let (mut child, addr) = spawn_view(&profile, 5);
    // Shorter than the server's deadline for a slow client: a server that served one
    // client at a time would not answer within it.
    let get = |host: &str| {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        write!(s, "GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
        let mut r = Vec::new();
        let _ = s.read_to_end(&mut r);
        String::from_utf8_lossy(&r).into_owned()
    };
    // A client stalled after one byte of its request.
    let mut stalled = TcpStream::connect(&addr).unwrap();
    stalled.write_all(b"G").unwrap();
    // A client that asks for the page and never reads it.
    let mut deaf = TcpStream::connect(&addr).unwrap();
    deaf.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let page = get("localhost");
    assert!(
        page.starts_with("HTTP/1.1 200 OK"),
        "{}",
        &page[..80.min(page.len())]
    );
    let rebound = get("evil.example.com");
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    assert!(!rebound.contains("<html"));
    let port = addr.rsplit(':').next().unwrap();
    assert!(get(&format!("127.0.0.1:{port}")).starts_with("HTTP/1.1 200 OK"));
    drop((stalled, deaf));
    assert!(child.wait().unwrap().success());
}
