//! Dense ids and the vectors they index.
//!
//! Every simulated object (task, CPU, lock, folio, VMA, ...) is named by a `u32` index into an
//! `IdVec` owned by its subsystem. Dense ids keep state compact and iteration ordered, which is
//! what determinism needs (no pointer or hash order ever decides anything).

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// A dense index type (see [`define_id!`](crate::define_id)).
pub trait Id: Copy + Eq + Ord + fmt::Debug {
    fn from_index(index: usize) -> Self;
    fn index(self) -> usize;
}

/// Defines a `u32` id newtype implementing [`Id`].
#[macro_export]
macro_rules! define_id {
    ($(#[$meta:meta])* $vis:vis struct $name:ident;) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis struct $name(pub u32);

        impl $crate::id::Id for $name {
            fn from_index(index: usize) -> Self {
                $name(u32::try_from(index).expect(concat!(stringify!($name), " overflow")))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

/// A vector indexed by an id type.
#[derive(Clone, PartialEq, Eq)]
pub struct IdVec<I, T> {
    raw: Vec<T>,
    _id: PhantomData<fn(I)>,
}

impl<I: Id, T> IdVec<I, T> {
    pub const fn new() -> Self {
        IdVec { raw: Vec::new(), _id: PhantomData }
    }

    /// A vector holding `value` under the first id.
    pub fn with_first(value: T) -> Self {
        IdVec { raw: vec![value], _id: PhantomData }
    }

    /// Appends `value` and returns its id.
    pub fn push(&mut self, value: T) -> I {
        let id = I::from_index(self.raw.len());
        self.raw.push(value);
        id
    }

    pub fn len(&self) -> usize {
        self.raw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    pub fn get(&self, id: I) -> Option<&T> {
        self.raw.get(id.index())
    }

    pub fn get_mut(&mut self, id: I) -> Option<&mut T> {
        self.raw.get_mut(id.index())
    }

    pub fn iter(&self) -> impl Iterator<Item = (I, &T)> {
        self.raw.iter().enumerate().map(|(i, v)| (I::from_index(i), v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (I, &mut T)> {
        self.raw.iter_mut().enumerate().map(|(i, v)| (I::from_index(i), v))
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.raw.iter()
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.raw.iter_mut()
    }

    pub fn ids(&self) -> impl Iterator<Item = I> + use<I, T> {
        (0..self.raw.len()).map(I::from_index)
    }
}

impl<I: Id, T> Default for IdVec<I, T> {
    fn default() -> Self {
        IdVec::new()
    }
}

impl<I: Id, T> Index<I> for IdVec<I, T> {
    type Output = T;
    fn index(&self, id: I) -> &T {
        &self.raw[id.index()]
    }
}

impl<I: Id, T> IndexMut<I> for IdVec<I, T> {
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.raw[id.index()]
    }
}

impl<I: Id, T: fmt::Debug> fmt::Debug for IdVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    define_id!(
        struct ThingId;
    );

    #[test]
    fn push_and_index() {
        let mut v: IdVec<ThingId, &str> = IdVec::new();
        let a = v.push("a");
        let b = v.push("b");
        assert_eq!((a, b), (ThingId(0), ThingId(1)));
        v[b] = "B";
        assert_eq!(v.iter().map(|(i, s)| format!("{i}{s}")).collect::<Vec<_>>(), ["0a", "1B"]);
        assert_eq!(v.get(ThingId(2)), None);
    }
}
