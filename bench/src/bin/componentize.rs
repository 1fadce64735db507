//! `componentize IN.wasm OUT.wasm`: a WASI preview-1 command module as a
//! `wasi:cli/command` component (see `componentize.rs`), as the benchmark's component
//! rows and a user would build it.

use anyhow::{Context, Result};

#[path = "../componentize.rs"]
mod componentize;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        anyhow::bail!("usage: componentize IN.wasm OUT.wasm");
    };
    let core = std::fs::read(input).with_context(|| format!("reading {input}"))?;
    let component =
        componentize::componentize(&core).with_context(|| format!("componentizing {input}"))?;
    std::fs::write(output, component).with_context(|| format!("writing {output}"))?;
    Ok(())
}
