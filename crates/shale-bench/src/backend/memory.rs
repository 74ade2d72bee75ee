//! `memory`: an ordered map behind a reader-writer lock. It tests the harness (every workload
//! runs against it in the test suite) and gives the harness's own overhead as a floor.

use super::{Backend, Settle, Statistics, DISK_USAGE_STAT};
use crate::error::Result;
use crate::props::{PropSpec, Properties};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;

/// The memory backend has no properties.
pub(super) static PROPS: &[PropSpec] = &[];

/// See the module documentation.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemoryBackend {
    /// An empty map.
    pub fn open(_props: &Properties) -> Result<MemoryBackend> {
        Ok(MemoryBackend::default())
    }
}

impl Backend for MemoryBackend {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map.read().get(key).cloned())
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let map = self.map.read();
        let mut n = 0;
        for (k, v) in map
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .take(count)
        {
            visit(k, v);
            n += 1;
        }
        Ok(n)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map.write().insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.insert(key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.map.write().remove(key);
        Ok(())
    }

    fn statistics(&self) -> Result<Statistics> {
        let map = self.map.read();
        let mut s = Statistics::default();
        s.set_gauge("memory.keys", map.len() as u64);
        s.set_gauge(
            "memory.bytes",
            map.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum(),
        );
        s.set_gauge(DISK_USAGE_STAT, 0);
        Ok(s)
    }

    fn settle(&self, _timeout: std::time::Duration) -> Result<Settle> {
        Ok(Settle::Settled(std::time::Duration::ZERO))
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}
