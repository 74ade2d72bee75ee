//! `VersionSet`: the current version, the counters that survive restarts, and the MANIFEST.
//!
//! Every change to the set of live files is a [`VersionEdit`] appended to the MANIFEST and synced
//! before the new version is installed, so recovery rebuilds exactly the version that was last
//! installed. The MANIFEST starts with a snapshot edit of the whole version; when it grows past
//! `max_manifest_size` a new one is written and `CURRENT` is switched to it atomically (temporary
//! file, sync, rename, directory sync).
//!
//! Concurrency: a `VersionSet` is owned by the database state and mutated under its lock.
//!
//! Failure contract: when `log_and_apply` fails, the in-memory state is unchanged, but the MANIFEST
//! may hold a partial record; the caller must stop writing (poison the database). Recovery cuts a
//! torn MANIFEST tail.

use super::edit::{LogPosition, VersionEdit};
use super::version::Version;
use crate::error::{Error, IoContext, Result};
use crate::filename;
use crate::fs::Fs;
use crate::key::SeqNo;
use crate::wal::{LogReader, LogWriter, TailPolicy};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// The live version and the persistent counters.
pub(crate) struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    max_manifest_size: u64,
    current: Arc<Version>,
    /// Versions handed out earlier that readers may still hold; their files stay on disk.
    handed_out: Vec<Weak<Version>>,
    next_file_number: u64,
    last_seq: SeqNo,
    /// WALs numbered below this are fully reflected in SSTs.
    log_number: u64,
    manifest: Option<(u64, LogWriter)>,
    /// Per level, the largest key of the last compaction, so the next one starts after it.
    compact_pointers: Vec<Vec<u8>>,
    /// With an external log: the last log entry whose writes the version's files hold.
    log_position: Option<LogPosition>,
}

impl VersionSet {
    /// Creates the MANIFEST and CURRENT of a new, empty database.
    pub(crate) fn create(
        dir: &Path,
        fs: Arc<dyn Fs>,
        num_levels: usize,
        max_manifest_size: u64,
    ) -> Result<VersionSet> {
        let mut set = VersionSet {
            dir: dir.to_path_buf(),
            fs,
            max_manifest_size,
            current: Arc::new(Version::empty(num_levels)),
            handed_out: Vec::new(),
            next_file_number: 1,
            last_seq: 0,
            log_number: 0,
            manifest: None,
            compact_pointers: vec![Vec::new(); num_levels],
            log_position: None,
        };
        set.write_new_manifest()?;
        Ok(set)
    }

