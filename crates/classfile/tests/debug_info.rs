//! The tables that describe code for debuggers, stack traces and
//! reflection (line numbers, local variables, type annotations on code)
//! still point at the instructions they described, read back with `javap`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::*;

/// What `javap -c -v` says about one method.
#[derive(Debug, Default)]
struct MethodListing {
    /// Offset → mnemonic.
    insns: BTreeMap<u32, String>,
    /// (line, start_pc) in table order.
    lines: Vec<(u32, u32)>,
    /// (name, slot, start, length).
    locals: Vec<(String, u32, u32, u32)>,
    /// Type annotations: (target kind, offset) or (kind, start, length, slot).
    offsets: Vec<(String, u32)>,
    scopes: Vec<(String, u32, u32, u32)>,
}

fn field(line: &str, key: &str) -> Option<u32> {
    let rest = &line[line.find(key)? + key.len()..];
    rest[..rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len())]
        .parse()
        .ok()
}

fn javap(dir: &Path, class: &str) -> BTreeMap<String, MethodListing> {
    let out = Jdk::default()
        .tool("javap")
        .args(["-c", "-v", "-p", "-cp"])
        .arg(dir)
        .arg(class)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut methods = BTreeMap::new();
    let mut current: Option<(String, MethodListing)> = None;
    let mut in_locals = false;
    // Members are listed between the class body's braces.
    let body = text
        .lines()
        .skip_while(|l| *l != "{")
        .take_while(|l| *l != "}");
    for line in body {
        let trimmed = line.trim();
        if line.starts_with("  ") && !line.starts_with("   ") && trimmed.ends_with(';') {
            if let Some((name, m)) = current.take() {
                methods.insert(name, m);
            }
            current = Some((trimmed.to_string(), MethodListing::default()));
            in_locals = false;
            continue;
        }
        let Some((_, m)) = current.as_mut() else {
            continue;
        };
        if trimmed.starts_with("LocalVariableTable:") {
            in_locals = true;
            continue;
        }
        if in_locals {
            let cols: Vec<&str> = trimmed.split_whitespace().collect();
            match cols.as_slice() {
                ["Start", ..] => continue,
                [start, len, slot, name, _sig] if start.parse::<u32>().is_ok() => {
                    m.locals.push((
                        name.to_string(),
                        slot.parse().unwrap(),
                        start.parse().unwrap(),
                        len.parse().unwrap(),
                    ));
                    continue;
                }
                _ => in_locals = false,
            }
        }
        if let Some(rest) = trimmed.strip_prefix("line ") {
            let (l, pc) = rest.split_once(": ").unwrap();
            m.lines.push((l.parse().unwrap(), pc.parse().unwrap()));
        } else if let Some((kind, _)) = trimmed
            .split_once("): ")
            .and_then(|(_, r)| r.split_once(", "))
            .filter(|_| trimmed.contains("): "))
        {
            if let Some(off) = field(trimmed, "offset=") {
                m.offsets.push((kind.to_string(), off));
            } else if let (Some(s), Some(l), Some(i)) = (
                field(trimmed, "start_pc="),
                field(trimmed, "length="),
                field(trimmed, "index="),
            ) {
                m.scopes.push((kind.to_string(), s, l, i));
            }
        } else if let Some((off, rest)) = trimmed.split_once(": ") {
            if let (Ok(off), Some(op)) = (off.parse::<u32>(), rest.split_whitespace().next()) {
                if op.starts_with(|c: char| c.is_ascii_lowercase()) {
                    m.insns.insert(off, op.to_string());
                }
            }
        }
    }
    if let Some((name, m)) = current {
        methods.insert(name, m);
    }
    methods
}

#[test]
fn lines_locals_and_type_annotations_follow_their_instructions() {
    let jdk = Jdk::default();
    let tmp = TempDir::new("debug-info");
    let (plain, inst) = (tmp.join("plain"), tmp.join("instrumented"));
    jdk.javac(&java_sources(&fixtures_dir()), &plain, &[]);
    instrument_tree(&plain, &inst, &config());

    let mut annotations = 0;
    for class in ["Annotated", "Exceptions", "Switches", "Ctors$Derived"] {
        let (before, after) = (javap(&plain, class), javap(&inst, class));
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>()
        );
        for (name, b) in &before {
            let a = &after[name];
            if b.insns.is_empty() {
                continue;
            }
            let code_end = *a.insns.keys().last().unwrap();
            let is_insn = |pc: u32| a.insns.contains_key(&pc);
            // Every original instruction survives, in order.
            let mut rest = a.insns.values();
            for op in b.insns.values() {
                let op = op.trim_end_matches("_w");
                assert!(
                    rest.any(|o| o.trim_end_matches("_w") == op
                        || (op.starts_with("if") && o.starts_with("if"))),
                    "{class}.{name}: {op} lost"
                );
            }
            // Line numbers: same lines in the same order, on instructions.
            let lines = |m: &MethodListing| m.lines.iter().map(|l| l.0).collect::<Vec<_>>();
            assert_eq!(lines(b), lines(a), "{class}.{name}");
            assert!(
                a.lines.iter().all(|&(_, pc)| is_insn(pc)),
                "{class}.{name}: {:?}",
                a.lines
            );
            // Local variables: same names and slots, scopes on instructions.
            assert_eq!(b.locals.len(), a.locals.len());
            for ((bn, bs, ..), (an, as_, start, len)) in b.locals.iter().zip(&a.locals) {
                assert_eq!((bn, bs), (an, as_));
                assert!(
                    is_insn(*start) && start + len <= code_end,
                    "{class}.{name}: {an} {start}+{len}"
                );
            }
            // Type annotations on an instruction stay on that instruction;
            // those on a variable keep the variable's scope.
            assert_eq!(b.offsets.len(), a.offsets.len());
            for ((kind, bo), (_, ao)) in b.offsets.iter().zip(&a.offsets) {
                assert_eq!(
                    b.insns[bo], a.insns[ao],
                    "{class}.{name}: {kind} at {bo} -> {ao}"
                );
                annotations += 1;
            }
            assert_eq!(b.scopes.len(), a.scopes.len());
            for (kind, start, len, slot) in &a.scopes {
                assert!(
                    a.locals
                        .iter()
                        .any(|(_, s, st, l)| s == slot && st == start && l == len),
                    "{class}.{name}: {kind} {{{start}, {len}, {slot}}} matches no local variable"
                );
                annotations += 1;
            }
        }
    }
    assert!(annotations >= 6, "{annotations} type annotations checked");
}
