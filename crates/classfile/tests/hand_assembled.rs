//! Legal bytecode that javac never writes, assembled by hand: `jsr`/`ret`
//! subroutines (class files before version 50), and constructors that copy
//! the uninitialised `this` into another local or call `super(...)` on two
//! different paths.

use std::collections::HashMap;
use std::fs;

use crate::support::*;

/// Just enough of a class-file writer for these tests.
#[derive(Default)]
struct Assembler {
    pool: Vec<Vec<u8>>,
    utf8: HashMap<String, u16>,
    methods: Vec<Vec<u8>>,
}

impl Assembler {
    fn entry(&mut self, bytes: Vec<u8>) -> u16 {
        self.pool.push(bytes);
        self.pool.len() as u16
    }

    fn utf8(&mut self, s: &str) -> u16 {
        if let Some(&i) = self.utf8.get(s) {
            return i;
        }
        let mut b = vec![1];
        b.extend_from_slice(&(s.len() as u16).to_be_bytes());
        b.extend_from_slice(s.as_bytes());
        let i = self.entry(b);
        self.utf8.insert(s.to_string(), i);
        i
    }

    fn class(&mut self, name: &str) -> u16 {
        let n = self.utf8(name);
        let mut b = vec![7];
        b.extend_from_slice(&n.to_be_bytes());
        self.entry(b)
    }

    fn method_ref(&mut self, class: &str, name: &str, desc: &str) -> u16 {
        let c = self.class(class);
        let (n, d) = (self.utf8(name), self.utf8(desc));
        let mut nat = vec![12];
        nat.extend_from_slice(&n.to_be_bytes());
        nat.extend_from_slice(&d.to_be_bytes());
        let nat = self.entry(nat);
        let mut b = vec![10];
        b.extend_from_slice(&c.to_be_bytes());
        b.extend_from_slice(&nat.to_be_bytes());
        self.entry(b)
    }

    /// Adds a method; `frames` is the `info` of its `StackMapTable`.
    fn method(
        &mut self,
        access: u16,
        name: &str,
        desc: &str,
        max: (u16, u16),
        code: &[u8],
        frames: Option<&[u8]>,
    ) {
        let (n, d, c) = (self.utf8(name), self.utf8(desc), self.utf8("Code"));
        let smt = frames.map(|f| (self.utf8("StackMapTable"), f));
        let mut body = Vec::new();
        body.extend_from_slice(&max.0.to_be_bytes());
        body.extend_from_slice(&max.1.to_be_bytes());
        body.extend_from_slice(&(code.len() as u32).to_be_bytes());
        body.extend_from_slice(code);
        body.extend_from_slice(&0u16.to_be_bytes());
        body.extend_from_slice(&(smt.is_some() as u16).to_be_bytes());
        if let Some((name, f)) = smt {
            body.extend_from_slice(&name.to_be_bytes());
            body.extend_from_slice(&(f.len() as u32).to_be_bytes());
            body.extend_from_slice(f);
        }
        let mut m = Vec::new();
        for v in [access, n, d, 1, c] {
            m.extend_from_slice(&v.to_be_bytes());
        }
        m.extend_from_slice(&(body.len() as u32).to_be_bytes());
        m.extend_from_slice(&body);
        self.methods.push(m);
    }

    fn finish(mut self, name: &str, major: u16) -> Vec<u8> {
        let this = self.class(name);
        let sup = self.class("java/lang/Object");
        let mut out = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0];
        out.extend_from_slice(&major.to_be_bytes());
        out.extend_from_slice(&(self.pool.len() as u16 + 1).to_be_bytes());
        for e in &self.pool {
            out.extend_from_slice(e);
        }
        for v in [0x21u16, this, sup, 0, 0, self.methods.len() as u16] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        for m in &self.methods {
            out.extend_from_slice(m);
        }
        out.extend_from_slice(&0u16.to_be_bytes());
        out
    }
}

