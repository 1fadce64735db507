//! Mutated profiles against every reader: a profile that reads must never make `report`,
//! `compare`, `merge` or `export` panic or run away; one that does not read must be
//! refused with a message, not a panic. The base profiles are real pepper runs (paths,
//! branches, calling contexts, a time line), mutated by a seeded generator: numbers
//! replaced by edge values, array elements dropped, duplicated or swapped.

mod common;
use common::*;
use pepper_profile::Profile;
use serde_json::Value;

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every number and every array in `v`, as JSON pointers.
fn leaves(v: &Value, at: String, numbers: &mut Vec<String>, arrays: &mut Vec<String>) {
    match v {
        Value::Number(_) => numbers.push(at),
        Value::Array(a) => {
            arrays.push(at.clone());
            for (i, x) in a.iter().enumerate() {
                leaves(x, format!("{at}/{i}"), numbers, arrays);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                leaves(x, format!("{at}/{k}"), numbers, arrays);
            }
        }
        _ => {}
    }
}

fn mutate(base: &Value, rng: &mut Rng) -> Value {
    let mut v = base.clone();
    let (mut numbers, mut arrays) = (Vec::new(), Vec::new());
    leaves(&v, String::new(), &mut numbers, &mut arrays);
    for _ in 0..1 + rng.below(3) {
        if rng.below(3) > 0 && !numbers.is_empty() {
            let at = &numbers[rng.below(numbers.len())];
            let n: Value = match rng.below(6) {
                0 => 0.into(),
                1 => 1.into(),
                2 => (u32::MAX as u64).into(),
                3 => u64::MAX.into(),
                4 => (rng.next() % 64).into(),
                _ => (rng.next() >> rng.below(64)).into(),
            };
            if let Some(x) = v.pointer_mut(at) {
                *x = n;
            }
        } else if !arrays.is_empty() {
            let at = &arrays[rng.below(arrays.len())];
            let choice = rng.below(3);
            let (a, b) = (rng.next(), rng.next());
            if let Some(Value::Array(a_)) = v.pointer_mut(at) {
                let len = a_.len();
                if len > 0 {
                    let (i, j) = ((a % len as u64) as usize, (b % len as u64) as usize);
                    match choice {
                        0 => {
                            a_.remove(i);
                        }
                        1 => {
                            let x = a_[i].clone();
                            a_.insert(j, x);
                        }
                        _ => a_.swap(i, j),
                    }
                }
            }
        }
    }
    v
}

/// Everything a reader does with a profile (shared with the `profile` fuzz target).
#[path = "../../../fuzz/readers.rs"]
mod readers;
use readers::read_everything;

#[test]
fn mutated_profiles_never_panic_a_reader() {
    let bases = [
        run_to("exact-calls", &fixture("calls.wat"), &[], &[]).4,
        run_to("exact-paths", &fixture("nested.wat"), &[], &[]).4,
        run_to("pep", &fixture("two_loops.wat"), &["--timeline"], &[]).4,
    ];
    // `PEPPER_FUZZ_ITERS` runs longer (per base profile; the default keeps CI quick).
    let iters: usize = std::env::var("PEPPER_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(700);
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut read, mut refused) = (0, 0);
    for base in &bases {
        let text = std::fs::read_to_string(base).unwrap();
        let base: Value = serde_json::from_str(&text).unwrap();
        read_everything(&Profile::read(text.as_bytes()).expect("the base reads"));
        for _ in 0..iters {
            let m = serde_json::to_vec(&mutate(&base, &mut rng)).unwrap();
            match Profile::read(&m[..]) {
                Ok(p) => {
                    read_everything(&p);
                    read += 1;
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    refused += 1;
                }
            }
        }
    }
    // Both sides were exercised: mutations that still read, and ones refused.
    assert!(
        read > 100 && refused > 100,
        "read {read}, refused {refused}"
    );
}

/// A parent cycle, an out-of-range parent and a step through a missing branch are each
/// refused by name.
#[test]
fn structural_damage_is_refused_with_a_reason() {
    let (_, _, _, p, _) = run_to("exact-calls", &fixture("calls.wat"), &[], &[]);
    let mut v: Value = serde_json::to_value(&p).unwrap();
    let nodes = v["contexts"]["nodes"].as_array().unwrap().len();
    assert!(nodes > 2, "the fixture has contexts");
    v["contexts"]["nodes"][1]["parent"] = (nodes as u64 + 5).into();
    let e = Profile::read(&serde_json::to_vec(&v).unwrap()[..]).unwrap_err();
    assert!(e.to_string().contains("context node 1"), "{e}");
    v["contexts"]["nodes"][1]["parent"] = 2.into();
    v["contexts"]["nodes"][2]["parent"] = 1.into();
    let e = Profile::read(&serde_json::to_vec(&v).unwrap()[..]).unwrap_err();
    assert!(e.to_string().contains("not an earlier node"), "{e}");

    let (_, _, _, p, _) = run_to("exact-paths", &fixture("nested.wat"), &[], &[]);
    let mut v: Value = serde_json::to_value(&p).unwrap();
    let branches = v["branches"].as_array().unwrap().len() as u64;
    let path = v["paths"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|x| !x["steps"].as_array().unwrap().is_empty())
        .expect("a path with branches");
    path["steps"][0]["branch"] = (branches + 3).into();
    let e = Profile::read(&serde_json::to_vec(&v).unwrap()[..]).unwrap_err();
    assert!(e.to_string().contains("does not have"), "{e}");
}
