//! The report's regular-expression engine (JavaScript, in
//! crates/view/assets/app.js) against the regex crate that the CLI and
//! `vmview serve` use: the same verdict on every pattern and text here,
//! the same refusals (look-around, backreferences), and patterns that take
//! a backtracking engine exponential time answered at once. Run under node
//! (tests/browser/regex.mjs); the browser test in `view` checks the same
//! engine inside the page.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const PATTERNS: &[&str] = &[
    r"^java\.util",
    r"(?i)HELLO",
    r"\bfoo\b",
    r"\Bfoo",
    r"a{2,3}$",
    r"a{2}",
    r"a{2,}b",
    r"^(check|price)$",
    r"[^a-c]x",
    r"\d+",
    r"^\D+$",
    r"\s",
    r"\S\S\S",
    r"\w+\W",
    r"[[:alpha:]]+",
    r"[[:^digit:]]",
    r"x*",
    r"((((a))))",
    r"a|",
    r"é",
    r"(?i)É",
    r"(?i)[a-z]+é",
    r"\p{Greek}",
    r"\p{L}+\P{L}",
    r"\pN",
    r"^$",
    r"(?m)^b",
    r"(?m)a$",
    r"^b",
    r"a$",
    r"[a-]",
    r"[]a]",
    r"[\]x]",
    r"\x{41}",
    r"\x41\u0042",
    r"multiple of 5: 1[0-9]$",
    r"(?s).",
    r".",
    r"(?i:A)b",
    r"(?x) a b # spaced",
    r"(?P<name>ab)+c",
    r"(?:ab)*?c",
    r"[\d_]+",
    r"[^\W]",
    r"[\s\S]",
    r"\$\.\*",
    r"a\-b",
    r"\t",
    r"[0-9a-fA-F]{4}",
    r"(a|ab)(c|bcd)(d*)",
    r"(a+)+$",
    r"(.*)*x",
    r"(x+x+)+y",
    r"^(\w+\s?)*$",
    r"(.*a){12}",
    // 2^13 DFA states: past the page's cache bound, the Pike VM finishes.
    r"(a|b)*a(a|b){12}$",
    r"^[ab]*b[ab]{12}",
    // Refused by both.
    r"(?=a)",
    r"(?!a)b",
    r"(?<=a)b",
    r"(a)\1",
    r"a**",
    r"*a",
    r"(a",
    r"a)",
    r"[a",
    r"[z-a]",
    r"\q",
    r"a{3,2}",
    r"^*a",
    r"\b+x",
    r"a{2}{3}",
    r"(?i)*",
    r"a{1001}",
    r"(?:a{1000}){1000}",
    r"[\w&&[^a]]",
    r"a{30000}",
];

const TEXTS: &[&str] = &[
    "",
    "a",
    "b",
    "aa",
    "caaa",
    "aab",
    "java.util.List",
    "javaXutil",
    "say hello",
    "a foo b",
    "afoob",
    "price",
    "prices",
    "cx",
    "dx",
    "abc١٢",
    "café",
    "CAFé",
    "αβ",
    "_",
    "a\nb",
    "-",
    "]",
    "AB",
    "multiple of 5: 15",
    "\n",
    "abcd",
    "abd",
    "$.*",
    "a-b",
    "\t",
    "beef",
    "x",
    "ab ab c",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "word word word word word word word word word word word!",
    "abababbbabaabababbbbaaabababababbbabababa",
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbabbbbbbbbbbbb",
];

/// Patterns the report refuses though the regex crate takes them (its
/// error says to use `vmview serve`): class set operations, and programs
/// over 20,000 instructions (the crate's bound is on compiled bytes).
const REPORT_ONLY_REFUSES: &[&str] = &[r"[\w&&[^a]]", r"a{30000}"];

