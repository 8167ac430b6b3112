//! What can go wrong reading a class file, and the internal error type of the
//! bytecode passes.
//!
//! A class file reaches the rewriter from ClassFileLoadHook before the JVM
//! has checked anything, so every structural problem is an ordinary error
//! value that names where it was found. Inside one method the passes report
//! a [`CodeError`], which says whether the code is broken (the class is
//! rejected) or merely uses something this rewriter does not handle (the
//! method is left alone and the rest of the class is still instrumented).

/// A class file that cannot be rewritten because it is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// The first four bytes are not `0xCAFEBABE`.
    #[error("not a class file: magic is {0:#010x}, expected 0xcafebabe")]
    BadMagic(u32),
    /// The file ends inside a structure.
    #[error("class file truncated at byte {offset} while reading {context}")]
    Truncated {
        /// Byte offset in the class file where more data was needed.
        offset: usize,
        /// The structure being read.
        context: &'static str,
    },
    /// Bytes follow the last class attribute.
    #[error("{len} bytes of trailing data after the class file")]
    TrailingBytes {
        /// How many bytes follow the class file proper.
        len: usize,
    },
    /// A constant pool entry is of an unknown kind or is referred to as
    /// something it is not.
    #[error("constant pool entry #{index}: {reason}")]
    BadConstant {
        /// Index of the entry.
        index: u16,
        /// What is wrong with it.
        reason: String,
    },
    /// A structure outside method code is inconsistent.
    #[error("{context}: {reason}")]
    Malformed {
        /// The structure, e.g. `method foo(I)V` or `attribute Code`.
        context: String,
        /// What is wrong with it.
        reason: String,
    },
    /// [`HookConfig::probe_class`](crate::HookConfig::probe_class) is not a
    /// class name in internal form (`vmview/Probe`).
    #[error("probe class {name:?} is not an internal class name like vmview/Probe")]
    InvalidProbeClass {
        /// The name given.
        name: String,
    },
    /// The code of one method is not valid bytecode.
    #[error("method {method}: bytecode at pc {pc}: {reason}")]
    BadCode {
        /// `name` and descriptor of the method, e.g. `run()V`.
        method: String,
        /// Offset of the offending instruction or table entry.
        pc: u32,
        /// What is wrong with it.
        reason: String,
    },
}

/// Whether a [`CodeError`] means broken input or a limitation of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CodeErrorKind {
    /// The bytecode is invalid; the JVM would reject it too.
    Malformed,
    /// Valid bytecode that this rewriter does not transform.
    Unsupported,
}

/// A problem found while analysing or rewriting one method's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CodeError {
    pub kind: CodeErrorKind,
    pub pc: u32,
    pub reason: String,
}

impl CodeError {
    pub fn malformed(pc: u32, reason: impl Into<String>) -> Self {
        CodeError {
            kind: CodeErrorKind::Malformed,
            pc,
            reason: reason.into(),
        }
    }

    pub fn unsupported(pc: u32, reason: impl Into<String>) -> Self {
        CodeError {
            kind: CodeErrorKind::Unsupported,
            pc,
            reason: reason.into(),
        }
    }
}

impl From<RewriteError> for CodeError {
    /// Constant-pool problems met while reading code make the code invalid.
    fn from(e: RewriteError) -> Self {
        CodeError::malformed(0, e.to_string())
    }
}
