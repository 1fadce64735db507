//! The HTML report: every section for a real profile, and the page as a real browser
//! (headless Chromium) loads it: no script errors, the flame graph and the tables in the
//! DOM, and a screenshot kept in `target/test-artifacts/`.

mod common;
use common::*;
use std::process::Command;

fn report_html(profile: &std::path::Path, extra: &[&str]) -> (std::path::PathBuf, String) {
    let page = unique_path("report.html");
    let mut args = vec!["report", "--format", "html", "-o", page.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(profile.to_str().unwrap());
    let o = pepper(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&page).unwrap();
    (page, text)
}

/// Sections with content: a PEP run of a fixture with calls and loops has a flame graph,
/// functions, paths and control flow; a time line has its strip; tags balance.
#[test]
fn the_page_has_every_section() {
    let (_, _, stderr, p, file) = run_to("pep", &fixture("calls.wat"), &["--every", "1"], &[]);
    assert!(p.contexts.is_some(), "{stderr}");
    let (_, page) = report_html(&file, &[]);
    for needle in [
        "<h2>Flame graph</h2>",
        "<h2>Hottest functions</h2>",
        "<h2>Hottest paths</h2>",
        "<h2>Control flow of the hottest functions</h2>",
        "id=\"frames\"",
    ] {
        assert!(page.contains(needle), "{needle} missing");
    }
    for tag in ["section", "table", "svg"] {
        assert_eq!(
            page.matches(&format!("<{tag}")).count(),
            page.matches(&format!("</{tag}>")).count(),
            "<{tag}> unbalanced"
        );
    }
    let (_, _, _, _, timeline) = run_to("pep", &fixture("two_loops.wat"), &["--timeline"], &[]);
    let (_, page) = report_html(&timeline, &[]);
    assert!(page.contains("<h2>Phase time line</h2>") && page.contains("interval 0: group"));
}

fn chromium() -> Option<&'static str> {
    let found = Command::new("chromium").arg("--version").output().is_ok();
    if !found && std::env::var_os("PEPPER_REQUIRE_READERS").is_some() {
        panic!("`chromium` is required: scripts/test.sh installs it");
    }
    found.then_some("chromium")
}

/// Headless Chromium loads the report of a real workload (Lua, with DWARF lines): no
/// script error in its console, the flame graph's frames and the source section in the
/// DOM after scripts ran, and a screenshot.
#[test]
fn a_browser_loads_the_page() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium");
        return;
    };
    let Some(lua) = workload("lua") else {
        return;
    };
    let (_, _, stderr, _, file) = run_to("pep", &lua, &[], &["2"]);
    assert!(!stderr.contains("error"), "{stderr}");
    let (page, _) = report_html(&file, &[]);
    let url = format!("file://{}", page.display());
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let dom = Command::new(browser)
        .args(flags)
        .args(["--dump-dom", &url])
        .output()
        .unwrap();
    let console = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !console.contains("Uncaught") && !console.contains("SyntaxError"),
        "script errors: {console}"
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("id=\"frames\"") && dom.contains("<g"),
        "no flame graph in the DOM"
    );
    // Branch biases by C source file (Lua's DWARF names them, e.g. lvm.c).
    let files = dom
        .split("<h3>")
        .skip(1)
        .filter(|h| {
            h.split(['<', ' '])
                .next()
                .is_some_and(|f| f.ends_with(".c"))
        })
        .count();
    assert!(files > 0, "no source file in the source view");
    let shots = root().join("target/test-artifacts");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("report-lua.png");
    let o = Command::new(browser)
        .args(flags)
        .args([
            "--window-size=1280,2400",
            &format!("--screenshot={}", shot.display()),
            &url,
        ])
        .output()
        .unwrap();
    assert!(
        std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000),
        "no screenshot: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
