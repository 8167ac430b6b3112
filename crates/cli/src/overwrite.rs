//! A command never writes over its own input.
//!
//! Comparing names missed the ways one file has several: `vmview view
//! in.vmv -o in.vmv` was caught, but not `-o ./hard.vmv` with `hard.vmv` a
//! hard link to the input, a symlink to it, or `vmview view trace.html`
//! whose default output (the name with `.html`) is the input itself. Each
//! of them truncated the trace before reading it. Files are compared by
//! identity (device and inode, after following symlinks), and every
//! command that writes calls [`refuse_input_as_output`] before it creates
//! anything. Standard output counts too when it is a regular file (`vmview
//! show t.vmv >> t.vmv`), as GNU `cat` refuses `cat f >> f`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::hinted;

/// Fails when `output` (or standard output, for `None`) is one of
/// `inputs`. Inputs that cannot be looked at are left to the reader to
/// complain about; an output that does not exist yet is no input.
pub fn refuse_input_as_output(inputs: &[&Path], output: Option<&Path>) -> anyhow::Result<()> {
    let (out, shown) = match output {
        Some(p) => (std::fs::metadata(p), p.display().to_string()),
        None => (
            std::fs::metadata("/proc/self/fd/1").and_then(|m| {
                if m.is_file() {
                    Ok(m)
                } else {
                    Err(std::io::ErrorKind::Other.into())
                }
            }),
            "standard output".to_string(),
        ),
    };
    let Ok(out) = out else { return Ok(()) };
    for input in inputs {
        let Ok(inp) = std::fs::metadata(input) else {
            continue;
        };
        if inp.dev() == out.dev() && inp.ino() == out.ino() {
            let how = match output {
                Some(p) if p == *input => String::new(),
                Some(_) => " (the same file under another name: a hard or symbolic link)".into(),
                None => String::new(),
            };
            return Err(hinted(
                format!(
                    "{shown} is the input file {}{how}: writing it would destroy the input",
                    input.display()
                ),
                match output {
                    Some(_) => "write to another file (-o), then rename it if you want to replace the input",
                    None => "redirect the output to another file",
                },
            ));
        }
    }
    Ok(())
}
