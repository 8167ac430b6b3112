//! `vmview agent-path`: where the agent library inside vmview is, for
//! users who start Java with `-agentpath:` themselves (a service's unit
//! file, a container's entry point, JAVA_TOOL_OPTIONS).

use std::process::ExitCode;

use clap::Args;

const LONG_ABOUT: &str = "\
Print the path of the vmview agent library, for starting Java with \
-agentpath: yourself.

The agent is inside the vmview executable; this writes it to the per-user \
cache ($XDG_CACHE_HOME/vmview/HASH/libvmview_agent.so, else \
~/.cache/vmview/HASH/…) if it is not there yet, and prints that path. \
HASH depends on the library's bytes, so each vmview build has its own \
file and the path stays valid as long as this build is installed (entries \
of other builds unused for a day are removed). With VMVIEW_AGENT set, \
that library is printed instead.

The agent's options are documented by `vmview record --help` (each flag \
there is an option: --classes 'shop.*' is classes=shop.*, lists take '+'). \
A JVM running as another user must be able to read the file: copy it \
somewhere it can, or run `vmview agent-path` as that user.";

const EXAMPLES: &str = "\
Examples:
  # Start Java with the agent by hand
  java -agentpath:$(vmview agent-path)=file=shop.vmv,classes=shop.* -cp classes shop.Main

  # Every JVM started from this shell
  export JAVA_TOOL_OPTIONS=\"-agentpath:$(vmview agent-path)=file=run-%p.vmv,classes=com.acme.*\"

  # Which build of the agent it is (the same as vmview's)
  vmview --version";

#[derive(Args)]
#[command(
    about = "Print the path of the agent library, for java -agentpath:PATH=OPTIONS",
    long_about = LONG_ABOUT,
    after_long_help = EXAMPLES
)]
pub struct AgentPathArgs {}

pub fn run(_args: &AgentPathArgs) -> anyhow::Result<ExitCode> {
    let path = crate::agent::path()?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}
