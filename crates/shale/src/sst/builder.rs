//! Writing an SST: [`TableBuilder`] turns a sorted stream of internal keys into data blocks, a
//! bloom filter, a properties block, an index block and a footer.
//!
//! Invariants: keys arrive in strictly increasing [`compare_internal`] order (checked: an
//! out-of-order key is an `InvalidArgument` error, not a corrupt file); blocks are written back to
//! back from offset 0 so that every byte of the file belongs to a checksummed block or the footer.
//!
//! Concurrency: a builder has one owner (a flush or a compaction).

use super::block::BlockBuilder;
use super::filter::{build_filter, filter_hash};
use super::format::{
    block_trailer, maybe_compress, BlockHandle, Footer, BLOCK_TRAILER_LEN, BLOCK_UNCOMPRESSED,
};
use super::properties::Properties;
use super::TableOptions;
use crate::error::{Error, IoContext, Result};
use crate::fs::WritableFile;
use crate::key::{
    compare_internal, pack_trailer, parse_internal_key, user_key, ValueKind, KIND_FOR_SEEK,
    MAX_SEQNO,
};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Restart interval of the index block: every entry is a restart point, so a seek is a pure
/// binary search over whole keys.
const INDEX_RESTART_INTERVAL: usize = 1;

/// What a finished table holds, for the version's file metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableInfo {
    /// Bytes in the file.
    pub file_size: u64,
    /// The first internal key (empty for an empty table).
    pub smallest: Vec<u8>,
    /// The last internal key (empty for an empty table).
    pub largest: Vec<u8>,
    /// The table's statistics, as written into its properties block.
    pub properties: Properties,
}

/// Writes one SST. Call [`TableBuilder::add`] for each entry in order, then
/// [`TableBuilder::finish`]. Dropping a builder without finishing leaves a partial file that the
/// caller deletes.
pub(crate) struct TableBuilder {
    out: Writer,
    opts: TableOptions,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    // The handle of the last data block written, whose index entry waits for the next key (so the
    // separator can be shortened) or for `finish`.
    pending_index: Option<BlockHandle>,
    smallest: Vec<u8>,
    last_key: Vec<u8>,
    // Hashes of distinct user keys, for the filter (empty when filters are off).
    filter_hashes: Vec<u64>,
    props: Properties,
    blob_refs: BTreeMap<u64, u64>,
    scratch: Vec<u8>,
    handle_buf: Vec<u8>,
}

/// The file being written and where its end is.
struct Writer {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    // INVARIANT: bytes appended to `file` so far.
    offset: u64,
    // The first error: later calls fail with it (the file is unusable).
    err: Option<Error>,
}

impl Writer {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        let path = &self.path;
        match self
            .file
            .append(data)
            .ctx(|| format!("write {}", path.display()))
        {
            Ok(()) => {
                self.offset += data.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.err = Some(e.clone());
                Err(e)
            }
        }
    }
    /// Appends `stored` and its trailer; returns its handle.
    fn write_block(&mut self, stored: &[u8], kind: u8) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: stored.len() as u64,
        };
        self.append(stored)?;
        self.append(&block_trailer(stored, kind))?;
        Ok(handle)
    }
}

impl TableBuilder {
    /// A builder writing to `file` (named `path` in errors) with `opts`.
    pub(crate) fn new(
        file: Box<dyn WritableFile>,
        path: PathBuf,
        opts: TableOptions,
    ) -> TableBuilder {
        TableBuilder {
            out: Writer {
                file,
                path,
                offset: 0,
                err: None,
            },
            data_block: BlockBuilder::new(opts.restart_interval),
            index_block: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            opts,
            pending_index: None,
            smallest: Vec::new(),
            last_key: Vec::new(),
            filter_hashes: Vec::new(),
            props: Properties {
                smallest_seq: u64::MAX,
                ..Properties::default()
            },
            blob_refs: BTreeMap::new(),
            scratch: Vec::new(),
            handle_buf: Vec::new(),
        }
    }

