//! Flame-graph SVG, drawn by the `inferno` crate (the Rust port of
//! `flamegraph.pl`) from the collapsed stacks of [`crate::collapsed`].
//!
//! An SVG opens in any browser, zooms on click and searches with Ctrl-F, so
//! it is the quickest way to show where a traced program spent its time
//! without installing anything. inferno is used without its default
//! features (no command line, no threads): the drawing is all we need, and
//! that keeps its build cost to a few seconds.

use std::io::{self, Write};

use inferno::flamegraph::color::{MultiPalette, Palette};
use inferno::flamegraph::{self, Options};
use vmview_format::{Event, SymbolTable, TraceHeader};

use crate::collapsed::{CallTree, CollapseOptions, Weight};
use crate::weight::{SampleWeight, WeightError};
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

    /// A writer for the trace with this header (a sampled weight needs
    /// its `sampler`); fails when the header says the weight cannot be had.
    pub fn for_trace(
        out: W,
        opts: CollapseOptions,
        title: impl Into<String>,
        header: &TraceHeader,
    ) -> Result<Self, WeightError> {
        Ok(FlameGraphWriter {
            out,
            tree: CallTree::for_trace(opts, header)?,
            opts,
            title: title.into(),
        })
    }
}

impl<W: Write> EventWriter for FlameGraphWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.tree.add(ev, syms);
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.tree.check().map_err(WeightError::into_io)?;
        self.tree.close_open_calls();
        let lines = self.tree.folded();
        let mut options = Options::default();
        options.title = self.title.clone();
        if self.opts.frame_types {
            // Colours by the `_[j]`, `_[i]` annotations.
            options.colors = Palette::Multi(MultiPalette::Java);
        }
        options.count_name = match self.opts.weight {
            Weight::SelfTime => "ns".to_string(),
            Weight::Calls => "calls".to_string(),
            Weight::Sampled(w) => w.unit().to_string(),
        };
        options.subtitle = Some(match self.opts.weight {
            Weight::SelfTime => "width: wall time in traced methods (vmview CALL/RETURN)".into(),
            Weight::Calls => "width: number of calls (vmview CALL events)".into(),
            Weight::Sampled(SampleWeight::Samples) => {
                "width: stack samples (vmview SAMPLE events)".into()
            }
            Weight::Sampled(SampleWeight::Cpu) => {
                "width: CPU samples (vmview SAMPLE events: sampler=cpu, or RUN state)".into()
            }
            Weight::Sampled(SampleWeight::Wall) => {
                "width: wall-clock samples, every state (vmview SAMPLE events)".into()
            }
            Weight::Sampled(SampleWeight::Alloc) => {
                "width: bytes of sampled allocations (vmview ALLOC_SAMPLE events)".into()
            }
            Weight::Sampled(SampleWeight::Lock) => {
                "width: ns waited on contended monitors, under the traced call path".into()
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
