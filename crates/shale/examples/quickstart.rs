//! Quick start: open a database, write, read, scan, reopen, read again.
//!
//! `cargo run --release -p shale --example quickstart [DIR]` (default directory `shale-data`).

use shale::{Db, Durability, Options, WriteBatch, WriteOptions};

fn main() -> shale::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "shale-data".to_owned());
    let db = Db::open(&dir, Options::default())?;
    println!("opened {dir}");

    db.put(b"greeting", b"hello, world")?;
    let mut batch = WriteBatch::new();
    for i in 0..1000u32 {
        batch.put(format!("user:{i:04}"), format!("{{\"id\":{i}}}"));
    }
    batch.delete(b"user:0007");
    db.write(
        batch,
        &WriteOptions {
            durability: Durability::Sync,
        },
    )?;
    println!("wrote 1001 keys (one synced batch)");

    let value = db.get(b"greeting")?.expect("just written");
    println!("greeting = {}", String::from_utf8_lossy(&value));
    let first: Vec<String> = db
        .prefix(b"user:")
        .take(3)
        .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
        .collect::<shale::Result<_>>()?;
    println!("first users: {first:?}");
    db.close()?;

    let db = Db::open(&dir, Options::default())?;
    let count = db.prefix(b"user:").count();
    println!(
        "reopened: {count} users, user:0007 is {:?}",
        db.get(b"user:0007")?
    );
    let s = db.stats();
    println!(
        "files per level {:?}, {} bytes on disk (the replayed WAL was flushed to L0 at open)",
        s.files_per_level, s.on_disk_bytes
    );
    db.close()
}
