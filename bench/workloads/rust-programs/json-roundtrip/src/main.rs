//! Driver for `serde_json` (with `serde`'s derive): `json-roundtrip RECORDS ROUNDS` builds a
//! deterministic document of RECORDS records, then ROUNDS times serializes it (compact and
//! pretty), parses it back both as an untyped `Value` and into the typed structs, walks the
//! `Value` tree and checks the round trip, and prints sizes and an FNV-1a checksum.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct Point {
    x: f64,
    y: f64,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
enum Kind {
    Leaf,
    Branch { depth: u32 },
    Tagged(String),
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct Record {
    id: u64,
    name: String,
    active: bool,
    score: f64,
    tags: Vec<String>,
    path: Vec<Point>,
    kind: Kind,
    attrs: BTreeMap<String, i64>,
    note: Option<String>,
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Document {
    version: u32,
    title: String,
    records: Vec<Record>,
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

const WORDS: &[&str] = &[
    "pepper", "path", "edge", "profile", "wasm", "loop", "header", "branch", "sample",
    "register", "counter", "yieldpoint", "caf\u{e9}", "na\u{ef}ve", "\"quoted\"", "tab\there",
    "\u{3bb}-calculus", "line\nbreak", "back\\slash", "\u{1f336}",
];

fn document(n: usize) -> Document {
    let mut r = Lcg(42);
    let word = |r: &mut Lcg| WORDS[r.next() as usize % WORDS.len()].to_string();
    let records = (0..n)
        .map(|i| {
            let ntags = (r.next() % 5) as usize;
            let npts = (r.next() % 7) as usize;
            let kind = match r.next() % 3 {
                0 => Kind::Leaf,
                1 => Kind::Branch { depth: (r.next() % 64) as u32 },
                _ => Kind::Tagged(word(&mut r)),
            };
            let attrs = (0..r.next() % 4)
                .map(|k| (format!("{}{k}", word(&mut r)), r.next() as i64 - (1 << 30)))
                .collect();
            Record {
                id: i as u64 * 7919 + r.next() % 100,
                name: format!("{} {} #{i}", word(&mut r), word(&mut r)),
                active: r.next() % 2 == 0,
                score: (r.next() as f64) / 3.0e6 - 700.0,
                tags: (0..ntags).map(|_| word(&mut r)).collect(),
                path: (0..npts)
                    .map(|_| Point { x: r.next() as f64 * 1e-4, y: -(r.next() as f64) / 7.0 })
                    .collect(),
                kind,
                attrs,
                note: (r.next() % 4 == 0).then(|| word(&mut r).repeat(3)),
            }
        })
        .collect();
    Document { version: 3, title: "pepper corpus \u{2014} json".into(), records }
}

fn mix(h: &mut u64, x: u64) {
    *h ^= x;
    *h = h.wrapping_mul(0x100_0000_01b3);
}

fn walk(v: &Value, h: &mut u64) -> usize {
    match v {
        Value::Null => {
            mix(h, 1);
            1
        }
        Value::Bool(b) => {
            mix(h, 2 + *b as u64);
            1
        }
        Value::Number(n) => {
            mix(h, n.as_f64().unwrap_or(0.0).to_bits());
            1
        }
        Value::String(s) => {
            mix(h, s.len() as u64);
            s.bytes().for_each(|b| mix(h, b as u64));
            1
        }
        Value::Array(a) => 1 + a.iter().map(|x| walk(x, h)).sum::<usize>(),
        Value::Object(o) => {
            let mut n = 1;
            for (k, x) in o {
                k.bytes().for_each(|b| mix(h, b as u64));
                n += walk(x, h);
            }
            n
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rounds: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let doc = document(n);
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let (mut compact_len, mut pretty_len, mut nodes) = (0, 0, 0);
    for _ in 0..rounds {
        let compact = serde_json::to_string(&doc).unwrap();
        let value: Value = serde_json::from_str(&compact).unwrap();
        nodes = walk(&value, &mut hash);
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let back: Document = serde_json::from_str(&pretty).unwrap();
        assert!(back == doc, "typed round trip");
        let again: Value = serde_json::to_value(&back).unwrap();
        assert!(again == value, "value round trip");
        compact_len = compact.len();
        pretty_len = pretty.len();
    }
    println!("{n} records: compact {compact_len} bytes, pretty {pretty_len} bytes, {nodes} nodes");
    println!("checksum {hash:016x}");
}
