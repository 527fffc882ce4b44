//! [`PagedVec`]: a growable array kept in pages of [`PAGE`] elements, for the per-connection
//! tables that only ever grow at their end and are indexed by slot number (the live-client
//! registry's shards, the parking's slots, the keep-alive roster's shards).
//!
//! A `Vec` doubles its capacity when full, so a table of one entry per connection holds up to
//! twice the room its connections need: 19,500 connections held 32,768 slots' worth, 67 bytes a
//! connection for a 40-byte slot (docs/benchmarks.md, "Session 20"). Here only the last page
//! grows (doubling, as a `Vec` does, up to [`PAGE`] elements); every earlier page is full. The
//! unused room is at most half a page, and growing never moves the elements already stored
//! (no copy of a large table under its lock).

/// Elements per page (a power of two, so a page's `Vec` reaches it exactly by doubling).
pub const PAGE: usize = 256;

/// A growable array in pages of [`PAGE`] elements; see the module doc.
#[derive(Debug)]
pub struct PagedVec<T> {
    /// Every page but the last holds exactly [`PAGE`] elements.
    pages: Vec<Vec<T>>,
}

impl<T> Default for PagedVec<T> {
    fn default() -> Self {
        PagedVec { pages: Vec::new() }
    }
}

impl<T> PagedVec<T> {
    /// How many elements there are.
    pub fn len(&self) -> usize {
        self.pages
            .last()
            .map_or(0, |last| (self.pages.len() - 1) * PAGE + last.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Appends `value`; returns its index.
    pub fn push(&mut self, value: T) -> usize {
        match self.pages.last_mut() {
            Some(page) if page.len() < PAGE => page.push(value),
            _ => self.pages.push(vec![value]),
        }
        self.len() - 1
    }

    /// The element at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.pages.get(index / PAGE)?.get(index % PAGE)
    }

    /// The element at `index`, if there is one.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.pages.get_mut(index / PAGE)?.get_mut(index % PAGE)
    }

    /// Every element, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.pages.iter().flatten()
    }

    /// Every element, in index order, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.pages.iter_mut().flatten()
    }

    /// Elements' room held, used or not (the bound in the module doc).
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.pages.iter().map(Vec::capacity).sum()
    }
}

impl<T> std::ops::Index<usize> for PagedVec<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        &self.pages[index / PAGE][index % PAGE]
    }
}

impl<T> std::ops::IndexMut<usize> for PagedVec<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.pages[index / PAGE][index % PAGE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_every_element_where_it_was_pushed() {
        let mut v = PagedVec::default();
        assert!(v.is_empty());
        for i in 0..(3 * PAGE + 7) {
            assert_eq!(v.push(i * 10), i);
        }
        assert_eq!(v.len(), 3 * PAGE + 7);
        for i in 0..v.len() {
            assert_eq!(v[i], i * 10);
            assert_eq!(v.get(i), Some(&(i * 10)));
        }
        assert_eq!(v.get(v.len()), None);
        v[PAGE] = 1;
        *v.get_mut(PAGE + 1).expect("there") = 2;
        assert_eq!((v[PAGE], v[PAGE + 1]), (1, 2));
        let all: Vec<usize> = v.iter().copied().collect();
        assert_eq!(all.len(), v.len());
        assert_eq!(all[PAGE - 1], (PAGE - 1) * 10);
        v.iter_mut().for_each(|e| *e += 1);
        assert_eq!(
            (v[0], v[PAGE], v[v.len() - 1]),
            (1, 2, (3 * PAGE + 6) * 10 + 1)
        );
    }

    #[test]
    fn holds_at_most_half_a_page_of_room_beyond_its_elements() {
        let mut v = PagedVec::default();
        for n in 1..=(5 * PAGE) {
            v.push(0u64);
            let room = v.capacity() - v.len();
            assert!(
                room <= PAGE / 2,
                "{room} unused at {n} elements, capacity {}",
                v.capacity()
            );
        }
    }
}
