//! Symbol records (the IBM patents' "correlation records"): the names that
//! events refer to by handle, and the table that resolves them.

use crate::event::{Loc, MethodId, StackId, StringId, ThreadRef};

/// A method: its class, name, JVM descriptor and parameter names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodSymbol {
    pub id: MethodId,
    /// Dotted binary class name (`shop.Inventory$Clerk`).
    pub class: StringId,
    /// Method name (`<init>`, `<clinit>` included).
    pub name: StringId,
    /// JVM descriptor, e.g. `(ILjava/lang/String;)V`.
    pub sig: StringId,
    /// Parameter names, `this` excluded: from the LocalVariableTable when
    /// the class has one, else `arg0`, `arg1` …; one per descriptor parameter.
    pub param_names: Vec<StringId>,
    /// JVM access flags (static, synchronized, native …).
    pub modifiers: u16,
}

/// A thread as it was when first seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSymbol {
    pub id: ThreadRef,
    /// `Thread.getId()`; -1 when unknown (a VM-internal thread).
    pub java_id: i64,
    pub name: StringId,
    pub group: StringId,
    pub priority: i32,
    pub daemon: bool,
}

/// A stack trace, interned once so that samples refer to it by handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSymbol {
    pub id: StackId,
    /// Frames, top (innermost) first, stack base last.
    pub frames: Vec<(MethodId, Loc)>,
    /// How each frame ran, one per frame in the same order; empty when no
    /// frame's type is known (every frame [`FrameType::Unknown`]).
    pub types: Vec<FrameType>,
}

impl StackSymbol {
    /// How frame `i` (top first) ran.
    pub fn frame_type(&self, i: usize) -> FrameType {
        self.types.get(i).copied().unwrap_or(FrameType::Unknown)
    }
}

/// How a sampled frame ran when the sample was taken, as far as the
/// sampler could tell ([`StackSymbol::types`]; docs/SAMPLING.md says what
/// each is based on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum FrameType {
    /// Not known (every frame of a safepoint sample that is not native,
    /// the frames below the top compiled or interpreted one).
    #[default]
    Unknown = 0,
    /// Run by the bytecode interpreter.
    Interpreted = 1,
    /// JIT-compiled code of this method, the frame the code belongs to.
    Compiled = 2,
    /// Inlined by the JIT into the compiled frame below it.
    Inlined = 3,
    /// A native method.
    Native = 4,
}

impl FrameType {
    /// The wire byte.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The type of a wire byte, if it is one.
    pub fn from_code(code: u8) -> Option<FrameType> {
        Some(match code {
            0 => FrameType::Unknown,
            1 => FrameType::Interpreted,
            2 => FrameType::Compiled,
            3 => FrameType::Inlined,
            4 => FrameType::Native,
            _ => return None,
        })
    }

    /// The name the text, JSON and XML outputs use (`unknown`,
    /// `interpreted`, `compiled`, `inlined`, `native`).
    pub fn name(self) -> &'static str {
        match self {
            FrameType::Unknown => "unknown",
            FrameType::Interpreted => "interpreted",
            FrameType::Compiled => "compiled",
            FrameType::Inlined => "inlined",
            FrameType::Native => "native",
        }
    }

    /// The type named `name` ([`FrameType::name`]).
    pub fn from_name(name: &str) -> Option<FrameType> {
        [
            FrameType::Unknown,
            FrameType::Interpreted,
            FrameType::Compiled,
            FrameType::Inlined,
            FrameType::Native,
        ]
        .into_iter()
        .find(|t| t.name() == name)
    }
}

/// One symbol record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Symbol {
    String { id: StringId, text: String },
    Method(MethodSymbol),
    Thread(ThreadSymbol),
    Stack(StackSymbol),
}
