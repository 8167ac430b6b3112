//! Storage for things keyed by a symbol handle.
//!
//! Producers hand out dense handles (0, 1, 2 …), so a vector indexed by
//! handle is the fast and compact choice. But handles come from the
//! producer or, on the reading side, from an untrusted file: a single
//! record with handle 4 000 000 000 must not allocate gigabytes. [`Slots`]
//! therefore keeps a vector whose length stays within a constant factor of
//! the number of entries it holds and puts outliers in a hash map.

use std::collections::HashMap;

/// Entries the vector may hold beyond twice its occupied count.
const DENSE_SLACK: usize = 4096;

#[derive(Debug, Clone)]
pub(crate) struct Slots<T> {
    dense: Vec<Option<T>>,
    /// Occupied entries of `dense`.
    filled: usize,
    sparse: HashMap<u32, T>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            dense: Vec::new(),
            filled: 0,
            sparse: HashMap::new(),
        }
    }
}

impl<T> Slots<T> {
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        match self.dense.get(id as usize) {
            Some(Some(x)) => Some(x),
            _ if self.sparse.is_empty() => None,
            _ => self.sparse.get(&id),
        }
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        match self.dense.get_mut(id as usize) {
            Some(Some(x)) => Some(x),
            _ if self.sparse.is_empty() => None,
            _ => self.sparse.get_mut(&id),
        }
    }

    pub(crate) fn insert(&mut self, id: u32, x: T) {
        let i = id as usize;
        if i >= self.dense.len() && i <= self.filled * 2 + DENSE_SLACK {
            self.dense.resize_with(i + 1, || None);
        }
        match self.dense.get_mut(i) {
            Some(slot) => {
                if slot.is_none() {
                    self.filled += 1;
                }
                *slot = Some(x);
                if !self.sparse.is_empty() {
                    self.sparse.remove(&id);
                }
            }
            None => {
                self.sparse.insert(id, x);
            }
        }
    }

    /// Moves every entry out, with its handle.
    pub(crate) fn drain(self, mut f: impl FnMut(u32, T)) {
        for (i, x) in self.dense.into_iter().enumerate() {
            if let Some(x) = x {
                f(i as u32, x);
            }
        }
        for (i, x) in self.sparse {
            f(i, x);
        }
    }

    /// Calls `f` on every entry.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        self.dense.iter_mut().flatten().for_each(&mut f);
        self.sparse.values_mut().for_each(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_ids_stay_in_the_vector() {
        let mut s = Slots::default();
        for i in 0..10_000u32 {
            s.insert(i, i * 2);
        }
        assert!(s.sparse.is_empty());
        assert_eq!(s.get(9_999), Some(&19_998));
        assert_eq!(s.get(10_000), None);
    }

    #[test]
    fn huge_ids_do_not_allocate_huge_vectors() {
        let mut s = Slots::default();
        let mut id = 4096u32;
        for _ in 0..20 {
            s.insert(id, id);
            id = id.saturating_mul(3);
        }
        s.insert(u32::MAX, 7);
        assert!(
            s.dense.len() <= 2 * 21 + DENSE_SLACK + 1,
            "{}",
            s.dense.len()
        );
        assert_eq!(s.get(u32::MAX), Some(&7));
        assert_eq!(s.get(4096), Some(&4096));
    }

    #[test]
    fn an_id_moved_from_the_map_into_the_vector_is_found_once() {
        let mut s = Slots::default();
        s.insert(5000, 1);
        assert_eq!(s.get(5000), Some(&1));
        for i in 0..5000 {
            s.insert(i, 0);
        }
        assert_eq!(s.get(5000), Some(&1), "still found in the map");
        s.insert(5000, 2);
        assert_eq!(s.get(5000), Some(&2));
        assert!(s.sparse.is_empty());
    }
}
