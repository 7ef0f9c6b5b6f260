//! The `boxlayer` command line: parses arguments, calls one library function per subcommand and
//! prints the error chain once.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Turns raw outdoor LiDAR + RGB logs into the 3D box layer of a grounding dataset.
#[derive(Debug, Parser)]
#[command(name = "boxlayer", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a one-screen summary of an input: an ONNX model, a Waymo v1 segment or a Waymo v2 folder.
    Inspect {
        /// The file to summarise.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("BOXLAYER_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Inspect { file } => {
            let summary = boxlayer::inspect::inspect(&file).with_context(|| format!("inspect {}", file.display()))?;
            print!("{summary}");
        }
    }
    Ok(())
}
