//! Recycled batch buffers.
//!
//! A batch of 64 images at 224 px is 38.5 MB of `f32`. Allocated fresh for
//! every batch it comes from `mmap` each time, and the kernel then faults in
//! and zeroes all 9400 of its pages as the decoder writes them: about a tenth
//! of the decode threads' time in profiles. Instead a batch's buffer goes
//! back to its loader's [`BufferPool`] when the batch (or the numpy array
//! made from it) is dropped, and the next batch is decoded into it.
//!
//! Every byte of a reused buffer is overwritten before it is handed out
//! again, so nothing of an earlier batch shows through.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, Weak};

/// Free buffers of one loader, at most `keep` of them.
#[derive(Debug)]
struct Shelf<T> {
    free: Mutex<Vec<Vec<T>>>,
    keep: usize,
}

/// Hands out batch buffers, reusing those of dropped batches.
#[derive(Debug)]
pub struct BufferPool<T> {
    shelf: Arc<Shelf<T>>,
}

impl<T: Copy + Default> BufferPool<T> {
    /// A pool that keeps up to `keep` free buffers; more are freed.
    pub fn new(keep: usize) -> Self {
        Self {
            shelf: Arc::new(Shelf {
                free: Mutex::new(Vec::with_capacity(keep)),
                keep,
            }),
        }
    }

    /// A buffer of `len` elements whose contents are unspecified (a reused
    /// buffer holds an earlier batch): the caller overwrites all of it.
    pub fn take(&self, len: usize) -> Buffer<T> {
        let reused = self.shelf.free.lock().ok().and_then(|mut free| free.pop());
        let data = match reused {
            Some(mut data) => {
                data.resize(len, T::default());
                data
            }
            // Zeroed pages straight from the kernel: no pass over them here.
            None => vec![T::default(); len],
        };
        Buffer {
            data,
            home: Arc::downgrade(&self.shelf),
        }
    }

    /// Free buffers held now.
    pub fn free(&self) -> usize {
        self.shelf.free.lock().map_or(0, |free| free.len())
    }
}

/// A batch's image buffer: a `Vec` that returns to its pool when dropped.
pub struct Buffer<T> {
    data: Vec<T>,
    home: Weak<Shelf<T>>,
}

impl<T> Buffer<T> {
    /// A buffer that belongs to no pool.
    pub fn unpooled(data: Vec<T>) -> Self {
        Self {
            data,
            home: Weak::new(),
        }
    }

    /// Keeps the first `len` elements.
    pub fn truncate(&mut self, len: usize) {
        self.data.truncate(len);
    }

    /// The data, taken out of the pool's reach.
    pub fn into_vec(mut self) -> Vec<T> {
        self.home = Weak::new();
        std::mem::take(&mut self.data)
    }
}

impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        let Some(shelf) = self.home.upgrade() else {
            return;
        };
        // try_lock: a buffer dropped in a forked child must not wait for a
        // lock a thread of the parent held at fork(); it is simply freed.
        if let Ok(mut free) = shelf.free.try_lock() {
            if free.len() < shelf.keep {
                free.push(std::mem::take(&mut self.data));
            }
        };
    }
}

impl<T> Deref for Buffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data
    }
}

impl<T> DerefMut for Buffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
}

impl<T: Clone> Clone for Buffer<T> {
    /// A copy that belongs to no pool.
    fn clone(&self) -> Self {
        Self::unpooled(self.data.clone())
    }
}

impl<T: PartialEq> PartialEq for Buffer<T> {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data
    }
}

impl<T> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} elements)", self.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_is_reused_up_to_the_bound() {
        let pool = BufferPool::<f32>::new(1);
        let mut a = pool.take(1000);
        a[999] = 7.0;
        let ptr = a.as_ptr();
        let b = pool.take(1000);
        drop(a);
        drop(b); // beyond `keep`: freed
        assert_eq!(pool.free(), 1);
        let again = pool.take(1000);
        assert_eq!(again.as_ptr(), ptr, "the first dropped buffer came back");
        assert_eq!(again.len(), 1000);
        assert_eq!(pool.free(), 0);
        // A shorter batch (the epoch's last) reuses it too, at its length.
        drop(again);
        assert_eq!(pool.take(10).len(), 10);
    }

    #[test]
    fn buffers_outliving_their_pool_and_copies_are_simply_freed() {
        let pool = BufferPool::<u8>::new(4);
        let a = pool.take(16);
        let copy = a.clone();
        assert_eq!(copy, a);
        drop(pool);
        drop(a);
        drop(copy);
        let owned = BufferPool::<u8>::new(4).take(3).into_vec();
        assert_eq!(owned, vec![0u8; 3]);
    }
}
