//! `perftest`: an open-loop perftest of the zerodispatch broker's confirm path.
//!
//! ```text
//! cargo run --release -p zerodispatch-perftest -- --rate 50 --duration 3s
//! cargo run --release -p zerodispatch-perftest -- --rate 0 --duration 2s --json
//! cargo run --release -p zerodispatch-perftest -- --compare --duration 2s
//! ```
//!
//! Publishers send at `--rate` messages per second each (0: as fast as they can) for
//! `--duration`; consumers confirm every delivery. Latency is measured from each message's
//! *scheduled* send time, carried in its payload handle, so that stalls are not hidden
//! (no coordinated omission): publish -> consume in the consumers' `on_delivery`, publish
//! -> confirm in the producers' `on_ack`. The two are separate: the ACK means the queue
//! stored the message, not that a consumer got it. A line a second shows the last second's
//! rates and both latencies; the summary shows totals, rates, both latency distributions
//! (whole run), the mean messages per PUT frame, and checks that every published message
//! had exactly one outcome.
//!
//! `--queues N` spreads the publishers and consumers over N queues (publisher and consumer
//! `i` on queue `i % N`) and adds each queue's figures to the totals.
//!
//! `--compare` runs the seed's scenario (rate 50, one publisher, one consumer) with
//! `--flush dynamic` and then `--flush timer:100ms` and prints them side by side, with the
//! ratio of their latencies.
//!
//! Exit status: 0, 1 for a broker error, 2 when a message was lost or duplicated (the
//! summary is printed first).

// The command line, and the scenario it describes.
mod cli;
mod scenario;
// What a run counts and records as it goes.
mod counters;
mod latency;
// Publishing open loop, on a schedule.
mod schedule;
// A run: in-process (`run`) or over TCP (`tcp`, with its stamps, its own server and the
// proxy that kills connections).
mod chaos;
mod local_server;
mod run;
mod stamp;
mod tcp;
// What a run measured, and how it is printed.
mod cpu;
mod report;
mod result;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use zerodispatch_broker::FlushStrategy;

use crate::cli::Args;
use crate::result::RunResult;
use crate::scenario::Scenario;
use crate::schedule::Progress;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(message) = args.check() {
        <Args as clap::CommandFactory>::command()
            .error(clap::error::ErrorKind::ArgumentConflict, message)
            .exit();
    }
    let progress = match (args.quiet, args.json) {
        (true, _) => Progress::Off,
        (false, true) => Progress::Stderr,
        (false, false) => Progress::Stdout,
    };
    let outcome = if args.compare {
        compare(&args, progress)
    } else {
        single(&args, progress)
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("perftest: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One run, as the command line says. Returns whether no message was lost.
fn single(args: &Args, progress: Progress) -> Result<bool, Box<dyn std::error::Error>> {
    let scenario = Scenario::from_args(args);
    if !args.json && !args.quiet {
        println!("perftest: {}", report::describe(&scenario));
    }
    let cpu = cpu::Start::now();
    let result = run::run(&scenario, progress)?;
    let cpu = cpu.elapsed();
    if args.json {
        match cpu {
            Some(_) => println!("{}", report::json_with_cpu(&result, cpu)),
            None => println!("{}", report::json(&result)),
        }
    } else {
        println!("{}", report::summary(&result));
        if let Some(cpu) = cpu {
            println!("{}", report::cpu_line(&cpu));
        }
    }
    Ok(result.ok())
}

/// The seed's scenario, dynamic flush then a 100 ms timer. Returns whether no message was
/// lost in either run.
fn compare(args: &Args, progress: Progress) -> Result<bool, Box<dyn std::error::Error>> {
    let base = Scenario {
        publishers: 1,
        consumers: 1,
        queues: 1,
        rate: 50.0,
        fanout: 0,
        ..Scenario::from_args(args)
    };
    let mut runs: Vec<RunResult> = Vec::with_capacity(2);
    for flush in [
        FlushStrategy::Dynamic,
        FlushStrategy::Timer(Duration::from_millis(100)),
    ] {
        let scenario = Scenario {
            flush,
            ..base.clone()
        };
        if progress != Progress::Off {
            let line = format!("perftest: {}", report::describe(&scenario));
            match progress {
                Progress::Stdout => println!("{line}"),
                _ => eprintln!("{line}"),
            }
        }
        runs.push(run::run(&scenario, progress)?);
    }
    let (dynamic, timer) = (&runs[0], &runs[1]);
    if args.json {
        println!("{}", report::compare_json(dynamic, timer));
    } else {
        if !args.quiet {
            for r in &runs {
                println!("{}", report::summary(r));
            }
        }
        println!("{}", report::compare_table(dynamic, timer));
    }
    Ok(dynamic.ok() && timer.ok())
}
