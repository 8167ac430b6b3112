//! Reads `javap -c -p` output and rewrites each instruction into the text
//! `vmview_classfile::disasm` produces, so that tests compare the
//! disassembler (and the bytecode traces built on it) with the JDK's own.
//!
//! Shared by this crate's tests and the CLI's (`#[path]`-included there),
//! so it depends on nothing but std.

use std::path::Path;
use std::process::Command;

/// One method's code as javap shows it: the header line (`static int
/// sum(int);`) and the instructions as (offset, text in vmview's form).
#[derive(Debug, Clone)]
pub struct JavapMethod {
    pub header: String,
    pub instructions: Vec<(u32, String)>,
}

/// Runs `javap -c -p` (`javap_tool`, e.g. `javap` on the PATH) once on the
/// classes `names` (binary names, `fx.Loop`) in `classpath` and returns,
/// per class, the methods that have code, in class-file order. The
/// classes must have been compiled with a SourceFile attribute (javac's
/// default), whose `Compiled from` line separates them in javap's output.
pub fn javap_classes(javap_tool: &Path, classpath: &Path, names: &[&str]) -> Vec<Vec<JavapMethod>> {
    let out = Command::new(javap_tool)
        .args(["-c", "-p", "-cp"])
        .arg(classpath)
        .args(names)
        .output()
        .expect("run javap");
    assert!(
        out.status.success(),
        "javap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let blocks: Vec<&str> = text.split("Compiled from").skip(1).collect();
    assert_eq!(blocks.len(), names.len(), "one javap block per class");
    blocks
        .iter()
        .zip(names)
        .map(|(b, n)| parse(b, &n.replace('.', "/")))
        .collect()
}

/// Parses javap's output; `this_class` (internal form) qualifies members
/// of the class itself, which javap prints without their class.
pub fn parse(text: &str, this_class: &str) -> Vec<JavapMethod> {
    let mut methods = Vec::new();
    let mut header = String::new();
    let mut current: Option<JavapMethod> = None;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if line.starts_with("  ") && !line.starts_with("   ") && trimmed.ends_with(';') {
            header = trimmed.to_string();
            continue;
        }
        if trimmed == "Code:" {
            if let Some(m) = current.take() {
                methods.push(m);
            }
            current = Some(JavapMethod {
                header: header.clone(),
                instructions: Vec::new(),
            });
            continue;
        }
        let Some(m) = current.as_mut() else { continue };
        // Only the start: a string constant may end in spaces.
        let Some((offset, rest)) = line.trim_start().split_once(": ") else {
            continue;
        };
        let Ok(offset) = offset.parse::<u32>() else {
            continue;
        };
        let (mnemonic, rest) = match rest.split_once(' ') {
            Some((m, r)) => (m, r.trim_start()),
            None => (rest, ""),
        };
        let text = if mnemonic == "tableswitch" || mnemonic == "lookupswitch" {
            // `{ // 1 to 3`, then `key: target` lines, then `}`.
            let mut cases = Vec::new();
            for l in lines.by_ref() {
                let l = l.trim();
                if l == "}" {
                    break;
                }
                if let Some((k, t)) = l.split_once(": ") {
                    cases.push(format!("{k}: {t}"));
                }
            }
            format!("{mnemonic} {{ {} }}", cases.join(", "))
        } else {
            instruction(mnemonic, rest, this_class)
        };
        m.instructions.push((offset, text));
    }
    if let Some(m) = current.take() {
        methods.push(m);
    }
    methods
}

fn instruction(mnemonic: &str, rest: &str, this_class: &str) -> String {
    let (operands, comment) = match rest.split_once("//") {
        Some((o, c)) => (o.trim(), Some(c.trim_start())),
        None => (rest, None),
    };
    let Some(comment) = comment else {
        let operands: Vec<&str> = operands.split_whitespace().collect();
        return if operands.is_empty() {
            mnemonic.to_string()
        } else {
            format!("{mnemonic} {}", operands.join(" "))
        };
    };
    let (kind, value) = comment.split_once(' ').unwrap_or((comment, ""));
    let operand = match kind {
        "Field" | "Method" | "InterfaceMethod" => qualify(value, this_class),
        "String" if mnemonic.starts_with("ldc") => format!("\"{value}\""),
        "int" | "long" | "float" | "double" if mnemonic.starts_with("ldc") => value.to_string(),
        "class" if mnemonic.starts_with("ldc") => format!("class {value}"),
        "MethodType" | "MethodHandle" | "Dynamic" if mnemonic.starts_with("ldc") => {
            format!("{kind} {value}")
        }
        _ => value.to_string(),
    };
    if mnemonic == "multianewarray" {
        let dims = operands.rsplit(',').next().unwrap_or("").trim();
        return format!("{mnemonic} {operand}, {dims}");
    }
    format!("{mnemonic} {operand}")
}

/// `foo:()V` → `fx/Loop.foo:()V`; already qualified references unchanged.
/// Names cannot hold `.` (JVMS §4.2.2), so a `.` outside quotes before the
/// `:` separates the class.
fn qualify(member: &str, this_class: &str) -> String {
    let mut quoted = false;
    for c in member.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => return member.to_string(),
            ':' if !quoted => break,
            _ => {}
        }
    }
    format!("{this_class}.{member}")
}

/// vmview's instruction text as javap would show it: javap drops the
/// trailing spaces of a string constant (`ldc "hi "` prints as `hi`).
pub fn as_javap_shows(text: &str) -> String {
    match text.split_once(" \"") {
        Some((m, s)) if m.starts_with("ldc") && s.ends_with('"') => {
            format!("{m} \"{}\"", s[..s.len() - 1].trim_end())
        }
        _ => text.to_string(),
    }
}
