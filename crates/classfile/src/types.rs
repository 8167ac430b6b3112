//! Verification types (JVMS §4.10.1.2) and the class names they refer to.
//!
//! Stack-map frames name classes by constant-pool index, but the types the
//! rewriter derives itself (parameter types of the implicit first frame,
//! results of field reads and calls in a simulated block) come from
//! descriptors and may have no `CONSTANT_Class` yet. Both are interned here
//! by name, so equal types compare equal whatever index they came from, and
//! a pool entry is created only when a frame that mentions a new name is
//! actually written.

use crate::constant_pool::{ConstantPool, PoolFull};
use crate::error::RewriteError;
use rustc_hash::FxHashMap;

/// An interned class name (internal form, or an array descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClassId(u32);

/// A verification type. Long and double are one entry here; where slots
/// matter (operand stack and locals during simulation) they are followed by
/// a `Top` for their second half.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum VType {
    Top,
    Integer,
    Float,
    Long,
    Double,
    Null,
    UninitializedThis,
    Object(ClassId),
    /// An object created by the `new` at this code offset, not yet
    /// initialised.
    Uninitialized(u32),
}

impl VType {
    pub fn is_category2(self) -> bool {
        matches!(self, VType::Long | VType::Double)
    }
}

/// Interns class names and remembers their constant-pool entries.
#[derive(Default)]
pub(crate) struct ClassNames {
    names: Vec<Vec<u8>>,
    pool_index: Vec<Option<u16>>,
    by_name: FxHashMap<Vec<u8>, ClassId>,
    by_pool_index: FxHashMap<u16, ClassId>,
}

impl ClassNames {
    pub fn intern(&mut self, name: &[u8]) -> ClassId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = ClassId(self.names.len() as u32);
        self.names.push(name.to_vec());
        self.pool_index.push(None);
        self.by_name.insert(name.to_vec(), id);
        id
    }

    /// The class named by the `CONSTANT_Class` at `index`.
    pub fn class_from_pool(
        &mut self,
        pool: &ConstantPool,
        index: u16,
    ) -> Result<ClassId, RewriteError> {
        if let Some(&id) = self.by_pool_index.get(&index) {
            return Ok(id);
        }
        let id = self.intern(pool.class_name(index)?);
        self.by_pool_index.insert(index, id);
        let slot = &mut self.pool_index[id.0 as usize];
        if slot.is_none() {
            *slot = Some(index);
        }
        Ok(id)
    }

    pub fn name(&self, id: ClassId) -> &[u8] {
        self.names
            .get(id.0 as usize)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// A `CONSTANT_Class` index for `id`, adding one if needed.
    pub fn pool_index(&mut self, id: ClassId, pool: &mut ConstantPool) -> Result<u16, PoolFull> {
        let i = id.0 as usize;
        if let Some(Some(index)) = self.pool_index.get(i) {
            return Ok(*index);
        }
        let index = pool.class_index(self.name(id))?;
        self.pool_index[i] = Some(index);
        self.by_pool_index.insert(index, id);
        Ok(index)
    }
}
