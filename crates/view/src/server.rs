//! A small HTTP/1.1 server for the page and its JSON API, on loopback.
//!
//! It serves exactly four kinds of path — the page, its script, its style
//! sheet and `/api/…` — from memory and the trace, never from the file
//! system, so there is no path to traverse. It listens on 127.0.0.1 unless
//! told otherwise, and answers only requests whose `Host` is a loopback
//! name (or the address it was explicitly bound to): a web page elsewhere
//! that rebinds its DNS name to 127.0.0.1 cannot read the trace. Every
//! response forbids scripts from anywhere but the page itself (CSP), MIME
//! sniffing and framing. One thread per connection, `Connection: close`:
//! the page makes a handful of requests, and no framework is needed for
//! that.
//!
//! Any web page the user visits can make the browser connect here, so the
//! server bounds what a client can hold ([`Limits`]): each connection has
//! one deadline for the whole exchange, counted from its acceptance and
//! checked before every read and write (a client that sends a byte every
//! second cannot keep it open), and at most so many connections are served
//! at once; the ones over the bound get a `503` from the accepting thread
//! and are closed, so the number of threads never grows with the clients.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

use crate::assets;
use crate::model::{parse, ApiError, TraceModel};
use crate::timeline::{add_fields, View};

/// The policy of every response: the page's own script and style only, no
/// network, pictures only from blobs (the flame graph).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' blob: data:; frame-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How long a request waits for a background filter before answering with
/// what it has.
const FILTER_WAIT: Duration = Duration::from_millis(1500);

/// The stack of each connection's thread: the filter language's nesting
/// limit (`vmview_filter::MAX_NESTING`) is checked to fit in half of it.
const THREAD_STACK: usize = 2 << 20;

/// What one client may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more are answered `503` and closed.
    pub max_connections: usize,
    /// The whole exchange (request received, answer computed and sent)
    /// must be over this long after the connection was accepted; then
    /// the connection is closed.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            deadline: Duration::from_secs(10),
        }
    }
}

/// A listening server.
pub struct Server {
    listener: TcpListener,
    model: Arc<TraceModel>,
    bound: IpAddr,
    limits: Limits,
}

/// One connection being served; the count goes down when it is dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free port), with the default limits.
    pub fn bind(addr: SocketAddr, model: Arc<TraceModel>) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        Ok(Server {
            listener,
            model,
            bound: addr.ip(),
            limits: Limits::default(),
        })
    }

    /// The same server with other limits.
    pub fn with_limits(self, limits: Limits) -> Server {
        Server { limits, ..self }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends.
    pub fn run(self) -> io::Result<()> {
        let bound = self.bound;
        let limits = self.limits;
        let active = Arc::new(AtomicUsize::new(0));
        for stream in self.listener.incoming() {
            let Ok(stream) = stream else { continue };
            let deadline = Instant::now() + limits.deadline;
            if active.fetch_add(1, Ordering::AcqRel) >= limits.max_connections {
                active.fetch_sub(1, Ordering::AcqRel);
                refuse_busy(stream);
                continue;
            }
            let slot = Slot(Arc::clone(&active));
            let model = Arc::clone(&self.model);
            // A thread that cannot be created drops the closure: the
            // connection is closed and its slot freed.
            let _ = std::thread::Builder::new()
                .name("vmview-serve".into())
                .stack_size(THREAD_STACK)
                .spawn(move || {
                    let _ = handle(&stream, &model, bound, deadline);
                    // The slot is free before the client sees the end of
                    // the connection: a client that was answered can
                    // connect again at once.
                    drop(slot);
                    drop(stream);
                });
        }
        Ok(())
    }
}

/// Answers a connection over the limit with a `503`, from the accepting
/// thread and without ever waiting on the client: what the client already
/// sent is read (so closing does not reset the connection before it reads
/// the answer), the answer is written if the socket takes it at once, and
/// the connection is closed.
fn refuse_busy(stream: TcpStream) {
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let mut sink = [0u8; 8192];
    let _ = (&stream).read(&mut sink);
    let r = Response::text(
        503,
        "vmview serve: too many connections at once; try again\n",
    );
    let _ = write_response(&mut (&stream), &r, false);
    let _ = stream.shutdown(Shutdown::Both);
}

