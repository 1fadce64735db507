//! `pepper`: the command-line interface. One module per subcommand; flags become plain
//! config types here, at the edge, and the library crates never see clap.

mod cmd;

use clap::{Parser, Subcommand};

/// pepper: path, edge and calling-context profiler for WebAssembly.
///
/// Typical use:
///   pepper run prog.wasm ARGS          profile (PEP sampling by default), write prog.pepper.json
///   pepper report prog.pepper.json     hottest functions, paths and branch biases
///   pepper compare exact.json pep.json accuracy of one profile against another
///   pepper export prog.pepper.json     calling contexts as pprof (also folded, flamegraph, firefox)
///   pepper merge a.json b.json -o all.json  sum profiles of several runs or stores
///   pepper hints prog.pepper.json prog.wasm -o prog.hinted.wasm  branch hints for engines
///   pepper phases prog.pepper.json          phases of a --timeline run, similarity matrix
///   pepper serve app.wasm                   a wasi:http/proxy component, profiled all along
///
/// Exit status: `run` passes the guest's on (134 after a trap); 125 when pepper itself
/// fails; 2 for a malformed command line.
#[derive(Parser, Debug)]
#[command(name = "pepper", version, about, long_about, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Run(Box<cmd::run::Args>),
    Report(cmd::report::Args),
    Instrument(cmd::instrument::Args),
    Compare(cmd::compare::Args),
    Export(cmd::export::Args),
    Merge(cmd::merge::Args),
    Hints(cmd::hints::Args),
    Phases(cmd::phases::Args),
    View(cmd::view::Args),
    Serve(cmd::serve::Args),
    /// Print a shell completion script: `pepper completions bash > /etc/bash_completion.d/pepper`.
    Completions {
        /// The shell (bash, zsh, fish, elvish, powershell).
        shell: clap_complete::Shell,
    },
}

/// Exit status when pepper itself fails (bad module, unwritable profile, I/O): 125, as
/// `docker run` and `chroot` use for "the tool failed, not the program", so it is not
/// mistaken for a guest's own exit status (passed through as is; 134 after a trap, like
/// `wasmtime run`). A malformed command line exits 2 before anything runs.
const PEPPER_FAILED: i32 = 125;

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => cmd::run::run(*a),
        Command::Report(a) => cmd::report::run(a),
        Command::Instrument(a) => cmd::instrument::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Hints(a) => cmd::hints::run(a),
        Command::Phases(a) => cmd::phases::run(a),
        Command::View(a) => cmd::view::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "pepper", &mut std::io::stdout());
            Ok(0)
        }
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                std::process::exit(0);
            }
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            std::process::exit(PEPPER_FAILED);
        }
    }
}

/// A reader that closed its end (`pepper report | head`) wanted no more: success, as for
/// other Unix tools, in every subcommand, whichever layer the write error came through.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let kind = match (
            c.downcast_ref::<std::io::Error>(),
            c.downcast_ref::<serde_json::Error>(),
            c.downcast_ref::<pepper_profile::ProfileError>(),
        ) {
            (Some(io), ..) => Some(io.kind()),
            (_, Some(json), _) => json.io_error_kind(),
            (.., Some(pepper_profile::ProfileError::Io(io))) => Some(io.kind()),
            _ => None,
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}
