//! `events=bytecode`: every instruction executed in a trace class's methods,
//! checked against `javap -c` on the same compiled class.

use std::collections::HashMap;
use std::path::Path;

use crate::support::{classes, of_type, record};

#[path = "../../classfile/tests/support/javap.rs"]
#[allow(dead_code)]
mod javap;

/// javap's method header (`static int sum(int);`, `public fx.Steps();`,
/// `static {};`) → the method name the trace uses.
fn method_name(header: &str) -> String {
    if header.starts_with("static {}") {
        return "<clinit>".into();
    }
    let before = header.split('(').next().unwrap_or("");
    let name = before.split_whitespace().last().unwrap_or("");
    if name.contains('.') {
        "<init>".into()
    } else {
        name.to_string()
    }
}

#[test]
fn a_bytecode_trace_matches_javap_offsets_mnemonics_and_operands() {
    let n = 4;
    let rec = record(
        &["--classes", "fx.Steps", "--events", "calls+bytecode"],
        &[],
        "fx.Steps",
        &[&n.to_string()],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    assert!(rec.stdout().contains("total 30"), "{}", rec.stdout());
    let events = rec.events();
    let steps = of_type(&events, "BYTECODE");
    assert!(!steps.is_empty(), "no BYTECODE events: {}", rec.stderr());

    // What javap says each method's instruction at each offset is.
    let javap = javap::javap_classes(Path::new("javap"), classes(), &["fx.Steps"]);
    let mut code: HashMap<String, HashMap<u32, String>> = HashMap::new();
    for m in &javap[0] {
        code.insert(
            method_name(&m.header),
            m.instructions.iter().cloned().collect(),
        );
    }
    for e in &steps {
        assert_eq!(
            e["class"], "fx.Steps",
            "only trace-class methods are stepped: {e}"
        );
        let method = e["method"].as_str().unwrap();
        let bci = e["loc"]["bci"].as_u64().unwrap() as u32;
        let insn = e["insn"].as_str().unwrap();
        let want = code
            .get(method)
            .and_then(|m| m.get(&bci))
            .unwrap_or_else(|| panic!("javap has no instruction at {method}:{bci}: {e}"));
        assert_eq!(&javap::as_javap_shows(insn), want, "{method}:{bci}");
    }

    // sum(4) runs straight through its code, the loop body four times.
    let sum: Vec<(u32, &str)> = steps
        .iter()
        .filter(|e| e["method"] == "sum")
        .map(|e| {
            (
                e["loc"]["bci"].as_u64().unwrap() as u32,
                e["insn"].as_str().unwrap(),
            )
        })
        .collect();
    let executed = |text: &str| sum.iter().filter(|(_, t)| t.starts_with(text)).count();
    assert_eq!(executed("iinc"), n, "loop increment: {sum:?}");
    assert_eq!(executed("if_icmpge"), n + 1, "loop test: {sum:?}");
    assert_eq!(executed("imul"), n);
    assert_eq!(executed("ireturn"), 1);
    assert!(sum.iter().any(|(_, t)| *t == "iconst_5"), "{sum:?}");
    assert!(
        sum.iter().any(|(_, t)| *t == "putstatic fx/Steps.calls:I"),
        "a field of the class itself is named with its class: {sum:?}"
    );
    let javap_sum = &code["sum"];
    let stepped: std::collections::BTreeSet<u32> = sum.iter().map(|(o, _)| *o).collect();
    let all: std::collections::BTreeSet<u32> = javap_sum.keys().copied().collect();
    assert_eq!(stepped, all, "every instruction of sum ran at least once");

    // main: resolved invokes, field and the switch in describe.
    let texts: Vec<&str> = steps.iter().map(|e| e["insn"].as_str().unwrap()).collect();
    for want in [
        "getstatic java/lang/System.out:Ljava/io/PrintStream;",
        "invokevirtual java/io/PrintStream.println:(Ljava/lang/String;)V",
        "invokestatic fx/Steps.sum:(I)I",
        "invokestatic java/lang/Integer.parseInt:(Ljava/lang/String;)I",
        "ldc \"two\"",
    ] {
        assert!(texts.contains(&want), "no {want:?} in {texts:?}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("tableswitch {") || t.starts_with("lookupswitch {")),
        "{texts:?}"
    );
    // Calls are still recorded alongside (mode=jvmti is chosen for bytecode).
    assert!(of_type(&events, "CALL")
        .iter()
        .any(|c| c["method"] == "sum"));
}
