//! The disassembler against `javap -c`: every instruction of every method
//! of the fixtures (switches, lambdas, constructors, exceptions, statics …)
//! must read as javap prints it, operands resolved.

use std::path::Path;

use vmview_classfile::disasm::disassemble_class;

use crate::support::javap::{as_javap_shows, javap_classes};
use crate::support::{files_under, fixtures_dir, java_sources, Jdk, TempDir};

#[test]
fn every_instruction_of_the_fixtures_reads_as_javap_prints_it() {
    let jdk = Jdk::default();
    let dir = TempDir::new("disasm");
    let out = dir.join("classes");
    jdk.javac(&java_sources(&fixtures_dir()), &out, &[]);
    let classes: Vec<_> = files_under(&out)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "class"))
        .collect();
    let names: Vec<String> = classes
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&out).unwrap().with_extension("");
            rel.to_string_lossy().replace('/', ".")
        })
        .collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let javap = javap_classes(Path::new("javap"), &out, &name_refs);
    let mut compared = 0;
    for ((path, name), expected) in classes.iter().zip(&names).zip(javap) {
        let ours = disassemble_class(&std::fs::read(path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ours.len(), expected.len(), "{name}: methods with code");
        for (m, j) in ours.iter().zip(&expected) {
            let ours: Vec<(u32, String)> = m
                .instructions
                .iter()
                .map(|i| (i.offset, as_javap_shows(&i.text)))
                .collect();
            assert_eq!(
                ours, j.instructions,
                "{name}.{}{} (javap: {})",
                m.name, m.descriptor, j.header
            );
            compared += ours.len();
        }
    }
    assert!(compared > 500, "only {compared} instructions compared");
}