    /// Rebuilds the version named by `CURRENT`.
    ///
    /// # Errors
    /// `Corruption` naming the file when CURRENT or the MANIFEST is damaged, or when the MANIFEST
    /// contradicts itself; `Io` when a file cannot be read.
    pub(crate) fn recover(
        dir: &Path,
        fs: Arc<dyn Fs>,
        num_levels: usize,
        max_manifest_size: u64,
    ) -> Result<VersionSet> {
        let current_path = filename::current(dir);
        let current = fs
            .read_all(&current_path)
            .ctx(|| format!("read {}", current_path.display()))?;
        let name = std::str::from_utf8(&current)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| matches!(filename::parse(s), Some(filename::FileKind::Manifest(_))))
            .ok_or_else(|| {
                Error::corruption(&current_path, 0, "CURRENT does not name a MANIFEST")
            })?;
        let manifest_path = dir.join(name);
        let data = fs.read_all(&manifest_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::corruption(
                    &current_path,
                    0,
                    format!("CURRENT names {name}, which does not exist"),
                )
            } else {
                Error::io(e, format!("read {}", manifest_path.display()))
            }
        })?;

        let mut version = Version::empty(num_levels);
        let mut next_file_number = None;
        let mut last_seq = None;
        let mut log_number = None;
        let mut log_position = None;
        let mut compact_pointers = vec![Vec::new(); num_levels];
        let mut reader = LogReader::new(data, manifest_path.clone(), TailPolicy::CutTornTailOnly);
        let mut records = 0u64;
        while let Some((offset, record)) = reader.next_record()? {
            let edit = VersionEdit::decode(record)
                .map_err(|e| Error::corruption(&manifest_path, offset, e))?;
            if let Some(level) = edit
                .new_files
                .iter()
                .map(|(l, _)| *l)
                .chain(edit.deleted_files.iter().map(|(l, _)| *l))
                .find(|&l| l >= num_levels)
            {
                return Err(Error::corruption(
                    &manifest_path,
                    offset,
                    format!("edit names level {level} but the database is opened with num_levels = {num_levels}"),
                ));
            }
            version = version
                .apply(&edit)
                .map_err(|e| Error::corruption(&manifest_path, offset, e.message()))?;
            next_file_number = edit.next_file_number.or(next_file_number);
            last_seq = edit.last_seq.or(last_seq);
            log_number = edit.log_number.or(log_number);
            log_position = edit.log_position.or(log_position);
            for (level, key) in edit.compact_pointers {
                compact_pointers[level] = key;
            }
            records += 1;
        }
        if let Some(cut) = reader.tail_cut() {
            tracing::warn!(file = %manifest_path.display(), offset = cut.offset, reason = %cut.reason, "cut a torn MANIFEST tail");
        }
        let missing = |what: &str| {
            Error::corruption(
                &manifest_path,
                0,
                format!("MANIFEST ({records} records) never sets {what}"),
            )
        };
        let next_file_number = next_file_number.ok_or_else(|| missing("the next file number"))?;
        let last_seq = last_seq.ok_or_else(|| missing("the last sequence number"))?;
        let log_number = log_number.ok_or_else(|| missing("the log number"))?;
        let max_used = version
            .file_numbers()
            .chain(version.blob_file_numbers())
            .max()
            .unwrap_or(0);
        let mut set = VersionSet {
            dir: dir.to_path_buf(),
            fs,
            max_manifest_size,
            current: Arc::new(version),
            handed_out: Vec::new(),
            next_file_number: next_file_number.max(max_used + 1).max(log_number + 1),
            last_seq,
            log_number,
            manifest: None,
            compact_pointers,
            log_position,
        };
        if let Some(filename::FileKind::Manifest(n)) = filename::parse(name) {
            set.next_file_number = set.next_file_number.max(n + 1);
        }
        Ok(set)
    }

    /// Starts a fresh MANIFEST holding a snapshot of the current state, and points CURRENT at it.
    /// Used at open (so recovery never appends to an old file) and when the MANIFEST grows too big.
    pub(crate) fn write_new_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let written = self
            .write_snapshot_manifest(&self.dir, number)
            .and_then(|writer| self.set_current(&self.dir, number).map(|()| writer));
        match written {
            Ok(writer) => {
                self.manifest = Some((number, writer));
                Ok(())
            }
            Err(e) => {
                // Unless CURRENT may already name it, the new MANIFEST is nobody's: remove it.
                if !e.is_fatal() {
                    let _ = self.fs.remove_file(&filename::manifest(&self.dir, number));
                }
                Err(e)
            }
        }
    }

    /// Writes a MANIFEST numbered `number` in `dir` holding a snapshot of the current state, and
    /// syncs it; returns its writer.
    fn write_snapshot_manifest(&self, dir: &Path, number: u64) -> Result<LogWriter> {
        let path = filename::manifest(dir, number);
        let mut edit = self.current.snapshot_edit();
        edit.log_position = self.log_position.clone();
        edit.next_file_number = Some(self.next_file_number);
        edit.last_seq = Some(self.last_seq);
        edit.log_number = Some(self.log_number);
        edit.compact_pointers = self
            .compact_pointers
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.is_empty())
            .map(|(l, k)| (l, k.clone()))
            .collect();
        let mut record = Vec::new();
        edit.encode(&mut record);
        let file = self
            .fs
            .create(&path)
            .ctx(|| format!("create {}", path.display()))?;
        let mut writer = LogWriter::new(file);
        writer
            .add_record(&record)
            .ctx(|| format!("write {}", path.display()))?;
        writer.sync().ctx(|| format!("sync {}", path.display()))?;
        Ok(writer)
    }

    /// Writes a MANIFEST and CURRENT describing the current version into `dir` (a checkpoint of
    /// the database, whose files the caller places there), and syncs them and the directory.
    /// Returns the MANIFEST's number.
    pub(crate) fn write_checkpoint_manifest(&self, dir: &Path) -> Result<u64> {
        let number = self.next_file_number;
        self.write_snapshot_manifest(dir, number)?;
        self.set_current(dir, number)?;
        Ok(number)
    }

    fn set_current(&self, dir: &Path, manifest_number: u64) -> Result<()> {
        // The temporary file's number is derived from the MANIFEST's so it needs no counter update.
        let tmp = dir.join(format!(
            "{}.dbtmp",
            filename::manifest_name(manifest_number)
        ));
        let current = filename::current(dir);
        let written = (|| {
            let mut file = self
                .fs
                .create(&tmp)
                .ctx(|| format!("create {}", tmp.display()))?;
            let contents = format!("{}\n", filename::manifest_name(manifest_number));
            file.append(contents.as_bytes())
                .ctx(|| format!("write {}", tmp.display()))?;
            file.sync().ctx(|| format!("sync {}", tmp.display()))?;
            drop(file);
            self.fs
                .rename(&tmp, &current)
                .ctx(|| format!("rename {} to CURRENT", tmp.display()))
        })();
        if let Err(e) = written {
            // CURRENT is unchanged.
            let _ = self.fs.remove_file(&tmp);
            return Err(e);
        }
        // From here CURRENT may name the new MANIFEST, or not, after a crash: a failure is fatal.
        self.fs
            .sync_dir(dir)
            .ctx(|| format!("sync directory {}", dir.display()))
            .map_err(Error::fatal)
    }

    /// Writes `edit` to the MANIFEST, syncs it, and installs the resulting version.
    /// Fills in the next file number and last sequence number.
    ///
    /// On failure the edit is not installed. The MANIFEST is rolled (a new one written, holding a
    /// snapshot, and CURRENT pointed at it) once it is large, or after a write to it failed: its
    /// end may then hold part of a record, which recovery cuts as a torn tail since nothing after
    /// it was synced.
    ///
    /// # Errors
    /// A failure to write or sync the current MANIFEST, or to make CURRENT durable, is
    /// [`Error::fatal`]: the edit may or may not be on disk. A lack of space (`StorageFull`,
    /// `QuotaExceeded`) while appending to the MANIFEST or while writing a new one is not:
    /// nothing durable changed, and the next edit rolls to a new MANIFEST.
    pub(crate) fn log_and_apply(&mut self, edit: VersionEdit) -> Result<()> {
        self.log_and_apply_unmarked(edit).map_err(|e| {
            let no_space = matches!(
                e.io_kind(),
                Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
            );
            if no_space && !e.is_fatal() {
                e
            } else {
                e.fatal()
            }
        })
    }

    fn log_and_apply_unmarked(&mut self, mut edit: VersionEdit) -> Result<()> {
        let version = self.current.apply(&edit)?;
        if let Some(n) = edit.log_number {
            debug_assert!(n >= self.log_number, "log number went backwards");
        }
        edit.next_file_number = Some(self.next_file_number);
        edit.last_seq = Some(self.last_seq);
        let rolled = !matches!(&self.manifest, Some((_, writer)) if writer.len() < self.max_manifest_size && !writer.is_broken());
        if !rolled {
            let mut record = Vec::new();
            edit.encode(&mut record);
            let (number, writer) = self.manifest.as_mut().expect("checked above");
            let path = filename::manifest(&self.dir, *number);
            writer
                .add_record(&record)
                .ctx(|| format!("write {}", path.display()))?;
            writer
                .sync()
                .ctx(|| format!("sync {}", path.display()))
                .map_err(Error::fatal)?;
            self.install(version, &edit);
            return Ok(());
        }
        // The new MANIFEST holds a snapshot of the state with the edit installed: install it,
        // and put the old state back if the new MANIFEST cannot be written.
        let before = (
            self.current.clone(),
            self.log_number,
            self.log_position.clone(),
            self.compact_pointers.clone(),
        );
        self.install(version, &edit);
        let old = self.manifest.as_ref().map(|(n, _)| *n);
        if let Err(e) = self.write_new_manifest() {
            if !e.is_fatal() {
                (
                    self.current,
                    self.log_number,
                    self.log_position,
                    self.compact_pointers,
                ) = before;
            }
            return Err(e);
        }
        if let Some(old) = old {
            let _ = self.fs.remove_file(&filename::manifest(&self.dir, old));
        }
        Ok(())
    }

    fn install(&mut self, version: Version, edit: &VersionEdit) {
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        if let Some(p) = &edit.log_position {
            self.log_position = Some(p.clone());
        }
        for (level, key) in &edit.compact_pointers {
            self.compact_pointers[*level] = key.clone();
        }
        self.handed_out.retain(|v| v.strong_count() > 0);
        self.handed_out.push(Arc::downgrade(&self.current));
        self.current = Arc::new(version);
    }

    /// The current version.
    pub(crate) fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// Numbers of every SST and physical blob file that the current version or a version still
    /// held by a reader names.
    pub(crate) fn live_files(&mut self) -> HashSet<u64> {
        self.handed_out.retain(|v| v.strong_count() > 0);
        let mut live: HashSet<u64> = self.current.file_numbers().collect();
        live.extend(self.current.blob_file_numbers());
        for v in self.handed_out.iter().filter_map(Weak::upgrade) {
            live.extend(v.file_numbers());
            live.extend(v.blob_file_numbers());
        }
        live
    }

    /// Allocates a file number.
    pub(crate) fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes sure file number `n` is never handed out: used at recovery for every numbered file in
    /// the directory, since WAL numbers are allocated without a MANIFEST edit.
    pub(crate) fn mark_file_number_used(&mut self, n: u64) {
        self.next_file_number = self.next_file_number.max(n.saturating_add(1));
    }

    pub(crate) fn last_seq(&self) -> SeqNo {
        self.last_seq
    }

    /// Records that sequence numbers up to `seq` were used. Persisted with the next edit.
    pub(crate) fn set_last_seq(&mut self, seq: SeqNo) {
        debug_assert!(seq >= self.last_seq);
        self.last_seq = seq;
    }

    /// Puts back the last sequence number an edit that failed to install had raised (see
    /// [`VersionSet::set_last_seq`]).
    pub(crate) fn reset_last_seq(&mut self, seq: SeqNo) {
        self.last_seq = seq;
    }

    pub(crate) fn log_number(&self) -> u64 {
        self.log_number
    }

    /// With an external log: the last log entry whose writes the current version's files hold.
    pub(crate) fn log_position(&self) -> Option<&LogPosition> {
        self.log_position.as_ref()
    }

    /// Replaces the whole state with another database's (a checkpoint installed in place of this
    /// one: see `db::replicated`) and writes it as a fresh MANIFEST. The caller has placed the
    /// version's files in the directory. Counters only move forward.
    pub(crate) fn replace(
        &mut self,
        version: Version,
        last_seq: SeqNo,
        log_position: Option<LogPosition>,
        next_file_number: u64,
    ) -> Result<()> {
        self.handed_out.retain(|v| v.strong_count() > 0);
        self.handed_out.push(Arc::downgrade(&self.current));
        self.current = Arc::new(version);
        self.last_seq = self.last_seq.max(last_seq);
        self.log_position = log_position;
        self.next_file_number = self.next_file_number.max(next_file_number);
        for p in &mut self.compact_pointers {
            p.clear();
        }
        let old = self.manifest.take().map(|(n, _)| n);
        self.write_new_manifest()?;
        if let Some(old) = old {
            let _ = self.fs.remove_file(&filename::manifest(&self.dir, old));
        }
        Ok(())
    }

    /// The next file number that will be handed out.
    pub(crate) fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    pub(crate) fn manifest_number(&self) -> Option<u64> {
        self.manifest.as_ref().map(|(n, _)| *n)
    }
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("next_file_number", &self.next_file_number)
            .field("last_seq", &self.last_seq)
            .field("log_number", &self.log_number)
            .finish_non_exhaustive()
    }
}
