//! vmview's browser view: one single-page interface over a trace, served
//! two ways.
//!
//! VMView showed its traces in an ordinary web browser so that its authors
//! could spend their time on tracing rather than on GUI code; vmview does
//! the same. The page (`assets/`, embedded here with `include_str!`, so the
//! binary carries it and nothing is loaded from the network) talks to a
//! *source* of trace data with one small JSON vocabulary:
//!
//! - [`server`]: a loopback HTTP server answering that vocabulary from the
//!   trace's index ([`model::TraceModel`]), page by page, so a trace of any
//!   size opens at once (`vmview serve`);
//! - [`report`]: one self-contained HTML file with the events and analyses
//!   embedded as JSON (`vmview view`), bounded in size, for mailing a
//!   trace's story to someone.
//!
//! Trace strings are program data (exception messages, String arguments,
//! thread names) and may be hostile. The page only ever puts them into the
//! DOM with `textContent`; the server and the report send a Content
//! Security Policy that forbids any script but the page's own; JSON
//! embedded in HTML has `<`, `>` and `&` escaped so no `</script` or
//! `<!--` can end its block.

#![forbid(unsafe_code)]

pub mod analysis;
pub mod model;
pub mod report;
pub mod server;
pub mod timeline;
pub mod timeline_cache;

/// The page's markup, script and style.
pub mod assets {
    pub const INDEX_HTML: &str = include_str!("../assets/index.html");
    pub const APP_JS: &str = include_str!("../assets/app.js");
    pub const APP_CSS: &str = include_str!("../assets/app.css");
}

/// JSON made safe to sit inside an HTML `<script type="application/json">`
/// block: `<`, `>` and `&` become `\u003c`, `\u003e`, `\u0026` (equal JSON,
/// and no `</script` or `<!--` can appear), as do U+2028 and U+2029.
pub fn json_for_html(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_close_its_script_block() {
        let hostile = serde_json::json!({"m": "</script><script>alert(1)</script><!-- & \u{2028}"});
        let safe = json_for_html(&hostile.to_string());
        assert!(!safe.to_ascii_lowercase().contains("</script"));
        assert!(!safe.contains("<!--"));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, hostile);
    }
}
