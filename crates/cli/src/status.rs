//! A live status line pinned to the bottom row of the terminal while the
//! JVM runs.
//!
//! The JVM shares the terminal (its stdout and stderr are inherited), so an
//! ordinary spinner that redraws "the current line" would end up glued to
//! the start of every line the program prints. Instead, like apt's progress
//! bar, the scroll region is shrunk by one row: the program's output scrolls
//! above, the status stays on the last row, and `finish` (also run on drop)
//! gives the row back. Only used when stderr is a terminal.

use std::io::{self, IsTerminal, Write};

/// Spinner frames, one per redraw.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

pub struct StatusLine {
    rows: u16,
    frame: usize,
    active: bool,
}

impl StatusLine {
    /// Reserves the bottom row, or `None` when stderr is not a terminal (or
    /// one too small to spare a row).
    pub fn start() -> Option<StatusLine> {
        let stderr = io::stderr();
        if !stderr.is_terminal() {
            return None;
        }
        let (_, rows) = size()?;
        if rows < 4 {
            return None;
        }
        // A fresh line below the cursor (scrolling if it is on the last
        // row), then the scroll region above the last row.
        let seq = format!("\n\x1b7\x1b[1;{}r\x1b8\x1b[1A", rows - 1);
        emit(&seq);
        Some(StatusLine {
            rows,
            frame: 0,
            active: true,
        })
    }

    /// Redraws the status with `text` (cut to the terminal's width).
    pub fn draw(&mut self, text: &str) {
        if !self.active {
            return;
        }
        let Some((cols, rows)) = size() else { return };
        let mut seq = String::new();
        if rows != self.rows && rows >= 4 {
            // The terminal was resized: move the reserved row with it.
            seq.push_str(&format!("\x1b7\x1b[1;{}r\x1b8", rows - 1));
            self.rows = rows;
        }
        let spinner = FRAMES[self.frame % FRAMES.len()];
        self.frame += 1;
        let line: String = format!("{spinner} {text}")
            .chars()
            .take(usize::from(cols.saturating_sub(1)))
            .collect();
        seq.push_str(&format!("\x1b7\x1b[{};1H\x1b[2K{line}\x1b8", self.rows));
        emit(&seq);
    }

    /// Clears the status row and gives it back to the scroll region.
    pub fn finish(&mut self) {
        if std::mem::replace(&mut self.active, false) {
            emit(&format!("\x1b7\x1b[r\x1b[{};1H\x1b[2K\x1b8", self.rows));
        }
    }
}

impl Drop for StatusLine {
    fn drop(&mut self) {
        self.finish();
    }
}

/// (columns, rows) of the terminal on stderr.
fn size() -> Option<(u16, u16)> {
    let (terminal_size::Width(w), terminal_size::Height(h)) =
        terminal_size::terminal_size_of(io::stderr())?;
    Some((w, h))
}

/// One write, so that the JVM's output cannot land between our cursor moves.
fn emit(seq: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(seq.as_bytes());
    let _ = err.flush();
}
