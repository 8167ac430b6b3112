//! The bytes of the probe class, `vmview/Probe`: one `public static
//! native` method per entry of [`vmview_classfile::probe::ALL`] and
//! [`vmview_classfile::probe::MONITORS`], no code, and one field: the
//! `public static int[]` of call counters ([`vmview_classfile::probe::COUNTS_FIELD`])
//! that methods demoted by the overhead budget increment (`crate::budget`).
//!
//! Instrumented classes call these methods; the agent defines the class in
//! the bootstrap loader (so classes of every loader resolve it) and binds
//! the methods to its Rust functions with `RegisterNatives`. Generating the
//! few hundred bytes here keeps the probe's signatures in one place, the
//! rewriter's table, instead of a Java source that could drift from it.

use vmview_classfile::probe::ProbeMethod;

/// The probe class's internal name.
pub const PROBE_CLASS: &str = "vmview/Probe";

const ACC_PUBLIC: u16 = 0x0001;
const ACC_STATIC: u16 = 0x0008;
const ACC_FINAL: u16 = 0x0010;
const ACC_SUPER: u16 = 0x0020;
const ACC_NATIVE: u16 = 0x0100;
const CONSTANT_UTF8: u8 = 1;
const CONSTANT_CLASS: u8 = 7;
/// Java 8: no stack maps needed (there is no code at all) and every JVM
/// the agent supports loads it.
const MAJOR_VERSION: u16 = 52;

/// A class file declaring `methods` as `public static native` in a public
/// final class named `name` extending `java.lang.Object`.
pub fn class_bytes(name: &str, methods: &[ProbeMethod]) -> Vec<u8> {
    let mut pool: Vec<Vec<u8>> = Vec::new();
    // Index (1-based) of a UTF-8 entry, added on first use.
    let utf8 = |pool: &mut Vec<Vec<u8>>, s: &str| -> u16 {
        let mut e = vec![CONSTANT_UTF8];
        e.extend_from_slice(&(s.len() as u16).to_be_bytes());
        e.extend_from_slice(s.as_bytes());
        match pool.iter().position(|x| *x == e) {
            Some(i) => (i + 1) as u16,
            None => {
                pool.push(e);
                pool.len() as u16
            }
        }
    };
    let class = |pool: &mut Vec<Vec<u8>>, name_index: u16| -> u16 {
        let mut e = vec![CONSTANT_CLASS];
        e.extend_from_slice(&name_index.to_be_bytes());
        pool.push(e);
        pool.len() as u16
    };
    let this_name = utf8(&mut pool, name);
    let this_class = class(&mut pool, this_name);
    let super_name = utf8(&mut pool, "java/lang/Object");
    let super_class = class(&mut pool, super_name);
    let (field_name, field_desc) = vmview_classfile::probe::COUNTS_FIELD;
    let field = (utf8(&mut pool, field_name), utf8(&mut pool, field_desc));
    let method_refs: Vec<(u16, u16)> = methods
        .iter()
        .map(|m| (utf8(&mut pool, m.name), utf8(&mut pool, m.descriptor)))
        .collect();

    let mut out = Vec::with_capacity(64 + pool.iter().map(Vec::len).sum::<usize>());
    out.extend_from_slice(&0xCAFE_BABE_u32.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&MAJOR_VERSION.to_be_bytes());
    out.extend_from_slice(&((pool.len() + 1) as u16).to_be_bytes());
    for e in &pool {
        out.extend_from_slice(e);
    }
    out.extend_from_slice(&(ACC_PUBLIC | ACC_FINAL | ACC_SUPER).to_be_bytes());
    out.extend_from_slice(&this_class.to_be_bytes());
    out.extend_from_slice(&super_class.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // interfaces
    out.extend_from_slice(&1u16.to_be_bytes()); // fields
    out.extend_from_slice(&(ACC_PUBLIC | ACC_STATIC).to_be_bytes());
    out.extend_from_slice(&field.0.to_be_bytes());
    out.extend_from_slice(&field.1.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // attributes
    out.extend_from_slice(&(method_refs.len() as u16).to_be_bytes());
    for (name, desc) in method_refs {
        out.extend_from_slice(&(ACC_PUBLIC | ACC_STATIC | ACC_NATIVE).to_be_bytes());
        out.extend_from_slice(&name.to_be_bytes());
        out.extend_from_slice(&desc.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes()); // attributes
    }
    out.extend_from_slice(&0u16.to_be_bytes()); // class attributes
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_classfile::probe::ALL;

    #[test]
    fn probe_class_declares_every_probe_method_as_public_static_native() {
        let bytes = class_bytes(PROBE_CLASS, &ALL);
        let info = vmview_classfile::describe(&bytes).expect("a well-formed class file");
        assert_eq!(info.name, PROBE_CLASS);
        assert_eq!(info.super_name.as_deref(), Some("java/lang/Object"));
        let declared: Vec<(&str, &str)> = info
            .methods
            .iter()
            .map(|m| (m.name.as_str(), m.descriptor.as_str()))
            .collect();
        let expected: Vec<(&str, &str)> = ALL.iter().map(|m| (m.name, m.descriptor)).collect();
        assert_eq!(declared, expected);
        assert!(info
            .methods
            .iter()
            .all(|m| m.access == ACC_PUBLIC | ACC_STATIC | ACC_NATIVE));
    }
}
