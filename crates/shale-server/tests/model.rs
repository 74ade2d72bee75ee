//! Model tests: random command sequences against an in-memory model of Redis's semantics,
//! through the real server, with restarts (SIGKILL) in between. One test per type, each over a
//! small pool of keys that also holds a key of another type (so WRONGTYPE paths run), plus the
//! keyspace commands (RENAME, MOVE, COPY, SELECT, DBSIZE) across databases.
//!
//! After every restart the whole model is compared with the server: every key's type and
//! content, and DBSIZE of every database used.

mod common;

use common::Server;
use redis::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Operations per test between checks of the whole state.
const OPS_PER_ROUND: usize = 1000;
/// Rounds (a SIGKILL and restart after each but the last).
const ROUNDS: usize = 4;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, PartialEq)]
enum V {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    ZSet(BTreeMap<Vec<u8>, f64>),
    List(VecDeque<Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
}

impl V {
    fn type_name(&self) -> &'static str {
        match self {
            V::Str(_) => "string",
            V::Hash(_) => "hash",
            V::ZSet(_) => "zset",
            V::List(_) => "list",
            V::Set(_) => "set",
        }
    }
    fn is_empty(&self) -> bool {
        match self {
            V::Str(_) => false,
            V::Hash(h) => h.is_empty(),
            V::ZSet(z) => z.is_empty(),
            V::List(l) => l.is_empty(),
            V::Set(s) => s.is_empty(),
        }
    }
}

