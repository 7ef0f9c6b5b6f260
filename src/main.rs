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
    /// Run the demonstration on data it simulates itself and print what each stage produced.
    Demo {
        /// Sweeps per platform.
        #[arg(long, default_value_t = 5)]
        frames: usize,
        /// Simulator seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Output folder.
        #[arg(long, default_value = "demo-out")]
        out: PathBuf,
    },
    /// Print a one-screen summary of an input file (ONNX models so far).
    Inspect {
        /// The file to summarise.
        file: PathBuf,
    },
    /// Evaluate predictions against ground truth: detection AP, tracking CLEAR-MOT/AMOTA, grounding Acc@δ/mIoU.
    Eval {
        /// Ground truth: a 3EED-layout folder or a JSON-lines box list.
        #[arg(long)]
        gt: PathBuf,
        /// Predictions, in the same format as the ground truth.
        #[arg(long)]
        pred: PathBuf,
        /// Input format, `3eed` or `jsonl`; by default a folder is 3eed and a file jsonl.
        #[arg(long)]
        format: Option<boxlayer::eval::InputFormat>,
        /// Also write the full results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// An `EvalConfig` TOML file; defaults apply to everything it leaves out.
        #[arg(long)]
        config: Option<PathBuf>,
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
        Command::Demo { frames, seed, out } => {
            let report = boxlayer::demo::run(&boxlayer::demo::DemoOptions { frames, seed, out }).context("demo")?;
            print!("{report}");
        }
        Command::Inspect { file } => {
            let summary = boxlayer::inspect::inspect(&file).with_context(|| format!("inspect {}", file.display()))?;
            print!("{summary}");
        }
        Command::Eval {
            gt,
            pred,
            format,
            json,
            config,
        } => {
            let config = match config {
                Some(path) => boxlayer::eval::read_config(&path)?,
                None => boxlayer::eval::EvalConfig::default(),
            };
            let format = format.unwrap_or(if gt.is_dir() {
                boxlayer::eval::InputFormat::ThreeEed
            } else {
                boxlayer::eval::InputFormat::Jsonl
            });
            let report = boxlayer::eval::run(&gt, &pred, format, &config).context("eval")?;
            print!("{report}");
            if let Some(path) = json {
                boxlayer::eval::write_json_report(&path, &report)?;
            }
        }
    }
    Ok(())
}