    /// Adds an entry. Keys arrive in strictly increasing `compare_internal` order (several
    /// versions of one user key may follow each other).
    ///
    /// # Errors
    /// `InvalidArgument` for a malformed or out-of-order key or an entry too large for the format;
    /// `Io` when writing a block fails (and every later call fails with it).
    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if let Some(e) = &self.out.err {
            return Err(e.clone());
        }
        let parsed = parse_internal_key(ikey)
            .ok_or_else(|| Error::invalid_argument("SST builder: malformed internal key"))?;
        let first = self.props.num_entries == 0;
        if !first && compare_internal(&self.last_key, ikey) != Ordering::Less {
            return Err(Error::invalid_argument("SST builder: keys out of order"));
        }
        if let Some(handle) = self.pending_index.take() {
            separator(&self.last_key, ikey, &mut self.scratch);
            self.handle_buf.clear();
            handle.encode_to(&mut self.handle_buf);
            self.index_block.add(&self.scratch, &self.handle_buf)?;
        }
        if self.opts.bloom_bits_per_key > 0
            && (first || user_key(&self.last_key) != parsed.user_key)
        {
            self.filter_hashes.push(filter_hash(parsed.user_key));
        }
        self.data_block.add(ikey, value)?;
        let p = &mut self.props;
        p.num_entries += 1;
        p.num_deletions += u64::from(parsed.kind == ValueKind::Deletion);
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);
        if first {
            self.smallest.extend_from_slice(ikey);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        if self.data_block.size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Records that this table's values reference `bytes` bytes of blob file `blob_file`
    /// (key-value separation); summed per blob file into [`Properties::blob_refs`].
    #[allow(dead_code)] // called by key-value separation as it lands
    pub(crate) fn add_blob_reference(&mut self, blob_file: u64, bytes: u64) {
        let total = self.blob_refs.entry(blob_file).or_insert(0);
        *total = total.saturating_add(bytes);
    }

    /// The size the file would have if finished now, less the filter, properties, index and
    /// footer (a close estimate for splitting compaction outputs).
    pub(crate) fn estimated_file_size(&self) -> u64 {
        self.out.offset + self.data_block.size_estimate() as u64
    }

    /// Writes the last data block, the filter, properties, index and footer, and syncs the file
    /// (`WritableFile::sync`, an fdatasync).
    ///
    /// # Errors
    /// `Io` when a write or the sync fails, or the error of an earlier failed `add`.
    pub(crate) fn finish(mut self) -> Result<TableInfo> {
        if let Some(e) = &self.out.err {
            return Err(e.clone());
        }
        self.flush_data_block()?;
        if let Some(handle) = self.pending_index.take() {
            // The last block's index key is its last key.
            self.handle_buf.clear();
            handle.encode_to(&mut self.handle_buf);
            self.index_block.add(&self.last_key, &self.handle_buf)?;
        }

        let filter = build_filter(&self.filter_hashes, self.opts.bloom_bits_per_key);
        let filter_handle = if filter.is_empty() {
            BlockHandle {
                offset: self.out.offset,
                size: 0,
            }
        } else {
            self.out.write_block(&filter, BLOCK_UNCOMPRESSED)?
        };

        let (index_stored, index_kind) = maybe_compress(
            self.index_block.finish(),
            self.opts.compression,
            &mut self.scratch,
        );
        let index_stored = index_stored.to_vec();

        let mut props = std::mem::take(&mut self.props);
        if props.num_entries == 0 {
            props.smallest_seq = 0;
        }
        props.index_size = (index_stored.len() + BLOCK_TRAILER_LEN) as u64;
        props.filter_size = if filter.is_empty() {
            0
        } else {
            (filter.len() + BLOCK_TRAILER_LEN) as u64
        };
        props.blob_refs = self.blob_refs.iter().map(|(&f, &b)| (f, b)).collect();
        let properties_handle = self.out.write_block(&props.encode(), BLOCK_UNCOMPRESSED)?;
        let index_handle = self.out.write_block(&index_stored, index_kind)?;

        let footer = Footer {
            filter: filter_handle,
            properties: properties_handle,
            index: index_handle,
        };
        self.out.append(&footer.encode())?;
        let path = &self.out.path;
        self.out
            .file
            .sync()
            .ctx(|| format!("sync {}", path.display()))?;
        Ok(TableInfo {
            file_size: self.out.offset,
            smallest: std::mem::take(&mut self.smallest),
            largest: std::mem::take(&mut self.last_key),
            properties: props,
        })
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let (stored, kind) = maybe_compress(
            self.data_block.finish(),
            self.opts.compression,
            &mut self.scratch,
        );
        let handle = self.out.write_block(stored, kind)?;
        self.data_block.reset();
        self.pending_index = Some(handle);
        self.props.num_data_blocks += 1;
        Ok(())
    }
}

/// Writes into `out` a short key `k` with `last <= k < next` (internal order), for the index
/// entry between two data blocks: a shortened user key strictly between the two user keys with
/// the trailer that sorts first, or `last` itself when no shorter key fits.
pub(crate) fn separator(last: &[u8], next: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (lu, nu) = (user_key(last), user_key(next));
    let diff = lu.iter().zip(nu).take_while(|(a, b)| a == b).count();
    if diff + 1 < lu.len() && diff < nu.len() {
        let byte = lu[diff];
        if byte < 0xff && byte + 1 < nu[diff] {
            out.extend_from_slice(&lu[..diff]);
            out.push(byte + 1);
            out.extend_from_slice(&pack_trailer(MAX_SEQNO, KIND_FOR_SEEK).to_le_bytes());
            return;
        }
    }
    out.extend_from_slice(last);
}