/// What a command should answer.
#[derive(Debug, Clone, PartialEq)]
enum Exp {
    Ok,
    Int(i64),
    Bulk(Option<Vec<u8>>),
    /// A float reply (compared numerically).
    Float(Option<f64>),
    Array(Vec<Exp>),
    /// An array compared as a set (SMEMBERS, ...).
    Unordered(Vec<Vec<u8>>),
    /// A flat array of (field, value) pairs in any pair order (HGETALL: a small hash answers in
    /// insertion order, a large one in field order).
    Pairs(Vec<(Vec<u8>, Vec<u8>)>),
    /// An error reply starting with this code.
    Err(&'static str),
    /// Not checked (random replies); the model was updated from the actual reply.
    Any,
}

fn bulk(v: &[u8]) -> Exp {
    Exp::Bulk(Some(v.to_vec()))
}

fn wrongtype() -> Exp {
    Exp::Err("WRONGTYPE")
}

/// The model: 16 databases and the selected one.
struct Model {
    dbs: Vec<HashMap<Vec<u8>, V>>,
    db: usize,
}

impl Model {
    fn new() -> Model {
        Model {
            dbs: vec![HashMap::new(); 16],
            db: 0,
        }
    }
    fn get(&self, k: &[u8]) -> Option<&V> {
        self.dbs[self.db].get(k)
    }
    fn set(&mut self, k: &[u8], v: V) {
        self.dbs[self.db].insert(k.to_vec(), v);
    }
    fn del(&mut self, k: &[u8]) -> bool {
        self.dbs[self.db].remove(k).is_some()
    }
    /// Removes `k` if its collection became empty.
    fn tidy(&mut self, k: &[u8]) {
        if self.get(k).is_some_and(V::is_empty) {
            self.del(k);
        }
    }
}

fn to_value_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        Value::Okay => Some(b"OK".to_vec()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

fn matches(got: &Value, want: &Exp) -> bool {
    match (want, got) {
        (Exp::Any, _) => true,
        (Exp::Ok, Value::Okay) => true,
        (Exp::Ok, Value::SimpleString(s)) => s == "OK",
        (Exp::Int(i), Value::Int(g)) => i == g,
        (Exp::Bulk(None), Value::Nil) => true,
        (Exp::Bulk(Some(b)), g) => to_value_bytes(g).as_deref() == Some(b.as_slice()),
        (Exp::Float(None), Value::Nil) => true,
        (Exp::Float(Some(f)), g) => to_value_bytes(g)
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.parse::<f64>().ok())
            .is_some_and(|x| x == *f || (x - f).abs() <= f.abs() * 1e-12),
        (Exp::Array(items), Value::Array(g)) => {
            items.len() == g.len() && items.iter().zip(g).all(|(w, g)| matches(g, w))
        }
        (Exp::Array(items), Value::Nil) => items.is_empty(),
        (Exp::Unordered(items), Value::Array(g) | Value::Set(g)) => {
            let mut got: Vec<Vec<u8>> = g.iter().filter_map(to_value_bytes).collect();
            let mut want = items.clone();
            got.sort();
            want.sort();
            got == want
        }
        (Exp::Pairs(pairs), got) => {
            let flat: Vec<Vec<u8>> = match got {
                Value::Map(m) => m
                    .iter()
                    .flat_map(|(f, v)| [f, v])
                    .filter_map(to_value_bytes)
                    .collect(),
                Value::Array(g) => g.iter().filter_map(to_value_bytes).collect(),
                _ => return false,
            };
            let mut got: Vec<(Vec<u8>, Vec<u8>)> = flat
                .chunks_exact(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            let mut want = pairs.clone();
            got.sort();
            want.sort();
            flat.len() == pairs.len() * 2 && got == want
        }
        _ => false,
    }
}

/// Runs `args` and compares the reply with `want`.
fn check(con: &mut redis::Connection, args: &[Vec<u8>], want: &Exp) {
    check_value(con, args, want);
}

/// [`check`], returning the reply.
fn check_value(con: &mut redis::Connection, args: &[Vec<u8>], want: &Exp) -> Value {
    let mut c = redis::cmd(std::str::from_utf8(&args[0]).unwrap());
    for a in &args[1..] {
        c.arg(a.as_slice());
    }
    let shown = || {
        args.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    match c.query::<Value>(con) {
        Ok(v) => {
            assert!(
                !matches!(want, Exp::Err(_)) && matches(&v, want),
                "{}: got {v:?}, want {want:?}",
                shown()
            );
            v
        }
        Err(e) => {
            let code = e.code().unwrap_or("?").to_string();
            match want {
                Exp::Err(prefix) => assert!(
                    code.starts_with(prefix) || e.to_string().contains(prefix),
                    "{}: got error {e}, want {prefix}",
                    shown()
                ),
                _ => panic!("{}: got error {e}, want {want:?}", shown()),
            }
            Value::Nil
        }
    }
}

fn a(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn num(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// The expected reply of reading all of `k` with the command that suits its model type.
fn dump_command(k: &[u8], v: &V) -> (Vec<Vec<u8>>, Exp) {
    match v {
        V::Str(s) => (a(&[b"GET", k]), bulk(s)),
        V::Hash(h) => (
            a(&[b"HGETALL", k]),
            Exp::Pairs(h.iter().map(|(f, v)| (f.clone(), v.clone())).collect()),
        ),
        V::ZSet(z) => {
            let mut items: Vec<(&Vec<u8>, &f64)> = z.iter().collect();
            items.sort_by(|x, y| x.1.total_cmp(y.1).then(x.0.cmp(y.0)));
            (
                a(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]),
                Exp::Array(
                    items
                        .into_iter()
                        .flat_map(|(m, s)| [bulk(m), Exp::Float(Some(*s))])
                        .collect(),
                ),
            )
        }
        V::List(l) => (
            a(&[b"LRANGE", k, b"0", b"-1"]),
            Exp::Array(l.iter().map(|e| bulk(e)).collect()),
        ),
        V::Set(s) => (
            a(&[b"SMEMBERS", k]),
            Exp::Unordered(s.iter().cloned().collect()),
        ),
    }
}

/// Compares every key of every database the model uses, and DBSIZE.
fn verify_all(con: &mut redis::Connection, model: &Model) {
    for (db, keys) in model.dbs.iter().enumerate() {
        check(con, &a(&[b"SELECT", &num(db as i64)]), &Exp::Ok);
        check(con, &a(&[b"DBSIZE"]), &Exp::Int(keys.len() as i64));
        for (k, v) in keys {
            let t = v.type_name().as_bytes().to_vec();
            check(con, &a(&[b"TYPE", k]), &Exp::Bulk(Some(t)));
            let (cmd, want) = dump_command(k, v);
            check(con, &cmd, &want);
        }
    }
    check(con, &a(&[b"SELECT", &num(model.db as i64)]), &Exp::Ok);
}

/// Runs `ROUNDS` rounds of `OPS_PER_ROUND` operations from `step`, restarting (SIGKILL) between
/// rounds and comparing the whole state after each.
fn run_model(seed: u64, step: fn(&mut Rng, &mut Model, &mut redis::Connection)) {
    let mut server = Server::start(&[]);
    let mut model = Model::new();
    let mut rng = Rng(seed);
    for round in 0..ROUNDS {
        let mut con = server.client();
        check(&mut con, &a(&[b"SELECT", &num(model.db as i64)]), &Exp::Ok);
        for _ in 0..OPS_PER_ROUND {
            if rng.chance(3) {
                keyspace_step(&mut rng, &mut model, &mut con);
            } else {
                step(&mut rng, &mut model, &mut con);
            }
        }
        verify_all(&mut con, &model);
        drop(con);
        if round + 1 < ROUNDS {
            server = server.restart();
            let mut con = server.client();
            verify_all(&mut con, &model);
        }
    }
}

const KEYS: &[&[u8]] = &[b"k1", b"k2", b"k3", b"k4", b"other"];
const ITEMS: &[&[u8]] = &[b"a", b"b", b"c", b"d", b"e", b"f", b"gg", b""];

/// Keyspace operations shared by every model: DEL, EXISTS, RENAME, MOVE, COPY, SELECT, a string
/// SET over any key.
fn keyspace_step(rng: &mut Rng, m: &mut Model, con: &mut redis::Connection) {
    let k = *rng.pick(KEYS);
    let k2 = *rng.pick(KEYS);
    match rng.below(8) {
        0 => {
            let n = i64::from(m.del(k));
            check(con, &a(&[b"DEL", k]), &Exp::Int(n));
        }
        1 => {
            let n = i64::from(m.get(k).is_some());
            check(con, &a(&[b"EXISTS", k]), &Exp::Int(n));
        }
        2 => {
            let want = match m.get(k).cloned() {
                None => Exp::Err("ERR"),
                Some(v) => {
                    m.del(k);
                    m.set(k2, v);
                    Exp::Ok
                }
            };
            check(con, &a(&[b"RENAME", k, k2]), &want);
        }
        3 => {
            let to = (m.db + 1 + rng.below(2) as usize) % 3;
            let want = match m.get(k).cloned() {
                Some(v) if !m.dbs[to].contains_key(k) => {
                    m.del(k);
                    m.dbs[to].insert(k.to_vec(), v);
                    1
                }
                _ => 0,
            };
            check(con, &a(&[b"MOVE", k, &num(to as i64)]), &Exp::Int(want));
        }
        4 => {
            let want = match (k == k2, m.get(k).cloned()) {
                (true, _) => Exp::Err("ERR"),
                (false, None) => Exp::Int(0),
                (false, Some(v)) => {
                    m.set(k2, v);
                    Exp::Int(1)
                }
            };
            check(con, &a(&[b"COPY", k, k2, b"REPLACE"]), &want);
        }
        5 => {
            m.db = rng.below(3) as usize;
            check(con, &a(&[b"SELECT", &num(m.db as i64)]), &Exp::Ok);
        }
        6 => {
            let v = rng.pick(ITEMS).to_vec();
            m.set(k, V::Str(v.clone()));
            check(con, &a(&[b"SET", k, &v]), &Exp::Ok);
        }
        _ => {
            let n = m.dbs[m.db].len() as i64;
            check(con, &a(&[b"DBSIZE"]), &Exp::Int(n));
        }
    }
}

fn step_strings(rng: &mut Rng, m: &mut Model, con: &mut redis::Connection) {
    let k = *rng.pick(KEYS);
    let cur = m.get(k).cloned();
    let s = match &cur {
        None => Some(Vec::new()),
        Some(V::Str(s)) => Some(s.clone()),
        Some(_) => None,
    };
    match rng.below(9) {
        0 => {
            let v = rng.pick(ITEMS).to_vec();
            let want = match &cur {
                Some(V::Str(_)) | None => {
                    let mut n = s.clone().unwrap_or_default();
                    n.extend_from_slice(&v);
                    m.set(k, V::Str(n.clone()));
                    Exp::Int(n.len() as i64)
                }
                _ => wrongtype(),
            };
            check(con, &a(&[b"APPEND", k, &v]), &want);
        }
        1 => {
            let d = rng.below(21) as i64 - 10;
            let want = match &cur {
                None => {
                    m.set(k, V::Str(num(d)));
                    Exp::Int(d)
                }
                Some(V::Str(s)) => match std::str::from_utf8(s).ok().and_then(|t| {
                    (t == "0" || !(t.starts_with('0') || t.starts_with("-0") || t.starts_with('+')))
                        .then(|| t.parse::<i64>().ok())
                        .flatten()
                }) {
                    Some(n) => {
                        m.set(k, V::Str(num(n + d)));
                        Exp::Int(n + d)
                    }
                    None => Exp::Err("ERR"),
                },
                Some(_) => wrongtype(),
            };
            check(con, &a(&[b"INCRBY", k, &num(d)]), &want);
        }
        2 => {
            let want = match &cur {
                None => Exp::Bulk(None),
                Some(V::Str(s)) => bulk(s),
                Some(_) => wrongtype(),
            };
            check(con, &a(&[b"GET", k]), &want);
        }
        3 => {
            let want = match &cur {
                None => Exp::Int(0),
                Some(V::Str(s)) => Exp::Int(s.len() as i64),
                Some(_) => wrongtype(),
            };
            check(con, &a(&[b"STRLEN", k]), &want);
        }
        4 => {
            let off = rng.below(6) as usize;
            let v = rng.pick(ITEMS).to_vec();
            let want = match s {
                Some(mut s) => {
                    if !v.is_empty() {
                        if s.len() < off + v.len() {
                            s.resize(off + v.len(), 0);
                        }
                        s[off..off + v.len()].copy_from_slice(&v);
                        m.set(k, V::Str(s.clone()));
                    }
                    let len = if v.is_empty() {
                        cur.as_ref().map_or(0, |_| s.len())
                    } else {
                        s.len()
                    };
                    Exp::Int(len as i64)
                }
                None => wrongtype(),
            };
            check(con, &a(&[b"SETRANGE", k, &num(off as i64), &v]), &want);
        }
        5 => {
            let (st, en) = (rng.below(7) as i64 - 3, rng.below(7) as i64 - 3);
            let want = match &cur {
                None => bulk(b""),
                Some(V::Str(s)) => {
                    let len = s.len() as i64;
                    let (mut a0, mut b0) = (st, en);
                    if a0 < 0 && b0 < 0 && a0 > b0 {
                        bulk(b"")
                    } else {
                        if a0 < 0 {
                            a0 += len;
                        }
                        if b0 < 0 {
                            b0 += len;
                        }
                        a0 = a0.max(0);
                        b0 = b0.max(0).min(len - 1);
                        if a0 > b0 || len == 0 {
                            bulk(b"")
                        } else {
                            bulk(&s[a0 as usize..=b0 as usize])
                        }
                    }
                }
                Some(_) => wrongtype(),
            };
            check(con, &a(&[b"GETRANGE", k, &num(st), &num(en)]), &want);
        }
        6 => {
            let k2 = *rng.pick(KEYS);
            let (v1, v2) = (rng.pick(ITEMS).to_vec(), rng.pick(ITEMS).to_vec());
            m.set(k, V::Str(v1.clone()));
            m.set(k2, V::Str(v2.clone()));
            check(con, &a(&[b"MSET", k, &v1, k2, &v2]), &Exp::Ok);
        }
        7 => {
            let want = match &cur {
                None => Exp::Bulk(None),
                Some(V::Str(s)) => {
                    let s = s.clone();
                    m.del(k);
                    bulk(&s)
                }
                Some(_) => wrongtype(),
            };
            check(con, &a(&[b"GETDEL", k]), &want);
        }
        _ => {
            let v = rng.pick(ITEMS).to_vec();
            let want = if cur.is_none() {
                m.set(k, V::Str(v.clone()));
                1
            } else {
                0
            };
            check(con, &a(&[b"SETNX", k, &v]), &Exp::Int(want));
        }
    }
}

fn step_hashes(rng: &mut Rng, m: &mut Model, con: &mut redis::Connection) {
    let k = *rng.pick(KEYS);
    let f = rng.pick(ITEMS).to_vec();
    let h = match m.get(k) {
        None => Some(BTreeMap::new()),
        Some(V::Hash(h)) => Some(h.clone()),
        Some(_) => None,
    };
    let Some(mut h) = h else {
        check(con, &a(&[b"HSET", k, &f, b"v"]), &wrongtype());
        return;
    };
    match rng.below(8) {
        0 | 1 => {
            let f2 = rng.pick(ITEMS).to_vec();
            let (mut v, v2) = (rng.pick(ITEMS).to_vec(), rng.pick(ITEMS).to_vec());
            if rng.chance(5) {
                // Past the inline limit: the hash moves to one record per field.
                v = vec![b'L'; 9000];
            }
            let mut added = i64::from(!h.contains_key(&f));
            h.insert(f.clone(), v.clone());
            added += i64::from(!h.contains_key(&f2));
            h.insert(f2.clone(), v2.clone());
            m.set(k, V::Hash(h));
            check(con, &a(&[b"HSET", k, &f, &v, &f2, &v2]), &Exp::Int(added));
        }
        2 => {
            let n = i64::from(h.remove(&f).is_some());
            m.set(k, V::Hash(h));
            m.tidy(k);
            check(con, &a(&[b"HDEL", k, &f]), &Exp::Int(n));
        }
        3 => check(con, &a(&[b"HGET", k, &f]), &Exp::Bulk(h.get(&f).cloned())),
        4 => check(con, &a(&[b"HLEN", k]), &Exp::Int(h.len() as i64)),
        5 => {
            let d = rng.below(9) as i64 - 4;
            let want = match h.get(&f) {
                None => Some(d),
                Some(v) => std::str::from_utf8(v)
                    .ok()
                    .filter(|t| *t == "0" || !(t.starts_with('0') || t.starts_with("-0")))
                    .and_then(|t| t.parse::<i64>().ok())
                    .map(|n| n + d),
            };
            let exp = match want {
                Some(n) => {
                    h.insert(f.clone(), num(n));
                    m.set(k, V::Hash(h));
                    Exp::Int(n)
                }
                None => Exp::Err("ERR"),
            };
            check(con, &a(&[b"HINCRBY", k, &f, &num(d)]), &exp);
        }
        6 => {
            let f2 = rng.pick(ITEMS).to_vec();
            check(
                con,
                &a(&[b"HMGET", k, &f, &f2]),
                &Exp::Array(vec![
                    Exp::Bulk(h.get(&f).cloned()),
                    Exp::Bulk(h.get(&f2).cloned()),
                ]),
            );
        }
        _ => {
            let n = if h.contains_key(&f) {
                0
            } else {
                h.insert(f.clone(), b"nx".to_vec());
                m.set(k, V::Hash(h));
                1
            };
            check(con, &a(&[b"HSETNX", k, &f, b"nx"]), &Exp::Int(n));
        }
    }
}

fn sorted(z: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut items: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.clone(), *s)).collect();
    items.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.0.cmp(&y.0)));
    items
}

