//! Turning Java values into [`Value`]s without running any Java code.
//!
//! Primitives are copied; a `String` is read with `GetStringRegion`, cut at
//! `strings=` characters; a boxed primitive by its `value` field; an array
//! by its class and length; anything else as `class@identityHash`. Never
//! `toString()`: calling into Java from a callback would run traced code
//! inside our own event and could deadlock or recurse.

use crate::classes::{self, ClassKind, BOXED_CLASSES};
use crate::jvmti::{Jni, LocalRef};
use crate::recording::Recording;
use crate::sys;
use std::ffi::CString;
use vmview_format::Value;

/// A field id resolved once at VMInit. Field ids of boot classes stay
/// valid for the life of the VM and may be used from any thread.
#[derive(Clone, Copy)]
pub struct FieldId(pub sys::jfieldID);

// SAFETY: a jfieldID is an opaque, immutable handle, valid on every thread.
unsafe impl Send for FieldId {}
unsafe impl Sync for FieldId {}

/// The fields the agent reads directly.
#[derive(Default)]
pub struct Fields {
    /// The `value` field of each boxed class, in [`ClassKind::BOXED`] order.
    boxed: [Option<FieldId>; 8],
    /// `Throwable.detailMessage`.
    pub detail_message: Option<FieldId>,
    /// `Thread.tid`.
    pub thread_id: Option<FieldId>,
}

impl Fields {
    /// Looks the fields up (at VMInit, on a thread that may use JNI).
    pub fn resolve(jni: Jni) -> Fields {
        let field = |class: &str, name: &str, sig: &str| -> Option<FieldId> {
            let c = jni.find_class(&CString::new(class).ok()?);
            if c.is_null() {
                return None;
            }
            let f = jni.field_id(c.get(), &CString::new(name).ok()?, &CString::new(sig).ok()?);
            f.map(FieldId)
        };
        let mut fields = Fields {
            detail_message: field("java/lang/Throwable", "detailMessage", "Ljava/lang/String;"),
            thread_id: field("java/lang/Thread", "tid", "J"),
            ..Fields::default()
        };
        for (slot, (class, sig)) in fields.boxed.iter_mut().zip(BOXED_CLASSES) {
            *slot = field(class, "value", sig);
        }
        fields
    }
}

/// A primitive read from a local slot or a `jvalue`, by descriptor code.
pub fn from_jvalue(agent: &Recording, jni: Jni, ty: u8, v: sys::jvalue) -> Value {
    // SAFETY: the descriptor says which member of the union the JVM set.
    unsafe {
        match ty {
            b'Z' => Value::Boolean(v.z != 0),
            b'B' => Value::Byte(v.b),
            b'C' => Value::Char(v.c),
            b'S' => Value::Short(v.s),
            b'I' => Value::Int(v.i),
            b'J' => Value::Long(v.j),
            b'F' => Value::Float(v.f),
            b'D' => Value::Double(v.d),
            b'L' => object(agent, jni, v.l),
            _ => Value::Unavailable,
        }
    }
}

/// A parameter in local `slot` of the current thread's top frame.
pub fn local(agent: &Recording, jni: Jni, thread: sys::jthread, ty: u8, slot: i32) -> Value {
    let j = agent.jvmti;
    let r = match ty {
        b'Z' => j.local_int(thread, 0, slot).map(|v| Value::Boolean(v != 0)),
        b'B' => j.local_int(thread, 0, slot).map(|v| Value::Byte(v as i8)),
        b'C' => j.local_int(thread, 0, slot).map(|v| Value::Char(v as u16)),
        b'S' => j.local_int(thread, 0, slot).map(|v| Value::Short(v as i16)),
        b'I' => j.local_int(thread, 0, slot).map(Value::Int),
        b'J' => j.local_long(thread, 0, slot).map(Value::Long),
        b'F' => j.local_float(thread, 0, slot).map(Value::Float),
        b'D' => j.local_double(thread, 0, slot).map(Value::Double),
        b'L' => j
            .local_object(jni, thread, 0, slot)
            .map(|o| object(agent, jni, o.get())),
        _ => return Value::Unavailable,
    };
    r.unwrap_or_else(|e| {
        // HotSpot checks the slot against the method's LocalVariableTable
        // and refuses one the table leaves out (an enum constructor's name
        // and ordinal, a bridge method's parameter): no value, as for a
        // native method, and nothing wrong with the agent.
        if e.code != sys::JVMTI_ERROR_INVALID_SLOT {
            agent.problems.jvmti(e);
        }
        Value::Unavailable
    })
}

