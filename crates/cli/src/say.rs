//! Printing that never panics.
//!
//! `eprintln!` and `println!` panic when the stream is closed: `vmview
//! record … 2>&1 >/dev/null | true` died with exit 101 on its last line
//! instead of passing on the JVM's exit code. Every line the CLI prints
//! goes through [`say!`] (stderr) or [`out!`] (stdout), which drop a line
//! the reader no longer wants. Output commands that stream their results
//! write through `io::Write` and stop on a broken pipe (`main::report`
//! turns it into exit 0); these macros are for the one-line messages
//! around them.

use std::fmt;
use std::io::Write;

/// Prints a line on stderr; a closed or full stderr is ignored.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::line(&mut ::std::io::stderr().lock(), format_args!($($arg)*))
    };
}

/// Prints a line on stdout; a closed stdout (`vmview jvms | head -1`) is
/// ignored.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::say::line(&mut ::std::io::stdout().lock(), format_args!($($arg)*))
    };
}

/// Writes `args` and a newline, ignoring errors (see the module docs).
pub fn line(w: &mut dyn Write, args: fmt::Arguments<'_>) {
    let _ = writeln!(w, "{args}").and_then(|()| w.flush());
}
