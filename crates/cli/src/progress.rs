//! A progress bar for long passes over a trace (export, filter, search).
//!
//! Drawn only when stderr is a terminal, and only once the pass has taken
//! a second, so short runs and pipelines stay quiet. Position is in bytes
//! of input, which both binary and XML readers can report.

use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    total: u64,
    what: &'static str,
    started: Instant,
    bar: Option<ProgressBar>,
    enabled: bool,
}

impl Progress {
    /// A progress bar over `total` bytes, labelled `what`.
    pub fn new(total: u64, what: &'static str) -> Self {
        Progress {
            total,
            what,
            started: Instant::now(),
            bar: None,
            enabled: io::stderr().is_terminal() && total > 0,
        }
    }

    /// `pos` bytes of input are done. Cheap: call it every few thousand events.
    pub fn set(&mut self, pos: u64) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() {
            if self.started.elapsed() < Duration::from_secs(1) {
                return;
            }
            let bar = ProgressBar::new(self.total);
            let style = ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .map(|s| s.progress_chars("=> "));
            if let Ok(style) = style {
                bar.set_style(style);
            }
            bar.set_message(self.what);
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(pos.min(self.total));
        }
    }

    /// Removes the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