/// Redis's inclusive rank range over `len` items.
fn rank_range(start: i64, stop: i64, len: usize) -> std::ops::Range<usize> {
    let len = len as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if s > e || s >= len {
        0..0
    } else {
        s as usize..e as usize + 1
    }
}

fn step_zsets(rng: &mut Rng, m: &mut Model, con: &mut redis::Connection) {
    let k = *rng.pick(KEYS);
    let mb = rng.pick(ITEMS).to_vec();
    let z = match m.get(k) {
        None => Some(BTreeMap::new()),
        Some(V::ZSet(z)) => Some(z.clone()),
        Some(_) => None,
    };
    let Some(mut z) = z else {
        check(con, &a(&[b"ZADD", k, b"1", &mb]), &wrongtype());
        return;
    };
    let score = (rng.below(9) as f64 - 4.0) / 2.0;
    match rng.below(9) {
        0 | 1 => {
            let n = i64::from(!z.contains_key(&mb));
            z.insert(mb.clone(), score);
            m.set(k, V::ZSet(z));
            check(
                con,
                &a(&[b"ZADD", k, format!("{score}").as_bytes(), &mb]),
                &Exp::Int(n),
            );
        }
        2 => {
            let n = i64::from(z.remove(&mb).is_some());
            m.set(k, V::ZSet(z));
            m.tidy(k);
            check(con, &a(&[b"ZREM", k, &mb]), &Exp::Int(n));
        }
        3 => {
            let (st, sp) = (rng.below(7) as i64 - 3, rng.below(7) as i64 - 3);
            let items = sorted(&z);
            let rev = rng.chance(50);
            let mut ordered = items.clone();
            if rev {
                ordered.reverse();
            }
            let want: Vec<Exp> = ordered[rank_range(st, sp, ordered.len())]
                .iter()
                .map(|(m, _)| bulk(m))
                .collect();
            let cmd: &[u8] = if rev { b"ZREVRANGE" } else { b"ZRANGE" };
            check(con, &a(&[cmd, k, &num(st), &num(sp)]), &Exp::Array(want));
        }
        4 => {
            let (lo, hi) = ((rng.below(5) as f64 - 2.0), (rng.below(5) as f64 - 1.0));
            let (off, cnt) = (rng.below(3) as usize, rng.below(4) as usize);
            let want: Vec<Exp> = sorted(&z)
                .into_iter()
                .filter(|(_, s)| *s > lo && *s <= hi)
                .skip(off)
                .take(cnt)
                .flat_map(|(m, s)| [bulk(&m), Exp::Float(Some(s))])
                .collect();
            check(
                con,
                &a(&[
                    b"ZRANGEBYSCORE",
                    k,
                    format!("({lo}").as_bytes(),
                    format!("{hi}").as_bytes(),
                    b"WITHSCORES",
                    b"LIMIT",
                    &num(off as i64),
                    &num(cnt as i64),
                ]),
                &Exp::Array(want),
            );
        }
        5 => {
            let want = sorted(&z)
                .iter()
                .position(|(x, _)| *x == mb)
                .map_or(Exp::Bulk(None), |r| Exp::Int(r as i64));
            check(con, &a(&[b"ZRANK", k, &mb]), &want);
        }
        6 => {
            let max = rng.chance(50);
            let cnt = rng.below(3) as usize + 1;
            let mut items = sorted(&z);
            if max {
                items.reverse();
            }
            let popped: Vec<(Vec<u8>, f64)> = items.into_iter().take(cnt).collect();
            for (x, _) in &popped {
                z.remove(x);
            }
            m.set(k, V::ZSet(z));
            m.tidy(k);
            let want = popped
                .into_iter()
                .flat_map(|(x, s)| [bulk(&x), Exp::Float(Some(s))])
                .collect();
            let cmd: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            check(con, &a(&[cmd, k, &num(cnt as i64)]), &Exp::Array(want));
        }
        7 => {
            let new = z.get(&mb).copied().unwrap_or(0.0) + score;
            z.insert(mb.clone(), new);
            m.set(k, V::ZSet(z));
            check(
                con,
                &a(&[b"ZINCRBY", k, format!("{score}").as_bytes(), &mb]),
                &Exp::Float(Some(new)),
            );
        }
        _ => {
            let (st, sp) = (rng.below(5) as i64 - 2, rng.below(5) as i64 - 2);
            let items = sorted(&z);
            let range = rank_range(st, sp, items.len());
            let n = range.len() as i64;
            for (x, _) in &items[range] {
                z.remove(x);
            }
            m.set(k, V::ZSet(z));
            m.tidy(k);
            check(
                con,
                &a(&[b"ZREMRANGEBYRANK", k, &num(st), &num(sp)]),
                &Exp::Int(n),
            );
        }
    }
}

