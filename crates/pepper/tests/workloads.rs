//! Differential tests on the real workloads (bench/workloads/build.sh builds them; CI does
//! that first): instrumented and original programs print the same output and exit code, and
//! the edge profile derived from exact paths equals the directly counted one (counters
//! placed statically and by a guide), and PEP with
//! every path end recorded (plain and smart numbering) equals exact paths.
//!
//! Missing workloads fail the test with instructions, unless PEPPER_SKIP_WORKLOADS=1.

mod common;
use common::*;

fn differential(name: &str, extra: &[&str], guest: &[&str]) {
    let Some(wasm) = workload(name) else { return };
    let (c0, out0, _, _) = run("none", &wasm, extra, guest);
    let (c1, out1, e1, paths) = run("exact-paths", &wasm, extra, guest);
    let (c2, out2, e2, edges) = run("exact-edges", &wasm, extra, guest);
    assert_eq!(c0, 0, "{name} runs");
    assert!(!out0.is_empty(), "{name} prints something");
    assert_eq!((c0, &out0), (c1, &out1), "exact-paths changed {name}: {e1}");
    assert_eq!((c0, &out0), (c2, &out2), "exact-edges changed {name}: {e2}");
    assert!(paths.paths.len() > 100, "{name}: real paths recorded");
    assert_same_edges(&paths, &edges);
    // Counters placed by a guide (the exact-paths profile) count the same outcomes.
    let guide = unique_path(format!("{name}.guide.json"));
    paths.write(std::fs::File::create(&guide).unwrap()).unwrap();
    let mut guided = extra.to_vec();
    guided.extend(["--guide", guide.to_str().unwrap()]);
    let (c3, out3, e3, guided_edges) = run("exact-edges", &wasm, &guided, guest);
    assert_eq!(
        (c0, &out0),
        (c3, &out3),
        "guided exact-edges changed {name}: {e3}"
    );
    assert_same_edges(&paths, &guided_edges);
    assert_pep_matches_exact(&wasm, extra, guest, &paths);
}

#[test]
fn bzip2() {
    let d = data_dir_arg();
    differential(
        "bzip2",
        &["--dir", &d],
        &["-c", "-9", "/data/input-small.txt"],
    );
}

#[test]
fn lua() {
    differential("lua", &[], &["1"]);
}

#[test]
fn sqlite() {
    differential("sqlite", &[], &["1"]);
}

#[test]
fn zstd() {
    differential("zstd", &[], &["1"]);
}

/// TPP: a guide from a different input (bzip2 -1 on the small input, run at -9) makes
/// real cold flow; hot paths must still be counted exactly and cold ones all caught.
#[test]
fn targeted_counts_hot_paths_exactly_and_catches_every_cold_one() {
    let Some(wasm) = workload("bzip2") else {
        return;
    };
    let d = data_dir_arg();
    for obvious in [&[][..], &["--obvious"][..]] {
        let mut extra = vec!["--dir", &d];
        extra.extend_from_slice(obvious);
        let cold = assert_targeted_exact(
            &wasm,
            &extra,
            &["-c", "-1", "/data/input-small.txt"],
            &["-c", "-9", "/data/input-small.txt"],
            "0.05",
        );
        assert!(cold > 0, "a guide from another input leaves some flow cold");
    }
    // Same input, nothing below 0%: no cold flow at all, every path exact.
    let Some(wasm) = workload("zstd") else { return };
    for obvious in [&[][..], &["--obvious"][..]] {
        assert_eq!(
            assert_targeted_exact(&wasm, obvious, &["1"], &["1"], "0"),
            0
        );
    }
}

/// DWARF's inlined subroutines reach the profile: bzip2's sorting is inlined into
/// `BZ2_blockSort`, and its branches say so (and the report shows it).
#[test]
fn inlined_frames_come_from_dwarf() {
    let Some(wasm) = workload("bzip2") else {
        return;
    };
    let d = data_dir_arg();
    let (_, _, _, p, path) = run_to(
        "exact-edges",
        &wasm,
        &["--dir", &d],
        &["-c", "-1", "/data/input-small.txt"],
    );
    let inlined: Vec<_> = p
        .branches
        .iter()
        .filter(|b| !b.inlined.is_empty())
        .collect();
    assert!(inlined.len() > 100, "{} inlined branches", inlined.len());
    let sort = inlined
        .iter()
        .find(|b| b.inlined[0] == "mainQSort3")
        .expect("mainQSort3's branches are inlined");
    assert!(
        sort.inlined
            .last()
            .unwrap()
            .starts_with("BZ2_blockSort (blocksort.c:"),
        "{:?}",
        sort.inlined
    );
    let report = pepper(&["report", "--top", "30", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("inlined into BZ2_blockSort"), "{text}");
}
