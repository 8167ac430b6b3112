//! Flame-graph SVG, drawn by the `inferno` crate (the Rust port of
//! `flamegraph.pl`) from the collapsed stacks of [`crate::collapsed`].
//!
//! An SVG opens in any browser, zooms on click and searches with Ctrl-F, so
//! it is the quickest way to show where a traced program spent its time
//! without installing anything. inferno is used without its default
//! features (no command line, no threads): the drawing is all we need, and
//! that keeps its build cost to a few seconds.

use std::io::{self, Write};

use inferno::flamegraph::{self, Options};
use vmview_format::{Event, SymbolTable};

use crate::collapsed::{CallTree, CollapseOptions, Weight};
use crate::EventWriter;

/// Writes a flame graph of the trace's call tree at [`EventWriter::finish`].
pub struct FlameGraphWriter<W: Write> {
    out: W,
    tree: CallTree,
    opts: CollapseOptions,
    title: String,
}

impl<W: Write> FlameGraphWriter<W> {
    /// `title` heads the picture (the trace's file name, say).
    pub fn new(out: W, opts: CollapseOptions, title: impl Into<String>) -> Self {
        FlameGraphWriter {
            out,
            tree: CallTree::new(opts),
            opts,
            title: title.into(),
        }
    }
}

impl<W: Write> EventWriter for FlameGraphWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.tree.add(ev, syms);
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.tree.close_open_calls();
        let lines = self.tree.folded();
        let mut options = Options::default();
        options.title = self.title.clone();
        options.count_name = match self.opts.weight {
            Weight::SelfTime => "ns".to_string(),
            Weight::Calls => "calls".to_string(),
            Weight::Samples => "samples".to_string(),
            Weight::Alloc => "bytes".to_string(),
        };
        options.subtitle = Some(match self.opts.weight {
            Weight::SelfTime => "width: wall time in traced methods (vmview CALL/RETURN)".into(),
            Weight::Calls => "width: number of calls (vmview CALL events)".into(),
            Weight::Samples => "width: stack samples (vmview SAMPLE events)".into(),
            Weight::Alloc => {
                "width: bytes of sampled allocations (vmview ALLOC_SAMPLE events)".into()
            }
        });
        if lines.is_empty() {
            // inferno refuses an empty profile; an empty picture says the
            // same thing without failing the export.
            return flamegraph::from_lines(&mut options, ["(no calls) 1"], &mut self.out)
                .map_err(io::Error::other)
                .and_then(|()| self.out.flush());
        }
        flamegraph::from_lines(
            &mut options,
            lines.iter().map(String::as_str),
            &mut self.out,
        )
        .map_err(io::Error::other)?;
        self.out.flush()
    }
}