fn step_lists(rng: &mut Rng, m: &mut Model, con: &mut redis::Connection) {
    let k = *rng.pick(KEYS);
    let e = rng.pick(ITEMS).to_vec();
    let l = match m.get(k) {
        None => Some(VecDeque::new()),
        Some(V::List(l)) => Some(l.clone()),
        Some(_) => None,
    };
    let Some(mut l) = l else {
        check(con, &a(&[b"LPUSH", k, &e]), &wrongtype());
        return;
    };
    let exists = m.get(k).is_some();
    match rng.below(11) {
        0 | 1 => {
            let left = rng.chance(50);
            let e2 = rng.pick(ITEMS).to_vec();
            for x in [&e, &e2] {
                if left {
                    l.push_front(x.clone());
                } else {
                    l.push_back(x.clone());
                }
            }
            let n = l.len() as i64;
            m.set(k, V::List(l));
            let cmd: &[u8] = if left { b"LPUSH" } else { b"RPUSH" };
            check(con, &a(&[cmd, k, &e, &e2]), &Exp::Int(n));
        }
        2 => {
            let left = rng.chance(50);
            let cnt = rng.below(3) as usize + 1;
            let mut out = Vec::new();
            for _ in 0..cnt {
                let x = if left { l.pop_front() } else { l.pop_back() };
                out.extend(x);
            }
            let want = if exists {
                Exp::Array(out.iter().map(|x| bulk(x)).collect())
            } else {
                Exp::Bulk(None)
            };
            m.set(k, V::List(l));
            m.tidy(k);
            let cmd: &[u8] = if left { b"LPOP" } else { b"RPOP" };
            check(con, &a(&[cmd, k, &num(cnt as i64)]), &want);
        }
        3 => {
            let (st, sp) = (rng.below(9) as i64 - 4, rng.below(9) as i64 - 4);
            let want = l
                .iter()
                .collect::<Vec<_>>()
                .get(rank_range(st, sp, l.len()))
                .unwrap_or_default()
                .iter()
                .map(|x| bulk(x))
                .collect();
            check(
                con,
                &a(&[b"LRANGE", k, &num(st), &num(sp)]),
                &Exp::Array(want),
            );
        }
        4 => {
            let i = rng.below(7) as i64 - 3;
            let idx = if i < 0 { l.len() as i64 + i } else { i };
            let want = l.get(idx.max(0) as usize).filter(|_| idx >= 0).cloned();
            check(con, &a(&[b"LINDEX", k, &num(i)]), &Exp::Bulk(want));
        }
        5 => {
            let i = rng.below(5) as i64 - 2;
            let idx = if i < 0 { l.len() as i64 + i } else { i };
            let want = if !exists || idx < 0 || idx as usize >= l.len() {
                Exp::Err("ERR")
            } else {
                l[idx as usize] = e.clone();
                m.set(k, V::List(l));
                Exp::Ok
            };
            check(con, &a(&[b"LSET", k, &num(i), &e]), &want);
        }
        6 => {
            let pivot = rng.pick(ITEMS).to_vec();
            let before = rng.chance(50);
            let want = if !exists {
                Exp::Int(0)
            } else {
                match l.iter().position(|x| *x == pivot) {
                    None => Exp::Int(-1),
                    Some(p) => {
                        l.insert(if before { p } else { p + 1 }, e.clone());
                        let n = l.len() as i64;
                        m.set(k, V::List(l));
                        Exp::Int(n)
                    }
                }
            };
            let w: &[u8] = if before { b"BEFORE" } else { b"AFTER" };
            check(con, &a(&[b"LINSERT", k, w, &pivot, &e]), &want);
        }
        7 => {
            let cnt = rng.below(5) as i64 - 2;
            let mut removed = 0;
            let limit = if cnt == 0 {
                usize::MAX
            } else {
                cnt.unsigned_abs() as usize
            };
            let idxs: Vec<usize> = if cnt < 0 {
                (0..l.len()).rev().collect()
            } else {
                (0..l.len()).collect()
            };
            let mut doomed = vec![false; l.len()];
            for i in idxs {
                if removed < limit && l[i] == e {
                    doomed[i] = true;
                    removed += 1;
                }
            }
            let kept: VecDeque<Vec<u8>> = l
                .iter()
                .zip(&doomed)
                .filter(|(_, d)| !**d)
                .map(|(x, _)| x.clone())
                .collect();
            m.set(k, V::List(kept));
            m.tidy(k);
            check(
                con,
                &a(&[b"LREM", k, &num(cnt), &e]),
                &Exp::Int(removed as i64),
            );
        }
        8 => {
            let (st, sp) = (rng.below(7) as i64 - 3, rng.below(7) as i64 - 3);
            let r = rank_range(st, sp, l.len());
            let kept: VecDeque<Vec<u8>> = l
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .get(r)
                .unwrap_or_default()
                .iter()
                .cloned()
                .collect();
            if exists {
                m.set(k, V::List(kept));
                m.tidy(k);
            }
            check(con, &a(&[b"LTRIM", k, &num(st), &num(sp)]), &Exp::Ok);
        }
        9 => {
            let dst = *rng.pick(KEYS);
            let dst_ok = matches!(m.get(dst), None | Some(V::List(_)));
            let want = match l.pop_back() {
                None => Exp::Bulk(None),
                Some(_) if !dst_ok => {
                    check(
                        con,
                        &a(&[b"LMOVE", k, dst, b"RIGHT", b"LEFT"]),
                        &wrongtype(),
                    );
                    return;
                }
                Some(x) => {
                    m.set(k, V::List(l));
                    m.tidy(k);
                    let mut d = match m.get(dst) {
                        Some(V::List(d)) => d.clone(),
                        _ => VecDeque::new(),
                    };
                    d.push_front(x.clone());
                    m.set(dst, V::List(d));
                    bulk(&x)
                }
            };
            check(con, &a(&[b"LMOVE", k, dst, b"RIGHT", b"LEFT"]), &want);
        }
        _ => {
            let want = l
                .iter()
                .position(|x| *x == e)
                .map_or(Exp::Bulk(None), |p| Exp::Int(p as i64));
            check(con, &a(&[b"LPOS", k, &e]), &want);
        }
    }
}