/// Constructors that keep `this` in local 2 before `super()`, and that call
/// `super()` on either branch; with stack-map frames from version 50 on.
fn odd_constructors(a: &mut Assembler, class: &str, major: u16) {
    let init = a
        .method_ref("java/lang/Object", "<init>", "()V")
        .to_be_bytes();
    let this = a.class(class).to_be_bytes();
    let framed = major >= 50;
    #[rustfmt::skip]
    let copy = [
        0x2a,             // 0: aload_0
        0x4d,             // 1: astore_2
        0x1b,             // 2: iload_1
        0x99, 0, 7,       // 3: ifeq 10
        0x2c,             // 6: aload_2
        0xa7, 0, 4,       // 7: goto 11
        0x2a,             // 10: aload_0
        0xb7, init[0], init[1], // 11: invokespecial Object.<init>
        0xb1,             // 14: return
    ];
    // 10: append [uninitializedThis]; 11: same_locals_1_stack_item [uninitializedThis]
    let copy_frames = [0, 2, 252, 0, 10, 6, 64, 6];
    a.method(
        1,
        "<init>",
        "(I)V",
        (1, 3),
        &copy,
        framed.then_some(&copy_frames[..]),
    );
    #[rustfmt::skip]
    let twice = [
        0x1b,             // 0: iload_1
        0x99, 0, 10,      // 1: ifeq 11
        0x2a,             // 4: aload_0
        0xb7, init[0], init[1], // 5: invokespecial Object.<init>
        0xa7, 0, 7,       // 8: goto 15
        0x2a,             // 11: aload_0
        0xb7, init[0], init[1], // 12: invokespecial Object.<init>
        0xb1,             // 15: return
    ];
    // 11: same; 15: full [this, int] []
    let twice_frames = [0, 2, 11, 255, 0, 3, 0, 2, 7, this[0], this[1], 1, 0, 0];
    a.method(
        1,
        "<init>",
        "(Z)V",
        (1, 2),
        &twice,
        framed.then_some(&twice_frames[..]),
    );
}

fn assemble_old() -> Vec<u8> {
    let mut a = Assembler::default();
    odd_constructors(&mut a, "OddOld", 49);
    #[rustfmt::skip]
    let subroutine = [
        0xa8, 0, 7,       // 0: jsr 7
        0x1a,             // 3: iload_0
        0x04,             // 4: iconst_1
        0x60,             // 5: iadd
        0xac,             // 6: ireturn
        0x4c,             // 7: astore_1 (the return address)
        0x84, 0, 5,       // 8: iinc 0, 5
        0xa9, 1,          // 11: ret 1
    ];
    a.method(9, "f", "(I)I", (2, 2), &subroutine, None);
    a.finish("OddOld", 49)
}

fn assemble_new() -> Vec<u8> {
    let mut a = Assembler::default();
    odd_constructors(&mut a, "OddNew", 52);
    a.finish("OddNew", 52)
}

const DRIVER: &str = r#"
public class OddDriver {
    public static void main(String[] args) {
        System.out.println("f " + OddOld.f(10));
        Object[] made = {new OddOld(1), new OddOld(0), new OddOld(true), new OddOld(false),
                         new OddNew(1), new OddNew(0), new OddNew(true), new OddNew(false)};
        System.out.println("made " + made.length);
    }
}
"#;

#[test]
fn subroutines_and_unusual_constructors_are_instrumented() {
    let jdk = Jdk::default();
    let tmp = TempDir::new("hand");
    let (plain, inst, probe, src) = (
        tmp.join("plain"),
        tmp.join("instrumented"),
        tmp.join("probe"),
        tmp.join("src"),
    );
    fs::create_dir_all(&plain).unwrap();
    fs::create_dir_all(&src).unwrap();
    fs::write(plain.join("OddOld.class"), assemble_old()).unwrap();
    fs::write(plain.join("OddNew.class"), assemble_new()).unwrap();
    fs::write(src.join("OddDriver.java"), DRIVER).unwrap();
    jdk.javac(
        &[src.join("OddDriver.java")],
        &plain,
        &["-cp", plain.to_str().unwrap()],
    );
    compile_probe(&jdk, &probe);

    let done = instrument_tree(&plain, &inst, &config());
    assert_eq!(done.unexpected_skips(), Vec::<String>::new());
    let before = jdk.run(&[&plain], "OddDriver", None);
    assert_eq!(
        before.status,
        Some(0),
        "the hand-assembled classes verify: {}",
        before.stderr
    );
    assert_eq!(before.stdout, "f 16\nmade 8\n");
    let log = tmp.join("probe.log");
    let after = jdk.run(&[&inst, &probe], "OddDriver", Some(&log));
    assert_eq!(after.stdout, before.stdout, "stderr:\n{}", after.stderr);
    let events = read_log(&log, &done.names);
    assert!(check_nesting(&events).is_empty());
    let mut expected = vec![
        "ENTER OddOld.f(I)I [10]".to_string(),
        "EXIT OddOld.f(I)I 16".to_string(),
    ];
    for class in ["OddOld", "OddNew"] {
        for (desc, arg) in [
            ("(I)V", "1"),
            ("(I)V", "0"),
            ("(Z)V", "true"),
            ("(Z)V", "false"),
        ] {
            expected.push(format!("ENTER {class}.<init>{desc} [{arg}]"));
            expected.push(format!("EXIT {class}.<init>{desc}"));
        }
    }
    assert_in_order(
        &events,
        &expected.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}
