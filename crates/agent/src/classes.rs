//! What the agent knows about a class: its dotted name, whether it is a
//! trace class, and how to show its instances as values.
//!
//! Classes are asked about on hot paths (an object parameter, a monitor, an
//! exception), and a `jclass` is only a local reference, so the answer is
//! cached in the class object's JVMTI tag: kind, traced flag and interned
//! name in one `i64`. The first look costs a `GetClassSignature`; later
//! ones a `GetTag`.

use crate::jvmti::Result;
use crate::recording::Recording;
use crate::sys;
use vmview_format::StringId;

/// How instances of a class are captured as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassKind {
    Object = 1,
    String = 2,
    Array = 3,
    Boolean = 4,
    Byte = 5,
    Char = 6,
    Short = 7,
    Int = 8,
    Long = 9,
    Float = 10,
    Double = 11,
}

impl ClassKind {
    const ALL: [ClassKind; 11] = [
        ClassKind::Object,
        ClassKind::String,
        ClassKind::Array,
        ClassKind::Boolean,
        ClassKind::Byte,
        ClassKind::Char,
        ClassKind::Short,
        ClassKind::Int,
        ClassKind::Long,
        ClassKind::Float,
        ClassKind::Double,
    ];

    /// The boxed primitive classes, in the order of [`BOXED`].
    pub const BOXED: [ClassKind; 8] = [
        ClassKind::Boolean,
        ClassKind::Byte,
        ClassKind::Char,
        ClassKind::Short,
        ClassKind::Int,
        ClassKind::Long,
        ClassKind::Float,
        ClassKind::Double,
    ];

    fn from_signature(sig: &str) -> ClassKind {
        match sig {
            "Ljava/lang/String;" => ClassKind::String,
            "Ljava/lang/Boolean;" => ClassKind::Boolean,
            "Ljava/lang/Byte;" => ClassKind::Byte,
            "Ljava/lang/Character;" => ClassKind::Char,
            "Ljava/lang/Short;" => ClassKind::Short,
            "Ljava/lang/Integer;" => ClassKind::Int,
            "Ljava/lang/Long;" => ClassKind::Long,
            "Ljava/lang/Float;" => ClassKind::Float,
            "Ljava/lang/Double;" => ClassKind::Double,
            s if s.starts_with('[') => ClassKind::Array,
            _ => ClassKind::Object,
        }
    }

    /// Index into [`ClassKind::BOXED`] for a boxed kind.
    pub fn boxed_index(self) -> Option<usize> {
        ClassKind::BOXED.iter().position(|k| *k == self)
    }
}

/// Boxed classes: JVM name, value-field descriptor.
pub const BOXED_CLASSES: [(&str, &str); 8] = [
    ("java/lang/Boolean", "Z"),
    ("java/lang/Byte", "B"),
    ("java/lang/Character", "C"),
    ("java/lang/Short", "S"),
    ("java/lang/Integer", "I"),
    ("java/lang/Long", "J"),
    ("java/lang/Float", "F"),
    ("java/lang/Double", "D"),
];

/// A class as the agent sees it.
#[derive(Debug, Clone, Copy)]
pub struct ClassFacts {
    pub kind: ClassKind,
    pub traced: bool,
    /// The interned dotted name (always set for trace classes and when
    /// asked for).
    pub name: Option<StringId>,
}

// Tag layout: bits 0-3 kind, bit 4 traced, bits 8-39 name id + 1 (0: not
// interned yet), bits 40-61 the recording's generation (a tag of an earlier
// recording in the same JVMTI environment is not this one's). A zero tag
// means "never seen".
const GENERATION_MASK: i64 = 0x3f_ffff;

fn encode(f: &ClassFacts, generation: u32) -> i64 {
    let name = f.name.map_or(0, |n| i64::from(n.0) + 1);
    (f.kind as i64)
        | (i64::from(f.traced) << 4)
        | (name << 8)
        | ((i64::from(generation) & GENERATION_MASK) << 40)
}

fn decode(tag: i64, generation: u32) -> Option<ClassFacts> {
    if (tag >> 40) & GENERATION_MASK != i64::from(generation) & GENERATION_MASK {
        return None;
    }
    let kind = ClassKind::ALL
        .into_iter()
        .find(|k| *k as i64 == tag & 0xf)?;
    let name = (tag >> 8) & 0xffff_ffff;
    Some(ClassFacts {
        kind,
        traced: tag & 0x10 != 0,
        name: (name != 0).then(|| StringId((name - 1) as u32)),
    })
}

