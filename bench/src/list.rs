//! `pepper-bench --list`: the corpus as a table (bench/results/corpus.md), with each
//! program's toolchain read from its module's `producers` section rather than taken on
//! trust from the manifest.

use crate::{corpus_size_of, write_results, Args};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// The `producers` section of a core module, as `field: name version, ...; ...` (empty
/// when the module has none).
fn producers(core: &[u8]) -> String {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(core) {
        let Ok(wasmparser::Payload::CustomSection(c)) = payload else {
            continue;
        };
        let wasmparser::KnownCustom::Producers(reader) = c.as_known() else {
            continue;
        };
        for field in reader.into_iter().flatten() {
            let values: Vec<String> = field
                .values
                .into_iter()
                .flatten()
                .map(|v| format!("{} {}", v.name, v.version).trim().to_string())
                .collect();
            out.push(format!("{}: {}", field.name, values.join(", ")));
        }
    }
    out.join("; ")
}

/// Defined functions of a core module.
fn functions(core: &[u8]) -> usize {
    wasmparser::Parser::new(0)
        .parse_all(core)
        .filter_map(|p| match p {
            Ok(wasmparser::Payload::FunctionSection(s)) => Some(s.count() as usize),
            _ => None,
        })
        .sum()
}

pub fn main(args: &Args, root: &Path) -> Result<()> {
    let build = pepper_bench::corpus::build_dir(root);
    let programs = pepper_bench::corpus::load(&pepper_bench::corpus::manifest_dir(root))?;
    // The measured corpus (built programs of no set), for its size; the table lists the
    // sets apart from it too.
    let mut measured: Vec<&str> = Vec::new();
    let mut table = String::from(
        "| program | set | family | what | source | producers (from the module) | kind | size | functions |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for p in &programs {
        let path = p.module(&build);
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("bench: {} not built ({})", p.name, path.display());
            continue;
        };
        let unit = pepper_wasm::component::Unit::parse(&bytes)?;
        if p.set.is_none() {
            measured.push(&p.family);
        }
        writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} MB | {} |",
            p.name,
            p.set.as_deref().unwrap_or("corpus"),
            p.family,
            p.what,
            p.source,
            producers(&unit.core).replace('|', "/"),
            if unit.component.is_some() {
                "component (its main module shown)"
            } else {
                "core module"
            },
            bytes.len() as f64 / 1e6,
            functions(&unit.core),
        )?;
    }
    let doc = format!(
        "# pepper's benchmark corpus\n\nThe measured corpus: {}. The other sets run only in \
         some tables (`phases`: staged drivers for `--phases`; `large`: minutes to compile, \
         `--large`); the identity test runs them all. Listed in \
         `bench/workloads/corpus/*.toml`, built by `bench/workloads/build.sh`; producers are \
         read from each module's `producers` section.\n\n\
         Reproduce: `cargo run --release -p pepper-bench -- --list`\n\n{table}",
        corpus_size_of(measured.into_iter())
    );
    write_results(args, root, "corpus", &doc)
}