fn run_engine(cases: &Value) -> Option<Vec<Value>> {
    if Command::new("node").arg("--version").output().is_err() {
        if std::env::var_os("VMVIEW_SKIP_BROWSER").is_some() {
            eprintln!("skipping: no node");
            return None;
        }
        panic!("this test needs node: run `bash .ci/run` (or set VMVIEW_SKIP_BROWSER=1)");
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new("node")
        .arg(dir.join("tests/browser/regex.mjs"))
        .arg(dir.join("../view/assets/app.js"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    // A script that fails early closes its input: its stderr says why.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(cases.to_string().as_bytes());
    // A backtracking engine would not come back: bounded wait.
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the report's regex engine ran for over 120 s on the cases");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "regex.mjs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(serde_json::from_slice(&o.stdout).expect("one JSON array"))
}

/// The report ran `~` with JavaScript's backtracking RegExp: `(a+)+$` on
/// a 37-character text hung Chromium for 40 s, while the CLI's regex crate
/// answered at once. Now the report has an engine of its own, linear in
/// the text, which must agree with the regex crate.
#[test]
fn report_regex_engine_agrees_with_the_regex_crate_in_linear_time() {
    let mut cases = Vec::new();
    for p in PATTERNS {
        for t in TEXTS {
            cases.push(json!([p, t]));
        }
    }
    // Long texts: exponential for a backtracking engine, instant here.
    let long_a = "a".repeat(5_000) + "!";
    for p in [
        r"(a+)+$",
        r"(.*)*x",
        r"^(\w+\s?)*$",
        r"(a|aa)*b",
        r"(.*a){20}",
    ] {
        cases.push(json!([p, long_a]));
    }
    let Some(got) = run_engine(&Value::from(cases.clone())) else {
        return;
    };
    assert_eq!(got.len(), cases.len());
    let mut wrong = Vec::new();
    for (case, js) in cases.iter().zip(&got) {
        let (p, t) = (case[0].as_str().unwrap(), case[1].as_str().unwrap());
        // As crates/filter builds its regular expressions.
        match regex::RegexBuilder::new(p).size_limit(1 << 20).build() {
            Ok(re) => {
                let want = re.is_match(t);
                let refused = js.as_str().is_some_and(|s| s.starts_with("error"));
                if refused && REPORT_ONLY_REFUSES.contains(&p) {
                    continue;
                }
                if js.as_bool() != Some(want) {
                    wrong.push(format!(
                        "{p:?} on {:?}: regex {want}, report {js}",
                        short(t)
                    ));
                }
            }
            Err(e) => {
                if !js.as_str().is_some_and(|s| s.starts_with("error: ")) {
                    wrong.push(format!(
                        "{p:?}: regex refuses ({}), report {js}",
                        e.to_string().lines().last().unwrap_or("")
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // The refusals say what is not supported, as the regex crate does.
    let msg = |p: &str| {
        let i = cases.iter().position(|c| c[0] == p).unwrap();
        got[i].as_str().unwrap().to_string()
    };
    assert!(msg(r"(?=a)").contains("look-around"), "{}", msg(r"(?=a)"));
    assert!(
        msg(r"(a)\1").contains("backreferences"),
        "{}",
        msg(r"(a)\1")
    );
}

fn short(t: &str) -> String {
    if t.len() > 20 {
        format!("{}… ({} bytes)", &t[..20], t.len())
    } else {
        t.to_string()
    }
}

/// Runs tests/browser/filter_url.mjs: the page at `url` opened once per
/// filter in its URL; `None` when the browser tools are missing and
/// VMVIEW_SKIP_BROWSER is set.
fn open_with_filters(url: &str, filters: &[&str]) -> Option<Vec<Value>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let npm = dir.join("../../target/npm");
    if !Path::new("/usr/bin/chromium").exists()
        || !npm.join("node_modules/playwright-core").exists()
    {
        if std::env::var_os("VMVIEW_SKIP_BROWSER").is_some() {
            eprintln!("skipping the browser test: no chromium or playwright-core");
            return None;
        }
        panic!("browser test needs /usr/bin/chromium and playwright-core in target/npm: run `bash .ci/run` (or set VMVIEW_SKIP_BROWSER=1)");
    }
    let spec = json!({"npm": npm, "url": url, "filters": filters, "timeout_ms": 20000});
    let o = Command::new("node")
        .arg(dir.join("tests/browser/filter_url.mjs"))
        .arg(spec.to_string())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "filter_url.mjs: {e}\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    assert!(v["failure"].is_null(), "{}", v["failure"]);
    assert_eq!(v["errors"], json!([]), "page errors");
    Some(v["results"].as_array().unwrap().clone())
}

/// A shared link whose filter is `thread ~ "^(a+)+$"` hung the report in
/// Chromium (JavaScript's backtracking RegExp on a thread named
/// `aaaa…a!`); now the report answers at once with the count the CLI
/// gives, refuses look-around as the CLI does, stops at the filter's
/// nesting limit, and `vmview serve` (which evaluates in Rust) agrees.
#[test]
fn browser_report_runs_hostile_regex_filters_from_the_url_in_linear_time() {
    let dir = crate::support::scratch("report-regex");
    let trace = dir.join("t.vmv");
    let thread = "a".repeat(36) + "!";
    crate::view::trace_with_thread(&trace, 200, &thread);
    let report = dir.join("t.html");
    let o = crate::support::run(&[
        "view",
        crate::support::path_str(&trace),
        "-o",
        crate::support::path_str(&report),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let deep = format!("{}type == CALL{}", "(".repeat(129), ")".repeat(129));
    let filters = [
        r#"thread ~ "^(a+)+$""#,
        r#"thread ~ "^(a|aa)+$" || thread ~ "(.*)*x""#,
        r#"thread ~ "^(a+)+!$" && type == CALL"#,
        r#"thread ~ "\d" || method ~ "^st\w+$""#,
        r#"thread ~ "(?=a)""#,
        deep.as_str(),
    ];
    let served = crate::view::serve_with(&trace, &[]);
    let pages = [
        format!("file://{}", report.display()),
        format!("http://{}/", served.addr),
    ];
    for url in &pages {
        let Some(results) = open_with_filters(url, &filters) else {
            return;
        };
        let got: Vec<String> = results
            .iter()
            .map(|r| match (&r["count"], &r["error"], &r["failure"]) {
                (Value::Number(n), _, _) => n.to_string(),
                (_, Value::String(e), _) => e.clone(),
                (_, _, f) => format!("FAILED after {} ms: {f}", r["ms"]),
            })
            .collect();
        assert_eq!(got[0], "0", "{url}: {got:?}");
        assert_eq!(got[1], "0", "{url}: {got:?}");
        assert_eq!(got[2], "100", "{url}: {got:?}");
        assert_eq!(got[3], "200", "{url}: {got:?}");
        assert!(got[4].contains("look-around"), "{url}: {got:?}");
        assert!(
            got[5].contains("nested too deep (limit 128"),
            "{url}: {got:?}"
        );
    }
}
