//! Driver for the `regex` crate (Rust's regex engine: parser, NFA/DFA/one-pass/backtracking
//! engines, literal prefilters): `regex-scan FILE ROUNDS` compiles a set of patterns and runs
//! them over a text ROUNDS times (counting matches, walking captures, replacing, splitting),
//! then prints the counts and an FNV-1a checksum of everything matched.

use regex::{Regex, RegexBuilder};

const PATTERNS: &[&str] = &[
    r"\bpepper\b",
    r"\b(branch|edge|path) (of|to|in) (\w+)",
    r"(?i)\bPROFILE\s+\w+\s+(SAMPLE|COUNTER)\b",
    r"\b\w{8,}\b",
    r"(?m)^sample\b.*\bpath$",
    r"\b(p\w+) (\w+) (p\w+)\b",
    r"[aeiou]{2}",
    r"\b(?:the|a|of) (?:wasm|loop) (?:header|register)\b",
    r"(\w+)er\b \w+ing|yield\w*",
    r"(?s)counter.{0,40}?yieldpoint",
];

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).map(String::as_str).unwrap_or("/data/input-small.txt");
    let rounds: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));

    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut counts = vec![0usize; PATTERNS.len() + 3];
    for _ in 0..rounds {
        counts.iter_mut().for_each(|c| *c = 0);
        // Compile every round: the parser and compiler are part of the work.
        let res: Vec<Regex> = PATTERNS
            .iter()
            .map(|p| RegexBuilder::new(p).size_limit(1 << 24).build().expect(p))
            .collect();
        for (i, re) in res.iter().enumerate() {
            if re.captures_len() > 1 {
                for caps in re.captures_iter(&text) {
                    counts[i] += 1;
                    if let Some(g) = caps.get(caps.len() - 1) {
                        fnv(&mut hash, g.as_str().as_bytes());
                    }
                }
            } else {
                for m in re.find_iter(&text) {
                    counts[i] += 1;
                    fnv(&mut hash, &m.start().to_le_bytes());
                }
            }
        }
        let n = PATTERNS.len();
        // Replacement with group references, and splitting.
        let swap = &res[1];
        let replaced = swap.replace_all(&text, "[$3 $1]");
        counts[n] = replaced.len();
        fnv(&mut hash, &replaced.as_bytes()[replaced.len() / 2..replaced.len() / 2 + 64]);
        let splitter = Regex::new(r"\s*\b(?:and|the)\b\s*").unwrap();
        counts[n + 1] = splitter.split(&text).filter(|s| s.len() > 40).count();
        // A set of patterns matched line by line.
        let set = regex::RegexSet::new(&PATTERNS[..4]).unwrap();
        counts[n + 2] = text.lines().filter(|l| set.matches(l).iter().count() >= 2).count();
    }
    println!("{} bytes, {} patterns: {:?}", text.len(), PATTERNS.len(), counts);
    println!("checksum {hash:016x}");
}
