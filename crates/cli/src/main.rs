//! `vmview`, the command-line front end: record a JVM with the agent, show
//! its events, summarise them.
//!
//! This crate is deliberately thin. It parses arguments, finds the agent
//! library, runs Java, draws progress and turns errors into one clear
//! message with a hint; the trace format, the analyses and the output
//! formats live in the library crates so other front ends can reuse them.

#![forbid(unsafe_code)]

#[macro_use]
mod say;

mod agent;
mod agent_path;
mod attach;
mod calltree;
mod calltree_weighed;
mod dataflow;
mod error;
mod export;
mod filter;
mod jvms;
mod locks;
mod manpage;
mod marker;
mod merge;
mod overwrite;
mod progress;
mod reactions;
mod record;
mod search;
mod serve;
mod show;
mod stats;
mod status;
mod trace;
mod view;

use std::io::{self, IsTerminal};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::error::Hinted;

const ABOUT: &str =
    "Record what a JVM does (calls with their arguments, exceptions and where they are caught, \
threads, locks, GC) into a trace file, then show and analyse it.";

const EXAMPLES: &str = "\
Examples:
  # Trace the shop.* classes of an application into trace.vmv
  vmview record --classes 'shop.*' -- java -cp app.jar shop.Main

  # ... or of one already running, for 30 seconds (vmview jvms lists them)
  vmview attach 4242 --classes 'shop.*' --duration 30s -o shop.vmv

  # Look at the events, as text or as JSON Lines for jq
  vmview show trace.vmv | less
  vmview show trace.vmv --format jsonl | jq 'select(.type == \"THROW\")'

  # An event found with jq, in its context
  vmview show trace.vmv --around 4242

  # Where the time went, which exceptions, which locks
  vmview stats trace.vmv

  # What each traced method is called with and returns
  vmview dataflow trace.vmv

  # Where the time went, call by call; who waited for which lock
  vmview calltree trace.vmv --compensate
  vmview locks trace.vmv";

#[derive(Parser)]
#[command(name = "vmview", version = agent::VERSION, about = ABOUT, after_long_help = EXAMPLES, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Record(record::RecordArgs),
    Attach(attach::AttachArgs),
    Jvms(jvms::JvmsArgs),
    Show(show::ShowArgs),
    Stats(stats::StatsArgs),
    Dataflow(dataflow::DataflowArgs),
    Export(export::ExportArgs),
    Filter(filter::FilterArgs),
    Search(search::SearchArgs),
    Serve(serve::ServeArgs),
    View(view::ViewArgs),
    Merge(merge::MergeArgs),
    Reactions(reactions::ReactionsArgs),
    Calltree(calltree::CalltreeArgs),
    Locks(locks::LocksArgs),
    AgentPath(agent_path::AgentPathArgs),
    #[command(hide = true)]
    Manpage(manpage::ManpageArgs),
}

fn main() -> ExitCode {
    let matches = match cli_command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return clap_error(e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return clap_error(e),
    };
    let result = match cli.command {
        Command::Record(args) => {
            let sub = matches
                .subcommand_matches("record")
                .expect("record matches");
            record::run(args, sub)
        }
        Command::Attach(args) => {
            let sub = matches
                .subcommand_matches("attach")
                .expect("attach matches");
            attach::run(args, sub)
        }
        Command::Jvms(args) => jvms::run(&args),
        Command::Show(args) => show::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::Dataflow(args) => dataflow::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Filter(args) => filter::run(&args),
        Command::Search(args) => search::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::View(args) => view::run(&args),
        Command::Merge(args) => merge::run(&args),
        Command::Reactions(args) => reactions::run(&args),
        Command::Calltree(args) => calltree::run(&args),
        Command::Locks(args) => locks::run(&args),
        Command::AgentPath(args) => agent_path::run(&args),
        Command::Manpage(args) => manpage::run(&args, cli_command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// The clap command, with the agent options of `vmview record` added from
/// the options table.
fn cli_command() -> clap::Command {
    Cli::command()
        .mut_subcommand("record", record::add_agent_option_args)
        .mut_subcommand("attach", record::add_agent_option_args)
}

/// Prints a usage error. An unknown flag after `record` also lists the
/// agent options, since that is what the user most likely wanted.
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let code = e.exit_code();
    let unknown_record_flag = e.kind() == ErrorKind::UnknownArgument
        && std::env::args().nth(1).as_deref() == Some("record");
    let _ = e.print();
    if unknown_record_flag {
        say!("\n{}", record::known_flags_sentence());
    }
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}

/// Prints an error with its causes and hint; a broken pipe (`vmview show |
/// head`) is not an error and exits 0 quietly.
fn report(e: &anyhow::Error) -> ExitCode {
    if e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    }) {
        return ExitCode::SUCCESS;
    }
    let (red, reset) = if io::stderr().is_terminal() {
        ("\x1b[1;31m", "\x1b[0m")
    } else {
        ("", "")
    };
    say!("vmview: {red}error:{reset} {e}");
    for cause in e.chain().skip(1) {
        say!("  caused by: {cause}");
    }
    if let Some(h) = e.chain().find_map(|c| c.downcast_ref::<Hinted>()) {
        if let Some(hint) = &h.hint {
            say!("hint: {hint}");
        }
    }
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        cli_command().debug_assert();
    }
}
