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
}

/// One symbol record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Symbol {
    String { id: StringId, text: String },
    Method(MethodSymbol),
    Thread(ThreadSymbol),
    Stack(StackSymbol),
}