/// Any reference: null, String, boxed, array or `class@hash`.
pub fn object(agent: &Recording, jni: Jni, obj: sys::jobject) -> Value {
    if obj.is_null() {
        return Value::Null;
    }
    let class = jni.object_class(obj);
    let facts = match classes::facts(agent, class.get(), true) {
        Ok(f) => f,
        Err(e) => {
            agent.problems.jvmti(e);
            return Value::Unavailable;
        }
    };
    let name = facts.name.unwrap_or_else(|| agent.symbols.string("?"));
    match facts.kind {
        ClassKind::String => {
            let (text, full_len) = string(jni, obj, agent.options.strings);
            Value::Str { text, full_len }
        }
        ClassKind::Array => Value::Array {
            class: name,
            length: jni.array_length(obj),
        },
        ClassKind::Object => match agent.jvmti.object_hash_code(obj) {
            Ok(hash) => Value::Object { class: name, hash },
            Err(e) => {
                agent.problems.jvmti(e);
                Value::Unavailable
            }
        },
        boxed => match boxed_value(agent, jni, obj, boxed) {
            Some(v) => Value::Boxed {
                class: name,
                value: Box::new(v),
            },
            None => Value::Unavailable,
        },
    }
}

fn boxed_value(agent: &Recording, jni: Jni, obj: sys::jobject, kind: ClassKind) -> Option<Value> {
    let f = agent.fields.get()?.boxed[kind.boxed_index()?]?.0;
    Some(match kind {
        ClassKind::Boolean => Value::Boolean(jni.boolean_field(obj, f)),
        ClassKind::Byte => Value::Byte(jni.byte_field(obj, f)),
        ClassKind::Char => Value::Char(jni.char_field(obj, f)),
        ClassKind::Short => Value::Short(jni.short_field(obj, f)),
        ClassKind::Int => Value::Int(jni.int_field(obj, f)),
        ClassKind::Long => Value::Long(jni.long_field(obj, f)),
        ClassKind::Float => Value::Float(jni.float_field(obj, f)),
        ClassKind::Double => Value::Double(jni.double_field(obj, f)),
        _ => return None,
    })
}

/// A string's first `max` UTF-16 units and, when it was cut, its full
/// length.
pub fn string(jni: Jni, s: sys::jobject, max: u32) -> (String, Option<u32>) {
    let len = jni.string_length(s);
    let mut n = len.min(max) as usize;
    // Short strings (most arguments) are copied through the stack: one
    // allocation per value, the String's, instead of two.
    let mut small = [0u16; 128];
    let mut large = Vec::new();
    let buf: &mut [u16] = if n <= small.len() {
        &mut small[..n]
    } else {
        large.resize(n, 0);
        &mut large
    };
    jni.string_region(s, buf);
    // Do not end on half of a surrogate pair.
    if (n as u32) < len && n > 0 && (0xd800..0xdc00).contains(&buf[n - 1]) {
        n -= 1;
    }
    let text = String::from_utf16_lossy(&buf[..n]);
    (text, ((n as u32) < len).then_some(len))
}

/// `Throwable.detailMessage`, bounded like any string.
pub fn exception_message(agent: &Recording, jni: Jni, exception: sys::jobject) -> Option<String> {
    let f = agent.fields.get()?.detail_message?.0;
    let msg: LocalRef = jni.object_field(exception, f);
    if msg.is_null() {
        return None;
    }
    Some(string(jni, msg.get(), agent.options.strings).0)
}
