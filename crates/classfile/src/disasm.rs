//! A disassembler that prints instructions the way `javap -c` does, with
//! the operands resolved against the constant pool.
//!
//! `javap -c` prints a constant-pool operand as an index plus a comment
//! (`invokevirtual #7 // Method java/io/PrintStream.println:(I)V`); a
//! bytecode trace has no pool to look the index up in, so here the comment
//! *is* the operand, without the kind word the mnemonic already implies:
//!
//! ```text
//! invokevirtual java/io/PrintStream.println:(Ljava/lang/String;)V
//! getstatic java/lang/System.out:Ljava/io/PrintStream;
//! invokespecial java/lang/Object."<init>":()V
//! invokedynamic #0:makeConcatWithConstants:(I)Ljava/lang/String;
//! new java/lang/StringBuilder
//! anewarray "[I"
//! ldc "text"            ldc 100000            ldc2_w 10000000000l
//! ldc 1.5f              ldc2_w 2.5d           ldc class java/lang/String
//! multianewarray "[[I", 2
//! ```
//!
//! The other operands are javap's, with its column padding squeezed to one
//! space: `bipush 10`, `iload 4`, `iinc 1, 1`, `if_icmpge 27` (the absolute
//! target), `newarray int`, and the switches on one line:
//! `tableswitch { 1: 28, 2: 30, default: 34 }`. Unlike javap, a member of
//! the class being disassembled keeps its class name, since a trace line
//! is read without the class around it. Names that are not Java
//! identifiers are quoted as javap quotes them (`"<init>"`, `"[I"`).
//!
//! Input is untrusted: a bad pool index or truncated code is an error,
//! never a panic.

use crate::bytecode::{self, op, InsnKind};
use crate::bytes::{Reader, WriteBe};
use crate::class_file::{ClassFile, Code};
use crate::constant_pool::{Constant, ConstantPool};
use crate::error::{CodeError, RewriteError};
use crate::mutf8;

/// One instruction: its offset in the method's code and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    pub offset: u32,
    pub text: String,
}

/// The instructions of one method of a class file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodCode {
    /// Method name, decoded (`<init>` included).
    pub name: String,
    /// JVM descriptor, e.g. `(I)V`.
    pub descriptor: String,
    pub instructions: Vec<Instruction>,
}

/// Disassembles `code` against a constant pool given as JVMTI's
/// `GetConstantPool` returns it: the `constant_pool_count` and the entries'
/// bytes in class-file form.
pub fn disassemble(
    code: &[u8],
    pool_count: u16,
    pool_bytes: &[u8],
) -> Result<Vec<Instruction>, RewriteError> {
    let mut whole = Vec::with_capacity(pool_bytes.len() + 2);
    whole.put_u16(pool_count);
    whole.extend_from_slice(pool_bytes);
    let mut r = Reader::new(&whole, 0, "the constant pool");
    let pool = ConstantPool::parse(&mut r, &whole)?;
    if r.remaining() != 0 {
        return Err(RewriteError::Malformed {
            context: "constant pool".into(),
            reason: format!("{} bytes after the last entry", r.remaining()),
        });
    }
    disassemble_code(code, &pool).map_err(|e| code_error("code", e))
}

/// Disassembles every method with code in a class file.
pub fn disassemble_class(bytes: &[u8]) -> Result<Vec<MethodCode>, RewriteError> {
    let class = ClassFile::parse(bytes)?;
    let mut out = Vec::new();
    for m in &class.methods {
        let Some(attr) = m.attribute("Code") else {
            continue;
        };
        let code = Code::parse(attr, bytes, &class.pool)?;
        let instructions = disassemble_code(code.code, &class.pool)
            .map_err(|e| code_error(&m.display_name(), e))?;
        out.push(MethodCode {
            name: mutf8::decode(m.name),
            descriptor: mutf8::decode(m.descriptor),
            instructions,
        });
    }
    Ok(out)
}

