//! Turning handles and JVM descriptors into the names users read.
//!
//! Traces keep JVM descriptors (`(Ljava/lang/String;I)V`) because they are
//! exact and compact; people and JSON consumers want Java type names
//! (`java.lang.String`, `int`). These helpers are shared by every exporter so
//! that text and JSON name things the same way.

use vmview_format::{Loc, MethodId, Monitor, SymbolTable};

/// The Java type names of a method descriptor's parameters and of its return
/// type: `(Ljava/lang/String;[I)V` → (`["java.lang.String", "int[]"]`, `"void"`).
///
/// `None` when the descriptor is malformed (a damaged trace), so callers can
/// fall back to something neutral instead of guessing.
pub fn descriptor_types(sig: &str) -> Option<(Vec<String>, String)> {
    let rest = sig.strip_prefix('(')?;
    let (params, ret) = rest.split_once(')')?;
    let mut types = Vec::new();
    let mut p = params;
    while !p.is_empty() {
        let (ty, tail) = field_type(p)?;
        types.push(ty);
        p = tail;
    }
    let (ret_ty, tail) = if ret == "V" {
        ("void".to_string(), "")
    } else {
        field_type(ret)?
    };
    if !tail.is_empty() {
        return None;
    }
    Some((types, ret_ty))
}

/// Parses one field descriptor at the start of `d`; returns the Java name and
/// the rest of the string.
fn field_type(d: &str) -> Option<(String, &str)> {
    let dims = d.bytes().take_while(|&b| b == b'[').count();
    let d = &d[dims..];
    let (base, rest) = match d.as_bytes().first()? {
        b'B' => ("byte".to_string(), &d[1..]),
        b'C' => ("char".to_string(), &d[1..]),
        b'D' => ("double".to_string(), &d[1..]),
        b'F' => ("float".to_string(), &d[1..]),
        b'I' => ("int".to_string(), &d[1..]),
        b'J' => ("long".to_string(), &d[1..]),
        b'S' => ("short".to_string(), &d[1..]),
        b'Z' => ("boolean".to_string(), &d[1..]),
        b'L' => {
            let end = d.find(';')?;
            if end == 1 {
                return None;
            }
            (d[1..end].replace('/', "."), &d[end + 1..])
        }
        _ => return None,
    };
    let mut name = base;
    for _ in 0..dims {
        name.push_str("[]");
    }
    Some((name, rest))
}

/// A method's class, name and descriptor, with `?` for anything the trace
/// never defined (a damaged chunk lost its symbol record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodNames<'a> {
    pub class: &'a str,
    pub name: &'a str,
    pub sig: &'a str,
}

impl<'a> MethodNames<'a> {
    pub fn resolve(syms: &'a SymbolTable, id: MethodId) -> Self {
        match syms.method(id) {
            Some(m) => MethodNames {
                class: syms.string(m.class),
                name: syms.string(m.name),
                sig: syms.string(m.sig),
            },
            None => MethodNames {
                class: "?",
                name: "?",
                sig: "?",
            },
        }
    }

    /// `shop.Inventory.add(Ljava/lang/String;I)V`.
    pub fn display(&self) -> String {
        format!("{}.{}{}", self.class, self.name, self.sig)
    }
}

/// `@ bci 12 line 34`, `@ bci 12` without line numbers, `@ unknown location`
/// for bci -1 (a native method or a location the JVM did not report).
pub fn loc_display(loc: &Loc) -> String {
    match (loc.bci, loc.line) {
        (b, _) if b < 0 => "@ unknown location".to_string(),
        (b, Some(l)) => format!("@ bci {b} line {l}"),
        (b, None) => format!("@ bci {b}"),
    }
}

/// An identity hash as Java's `Object.toString` prints it: lowercase hex,
/// no padding.
pub fn hash_hex(hash: u32) -> String {
    format!("{hash:x}")
}

/// An array value: `int[]` of length 3 → `int[3]`; `int[][]` →
/// `int[3][]` (Java's `new` syntax). A class name that is not an array type
/// gets `[3]` appended.
pub fn array_display(class: &str, length: u32) -> String {
    match class.find("[]") {
        Some(i) => format!("{}[{length}]{}", &class[..i], &class[i + 2..]),
        None => format!("{class}[{length}]"),
    }
}

/// `class@hash`, the monitor's name in every format.
pub fn monitor_name(syms: &SymbolTable, m: &Monitor) -> String {
    format!("{}@{}", syms.string(m.class), hash_hex(m.hash))
}

/// A duration or a trace time for people: `1.234567ms` below a second,
/// `3.000000001s` from one second on (the one definition is in
/// `vmview-options`).
pub use vmview_options::duration_exact as duration_display;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_types_names_primitives_objects_and_arrays() {
        let (p, r) = descriptor_types("(Ljava/lang/String;I[[JZ[Lshop/Item;)V").unwrap();
        assert_eq!(
            p,
            [
                "java.lang.String",
                "int",
                "long[][]",
                "boolean",
                "shop.Item[]"
            ]
        );
        assert_eq!(r, "void");
        let (p, r) = descriptor_types("()[Ljava/lang/Object;").unwrap();
        assert!(p.is_empty());
        assert_eq!(r, "java.lang.Object[]");
    }

    #[test]
    fn descriptor_types_rejects_damaged_descriptors() {
        for bad in [
            "",
            "?",
            "(I",
            "(Q)V",
            "(L;)V",
            "(Ljava/lang/String)V",
            "()",
            "()II",
        ] {
            assert_eq!(descriptor_types(bad), None, "{bad}");
        }
    }

    #[test]
    fn array_display_puts_the_length_in_the_first_dimension() {
        assert_eq!(array_display("int[]", 3), "int[3]");
        assert_eq!(
            array_display("java.lang.String[][]", 2),
            "java.lang.String[2][]"
        );
        assert_eq!(array_display("?", 1), "?[1]");
    }
}
