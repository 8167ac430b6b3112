//! Methods near the 64 KiB limit: one whose hooks would push it past the
//! limit is left alone and reported; in others, branches that no longer
//! reach in 16 bits are widened, and the instruction after a widened
//! conditional gets the stack-map frame it now needs.

use std::fmt::Write as _;
use std::fs;
use std::process::Command;

use crate::support::*;
use vmview_classfile::SkipReason;

/// `Big.java`: `huge` is ~65 KB of `if (x == v) return v;` (11 bytes each);
/// `wide` jumps over ~32 KB of returns with one `ifle`; `loop` does the same
/// with a loop whose backward `goto` and exit test span ~31 KB; `fat` is
/// compiled with `goto_w` by javac already.
fn big_source() -> String {
    let mut s = String::from("public class Big {\n");
    s.push_str("    static int huge(int x) {\n");
    for v in 1000..6900 {
        writeln!(s, "        if (x == {v}) return {v};").unwrap();
    }
    s.push_str("        return -1;\n    }\n\n");

    s.push_str("    static int wide(int x) {\n        if (x > 0) {\n");
    for v in 1000..3900 {
        writeln!(s, "            if (x == {v}) return {v};").unwrap();
    }
    s.push_str("            return -x;\n        }\n        return 0;\n    }\n\n");

    s.push_str("    static int loop(int n) {\n        int s = 0;\n");
    s.push_str("        for (int k = 0; k < n; k++) {\n            s += k;\n");
    for v in 1000..3400 {
        writeln!(s, "            if (k == {v}) return s + {v};").unwrap();
    }
    s.push_str("        }\n        return s;\n    }\n\n");

    // Big enough that javac itself must jump with goto_w ("fatcode").
    s.push_str("    static int fat(int x) {\n        int s = 0;\n        if (x > 0) {\n");
    for v in 1000..4700 {
        writeln!(s, "            s = s * 31 + {v};").unwrap();
    }
    s.push_str("        }\n        return s;\n    }\n\n");

    s.push_str(
        r#"    static int small(int x) {
        return x + 1;
    }

    public static void main(String[] args) {
        System.out.println(huge(1000) + " " + huge(6899) + " " + huge(5));
        System.out.println(wide(1000) + " " + wide(3899) + " " + wide(5) + " " + wide(-3));
        System.out.println(loop(5) + " " + loop(1001) + " " + loop(3399 + 1));
        System.out.println(fat(1) + " " + fat(0));
        System.out.println(small(41));
    }
}
"#,
    );
    s
}

#[test]
fn method_that_would_exceed_64k_is_skipped_and_the_rest_instrumented() {
    let jdk = Jdk::default();
    let tmp = TempDir::new("big");
    let (src, plain, inst, probe) = (
        tmp.join("src"),
        tmp.join("plain"),
        tmp.join("instrumented"),
        tmp.join("probe"),
    );
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("Big.java"), big_source()).unwrap();
    jdk.javac(&[src.join("Big.java")], &plain, &[]);
    compile_probe(&jdk, &probe);

    let done = instrument_tree(&plain, &inst, &config());
    let big = &done.results[0];
    let huge = big
        .skipped
        .iter()
        .find(|s| s.method.name == "huge")
        .expect("huge is skipped");
    match huge.reason {
        SkipReason::TooLarge {
            code_length,
            instrumented_length,
        } => {
            assert!(
                code_length > 60_000 && code_length <= 65_535,
                "{code_length}"
            );
            assert!(instrumented_length > 65_535);
        }
        ref other => panic!("huge skipped for {other:?}"),
    }
    assert!(huge.method_id.is_some());
    let instrumented: Vec<&str> = big.methods.iter().map(|m| m.method.name.as_str()).collect();
    assert_eq!(
        instrumented,
        ["<init>", "wide", "loop", "fat", "small", "main"]
    );

    // The widening really happened: javac had no reason to use goto_w.
    let javap = |dir: &std::path::Path| {
        let out = Command::new("javap")
            .args(["-c", "-p", "-cp"])
            .arg(dir)
            .arg("Big")
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let plain_code = javap(&plain);
    let fat_start = plain_code.find("static int fat(int)").unwrap();
    assert!(!plain_code[..fat_start].contains("goto_w"));
    assert!(
        plain_code[fat_start..].contains("goto_w"),
        "javac used goto_w in fat"
    );
    let code = javap(&inst);
    let wide_code = &code
        [code.find("static int wide(int)").unwrap()..code.find("static int loop(int)").unwrap()];
    assert!(
        wide_code.contains("ifgt") && wide_code.contains("goto_w"),
        "ifle inverted around a goto_w"
    );
    let loop_code = &code
        [code.find("static int loop(int)").unwrap()..code.find("static int fat(int)").unwrap()];
    assert!(
        loop_code.matches("goto_w").count() >= 2,
        "exit test and back edge widened"
    );

    let before = jdk.run(&[&plain], "Big", None);
    assert_eq!(before.status, Some(0), "{}", before.stderr);
    let log = tmp.join("probe.log");
    let after = jdk.run(&[&inst, &probe], "Big", Some(&log));
    assert_eq!(after.stdout, before.stdout, "stderr:\n{}", after.stderr);
    let events = read_log(&log, &done.names);
    assert!(check_nesting(&events).is_empty());
    assert_in_order(
        &events,
        &[
            "ENTER Big.wide(I)I [1000]",
            "EXIT Big.wide(I)I 1000",
            "ENTER Big.wide(I)I [-3]",
            "EXIT Big.wide(I)I 0",
            "ENTER Big.loop(I)I [5]",
            "EXIT Big.loop(I)I 10",
            "ENTER Big.loop(I)I [1001]",
            "EXIT Big.loop(I)I 501500",
            "ENTER Big.fat(I)I [1]",
            "ENTER Big.fat(I)I [0]",
            "EXIT Big.fat(I)I 0",
            "EXIT Big.small(I)I 42",
        ],
    );
    assert_eq!(count(&events, "ENTER", "Big.huge(I)I"), 0);
}