fn code_error(method: &str, e: CodeError) -> RewriteError {
    RewriteError::BadCode {
        method: method.to_string(),
        pc: e.pc,
        reason: e.reason,
    }
}

fn disassemble_code(code: &[u8], pool: &ConstantPool<'_>) -> Result<Vec<Instruction>, CodeError> {
    let insns = bytecode::decode(code)?;
    let mut out = Vec::with_capacity(insns.insns.len());
    for insn in &insns.insns {
        let operands = insn.operands(code);
        let mut text = String::from(mnemonic(insn.opcode));
        let u16_at = |i: usize| -> u16 {
            u16::from_be_bytes([
                operands.get(i).copied().unwrap_or(0),
                operands.get(i + 1).copied().unwrap_or(0),
            ])
        };
        let at = insn.offset;
        let cp = |e: RewriteError| CodeError::malformed(at, e.to_string());
        match (&insn.kind, insn.opcode) {
            (InsnKind::Branch { target } | InsnKind::WideBranch { target }, _) => {
                text += &format!(" {target}");
            }
            (
                InsnKind::TableSwitch {
                    default,
                    low,
                    targets,
                },
                _,
            ) => {
                text += " {";
                for (k, t) in targets.iter().enumerate() {
                    text += &format!(" {}: {t},", i64::from(*low) + k as i64);
                }
                text += &format!(" default: {default} }}");
            }
            (InsnKind::LookupSwitch { default, pairs }, _) => {
                text += " {";
                for (key, t) in pairs {
                    text += &format!(" {key}: {t},");
                }
                text += &format!(" default: {default} }}");
            }
            (_, op::BIPUSH) => text += &format!(" {}", operands[0] as i8),
            (_, op::SIPUSH) => text += &format!(" {}", u16_at(0) as i16),
            (_, op::LDC) => {
                text.push(' ');
                text += &constant(pool, u16::from(operands[0])).map_err(cp)?;
            }
            (_, op::LDC_W | op::LDC2_W) => {
                text.push(' ');
                text += &constant(pool, u16_at(0)).map_err(cp)?;
            }
            (_, op::ILOAD..=op::ALOAD | op::ISTORE..=op::ASTORE | op::RET) => {
                text += &format!(" {}", operands[0]);
            }
            (_, op::IINC) => text += &format!(" {}, {}", operands[0], operands[1] as i8),
            (_, op::WIDE) => {
                // javap prints the modified instruction: `iinc_w 1, 1000`.
                let modified = operands[0];
                text = format!("{}_w {}", mnemonic(modified), u16_at(1));
                if modified == op::IINC {
                    let c = u16::from_be_bytes([operands[3], operands[4]]) as i16;
                    text += &format!(", {c}");
                }
            }
            (_, op::GETSTATIC..=op::INVOKEINTERFACE) => {
                text.push(' ');
                text += &member(pool, u16_at(0)).map_err(cp)?;
            }
            (_, op::INVOKEDYNAMIC) => {
                text.push(' ');
                text += &dynamic(pool, u16_at(0)).map_err(cp)?;
            }
            (_, op::NEW | op::ANEWARRAY | op::CHECKCAST | op::INSTANCEOF) => {
                text.push(' ');
                text += &class(pool, u16_at(0)).map_err(cp)?;
            }
            (_, op::MULTIANEWARRAY) => {
                text += &format!(" {}, {}", class(pool, u16_at(0)).map_err(cp)?, operands[2]);
            }
            (_, op::NEWARRAY) => {
                let ty = match operands[0] {
                    4 => "boolean",
                    5 => "char",
                    6 => "float",
                    7 => "double",
                    8 => "byte",
                    9 => "short",
                    10 => "int",
                    11 => "long",
                    t => return Err(CodeError::malformed(at, format!("newarray type {t}"))),
                };
                text.push(' ');
                text += ty;
            }
            _ => {}
        }
        out.push(Instruction { offset: at, text });
    }
    Ok(out)
}

