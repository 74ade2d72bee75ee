//! Size classes: slot sizes growing by a constant factor, memcached's way.

/// Smallest slot: a 32-byte header and 16 bytes of key and value (an 8-byte key and value).
pub const MIN_SLOT: usize = 48;

/// Default growth from one class to the next. Mega-KV used 2 with 8 classes (25% of each slot
/// wasted on average), memcached uses 1.25 (11%); 1.1 wastes about 5%, which is more items, so
/// more hits, at equal memory. The price of more classes, memory spread thin over classes that
/// no longer get items, is paid back by moving pages between classes (`rebalance`).
pub const DEFAULT_GROWTH: f64 = 1.1;

/// Slot sizes are multiples of this, so item headers stay aligned.
pub const SLOT_ALIGN: usize = 8;

/// The slot sizes of a cache, smallest first; the last equals the page size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classes {
    sizes: Vec<usize>,
}

impl Classes {
    /// Classes from [`MIN_SLOT`] growing by `growth` (clamped to at least 1.05) up to `page`.
    pub fn new(page: usize, growth: f64) -> Classes {
        let growth = if growth.is_finite() {
            growth.max(1.05)
        } else {
            DEFAULT_GROWTH
        };
        let mut sizes = Vec::new();
        let mut size = MIN_SLOT;
        while size < page {
            sizes.push(size);
            let next = ((size as f64 * growth) as usize).next_multiple_of(SLOT_ALIGN);
            size = next.max(size + SLOT_ALIGN);
            // Above half a page a slot would waste most of the page: jump to a whole page.
            if size > page / 2 {
                break;
            }
        }
        sizes.push(page);
        Classes { sizes }
    }

    /// How many classes.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether there are none (never).
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// Slot size of class `class`.
    #[inline]
    pub fn size(&self, class: usize) -> usize {
        self.sizes[class]
    }

    /// The smallest class whose slots hold `len` bytes, if any.
    #[inline]
    pub fn for_len(&self, len: usize) -> Option<usize> {
        let class = self.sizes.partition_point(|&s| s < len);
        (class < self.sizes.len()).then_some(class)
    }

    /// Every slot size.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_grow_and_end_at_the_page() {
        let classes = Classes::new(1 << 20, DEFAULT_GROWTH);
        assert_eq!(classes.size(0), MIN_SLOT);
        assert_eq!(*classes.sizes().last().unwrap(), 1 << 20);
        assert!(classes.sizes().windows(2).all(|w| w[0] < w[1]));
        assert!(classes.sizes().iter().all(|s| s % SLOT_ALIGN == 0));
        assert!(
            classes.len() > 60 && classes.len() < 128,
            "{}",
            classes.len()
        );
        assert_eq!(classes.for_len(1), Some(0));
        assert_eq!(classes.for_len(MIN_SLOT), Some(0));
        assert_eq!(classes.for_len(MIN_SLOT + 1), Some(1));
        assert_eq!(classes.for_len(1 << 20), Some(classes.len() - 1));
        assert_eq!(classes.for_len((1 << 20) + 1), None);
    }
}
