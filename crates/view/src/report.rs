//! `vmview view`: the page as one self-contained HTML file.
//!
//! Everything the page needs — its script and style, the events, the
//! analyses and the flame graph — is embedded, so the file opens from a
//! mail attachment with no server and no network. That only works for
//! traces of bounded size (a browser parses the embedded JSON at once), so
//! the report refuses traces above a limit and says to use `vmview serve`
//! or to filter first. Embedded JSON goes through [`json_for_html`], and a
//! Content Security Policy with a fresh nonce allows only the page's own
//! script to run.

use std::fs::File;
use std::io::{self, BufReader};

use serde_json::{json, Value as Json};
use vmview_export::{EventWriter, JsonlWriter};
use vmview_format::TraceReader;

use crate::analysis::TraceAnalysis;
use crate::timeline::{Limits, TimelineBuilder};
use crate::{assets, json_for_html};

/// The largest trace a report embeds by default.
pub const DEFAULT_MAX_EVENTS: u64 = 300_000;

/// Why a report was not written.
#[derive(Debug)]
pub enum ReportError {
    TooLarge { events: u64, max: u64 },
    Format(vmview_format::FormatError),
    Io(io::Error),
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::TooLarge { events, max } => write!(
                f,
                "the trace has {events} events, more than a self-contained report holds ({max})"
            ),
            ReportError::Format(e) => write!(f, "{e}"),
            ReportError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReportError {}

impl From<vmview_format::FormatError> for ReportError {
    fn from(e: vmview_format::FormatError) -> Self {
        ReportError::Format(e)
    }
}

impl From<io::Error> for ReportError {
    fn from(e: io::Error) -> Self {
        ReportError::Io(e)
    }
}

/// Reads the trace `reader` (titled `title`) and returns the report's HTML;
/// refuses more than `max_events` events. The reader is borrowed so the
/// caller can report its diagnostics (a truncated trace) afterwards.
pub fn report_html(
    reader: &mut TraceReader<BufReader<File>>,
    title: &str,
    max_events: u64,
) -> Result<String, ReportError> {
    let index = reader.index()?.clone();
    let events = index.event_count();
    if events > max_events {
        return Err(ReportError::TooLarge {
            events,
            max: max_events,
        });
    }
    let duration_ns = index.chunks.iter().map(|c| c.end_ns).max().unwrap_or(0);
    let mut analysis = TraceAnalysis::new(duration_ns, title);
    analysis.use_header(&reader.header().properties);
    let mut jsonl = JsonlWriter::new(Vec::new());
    let mut timeline = TimelineBuilder::new(Limits::default());
    while let Some(ev) = reader.next_event() {
        analysis.event(&ev, reader.symbols());
        timeline.event(&ev);
        jsonl.write_event(&ev, reader.symbols())?;
    }
    let (views, svg) = analysis.finish(reader.symbols())?;
    // The whole index, every call its own slice: the page summarises it
    // per pixel itself (the report's traces are small).
    let timeline = timeline.finish(reader.symbols()).exact();
    let lines = jsonl.into_inner();
    let mut events_json = Vec::with_capacity(lines.len() + 2);
    events_json.push(b'[');
    for (i, l) in lines
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        if i > 0 {
            events_json.push(b',');
        }
        events_json.extend_from_slice(l);
    }
    events_json.push(b']');
    let h = reader.header();
    let info = json!({
        "file": title,
        "events": events,
        "chunks": index.chunks.len(),
        "first_id": index.chunks.first().map(|c| c.first_id),
        "last_id": index.chunks.last().map(|c| c.last_id),
        "duration_ns": duration_ns,
        "pid": h.pid,
        "start_unix_ns": h.start_unix_ns,
        "properties": h.properties.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "mode": "report",
    });
    let data = format!(
        "{{\"info\":{},\"views\":{},\"flamegraph\":{},\"timeline\":{},\"events\":{}}}",
        info,
        views,
        Json::String(svg),
        timeline,
        String::from_utf8_lossy(&events_json)
    );
    Ok(page(&data))
}

/// The page with `data` (a JSON document) embedded, script and style inline.
pub fn page(data: &str) -> String {
    let nonce = nonce();
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
img-src blob: data:; frame-src blob:; base-uri 'none'; form-action 'none'"
    );
    assets::INDEX_HTML
        .replace(
            "<!--CSP-->",
            &format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"),
        )
        .replace(
            "<!--STYLE-->",
            &format!("<style nonce=\"{nonce}\">\n{}</style>", assets::APP_CSS),
        )
        .replace(
            "<!--SCRIPT-->",
            &format!(
                "<script nonce=\"{nonce}\">\n{}</script>",
                assets::APP_JS.replace("</script", "<\\/script")
            ),
        )
        .replace(
            "<!--DATA-->",
            &format!(
                "<script type=\"application/json\" id=\"vmview-data\">{}</script>",
                json_for_html(data)
            ),
        )
}

/// A value no one can guess before the file is written (time and address
/// entropy, hashed): the CSP nonce.
fn nonce() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let a = h.finish();
    let mut h2 = RandomState::new().build_hasher();
    h2.write_u64(a);
    format!("{a:016x}{:016x}", h2.finish())
}