/// The operand of `ldc`, `ldc_w` and `ldc2_w`.
fn constant(pool: &ConstantPool<'_>, index: u16) -> Result<String, RewriteError> {
    Ok(match pool.get(index)? {
        Constant::String(s) => quote_string(&mutf8::decode(pool.utf8(*s)?)),
        Constant::Integer(v) => v.to_string(),
        Constant::Float(bits) => format!("{}f", java_float(f64::from(f32::from_bits(*bits)), true)),
        Constant::Long(v) => format!("{}l", *v as i64),
        Constant::Double(bits) => format!("{}d", java_float(f64::from_bits(*bits), false)),
        Constant::Class(_) => format!("class {}", class(pool, index)?),
        Constant::MethodType(d) => format!("MethodType {}", mutf8::decode(pool.utf8(*d)?)),
        Constant::MethodHandle(kind, r) => {
            format!("MethodHandle {} {}", ref_kind(*kind), member(pool, *r)?)
        }
        Constant::Dynamic(..) => format!("Dynamic {}", dynamic(pool, index)?),
        _ => {
            return Err(RewriteError::BadConstant {
                index,
                reason: "expected a loadable constant".into(),
            })
        }
    })
}

fn ref_kind(kind: u8) -> String {
    match kind {
        1 => "REF_getField".into(),
        2 => "REF_getStatic".into(),
        3 => "REF_putField".into(),
        4 => "REF_putStatic".into(),
        5 => "REF_invokeVirtual".into(),
        6 => "REF_invokeStatic".into(),
        7 => "REF_invokeSpecial".into(),
        8 => "REF_newInvokeSpecial".into(),
        9 => "REF_invokeInterface".into(),
        k => format!("REF_{k}"),
    }
}

/// `java/io/PrintStream.println:(I)V`, `java/lang/Object."<init>":()V`.
fn member(pool: &ConstantPool<'_>, index: u16) -> Result<String, RewriteError> {
    let owner = match pool.get(index)? {
        Constant::FieldRef(c, _)
        | Constant::MethodRef(c, _)
        | Constant::InterfaceMethodRef(c, _) => *c,
        _ => {
            return Err(RewriteError::BadConstant {
                index,
                reason: "expected a field or method reference".into(),
            })
        }
    };
    let (name, descriptor) = pool.member_ref(index)?;
    Ok(format!(
        "{}.{}:{}",
        class(pool, owner)?,
        check_name(&mutf8::decode(name)),
        mutf8::decode(descriptor)
    ))
}

/// `#0:makeConcatWithConstants:(I)Ljava/lang/String;`: the bootstrap
/// method's index in the BootstrapMethods attribute, name, descriptor.
fn dynamic(pool: &ConstantPool<'_>, index: u16) -> Result<String, RewriteError> {
    let bootstrap = match pool.get(index)? {
        Constant::Dynamic(b, _) | Constant::InvokeDynamic(b, _) => *b,
        _ => {
            return Err(RewriteError::BadConstant {
                index,
                reason: "expected a dynamic constant or call site".into(),
            })
        }
    };
    let (name, descriptor) = pool.dynamic(index)?;
    Ok(format!(
        "#{bootstrap}:{}:{}",
        check_name(&mutf8::decode(name)),
        mutf8::decode(descriptor)
    ))
}

fn class(pool: &ConstantPool<'_>, index: u16) -> Result<String, RewriteError> {
    Ok(check_name(&mutf8::decode(pool.class_name(index)?)))
}

