//! Unit tests of the store: batches read their own writes, scans merge staged writes, key counts
//! follow creations and deletions, a batch commits once, the version-0 migration.

use super::format::{self, Kind};
use super::*;
use bytes::Bytes;
use shale::fs::MemFs;
use std::sync::Arc;

fn open(fs: &Arc<MemFs>) -> Store {
    let options = shale::Options {
        fs: fs.clone(),
        ..shale::Options::default()
    };
    let db = Db::open("/db", options).unwrap();
    Store::new(db, Appendfsync::Everysec).unwrap()
}

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

#[test]
fn a_batch_reads_its_own_writes_in_points_and_scans() {
    let fs = Arc::new(MemFs::new());
    let store = open(&fs);
    let mut txn = store.txn(&StripeSet::new());
    // A value past the inline limit: the hash is one record per field.
    let long = "3".repeat(hashes::INLINE_MAX_BYTES + 1);
    hashes::set(&mut txn, b"h", &[b("a"), b("1"), b("c"), b(&long)]).unwrap();
    txn.commit().unwrap();
    hashes::set(&mut txn, b"h", &[b("b"), b("2"), b("a"), b("9")]).unwrap();
    hashes::delete(&mut txn, b"h", &[b("c")]).unwrap();
    // Nothing of the second half is committed yet, but the batch sees all of it.
    assert_eq!(
        hashes::get(&mut txn, b"h", b"a").unwrap(),
        Some(b"9".to_vec())
    );
    let all = hashes::get_all(&mut txn, b"h").unwrap();
    assert_eq!(
        all,
        vec![
            (b"a".to_vec(), b"9".to_vec()),
            (b"b".to_vec(), b"2".to_vec())
        ]
    );
    assert_eq!(hashes::len(&mut txn, b"h").unwrap(), 2);
    // Backward scans merge the same way.
    let mut seen = Vec::new();
    let m = keys::lookup(&mut txn, b"h").unwrap().unwrap();
    let prefix = format::collection_prefix(format::HASH_FIELD, m.generation);
    txn.scan_prefix(&prefix, Dir::Backward, |k, _| {
        seen.push(format::element_name(k).to_vec());
        true
    })
    .unwrap();
    assert_eq!(seen, vec![b"b".to_vec(), b"a".to_vec()]);
    drop(txn);
    // Dropped without commit: the second half never happened.
    let mut txn = store.txn(&StripeSet::new());
    assert_eq!(hashes::len(&mut txn, b"h").unwrap(), 2);
    assert_eq!(
        hashes::get(&mut txn, b"h", b"c").unwrap(),
        Some(long.into_bytes())
    );
}

#[test]
fn key_counts_follow_creations_overwrites_and_deletions() {
    let fs = Arc::new(MemFs::new());
    let store = open(&fs);
    let mut txn = store.txn(&StripeSet::new());
    txn.select(3);
    let p = txn.physical();
    strings::put(&mut txn, b"s", Bytes::from_static(b"v"), 0, None).unwrap();
    sets::add(&mut txn, b"set", &[b("x")]).unwrap();
    lists::push(&mut txn, b"l", &[b("a")], lists::End::Left, false).unwrap();
    assert_eq!(txn.db_size(p), 3, "staged counts are seen by the batch");
    txn.commit().unwrap();
    assert_eq!(store.db_size(p), 3);
    // Overwriting a list with a string keeps the count and drops the elements.
    let old = keys::lookup_write(&mut txn, b"l").unwrap();
    strings::put(&mut txn, b"l", Bytes::from_static(b"now"), 0, old.as_ref()).unwrap();
    sets::remove(&mut txn, b"set", &[b("x")]).unwrap();
    txn.commit().unwrap();
    assert_eq!(store.db_size(p), 2);
    assert_eq!(store.db_size(store.physical(0)), 0);
    drop(txn);
    let db = std::sync::Arc::into_inner(store.into_db()).expect("the only handle");
    db.close().unwrap();
    let store = open(&fs);
    assert_eq!(
        store.db_size(p),
        2,
        "counts are persisted with their batches"
    );
    let mut txn = store.txn(&StripeSet::new());
    txn.select(3);
    assert_eq!(
        keys::lookup(&mut txn, b"l").unwrap().map(|m| m.kind),
        Some(Kind::String)
    );
    let mut list_items = 0;
    txn.scan_prefix(&[format::LIST_ITEM], Dir::Forward, |_, _| {
        list_items += 1;
        true
    })
    .unwrap();
    assert_eq!(list_items, 0, "the overwritten list's elements are gone");
}

