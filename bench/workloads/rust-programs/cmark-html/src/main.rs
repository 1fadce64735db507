//! Driver for `pulldown-cmark` (a CommonMark pull parser with GFM extensions and an HTML
//! renderer): `cmark-html FILE ROUNDS` turns the words of a text into a Markdown document
//! (headings, nested lists, emphasis, links, code, tables, footnotes, block quotes, task
//! lists), then ROUNDS times parses it and renders HTML, and prints the event counts, the
//! HTML size and an FNV-1a checksum of the HTML.

use pulldown_cmark::{html, Event, Options, Parser, Tag};
use std::fmt::Write;

fn markdown(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut md = String::with_capacity(text.len() * 2);
    let mut seed: u32 = 7;
    let mut rnd = |n: u32| {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        (seed >> 16) % n
    };
    let mut i = 0;
    let mut take = |k: usize| {
        let s = &words[i % words.len()..(i % words.len() + k).min(words.len())];
        i += k;
        s.join(" ")
    };
    let mut section = 0;
    while md.len() < text.len() {
        section += 1;
        let _ = writeln!(md, "{} {} {section}\n", "#".repeat(1 + rnd(3) as usize), take(3));
        for _ in 0..1 + rnd(4) {
            match rnd(9) {
                0 => {
                    for d in 0..2 + rnd(6) {
                        let indent = "  ".repeat((d % 3) as usize);
                        let mark = if rnd(2) == 0 { "-" } else { "1." };
                        let _ = writeln!(md, "{indent}{mark} {} *{}* `{}`", take(4), take(2), take(1));
                    }
                }
                1 => {
                    let _ = writeln!(md, "| {} | {} | n |\n|:--|--:|--|", take(1), take(1));
                    for r in 0..3 + rnd(5) {
                        let _ = writeln!(md, "| {} | **{}** | {r} |", take(2), take(1));
                    }
                }
                2 => {
                    let _ = writeln!(md, "```rust\nfn {}() {{\n    // {}\n}}\n```", take(1), take(6));
                }
                3 => {
                    let _ = writeln!(md, "> {}\n> > {} [^n{section}]\n", take(8), take(5));
                    let _ = writeln!(md, "[^n{section}]: {}", take(6));
                }
                4 => {
                    for _ in 0..2 + rnd(3) {
                        let done = if rnd(2) == 0 { "x" } else { " " };
                        let _ = writeln!(md, "- [{done}] {} ~~{}~~", take(3), take(2));
                    }
                }
                _ => {
                    let _ = writeln!(
                        md,
                        "{} _{}_ \"{}\" [{}](https://example.org/{}?q={section}) {}... {} <b>{}</b>\n{} \\\n{}",
                        take(12), take(2), take(3), take(2), take(1), take(10), take(4), take(1),
                        take(8), take(6)
                    );
                }
            }
            md.push('\n');
        }
    }
    md
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).map(String::as_str).unwrap_or("/data/input-small.txt");
    let rounds: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let md = markdown(&text);
    let opts = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_SMART_PUNCTUATION
        | Options::ENABLE_HEADING_ATTRIBUTES;
    let mut out = String::new();
    let (mut events, mut headings, mut links) = (0usize, 0usize, 0usize);
    for _ in 0..rounds {
        (events, headings, links) = (0, 0, 0);
        let parser = Parser::new_ext(&md, opts).inspect(|e| {
            events += 1;
            match e {
                Event::Start(Tag::Heading { .. }) => headings += 1,
                Event::Start(Tag::Link { .. }) => links += 1,
                _ => {}
            }
        });
        out.clear();
        html::push_html(&mut out, parser);
    }
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for b in out.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x100_0000_01b3);
    }
    println!("{} bytes of markdown -> {} bytes of html", md.len(), out.len());
    println!("{events} events, {headings} headings, {links} links, checksum {hash:016x}");
}
