//! `ringmq-bench`: `run` drives a broker with open-loop load and reports
//! latency histograms; `compare` sets runs side by side and charts them.

use clap::{Parser, Subcommand};
use ringmq_bench::{compare, run};
use std::path::PathBuf;
use std::process::ExitCode;

/// ringmq's load generator and histogram tools.
#[derive(Parser)]
#[command(name = "ringmq-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Produce and consume at a rate, measure end-to-end and publish latency.
    Run(Box<run::RunArgs>),
    /// Compare runs (directories or .hgrm files): percentiles side by side and a chart.
    Compare {
        /// Run directories (their e2e.hgrm) or .hgrm files; the first is the baseline.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Where compare.svg and compare.png go.
        #[arg(long, default_value = ".")]
        out_dir: PathBuf,
        /// Runs of other charts meant to sit beside this one (repeatable): the axes hold them too,
        /// so the charts share their scales; they are not drawn.
        #[arg(long)]
        axes_of: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    // The embedded broker's allocator setting, as `ringmq serve` makes it.
    ringmq::server::prepare_process();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    match Cli::parse().command {
        Command::Run(args) => {
            let out = args.out.clone();
            let outcome = match run::run(*args) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(1);
                }
            };
            print!("{}", run::report(&outcome));
            if let Some(dir) = out {
                if let Err(e) = run::write_out(&outcome, &dir) {
                    eprintln!("error: {e}");
                    return ExitCode::from(1);
                }
                println!("wrote {}", dir.display());
            }
            let s = &outcome.summary;
            if s.lost > 0 || s.errors > 0 || s.received == 0 {
                eprintln!("FAILED: {} lost, {} errors, {} received", s.lost, s.errors, s.received);
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Command::Compare { inputs, out_dir, axes_of } => match compare::run(&inputs, &axes_of, &out_dir) {
            Ok((svg, png)) => {
                println!("wrote {} and {}", svg.display(), png.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
    }
}