/// javap's rule: a name that is not a `/`-separated sequence of Java
/// identifiers is printed in double quotes.
fn check_name(name: &str) -> String {
    let ident_start = |c: char| c.is_alphabetic() || c == '$' || c == '_';
    let ident_part = |c: char| ident_start(c) || c.is_numeric();
    let mut prev = '/';
    let plain = !name.is_empty()
        && name.chars().all(|c| {
            let ok = if prev == '/' {
                ident_start(c)
            } else {
                c == '/' || ident_part(c)
            };
            prev = c;
            ok
        });
    if plain {
        name.to_string()
    } else {
        quote_string(name)
    }
}

/// A string in double quotes with Java's escapes.
fn quote_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `Float.toString` / `Double.toString`: the shortest digits that read
/// back as the same value, plain between 10^-3 and 10^7, else
/// `d.dddE±n`, always with a fractional digit.
fn java_float(v: f64, single: bool) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits of the type.
    let sci = if single {
        format!("{:e}", v as f32)
    } else {
        format!("{v:e}")
    };
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let a = v.abs();
    if (1e-3..1e7).contains(&a) {
        let point = exp + 1; // digits before the decimal point
        let (int, frac) = if point <= 0 {
            (
                "0".to_string(),
                format!("{}{digits}", "0".repeat((-point) as usize)),
            )
        } else if point as usize >= digits.len() {
            (
                format!("{digits}{}", "0".repeat(point as usize - digits.len())),
                String::new(),
            )
        } else {
            (
                digits[..point as usize].to_string(),
                digits[point as usize..].to_string(),
            )
        };
        let frac = if frac.is_empty() { "0".into() } else { frac };
        format!("{sign}{int}.{frac}")
    } else {
        let frac = if digits.len() > 1 { &digits[1..] } else { "0" };
        format!("{sign}{}.{frac}E{exp}", &digits[..1])
    }
}

fn mnemonic(opcode: u8) -> &'static str {
    MNEMONICS.get(usize::from(opcode)).copied().unwrap_or("?")
}

