//! The measurements' buffer: owned, or a caller's slice read in place.
//!
//! Written by hand because the view must carry no lifetime: `Measurements<T>` is the
//! type every entry point takes, and a lifetime parameter on it would reach every
//! signature of the crate for the one caller (the Python package) that lends memory.
//! The borrowed form is only ever made by `Measurements::view`, which bounds its use by
//! a closure.

use std::fmt;
use std::ops::Deref;

pub(crate) enum Store<T> {
    Owned(Vec<T>),
    /// A caller's slice, valid for the whole life of this value (see `borrowed`).
    Borrowed {
        ptr: *const T,
        len: usize,
    },
}

// SAFETY: a borrowed store is a shared slice (`&[T]`), which is Send and Sync exactly
// when `T: Sync`; nothing writes through it.
unsafe impl<T: Sync> Send for Store<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Store<T> {}

impl<T: Clone> Store<T> {
    /// # Safety
    /// `data` must stay valid and unwritten for the whole life of the returned value.
    pub(crate) unsafe fn borrowed(data: &[T]) -> Self {
        Store::Borrowed {
            ptr: data.as_ptr(),
            len: data.len(),
        }
    }

    /// The buffer as an owned vector (a copy when borrowed).
    pub(crate) fn into_vec(self) -> Vec<T> {
        match self {
            Store::Owned(v) => v,
            Store::Borrowed { .. } => self.to_vec(),
        }
    }

    /// The buffer, writable: a borrowed one is copied first.
    pub(crate) fn make_mut(&mut self) -> &mut [T] {
        if let Store::Borrowed { .. } = self {
            *self = Store::Owned(self.to_vec());
        }
        match self {
            Store::Owned(v) => v,
            Store::Borrowed { .. } => unreachable!("made owned above"),
        }
    }
}

impl<T> Deref for Store<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Store::Owned(v) => v,
            // SAFETY: the contract of `borrowed`.
            Store::Borrowed { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl<T: Clone> Clone for Store<T> {
    /// Always an owned copy: a clone must not outlive the borrowed slice.
    fn clone(&self) -> Self {
        Store::Owned(self.to_vec())
    }
}

impl<T: PartialEq> PartialEq for Store<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: fmt::Debug> fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use crate::data::Measurements;

    #[test]
    fn a_view_reads_the_callers_slice_and_a_clone_owns_a_copy() {
        let v: Vec<f64> = (0..24).map(|i| i as f64 * 0.5).collect();
        let owned = Measurements::in_place(3, 4, 2, &v, |z| {
            assert_eq!(z.data().as_ptr(), v.as_ptr(), "read in place");
            assert_eq!(z.at(2, 1), &[9.0, 9.5]);
            let c = z.clone();
            assert_ne!(c.data().as_ptr(), v.as_ptr(), "a clone owns its buffer");
            assert_eq!(&c, z);
            c
        })
        .expect("consistent shape");
        assert_eq!(owned.into_data(), v);
        assert!(Measurements::in_place(3, 4, 3, &v, |_| ()).is_err());
    }
}
