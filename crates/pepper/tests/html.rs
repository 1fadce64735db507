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
    flame_graph_spans_the_page_and_zooms(browser, &page, &flags);
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

/// In a 1600-pixel window, the flame graph is as wide as its section (inferno's fluid
/// drawing, the page's width), and a click on a frame narrower than half of it zooms into
/// it as inferno's script does: the frame widens and the "Reset Zoom" button shows. A script added to a copy of
/// the page measures and clicks once the page's own scripts ran, and reports in the
/// title.
fn flame_graph_spans_the_page_and_zooms(browser: &str, page: &std::path::Path, flags: &[&str]) {
    let probe = r##"<script>
window.addEventListener("load", function() { setTimeout(function() {
  var svg = document.querySelector("#flamegraph svg").getBoundingClientRect().width;
  var section = document.querySelector("#flamegraph").getBoundingClientRect().width;
  var width = function(g) { return g.querySelector("rect").getBoundingClientRect().width; };
  var frame = Array.from(document.querySelectorAll("#frames g"))
    .find(function(g) { return width(g) > 10 && width(g) < section / 2; });
  var rect = frame.querySelector("rect");
  var before = rect.getBoundingClientRect().width;
  var hidden = document.getElementById("unzoom").classList.contains("hide");
  frame.dispatchEvent(new MouseEvent("click", {bubbles: true}));
  var after = rect.getBoundingClientRect().width;
  var shown = !document.getElementById("unzoom").classList.contains("hide");
  document.title = ["probe", svg, section, before, after, hidden && shown].join(" ");
}, 500); });
</script>"##;
    let html = std::fs::read_to_string(page)
        .unwrap()
        .replace("</body>", &format!("{probe}</body>"));
    let probed = unique_path("probe.html");
    std::fs::write(&probed, html).unwrap();
    let dom = Command::new(browser)
        .args(flags)
        .args([
            "--window-size=1600,1200",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", probed.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    let title = dom
        .split("<title>probe ")
        .nth(1)
        .and_then(|t| t.split('<').next())
        .unwrap_or_else(|| panic!("the probe did not run: {}", &dom[..dom.len().min(300)]));
    let v: Vec<&str> = title.split(' ').collect();
    let num = |i: usize| v[i].parse::<f64>().unwrap();
    let (svg, section, before, after) = (num(0), num(1), num(2), num(3));
    assert!(
        section > 1400.0,
        "the section is {section} px wide in a 1600 px window"
    );
    assert!(
        (svg - section).abs() < 2.0,
        "flame graph {svg} px in a {section} px section"
    );
    assert!(
        after > before * 1.5,
        "a click on a frame zooms it: {before} -> {after} px"
    );
    assert_eq!(v[4], "true", "the Reset Zoom button shows after the click");
}
