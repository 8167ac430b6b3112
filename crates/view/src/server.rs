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

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value as Json};

use crate::assets;
use crate::model::{parse, ApiError, TraceModel};

/// The policy of every response: the page's own script and style only, no
/// network, pictures only from blobs (the flame graph).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' blob: data:; frame-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How long a request waits for a background filter before answering with
/// what it has.
const FILTER_WAIT: Duration = Duration::from_millis(1500);

/// A listening server.
pub struct Server {
    listener: TcpListener,
    model: Arc<TraceModel>,
    bound: IpAddr,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port).
    pub fn bind(addr: SocketAddr, model: Arc<TraceModel>) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        Ok(Server {
            listener,
            model,
            bound: addr.ip(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends.
    pub fn run(self) -> io::Result<()> {
        let bound = self.bound;
        for stream in self.listener.incoming() {
            let Ok(stream) = stream else { continue };
            let model = Arc::clone(&self.model);
            std::thread::spawn(move || {
                let _ = handle(stream, &model, bound);
            });
        }
        Ok(())
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
    fn text(status: u16, s: &str) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: s.as_bytes().to_vec(),
        }
    }
}

fn handle(stream: TcpStream, model: &TraceModel, bound: IpAddr) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    // Request line and headers, bounded.
    (&mut reader).take(8192).read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut host = None;
    let mut header_bytes = 0;
    loop {
        let mut h = String::new();
        let n = (&mut reader).take(8192).read_line(&mut h)?;
        header_bytes += n;
        if n == 0 || h == "\r\n" || h == "\n" || header_bytes > 64 * 1024 {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            if name.trim().eq_ignore_ascii_case("host") {
                host = Some(value.trim().to_string());
            }
        }
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
    write_response(stream, &response, method == "HEAD")
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

fn write_response(mut stream: TcpStream, r: &Response, head_only: bool) -> io::Result<()> {
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        421 => "Misdirected Request",
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
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
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
}