/// The connection, read and written under one deadline: each read and
/// write waits at most until it, and fails with `TimedOut` once it has
/// passed, however the client paces its bytes.
struct Timed<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Timed<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the connection's deadline passed",
            ));
        }
        Ok(left)
    }
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        self.stream.read(buf)
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

struct Response {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Response {
    fn json(status: u16, v: &Json) -> Self {
        Response {
            status,
            content_type: "application/json; charset=utf-8",
            body: v.to_string().into_bytes(),
        }
    }
    /// `body` is JSON text already.
    fn json_text(status: u16, body: String) -> Self {
        Response {
            status,
            content_type: "application/json; charset=utf-8",
            body: body.into_bytes(),
        }
    }
    fn text(status: u16, s: &str) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: s.as_bytes().to_vec(),
        }
    }
}

fn handle(
    stream: &TcpStream,
    model: &TraceModel,
    bound: IpAddr,
    deadline: Instant,
) -> io::Result<()> {
    let mut reader = BufReader::new(Timed { stream, deadline });
    // Request line and headers, bounded. A line too long is refused, not
    // cut: the rest of it must not be read as a header (or the target
    // served shortened).
    let line = match read_line(&mut reader, MAX_REQUEST_LINE)? {
        Line::Text(l) => l,
        Line::TooLong => {
            let r = Response::text(414, "the request line is too long (at most 64 KiB)\n");
            return write_response(&mut Timed { stream, deadline }, &r, false);
        }
    };
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut host = None;
    let mut hosts = 0;
    let mut header_bytes = 0;
    loop {
        let h = match read_line(&mut reader, MAX_HEADER_LINE)? {
            Line::Text(h) => h,
            Line::TooLong => {
                header_bytes = usize::MAX;
                break;
            }
        };
        header_bytes += h.len();
        if h.is_empty() || h == "\r\n" || h == "\n" || header_bytes > MAX_HEADERS {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            if name.trim().eq_ignore_ascii_case("host") {
                host = Some(value.trim().to_string());
                hosts += 1;
            }
        }
    }
    if header_bytes > MAX_HEADERS || hosts > 1 {
        let r = Response::text(
            if hosts > 1 { 400 } else { 431 },
            "headers too large (8 KiB a line, 64 KiB in all), or more than one Host\n",
        );
        return write_response(&mut Timed { stream, deadline }, &r, false);
    }
    let response = if method != "GET" && method != "HEAD" {
        Response::text(405, "only GET\n")
    } else if !host.as_deref().is_some_and(|h| host_allowed(h, bound)) {
        Response::text(
            421,
            "vmview serves only requests addressed to a loopback host\n",
        )
    } else {
        route(target, model)
    };
    let mut out = Timed { stream, deadline };
    write_response(&mut out, &response, method == "HEAD")
}

/// The request line's bound: long enough for a filter of thousands of
/// characters in the query string (browsers send URLs of megabytes).
const MAX_REQUEST_LINE: u64 = 64 * 1024;
/// One header line's bound, and all headers'.
const MAX_HEADER_LINE: u64 = 8 * 1024;
const MAX_HEADERS: usize = 64 * 1024;

enum Line {
    /// The line with its end of line; empty at the end of the stream.
    Text(String),
    /// No end of line within the bound.
    TooLong,
}

/// One line of at most `limit` bytes (invalid UTF-8 is replaced, as the
/// page's URL decoding does).
fn read_line(reader: &mut impl BufRead, limit: u64) -> io::Result<Line> {
    let mut buf = Vec::new();
    let n = reader.take(limit).read_until(b'\n', &mut buf)?;
    if n as u64 == limit && buf.last() != Some(&b'\n') {
        return Ok(Line::TooLong);
    }
    Ok(Line::Text(String::from_utf8_lossy(&buf).into_owned()))
}