#[test]
fn a_version_0_keyspace_is_migrated_into_database_0() {
    let fs = Arc::new(MemFs::new());
    {
        let options = shale::Options {
            fs: fs.clone(),
            ..shale::Options::default()
        };
        let db = Db::open("/db", options).unwrap();
        let v0_meta = |key: &[u8]| {
            let mut k = vec![format::META];
            k.extend_from_slice(&format::key_hash(key).to_be_bytes());
            k.extend_from_slice(key);
            k
        };
        db.put(
            v0_meta(b"str"),
            format::string_meta(b"value", 4_000_000_000_000),
        )
        .unwrap();
        let mut expiry = vec![format::EXPIRY];
        expiry.extend_from_slice(&4_000_000_000_000u64.to_be_bytes());
        expiry.extend_from_slice(b"str");
        db.put(expiry, b"").unwrap();
        let mut hash = format::Meta::collection(Kind::Hash, 77);
        hash.len = 1;
        db.put(v0_meta(b"hash"), hash.encode()).unwrap();
        db.put(format::field_key(77, b"f"), b"v").unwrap();
        db.put(format::GENERATION_KEY, 77u64.to_be_bytes()).unwrap();
        db.close().unwrap();
    }
    let store = open(&fs);
    assert_eq!(store.db_size(0), 2);
    let mut txn = store.txn(&StripeSet::new());
    let s = strings::get(&mut txn, b"str").unwrap().unwrap();
    assert_eq!(
        (s.string_value(), s.expire_at),
        (&b"value"[..], 4_000_000_000_000)
    );
    assert_eq!(
        hashes::get(&mut txn, b"hash", b"f").unwrap(),
        Some(b"v".to_vec())
    );
    let mut expiring = Vec::new();
    txn.scan_prefix(&[format::EXPIRY], Dir::Forward, |k, _| {
        expiring.push(format::split_expiry_key(k).map(|(at, db, k)| (at, db, k.to_vec())));
        true
    })
    .unwrap();
    assert_eq!(
        expiring,
        vec![Some((4_000_000_000_000, 0, b"str".to_vec()))]
    );
    // New collections never reuse a generation handed out before.
    let g = store.new_generation();
    assert_ne!(g, 77);
}

#[test]
fn a_newer_format_is_refused() {
    let fs = Arc::new(MemFs::new());
    {
        let options = shale::Options {
            fs: fs.clone(),
            ..shale::Options::default()
        };
        let db = Db::open("/db", options).unwrap();
        db.put(format::FORMAT_KEY, 99u32.to_be_bytes()).unwrap();
        db.close().unwrap();
    }
    let options = shale::Options {
        fs: fs.clone(),
        ..shale::Options::default()
    };
    let db = Db::open("/db", options).unwrap();
    let err = Store::new(db, Appendfsync::Everysec).err().unwrap();
    assert_eq!(err.kind(), shale::ErrorKind::NotSupported);
}

#[test]
fn a_version_1_keyspace_is_read_as_version_2() {
    let fs = Arc::new(MemFs::new());
    {
        let store = open(&fs);
        let mut txn = store.txn(&StripeSet::new());
        hashes::set(&mut txn, b"h", &[b("f"), b("v")]).unwrap();
        txn.commit().unwrap();
        drop(txn);
        store
            .db()
            .put(format::FORMAT_KEY, 1u32.to_be_bytes())
            .unwrap();
        Arc::into_inner(store.into_db())
            .expect("the only handle")
            .close()
            .unwrap();
    }
    let store = open(&fs);
    let version = store.db().get(format::FORMAT_KEY).unwrap().unwrap();
    assert_eq!(version.to_vec(), 2u32.to_be_bytes().to_vec());
    let mut txn = store.txn(&StripeSet::new());
    assert_eq!(
        hashes::get(&mut txn, b"h", b"f").unwrap(),
        Some(b"v".to_vec())
    );
}

/// Bytes the engine took in (keys and values inserted) while `f` ran.
fn engine_bytes(store: &Store, f: impl FnOnce()) -> u64 {
    let before = store.db().stats().user_bytes_written;
    f();
    store.db().stats().user_bytes_written - before
}