/// The class's facts; `want_name` interns its name if that was not done yet.
pub fn facts(agent: &Recording, class: sys::jclass, want_name: bool) -> Result<ClassFacts> {
    let jvmti = agent.jvmti;
    if let Some(f) = decode(jvmti.tag(class)?, agent.generation) {
        if f.name.is_some() || !want_name {
            return Ok(f);
        }
    }
    let sig = jvmti.class_signature(class)?;
    let dotted = dotted_name(&sig);
    let traced = agent.options.is_traced_class(&dotted);
    let f = ClassFacts {
        kind: ClassKind::from_signature(&sig),
        traced,
        name: (want_name || traced).then(|| agent.symbols.string(&dotted)),
    };
    jvmti.set_tag(class, encode(&f, agent.generation))?;
    Ok(f)
}

/// The interned dotted name of a class (`?` when JVMTI cannot say).
pub fn name(agent: &Recording, class: sys::jclass) -> StringId {
    match facts(agent, class, true) {
        Ok(ClassFacts { name: Some(n), .. }) => n,
        Ok(_) => agent.symbols.string("?"),
        Err(e) => {
            agent.problems.jvmti(e);
            agent.symbols.string("?")
        }
    }
}

/// A JVM type signature as a dotted Java name: `Lshop/Inventory$Clerk;` →
/// `shop.Inventory$Clerk`, `[I` → `int[]`, `[[Ljava/lang/String;` →
/// `java.lang.String[][]`, `I` → `int`; hidden classes as `Class.getName()`
/// shows them (`fx.Main$$Lambda/0x0800`).
pub fn dotted_name(sig: &str) -> String {
    let dims = sig.bytes().take_while(|b| *b == b'[').count();
    let elem = &sig[dims..];
    let mut name = match elem.as_bytes().first() {
        // A hidden class's signature has a '.' before its suffix
        // (`Lfx/Main$$Lambda.0x0800;`): Class.getName() shows it as '/'.
        Some(b'L') => elem[1..]
            .trim_end_matches(';')
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        Some(&c) => primitive_name(c).unwrap_or(elem).to_string(),
        None => String::from("?"),
    };
    for _ in 0..dims {
        name.push_str("[]");
    }
    name
}

/// `I` → `int` and so on.
pub fn primitive_name(code: u8) -> Option<&'static str> {
    Some(match code {
        b'Z' => "boolean",
        b'B' => "byte",
        b'C' => "char",
        b'S' => "short",
        b'I' => "int",
        b'J' => "long",
        b'F' => "float",
        b'D' => "double",
        b'V' => "void",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_become_dotted_java_names() {
        assert_eq!(
            dotted_name("Lshop/Inventory$Clerk;"),
            "shop.Inventory$Clerk"
        );
        assert_eq!(dotted_name("[I"), "int[]");
        assert_eq!(dotted_name("[[Ljava/lang/String;"), "java.lang.String[][]");
        assert_eq!(dotted_name("J"), "long");
        assert_eq!(
            dotted_name("Lfx/Main$$Lambda.0x0800;"),
            "fx.Main$$Lambda/0x0800"
        );
    }

    #[test]
    fn class_tags_round_trip() {
        let f = ClassFacts {
            kind: ClassKind::Long,
            traced: true,
            name: Some(StringId(123_456)),
        };
        let back = decode(encode(&f, 1), 1).unwrap();
        assert_eq!(
            (back.kind, back.traced, back.name),
            (f.kind, f.traced, f.name)
        );
        assert!(decode(0, 1).is_none());
        let unnamed = ClassFacts { name: None, ..f };
        assert_eq!(decode(encode(&unnamed, 1), 1).unwrap().name, None);
    }

    #[test]
    fn class_tags_of_an_earlier_recording_read_as_unseen() {
        let f = ClassFacts {
            kind: ClassKind::Object,
            traced: true,
            name: Some(StringId(7)),
        };
        assert!(decode(encode(&f, 1), 2).is_none());
        assert!(decode(encode(&f, 2), 2).is_some());
    }
}