/// Whether a `Host` header names this machine's loopback (or the address
/// the server was explicitly bound to), with any port. DNS names other than
/// `localhost` are refused: that is what defeats DNS rebinding.
pub fn host_allowed(host: &str, bound: IpAddr) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inside, tail)) if tail.is_empty() || tail.starts_with(':') => inside,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
            Some(_) => return false,
            None => host,
        }
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        // An address literal cannot be rebound; with an explicit
        // `--bind 0.0.0.0` any of the machine's addresses may be used.
        Ok(ip) => ip.is_loopback() || ip == bound || bound.is_unspecified(),
        Err(_) => false,
    }
}

fn write_response(stream: &mut impl Write, r: &Response, head_only: bool) -> io::Result<()> {
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        414 => "URI Too Long",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n\
Referrer-Policy: no-referrer\r\nCross-Origin-Resource-Policy: same-origin\r\nContent-Security-Policy: {CSP}\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len()
    );
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(&r.body)?;
    }
    stream.flush()
}

fn route(target: &str, model: &TraceModel) -> Response {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let q = parse_query(query);
    let page = |s: &str, ct: &'static str| Response {
        status: 200,
        content_type: ct,
        body: s.as_bytes().to_vec(),
    };
    match path {
        "/" | "/index.html" => page(&serve_index(), "text/html; charset=utf-8"),
        "/app.js" => page(assets::APP_JS, "text/javascript; charset=utf-8"),
        "/app.css" => page(assets::APP_CSS, "text/css; charset=utf-8"),
        p if p.starts_with("/api/") => match api(&p[5..], &q, model) {
            Ok(r) => r,
            Err(ApiError::Bad(j)) => Response::json(400, &j),
            Err(ApiError::Internal(e)) => Response::json(500, &json!({"error": e})),
        },
        _ => Response::text(404, "not found\n"),
    }
}

/// The page as `serve` sends it: script and style from their own URLs.
fn serve_index() -> String {
    assets::INDEX_HTML
        .replace(
            "<!--STYLE-->",
            "<link rel=\"stylesheet\" href=\"/app.css\">",
        )
        .replace("<!--DATA-->", "")
        .replace("<!--SCRIPT-->", "<script src=\"/app.js\"></script>")
        .replace("<!--CSP-->", "")
}

fn api(name: &str, q: &HashMap<String, String>, model: &TraceModel) -> Result<Response, ApiError> {
    let num = |k: &str, d: u64| -> Result<u64, ApiError> {
        match q.get(k) {
            None => Ok(d),
            Some(v) if v.is_empty() => Ok(d),
            Some(v) => v
                .parse()
                .map_err(|_| ApiError::Bad(json!({"error": format!("{k} must be a number")}))),
        }
    };
    let text = |k: &str| q.get(k).map_or("", String::as_str);
    let mut mark = match text("mark").trim() {
        "" => None,
        m => Some(parse(m)?),
    };
    let body = match name {
        "info" => model.info(),
        "events" => {
            let (offset, limit) = (num("offset", 0)?, num("limit", 100)?);
            let filter = text("filter");
            if filter.trim().is_empty() {
                model.page(offset, limit, mark.as_mut())?
            } else {
                model.filtered_page(filter, offset, limit, mark.as_mut(), FILTER_WAIT)?
            }
        }
        "check" => {
            parse(text("q"))?;
            json!({"ok": true})
        }
        "locate" => {
            let id = num("id", 0)?;
            json!({"id": id, "row": model.row_in(text("filter"), id, FILTER_WAIT)?})
        }
        "step" => {
            let from = q.get("from").and_then(|v| v.parse().ok());
            let forward = text("dir") != "prev";
            model.step(text("filter"), text("search"), from, forward, FILTER_WAIT)?
        }
        "views" => match model.views(Duration::from_secs(2))? {
            Some(v) => v.0.clone(),
            None => return Ok(Response::json(503, &json!({"pending": true}))),
        },
        "timeline" | "tree" => {
            let threads = id_list(text("threads"))?
                .into_iter()
                .map(|t| t as u32)
                .collect::<Vec<_>>();
            let px = num("px", 1000)?;
            let Some(tl) = model.timeline(Duration::from_millis(200))? else {
                // While the index is built, a timeline answer shows the
                // part of the trace read so far (the page asks again).
                let from = num("from", 0)?;
                let to = num("to", model.duration_ns().saturating_add(1))?;
                let partial = (name == "timeline")
                    .then(|| model.partial_timeline(View { from, to, px }, &threads))
                    .flatten();
                let progress = model.timeline_progress();
                return Ok(match partial {
                    Some(mut v) => {
                        let (p, i) = (json!({"progress": progress}), model.timeline_source());
                        add_fields(&mut v, &[("partial", &p), ("index", &i)]);
                        Response::json_text(200, v)
                    }
                    None => Response::json(503, &json!({"pending": true, "progress": progress})),
                });
            };
            let (from, to) = (num("from", 0)?, num("to", tl.end_ns().saturating_add(1))?);
            if name == "timeline" {
                let mut v = tl.query_text(View { from, to, px }, &threads);
                add_fields(&mut v, &[("index", &model.timeline_source())]);
                return Ok(Response::json_text(200, v));
            } else {
                tl.tree(from, to, &threads)
            }
        }
        "byid" => model.by_ids(&mut id_list(text("ids"))?)?,
        "flamegraph.svg" => match model.views(Duration::from_secs(2))? {
            Some(v) => {
                return Ok(Response {
                    status: 200,
                    content_type: "image/svg+xml",
                    body: v.1.clone().into_bytes(),
                })
            }
            None => return Ok(Response::json(503, &json!({"pending": true}))),
        },
        _ => return Ok(Response::text(404, "no such API\n")),
    };
    Ok(Response::json(200, &body))
}