#[test]
fn a_key_written_twice_in_a_batch_reaches_the_engine_once() {
    // Sixteen pushes to one list in one batch: the meta record is staged sixteen times, but only
    // its last version is committed, so the engine takes what one push of sixteen elements gives
    // it.
    let fs = Arc::new(MemFs::new());
    let piecewise = open(&fs);
    let piecewise_bytes = engine_bytes(&piecewise, || {
        let mut txn = piecewise.txn(&StripeSet::new());
        for i in 0..16 {
            lists::push(
                &mut txn,
                b"l",
                &[b(&i.to_string())],
                lists::End::Left,
                false,
            )
            .unwrap();
        }
        txn.commit().unwrap();
    });
    let fs = Arc::new(MemFs::new());
    let whole = open(&fs);
    let whole_bytes = engine_bytes(&whole, || {
        let mut txn = whole.txn(&StripeSet::new());
        let all: Vec<Bytes> = (0..16).map(|i| b(&i.to_string())).collect();
        lists::push(&mut txn, b"l", &all, lists::End::Left, false).unwrap();
        txn.commit().unwrap();
    });
    assert_eq!(piecewise_bytes, whole_bytes);
    let mut txn = piecewise.txn(&StripeSet::new());
    let expected: Vec<Vec<u8>> = (0..16).rev().map(|i| i.to_string().into_bytes()).collect();
    assert_eq!(lists::range(&mut txn, b"l", 0, -1).unwrap(), expected);
    assert_eq!(lists::len(&mut txn, b"l").unwrap(), 16);

    // A put, a delete and a put of one key: the last one is what is committed.
    let mut txn = whole.txn(&StripeSet::new());
    strings::put(&mut txn, b"s", b("1"), 0, None).unwrap();
    let first = strings::get(&mut txn, b"s").unwrap().unwrap();
    keys::delete(&mut txn, b"s", &first).unwrap();
    assert!(strings::get(&mut txn, b"s").unwrap().is_none());
    strings::put(&mut txn, b"s", b("3"), 0, None).unwrap();
    txn.commit().unwrap();
    drop(txn);
    let mut txn = whole.txn(&StripeSet::new());
    let last = strings::get(&mut txn, b"s").unwrap().unwrap();
    assert_eq!(last.string_value(), b"3");
}

#[test]
fn element_records_read_ahead_answer_the_batch_until_it_writes_them() {
    let fs = Arc::new(MemFs::new());
    let store = open(&fs);
    let mut txn = store.txn(&StripeSet::new());
    // A hash past the inline limit (one record per field), a set and a sorted set.
    let long = "3".repeat(hashes::INLINE_MAX_BYTES + 1);
    hashes::set(&mut txn, b"h", &[b("a"), b("1"), b("big"), b(&long)]).unwrap();
    sets::add(&mut txn, b"s", &[b("m")]).unwrap();
    let add = zsets::AddFlags::default();
    zsets::add(&mut txn, b"z", add, &[(1.0, b("p"))]).unwrap();
    txn.commit().unwrap();
    drop(txn);

    let mut txn = store.txn(&StripeSet::new());
    let keys: [&[u8]; 3] = [b"h", b"s", b"z"];
    txn.read_ahead_meta(keys.into_iter());
    txn.read_ahead_elements(&[
        ElementReads {
            key: b"h",
            kind: Kind::Hash,
            names: vec![b"a", b"x", b"y"],
        },
        ElementReads {
            key: b"s",
            kind: Kind::Set,
            names: vec![b"m", b"n"],
        },
        ElementReads {
            key: b"z",
            kind: Kind::ZSet,
            names: vec![b"p"],
        },
        // Of the wrong type: nothing is read for it.
        ElementReads {
            key: b"s",
            kind: Kind::Hash,
            names: vec![b"m"],
        },
    ]);
    let generation =
        |txn: &mut Txn<'_>, key: &[u8]| keys::lookup(txn, key).unwrap().unwrap().generation;
    let h = generation(&mut txn, b"h");
    // Behind the batch's back (a batch's collections are locked; here nothing stops it), the
    // engine changes: the batch answers from what it read ahead, once.
    store
        .db()
        .put(format::field_key(h, b"x"), b"behind")
        .unwrap();
    assert_eq!(txn.get(&format::field_key(h, b"x")).unwrap(), None);
    assert_eq!(
        txn.get(&format::field_key(h, b"x")).unwrap(),
        Some(b"behind".to_vec())
    );
    store.db().delete(format::field_key(h, b"x")).unwrap();
    // A staged write comes before what was read ahead.
    txn.put(format::field_key(h, b"y"), b("staged"));
    assert_eq!(
        txn.get(&format::field_key(h, b"y")).unwrap(),
        Some(b"staged".to_vec())
    );
    txn.delete(format::field_key(h, b"y"));
    // The commands see the same answers as without reading ahead.
    assert_eq!(
        hashes::set(&mut txn, b"h", &[b("a"), b("2"), b("x"), b("3")]).unwrap(),
        1
    );
    assert_eq!(hashes::len(&mut txn, b"h").unwrap(), 3);
    assert_eq!(sets::add(&mut txn, b"s", &[b("m"), b("n")]).unwrap(), 1);
    let out = zsets::add(&mut txn, b"z", add, &[(2.0, b("p"))]).unwrap();
    assert_eq!((out.added, out.changed), (0, 1));
    txn.commit().unwrap();
    drop(txn);
    let mut txn = store.txn(&StripeSet::new());
    assert_eq!(
        hashes::get(&mut txn, b"h", b"a").unwrap(),
        Some(b"2".to_vec())
    );
    assert_eq!(hashes::get(&mut txn, b"h", b"y").unwrap(), None);
    assert_eq!(sets::len(&mut txn, b"s").unwrap(), 2);
    assert_eq!(zsets::score(&mut txn, b"z", b"p").unwrap(), Some(2.0));
}