/// JVMS §6.5 mnemonics by opcode (0x00–0xc9).
const MNEMONICS: [&str; 202] = [
    "nop",
    "aconst_null",
    "iconst_m1",
    "iconst_0",
    "iconst_1",
    "iconst_2",
    "iconst_3",
    "iconst_4",
    "iconst_5",
    "lconst_0",
    "lconst_1",
    "fconst_0",
    "fconst_1",
    "fconst_2",
    "dconst_0",
    "dconst_1",
    "bipush",
    "sipush",
    "ldc",
    "ldc_w",
    "ldc2_w",
    "iload",
    "lload",
    "fload",
    "dload",
    "aload",
    "iload_0",
    "iload_1",
    "iload_2",
    "iload_3",
    "lload_0",
    "lload_1",
    "lload_2",
    "lload_3",
    "fload_0",
    "fload_1",
    "fload_2",
    "fload_3",
    "dload_0",
    "dload_1",
    "dload_2",
    "dload_3",
    "aload_0",
    "aload_1",
    "aload_2",
    "aload_3",
    "iaload",
    "laload",
    "faload",
    "daload",
    "aaload",
    "baload",
    "caload",
    "saload",
    "istore",
    "lstore",
    "fstore",
    "dstore",
    "astore",
    "istore_0",
    "istore_1",
    "istore_2",
    "istore_3",
    "lstore_0",
    "lstore_1",
    "lstore_2",
    "lstore_3",
    "fstore_0",
    "fstore_1",
    "fstore_2",
    "fstore_3",
    "dstore_0",
    "dstore_1",
    "dstore_2",
    "dstore_3",
    "astore_0",
    "astore_1",
    "astore_2",
    "astore_3",
    "iastore",
    "lastore",
    "fastore",
    "dastore",
    "aastore",
    "bastore",
    "castore",
    "sastore",
    "pop",
    "pop2",
    "dup",
    "dup_x1",
    "dup_x2",
    "dup2",
    "dup2_x1",
    "dup2_x2",
    "swap",
    "iadd",
    "ladd",
    "fadd",
    "dadd",
    "isub",
    "lsub",
    "fsub",
    "dsub",
    "imul",
    "lmul",
    "fmul",
    "dmul",
    "idiv",
    "ldiv",
    "fdiv",
    "ddiv",
    "irem",
    "lrem",
    "frem",
    "drem",
    "ineg",
    "lneg",
    "fneg",
    "dneg",
    "ishl",
    "lshl",
    "ishr",
    "lshr",
    "iushr",
    "lushr",
    "iand",
    "land",
    "ior",
    "lor",
    "ixor",
    "lxor",
    "iinc",
    "i2l",
    "i2f",
    "i2d",
    "l2i",
    "l2f",
    "l2d",
    "f2i",
    "f2l",
    "f2d",
    "d2i",
    "d2l",
    "d2f",
    "i2b",
    "i2c",
    "i2s",
    "lcmp",
    "fcmpl",
    "fcmpg",
    "dcmpl",
    "dcmpg",
    "ifeq",
    "ifne",
    "iflt",
    "ifge",
    "ifgt",
    "ifle",
    "if_icmpeq",
    "if_icmpne",
    "if_icmplt",
    "if_icmpge",
    "if_icmpgt",
    "if_icmple",
    "if_acmpeq",
    "if_acmpne",
    "goto",
    "jsr",
    "ret",
    "tableswitch",
    "lookupswitch",
    "ireturn",
    "lreturn",
    "freturn",
    "dreturn",
    "areturn",
    "return",
    "getstatic",
    "putstatic",
    "getfield",
    "putfield",
    "invokevirtual",
    "invokespecial",
    "invokestatic",
    "invokeinterface",
    "invokedynamic",
    "new",
    "newarray",
    "anewarray",
    "arraylength",
    "athrow",
    "checkcast",
    "instanceof",
    "monitorenter",
    "monitorexit",
    "wide",
    "multianewarray",
    "ifnull",
    "ifnonnull",
    "goto_w",
    "jsr_w",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool: #1 Utf8 "java/lang/System", #2 Class #1, #3 Utf8 "out",
    /// #4 Utf8 "Ljava/io/PrintStream;", #5 NameAndType #3 #4,
    /// #6 Fieldref #2 #5, #7 Utf8 "a \"q\"\n", #8 String #7,
    /// #9 Integer 100000, #10 Long (2 slots), #12 Float 1.5.
    fn pool() -> (u16, Vec<u8>) {
        let mut b = Vec::new();
        let utf8 = |b: &mut Vec<u8>, s: &str| {
            b.push(1);
            b.put_u16(s.len() as u16);
            b.extend_from_slice(s.as_bytes());
        };
        utf8(&mut b, "java/lang/System");
        b.extend_from_slice(&[7, 0, 1]);
        utf8(&mut b, "out");
        utf8(&mut b, "Ljava/io/PrintStream;");
        b.extend_from_slice(&[12, 0, 3, 0, 4]);
        b.extend_from_slice(&[9, 0, 2, 0, 5]);
        utf8(&mut b, "a \"q\"\n");
        b.extend_from_slice(&[8, 0, 7]);
        b.push(3);
        b.extend_from_slice(&100_000i32.to_be_bytes());
        b.push(5);
        b.extend_from_slice(&10_000_000_000i64.to_be_bytes());
        b.push(4);
        b.extend_from_slice(&1.5f32.to_bits().to_be_bytes());
        (13, b)
    }

    fn texts(code: &[u8]) -> Vec<(u32, String)> {
        let (n, p) = pool();
        disassemble(code, n, &p)
            .unwrap()
            .into_iter()
            .map(|i| (i.offset, i.text))
            .collect()
    }

    #[test]
    fn resolves_pool_operands_and_prints_javap_operands() {
        let code = [
            op::GETSTATIC,
            0,
            6, // 0
            op::LDC,
            8, // 3
            op::LDC,
            9, // 5
            op::LDC2_W,
            0,
            10, // 7
            op::LDC,
            12, // 10
            op::BIPUSH,
            0xf6, // 12
            op::SIPUSH,
            0x03,
            0xe8, // 14
            op::IINC,
            1,
            0xff, // 17
            0xa2,
            0xff,
            0xfd, // 20: if_icmpge 17
            op::WIDE,
            op::IINC,
            1,
            0,
            0x03,
            0xe8, // 23
            op::NEWARRAY,
            10,         // 29
            op::RETURN, // 31
        ];
        let t = texts(&code);
        let want = [
            (0, "getstatic java/lang/System.out:Ljava/io/PrintStream;"),
            (3, "ldc \"a \\\"q\\\"\\n\""),
            (5, "ldc 100000"),
            (7, "ldc2_w 10000000000l"),
            (10, "ldc 1.5f"),
            (12, "bipush -10"),
            (14, "sipush 1000"),
            (17, "iinc 1, -1"),
            (20, "if_icmpge 17"),
            (23, "iinc_w 256, 1000"),
            (29, "newarray int"),
            (31, "return"),
        ];
        let want: Vec<(u32, String)> = want.iter().map(|(o, s)| (*o, s.to_string())).collect();
        assert_eq!(t, want);
    }

    #[test]
    fn prints_switches_on_one_line() {
        // 0: iconst_1, 1: tableswitch (2 bytes padding) default 44, 1..2 -> 45, 46
        let mut code = vec![op::ICONST_0 + 1, op::TABLESWITCH, 0, 0];
        for v in [43i32, 1, 2, 44, 45] {
            code.extend_from_slice(&v.to_be_bytes());
        }
        // 24: lookupswitch, padding 3, default +20 (44), 1 pair: 7 -> +21
        code.extend_from_slice(&[op::LOOKUPSWITCH, 0, 0, 0]);
        for v in [20i32, 1, 7, 21] {
            code.extend_from_slice(&v.to_be_bytes());
        }
        code.extend_from_slice(&[op::NOP, op::NOP, op::RETURN]);
        let t = texts(&code);
        assert_eq!(t[1].1, "tableswitch { 1: 45, 2: 46, default: 44 }");
        assert_eq!(t[2].1, "lookupswitch { 7: 45, default: 44 }");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let (n, p) = pool();
        assert!(disassemble(&[op::LDC, 200], n, &p).is_err());
        assert!(disassemble(&[op::GETSTATIC, 0, 8], n, &p).is_err());
        assert!(disassemble(&[op::NEWARRAY, 99], n, &p).is_err());
        assert!(disassemble(&[op::NEWARRAY], n, &p).is_err());
        assert!(disassemble(&[op::RETURN], n, &p[..p.len() - 1]).is_err());
        assert!(disassemble(&[op::RETURN], 0, &[]).is_err());
    }

    #[test]
    fn quotes_names_that_are_not_identifiers() {
        assert_eq!(check_name("java/lang/Object"), "java/lang/Object");
        assert_eq!(check_name("<init>"), "\"<init>\"");
        assert_eq!(check_name("[I"), "\"[I\"");
        assert_eq!(check_name("lambda$main$0"), "lambda$main$0");
    }

    #[test]
    fn floats_print_as_java_does() {
        assert_eq!(java_float(1.5, true), "1.5");
        assert_eq!(java_float(100.0, false), "100.0");
        assert_eq!(java_float(0.001, false), "0.001");
        assert_eq!(java_float(1e7, false), "1.0E7");
        assert_eq!(java_float(1.0e-5, false), "1.0E-5");
        assert_eq!(java_float(f64::from(f32::MAX), true), "3.4028235E38");
        assert_eq!(java_float(0.1, true), "0.1");
        assert_eq!(java_float(-2.5, false), "-2.5");
        assert_eq!(java_float(f64::NAN, false), "NaN");
    }
}