/// `1,2,3` → numbers; empty → none.
fn id_list(s: &str) -> Result<Vec<u64>, ApiError> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            p.trim().parse().map_err(|_| {
                ApiError::Bad(json!({"error": "a list of numbers separated by commas"}))
            })
        })
        .collect()
}

/// `a=1&b=x%20y` → map, percent- and `+`-decoded.
fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            // Two hex digits, nothing else: `from_str_radix` alone also
            // took a sign, so `%+1` became byte 1 here while the page's
            // URLSearchParams (the WHATWG rule) keeps it as `% 1`.
            b'%' if i + 2 < b.len()
                && b[i + 1].is_ascii_hexdigit()
                && b[i + 2].is_ascii_hexdigit() =>
            {
                let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                out.push(hex(b[i + 1]) << 4 | hex(b[i + 2]));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_are_served() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        for ok in [
            "127.0.0.1:8080",
            "localhost:1",
            "LOCALHOST",
            "[::1]:80",
            "127.0.0.2",
        ] {
            assert!(host_allowed(ok, lo), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "10.0.0.1",
            "",
            "[::1]x",
            "localhost:80x",
        ] {
            assert!(!host_allowed(bad, lo), "{bad}");
        }
        let lan: IpAddr = "192.168.1.5".parse().unwrap();
        assert!(host_allowed("192.168.1.5:9000", lan));
        assert!(!host_allowed("192.168.1.6:9000", lan));
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert!(host_allowed("192.168.1.6:9000", any));
        assert!(
            !host_allowed("evil.example:9000", any),
            "names still refused"
        );
    }

    #[test]
    fn queries_are_percent_decoded() {
        let q = parse_query("filter=type+%3D%3D+THROW&x=%zz&y=%4");
        assert_eq!(q["filter"], "type == THROW");
        assert_eq!(q["x"], "%zz");
        assert_eq!(q["y"], "%4");
    }

    /// `%+1` and `%-1` decoded to bytes 1 and 255 (u8::from_str_radix takes
    /// a sign), so the server read another filter than the page had
    /// written; now they stay as the WHATWG rule (URLSearchParams) has them.
    #[test]
    fn percent_signs_not_followed_by_two_hex_digits_stay_as_they_are() {
        let q = parse_query("a=%+1&b=%-1x&c=%e9%e8&d=%C3%A9%41&e=100%");
        assert_eq!(q["a"], "% 1");
        assert_eq!(q["b"], "%-1x");
        assert_eq!(
            q["c"], "\u{FFFD}\u{FFFD}",
            "bad UTF-8 as the page decodes it"
        );
        assert_eq!(q["d"], "éA");
        assert_eq!(q["e"], "100%");
    }
}
