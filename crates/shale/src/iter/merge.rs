//! The merging iterator: one cursor over the union of several sorted cursors.
//!
//! Purpose: reads see memtables, L0 tables and levels as one sorted stream. [`MergingIterator`]
//! keeps its valid children in a binary heap of child indices, ordered by the children's current
//! keys: a min-heap while moving forward, a max-heap while moving backward. The top of the heap is
//! the current entry. A step moves only the current child and restores the heap with one sift
//! (`O(log n)` comparisons); it never allocates.
//!
//! Invariants:
//! - Children never hold the same internal key (sequence numbers are unique per user key and a
//!   memtable and the table flushed from it are never merged together).
//! - Moving forward, every valid child sits on its first entry `>=` the current key; moving
//!   backward, on its last entry `<=` the current key. A direction switch re-establishes this by
//!   seeking every non-current child relative to the current key (a copy of it is kept in a
//!   reused buffer), which costs one seek per child.
//! - The first child error is sticky: the merge turns invalid, `status()` returns the error, and
//!   later positioning calls leave it invalid.
//!
//! Concurrency: a `MergingIterator` is owned by one thread at a time (`Send`, not shared). Children
//! over a memtable may see entries inserted after they were created; such entries keep the order
//! intact (they appear in their sorted place) and readers filter them out by sequence number.

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::compare_internal;
use std::cmp::Ordering;

/// Which way the merge is moving; decides the heap order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// A cursor over the union of its children, in [`compare_internal`] order, both directions.
pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    // INVARIANT: exactly the indices of the valid children, heap-ordered for `direction`
    // (smallest key on top forward, largest backward). `heap[0]` is the current child.
    // Empty when `err` is set.
    heap: Vec<usize>,
    direction: Direction,
    err: Option<Error>,
    // The current key, copied before a direction switch moves the children. Reused.
    scratch: Vec<u8>,
}

impl MergingIterator {
    /// A merge over `children`. The merge starts unpositioned (invalid); the children may be
    /// in any position, every seek repositions all of them.
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIterator {
        let n = children.len();
        MergingIterator {
            children,
            heap: Vec::with_capacity(n),
            direction: Direction::Forward,
            err: None,
            scratch: Vec::new(),
        }
    }

    /// True when child `a` comes before child `b` in the current direction.
    #[inline]
    fn before(&self, a: usize, b: usize) -> bool {
        let ord = compare_internal(self.children[a].key(), self.children[b].key());
        match self.direction {
            Direction::Forward => ord == Ordering::Less,
            Direction::Backward => ord == Ordering::Greater,
        }
    }

    /// Moves `heap[pos]` down until both of its heap children come after it.
    fn sift_down(&mut self, mut pos: usize) {
        let len = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                return;
            }
            let right = left + 1;
            let mut best = left;
            if right < len && self.before(self.heap[right], self.heap[left]) {
                best = right;
            }
            if !self.before(self.heap[best], self.heap[pos]) {
                return;
            }
            self.heap.swap(pos, best);
            pos = best;
        }
    }

    /// Records the first error and turns the merge invalid.
    fn fail(&mut self, err: Error) {
        if self.err.is_none() {
            self.err = Some(err);
        }
        self.heap.clear();
    }

    /// Rebuilds the heap from scratch after every child was repositioned.
    fn rebuild(&mut self, direction: Direction) {
        self.direction = direction;
        self.heap.clear();
        if self.err.is_some() {
            return;
        }
        for i in 0..self.children.len() {
            let child = &self.children[i];
            if child.valid() {
                self.heap.push(i);
            } else if let Err(e) = child.status() {
                self.fail(e);
                return;
            }
        }
        for pos in (0..self.heap.len() / 2).rev() {
            self.sift_down(pos);
        }
    }

    /// Restores the heap after the current child (`heap[0]`) moved one step.
    fn fix_top(&mut self) {
        let cur = self.heap[0];
        if self.children[cur].valid() {
            self.sift_down(0);
            return;
        }
        if let Err(e) = self.children[cur].status() {
            self.fail(e);
            return;
        }
        self.heap.swap_remove(0);
        if !self.heap.is_empty() {
            self.sift_down(0);
        }
    }

    /// Switches from backward to forward: every other child moves to its first entry after the
    /// current key, then the current child steps forward.
    fn switch_to_forward(&mut self) {
        let cur = self.heap[0];
        self.scratch.clear();
        self.scratch.extend_from_slice(self.children[cur].key());
        for i in 0..self.children.len() {
            if i == cur {
                continue;
            }
            let child = &mut self.children[i];
            child.seek(&self.scratch);
            // Defensive: with the no-duplicates invariant this never triggers, but it keeps
            // the switch strictly past the current key if it ever were broken.
            if child.valid() && compare_internal(child.key(), &self.scratch) == Ordering::Equal {
                child.next();
            }
        }
        self.children[cur].next();
        self.rebuild(Direction::Forward);
    }

    /// Switches from forward to backward: every other child moves to its last entry before the
    /// current key, then the current child steps backward.
    fn switch_to_backward(&mut self) {
        let cur = self.heap[0];
        self.scratch.clear();
        self.scratch.extend_from_slice(self.children[cur].key());
        for i in 0..self.children.len() {
            if i == cur {
                continue;
            }
            let child = &mut self.children[i];
            child.seek_for_prev(&self.scratch);
            if child.valid() && compare_internal(child.key(), &self.scratch) == Ordering::Equal {
                child.prev();
            }
        }
        self.children[cur].prev();
        self.rebuild(Direction::Backward);
    }

    /// Applies `position` to every child, then rebuilds the heap for `direction`.
    fn reposition(&mut self, direction: Direction, position: impl Fn(&mut dyn InternalIterator)) {
        if self.err.is_some() {
            return;
        }
        for child in &mut self.children {
            position(child.as_mut());
        }
        self.rebuild(direction);
    }
}

impl InternalIterator for MergingIterator {
    #[inline]
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        self.reposition(Direction::Forward, |c| c.seek_to_first());
    }

    fn seek_to_last(&mut self) {
        self.reposition(Direction::Backward, |c| c.seek_to_last());
    }

    fn seek(&mut self, target: &[u8]) {
        self.reposition(Direction::Forward, |c| c.seek(target));
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.reposition(Direction::Backward, |c| c.seek_for_prev(target));
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid MergingIterator");
        if self.heap.is_empty() {
            return;
        }
        match self.direction {
            Direction::Forward => {
                let cur = self.heap[0];
                self.children[cur].next();
                self.fix_top();
            }
            Direction::Backward => self.switch_to_forward(),
        }
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid MergingIterator");
        if self.heap.is_empty() {
            return;
        }
        match self.direction {
            Direction::Backward => {
                let cur = self.heap[0];
                self.children[cur].prev();
                self.fix_top();
            }
            Direction::Forward => self.switch_to_backward(),
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.children[self.heap[0]].key()
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.children[self.heap[0]].value()
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