/// A set operation of the model.
type SetAlgebra = fn(&BTreeSet<Vec<u8>>, &BTreeSet<Vec<u8>>) -> BTreeSet<Vec<u8>>;

fn step_sets(rng: &mut Rng, m: &mut Model, con: &mut redis::Connection) {
    let k = *rng.pick(KEYS);
    let e = rng.pick(ITEMS).to_vec();
    let s = match m.get(k) {
        None => Some(BTreeSet::new()),
        Some(V::Set(s)) => Some(s.clone()),
        Some(_) => None,
    };
    let Some(mut s) = s else {
        check(con, &a(&[b"SADD", k, &e]), &wrongtype());
        return;
    };
    let set_of = |m: &Model, key: &[u8]| -> Option<BTreeSet<Vec<u8>>> {
        match m.get(key) {
            None => Some(BTreeSet::new()),
            Some(V::Set(s)) => Some(s.clone()),
            Some(_) => None,
        }
    };
    match rng.below(8) {
        0 | 1 => {
            let e2 = rng.pick(ITEMS).to_vec();
            let mut n = i64::from(s.insert(e.clone()));
            n += i64::from(s.insert(e2.clone()));
            m.set(k, V::Set(s));
            check(con, &a(&[b"SADD", k, &e, &e2]), &Exp::Int(n));
        }
        2 => {
            let n = i64::from(s.remove(&e));
            m.set(k, V::Set(s));
            m.tidy(k);
            check(con, &a(&[b"SREM", k, &e]), &Exp::Int(n));
        }
        3 => check(
            con,
            &a(&[b"SISMEMBER", k, &e]),
            &Exp::Int(i64::from(s.contains(&e))),
        ),
        4 => check(
            con,
            &a(&[b"SMEMBERS", k]),
            &Exp::Unordered(s.iter().cloned().collect()),
        ),
        5 => {
            // SPOP: random; the model follows the reply and checks it was a member.
            let got = check_value(con, &a(&[b"SPOP", k]), &Exp::Any);
            match to_value_bytes(&got) {
                Some(x) => assert!(s.remove(&x), "SPOP returned a non-member"),
                None => assert!(s.is_empty(), "SPOP returned nothing from a non-empty set"),
            }
            m.set(k, V::Set(s));
            m.tidy(k);
        }
        6 => {
            let dst = *rng.pick(KEYS);
            let want = match set_of(m, dst) {
                None => wrongtype(),
                Some(mut d) => {
                    if s.remove(&e) {
                        d.insert(e.clone());
                        m.set(k, V::Set(s));
                        m.tidy(k);
                        m.set(dst, V::Set(d));
                        Exp::Int(1)
                    } else {
                        Exp::Int(0)
                    }
                }
            };
            check(con, &a(&[b"SMOVE", k, dst, &e]), &want);
        }
        _ => {
            let (x, y, dst) = (*rng.pick(KEYS), *rng.pick(KEYS), *rng.pick(KEYS));
            let ops: [(&[u8], SetAlgebra); 3] = [
                (b"SINTERSTORE", |a, b| a.intersection(b).cloned().collect()),
                (b"SUNIONSTORE", |a, b| a.union(b).cloned().collect()),
                (b"SDIFFSTORE", |a, b| a.difference(b).cloned().collect()),
            ];
            let (name, f) = ops[rng.below(3) as usize];
            let want = match (set_of(m, x), set_of(m, y)) {
                (Some(sx), Some(sy)) => {
                    let r = f(&sx, &sy);
                    let n = r.len() as i64;
                    m.del(dst);
                    if !r.is_empty() {
                        m.set(dst, V::Set(r));
                    }
                    Exp::Int(n)
                }
                _ => wrongtype(),
            };
            check(con, &a(&[name, dst, x, y]), &want);
        }
    }
}

#[test]
fn strings_follow_the_model_across_restarts() {
    run_model(0x5eed_0001, step_strings);
}

#[test]
fn hashes_follow_the_model_across_restarts() {
    run_model(0x5eed_0002, step_hashes);
}

#[test]
fn sorted_sets_follow_the_model_across_restarts() {
    run_model(0x5eed_0003, step_zsets);
}

#[test]
fn lists_follow_the_model_across_restarts() {
    run_model(0x5eed_0004, step_lists);
}

#[test]
fn sets_follow_the_model_across_restarts() {
    run_model(0x5eed_0005, step_sets);
}
