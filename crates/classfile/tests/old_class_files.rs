//! Class files of version 49 (no `StackMapTable`; verified by type
//! inference) and 50 (frames optional, with fallback to inference). No JDK
//! at hand emits them, so the test downgrades javac's `--release 8` output.

use std::fs;

use crate::support::*;

/// Rewrites a class file to `major`, dropping every `StackMapTable` when
/// `strip_frames`. A minimal class-file walker, independent of the crate
/// under test.
fn downgrade(bytes: &[u8], major: u16, strip_frames: bool) -> Vec<u8> {
    struct R<'a>(&'a [u8], usize);
    impl R<'_> {
        fn u1(&mut self) -> u8 {
            self.1 += 1;
            self.0[self.1 - 1]
        }
        fn u2(&mut self) -> u16 {
            u16::from_be_bytes([self.u1(), self.u1()])
        }
        fn u4(&mut self) -> u32 {
            u32::from_be_bytes([self.u1(), self.u1(), self.u1(), self.u1()])
        }
    }
    let mut r = R(bytes, 8);
    let count = r.u2();
    let mut utf8 = std::collections::HashMap::new();
    let mut i = 1;
    while i < count {
        let tag = r.u1();
        match tag {
            1 => {
                let len = r.u2() as usize;
                utf8.insert(i, bytes[r.1..r.1 + len].to_vec());
                r.1 += len;
            }
            5 | 6 => {
                r.1 += 8;
                i += 1;
            }
            3 | 4 | 9..=12 | 17 | 18 => r.1 += 4,
            15 => r.1 += 3,
            7 | 8 | 16 | 19 | 20 => r.1 += 2,
            _ => panic!("tag {tag}"),
        }
        i += 1;
    }
    let mut out = bytes[..r.1].to_vec();
    out[6..8].copy_from_slice(&major.to_be_bytes());
    let start = r.1;
    r.1 += 6;
    let interfaces = r.u2() as usize;
    r.1 += 2 * interfaces;
    // Fields and methods have the same shape; only methods' Code changes.
    let copy_attrs = |r: &mut R, out: &mut Vec<u8>| {
        let n = r.u2();
        out.extend_from_slice(&n.to_be_bytes());
        for _ in 0..n {
            let s = r.1;
            r.1 += 2;
            let len = r.u4() as usize;
            r.1 += len;
            out.extend_from_slice(&bytes[s..r.1]);
        }
    };
    let fields = r.u2();
    out.extend_from_slice(&bytes[start..r.1]);
    for _ in 0..fields {
        out.extend_from_slice(&bytes[r.1..r.1 + 6]);
        r.1 += 6;
        copy_attrs(&mut r, &mut out);
    }
    let methods = r.u2();
    out.extend_from_slice(&methods.to_be_bytes());
    for _ in 0..methods {
        out.extend_from_slice(&bytes[r.1..r.1 + 6]);
        r.1 += 6;
        let n = r.u2();
        out.extend_from_slice(&n.to_be_bytes());
        for _ in 0..n {
            let name = r.u2();
            let len = r.u4() as usize;
            let body = &bytes[r.1..r.1 + len];
            r.1 += len;
            if utf8[&name] != b"Code" || !strip_frames {
                out.extend_from_slice(&name.to_be_bytes());
                out.extend_from_slice(&(len as u32).to_be_bytes());
                out.extend_from_slice(body);
                continue;
            }
            let mut c = R(body, 4);
            let code_len = c.u4() as usize;
            c.1 += code_len;
            let exceptions = c.u2() as usize;
            c.1 += 8 * exceptions;
            let mut code = body[..c.1].to_vec();
            let mut kept = Vec::new();
            let n_attrs = c.u2();
            let mut n_kept = 0u16;
            for _ in 0..n_attrs {
                let s = c.1;
                let a_name = c.u2();
                let a_len = c.u4() as usize;
                c.1 += a_len;
                if utf8[&a_name] != b"StackMapTable" {
                    kept.extend_from_slice(&body[s..c.1]);
                    n_kept += 1;
                }
            }
            code.extend_from_slice(&n_kept.to_be_bytes());
            code.extend_from_slice(&kept);
            out.extend_from_slice(&name.to_be_bytes());
            out.extend_from_slice(&(code.len() as u32).to_be_bytes());
            out.extend_from_slice(&code);
        }
    }
    out.extend_from_slice(&bytes[r.1..]);
    out
}

fn run_downgraded(major: u16, strip_frames: bool) {
    let jdk = Jdk::default();
    let tmp = TempDir::new(&format!("legacy{major}"));
    let (compiled, plain, inst, probe) = (
        tmp.join("compiled"),
        tmp.join("plain"),
        tmp.join("instrumented"),
        tmp.join("probe"),
    );
    jdk.javac(
        &[fixtures_dir().join("legacy/Legacy.java")],
        &compiled,
        &["--release", "8"],
    );
    fs::create_dir_all(&plain).unwrap();
    for f in files_under(&compiled) {
        let name = f.file_name().unwrap();
        fs::write(
            plain.join(name),
            downgrade(&fs::read(&f).unwrap(), major, strip_frames),
        )
        .unwrap();
    }
    compile_probe(&jdk, &probe);
    let done = instrument_tree(&plain, &inst, &config());
    assert_eq!(done.unexpected_skips(), Vec::<String>::new());
    if strip_frames {
        let javap = jdk
            .tool("javap")
            .args(["-v", "-p", "-cp"])
            .arg(&inst)
            .args(["Legacy", "Legacy$Child"])
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&javap.stdout);
        assert_eq!(
            listing.contains("StackMapTable: number_of_entries"),
            major >= 50,
            "frames are created only from version 50 on"
        );
    }

    let before = jdk.run(&[&plain], "Legacy", None);
    assert_eq!(before.status, Some(0), "{}", before.stderr);
    let log = tmp.join("probe.log");
    let after = jdk.run(&[&inst, &probe], "Legacy", Some(&log));
    assert_eq!(after.stdout, before.stdout, "stderr:\n{}", after.stderr);
    let events = read_log(&log, &done.names);
    assert!(check_nesting(&events).is_empty());
    assert_in_order(
        &events,
        &[
            r#"ENTER Legacy$Base.<init>(Ljava/lang/String;)V ["CHILD3"]"#,
            "ENTER Legacy$Child.<init>(IZ)V [3, true]",
            "EXIT Legacy$Child.<init>(IZ)V",
            "ENTER Legacy$Child.<init>(I)V [3]",
            "EXIT Legacy$Child.twice()I 4",
            "EXIT Legacy.classify(I)I 1000",
            "EXIT Legacy.sum(Ljava/util/List;)J 10L",
            r#"EXIT Legacy.risky(I)Ljava/lang/String; "caught negative""#,
            "THROW Legacy.fail()V java.lang.UnsupportedOperationException",
            "EXIT Legacy.main([Ljava/lang/String;)V",
        ],
    );
}

#[test]
fn version_49_without_frames_is_instrumented_without_frames() {
    run_downgraded(49, true);
}

#[test]
fn version_50_with_frames_keeps_valid_frames() {
    run_downgraded(50, false);
}

#[test]
fn version_50_without_frames_gets_a_table_and_still_verifies() {
    run_downgraded(50, true);
}
