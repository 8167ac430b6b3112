//! `vmview manpage DIR` (hidden): writes the man pages, generated from the
//! same clap definitions as `--help` (clap_mangen), so the pages the
//! Debian package and the archive ship cannot disagree with the binary.
//! One page for `vmview` and one per command (`vmview-record.1`, …), as
//! git does it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

#[derive(Args)]
#[command(about = "Write vmview's man pages (vmview.1, vmview-COMMAND.1) into DIR")]
pub struct ManpageArgs {
    /// Directory to write the pages into (created if missing).
    dir: PathBuf,
}

pub fn run(args: &ManpageArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let cmd = cmd.version(crate::agent::VERSION);
    let mut written = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("vmview-{}", sub.get_name());
        let page = sub
            .clone()
            .display_name(&name)
            .bin_name(format!("vmview {}", sub.get_name()))
            .version(crate::agent::VERSION);
        write(&args.dir.join(format!("{name}.1")), page)?;
        written += 1;
    }
    write(&args.dir.join("vmview.1"), cmd)?;
    eprintln!(
        "vmview: wrote {} man pages to {}",
        written + 1,
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn write(path: &std::path::Path, cmd: clap::Command) -> anyhow::Result<()> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .with_context(|| format!("cannot render {}", path.display()))?;
    std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))
}
