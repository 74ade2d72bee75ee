// Shale's GPU index: Mega-KV's search, delete and insert over buckets of 8 packed slots.
// Compiled at run time by NVRTC (no toolkit headers needed); launched by `index/gpu/device.rs`.
//
// Layout (do not change without the host side, `index/shape.rs`): the table is `buckets * 8`
// slots of 64 bits, one bucket per 64-byte line. A slot packs `(location << 32) | signature`; 0
// is empty (a signature is never 0: a key hash whose low 32 bits are 0 has signature 1; a
// location is never 0). A key's first bucket is `hash & bucket_mask`, its second
// `first ^ (signature & block_mask)`: the two stay in one of the 8 insert blocks, and either is
// derived from the other and the signature (partial-key cuckoo hashing).
//
// Threads: every job (one search, delete or insert) is served by a tile of 8 consecutive lanes of
// one warp, lane i owning slot i of the bucket being probed, so a bucket is one coalesced 64-byte
// read. A tile lies entirely inside or entirely outside a launch's job range (blocks are whole
// warps), so its 8 lanes always take the same path. Every collective names the tile's own lane
// mask (`__ballot_sync`, `__shfl_sync`): no code relies on a warp running in lock step, which
// Volta's independent thread scheduling broke. A tile plays the part of
// `cooperative_groups::thread_block_tile<8>`, written out because NVRTC ships without that header.
//
// Slots change only through 64-bit atomics (atomicCAS, atomicExch) on the packed word, so a
// (signature, location) pair is never torn and each location is held by exactly one slot or one
// tile at a time. Kernels of one batch run in order on one stream: search, delete, update,
// elect, place.
// Within a kernel, reads of slots that other tiles may change go through L2 (`__ldcg`), where the
// atomics are performed.

typedef unsigned int u32;
typedef unsigned long long u64;

// Evictions one insert may chain before the last victim is dropped (Mega-KV: 5). Mirrored by
// `MAX_DISPLACEMENTS` on the host side.
#define MAX_DISPLACEMENTS 5

// Retries of one in-place update (see index_update).
#define UPDATE_ROUNDS 4096

struct Tile {
    u32 lane;  // 0..7: the slot this thread owns in a probed bucket
    u32 base;  // the tile's first lane in its warp
    u32 mask;  // the tile's 8 lanes in its warp
};

__device__ __forceinline__ Tile this_tile() {
    u32 warp_lane = threadIdx.x & 31u;
    Tile t;
    t.lane = warp_lane & 7u;
    t.base = warp_lane & ~7u;
    t.mask = 0xFFu << t.base;
    return t;
}

// Bit i set where lane i of the tile has `p`.
__device__ __forceinline__ u32 tile_ballot(const Tile& t, bool p) {
    return (__ballot_sync(t.mask, p) >> t.base) & 0xFFu;
}

// `v` as held by lane `src` of the tile.
__device__ __forceinline__ u64 tile_shfl(const Tile& t, u64 v, u32 src) {
    return __shfl_sync(t.mask, v, (int)src, 8);
}

// The job this thread's tile serves.
__device__ __forceinline__ u64 tile_job() {
    return ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
}

__device__ __forceinline__ u32 signature_of(u64 key) {
    u32 sig = (u32)key;
    return sig == 0 ? 1u : sig;  // ZERO_SIGNATURE_REMAP
}
// The signature of a packed slot (already remapped when it was stored).
__device__ __forceinline__ u32 slot_signature(u64 slot) { return (u32)slot; }
__device__ __forceinline__ u32 first_bucket(u64 key, u32 bucket_mask) { return (u32)(key >> 32) & bucket_mask; }
__device__ __forceinline__ u32 alternate_bucket(u32 bucket, u32 signature, u32 block_mask) {
    return bucket ^ (signature & block_mask);
}
__device__ __forceinline__ u64 pack_slot(u32 signature, u32 location) {
    return ((u64)location << 32) | signature;
}
__device__ __forceinline__ u32 slot_location(u64 slot) { return (u32)(slot >> 32); }

// Claims an empty slot of `bucket` for `entry`. Empty slots only fill up while the place kernel
// runs, so each lost race removes one candidate: at most 8 rounds.
__device__ bool claim_empty(const Tile& t, u64* table, u32 bucket, u64 entry) {
    u64* slots = table + (u64)bucket * 8;
    u64 mine = __ldcg(slots + t.lane);
    for (int round = 0; round < 8; ++round) {
        u32 empty = tile_ballot(t, mine == 0);
        if (empty == 0) return false;
        u32 owner = __ffs(empty) - 1;
        u64 seen = 0;
        if (t.lane == owner) {
            seen = atomicCAS(slots + t.lane, 0ull, entry);
            mine = seen;
        }
        if (tile_shfl(t, seen, owner) == 0) return true;
    }
    return false;
}

// found[job] = (location in the first bucket, location in the second), 0 where none matches.
// The table is not written while this kernel runs.
extern "C" __global__ void index_search(const u64* __restrict__ table, u32 bucket_mask, u32 block_mask,
                                        const u64* __restrict__ keys, u32 count, uint2* __restrict__ found) {
    u64 job = tile_job();
    if (job >= count) return;
    Tile t = this_tile();
    u64 key = keys[job];
    u32 sig = signature_of(key);
    u32 b1 = first_bucket(key, bucket_mask);
    u32 b2 = alternate_bucket(b1, sig, block_mask);
    u64 s1 = __ldg(table + (u64)b1 * 8 + t.lane);
    u64 s2 = __ldg(table + (u64)b2 * 8 + t.lane);
    u32 hit1 = tile_ballot(t, slot_signature(s1) == sig);
    u32 hit2 = tile_ballot(t, slot_signature(s2) == sig && b2 != b1);
    u64 at1 = tile_shfl(t, s1, hit1 ? __ffs(hit1) - 1 : 0);
    u64 at2 = tile_shfl(t, s2, hit2 ? __ffs(hit2) - 1 : 0);
    if (t.lane == 0) {
        found[job] = make_uint2(hit1 ? slot_location(at1) : 0u, hit2 ? slot_location(at2) : 0u);
    }
}

// Clears every slot holding exactly (signature, location) in either candidate bucket. Each lane
// handles its own slot; a lost CAS means another delete of the same pair won.
extern "C" __global__ void index_delete(u64* table, u32 bucket_mask, u32 block_mask, const u64* __restrict__ keys,
                                        const u32* __restrict__ locations, u32 count) {
    u64 job = tile_job();
    if (job >= count) return;
    Tile t = this_tile();
    u64 key = keys[job];
    u32 sig = signature_of(key);
    u64 entry = pack_slot(sig, locations[job]);
    u32 b1 = first_bucket(key, bucket_mask);
    u32 b2 = alternate_bucket(b1, sig, block_mask);
    u64* p1 = table + (u64)b1 * 8 + t.lane;
    if (__ldcg(p1) == entry) atomicCAS(p1, entry, 0ull);
    if (b2 != b1) {
        u64* p2 = table + (u64)b2 * 8 + t.lane;
        if (__ldcg(p2) == entry) atomicCAS(p2, entry, 0ull);
    }
}

// Inserts, first pass: where a candidate bucket already holds the signature, swap in the new
// location (the old one is displaced). Nothing moves between buckets in this pass, so a key present
// before the batch is always found. pending[job] = 1 where the key was absent.
extern "C" __global__ void index_update(u64* table, u32 bucket_mask, u32 block_mask, const u64* __restrict__ keys,
                                        const u32* __restrict__ locations, u32 count, u32* __restrict__ displaced,
                                        u32* __restrict__ pending) {
    u64 job = tile_job();
    if (job >= count) return;
    Tile t = this_tile();
    u64 key = keys[job];
    u32 sig = signature_of(key);
    u32 location = locations[job];
    u64 entry = pack_slot(sig, location);
    u32 b1 = first_bucket(key, bucket_mask);
    u32 b2 = alternate_bucket(b1, sig, block_mask);
    bool done = false;
    u32 old_location = 0;
    for (int which = 0; which < 2 && !done; ++which) {
        u32 bucket = which == 0 ? b1 : b2;
        if (which == 1 && b2 == b1) break;
        u64* slots = table + (u64)bucket * 8;
        u64 mine = __ldcg(slots + t.lane);
        // A lost CAS means another insert of the same pair and signature changed that slot
        // first; each round retries with what it wrote. Every lost round is another insert's
        // success, so the loop ends; the bound only guards against a broken invariant.
        for (int round = 0; round < UPDATE_ROUNDS; ++round) {
            u32 hits = tile_ballot(t, mine != 0 && slot_signature(mine) == sig);
            if (hits == 0) break;
            u32 owner = __ffs(hits) - 1;
            u64 seen = 0;
            if (t.lane == owner) {
                seen = atomicCAS(slots + t.lane, mine, entry);
            }
            u64 expected = tile_shfl(t, mine, owner);
            seen = tile_shfl(t, seen, owner);
            if (seen == expected) {
                done = true;
                old_location = slot_location(expected);
                break;
            }
            if (t.lane == owner) mine = seen;
        }
    }
    if (t.lane == 0) {
        displaced[job] = (done && old_location != location) ? old_location : 0u;
        pending[job] = done ? 0u : 1u;
    }
}

// A cheap integer mix, to pick victims from signature bits without a fixed pattern.
__device__ __forceinline__ u32 mix32(u32 x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// The name of a key's bucket pair and signature: two inserts with the same claim are the same
// entry to the index. Never 0 (the signature is not).
__device__ __forceinline__ u64 claim_of(u32 b1, u32 b2, u32 sig) {
    return ((u64)min(b1, b2) << 32) | sig;
}

// Where a claim lives in the open-addressed claim table (`claim_mask + 1` entries, at least twice
// the inserts, so probing always ends).
__device__ __forceinline__ u32 claim_home(u64 claim, u32 claim_mask) {
    return mix32((u32)(claim >> 32) * 0x9E3779B9u ^ (u32)claim) & claim_mask;
}

// Inserts, between the passes: among the keys still pending (absent before the batch), one
// insert per (bucket pair, signature) is elected, the latest in the batch. The claim table is
// zeroed before the batch. One thread per insert.
extern "C" __global__ void index_elect(u32 bucket_mask, u32 block_mask, const u64* __restrict__ keys, u32 count,
                                       const u32* __restrict__ pending, u64* claim_keys, u32* claim_jobs,
                                       u32 claim_mask) {
    u64 job = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (job >= count || pending[job] == 0) return;
    u64 key = keys[job];
    u32 sig = signature_of(key);
    u32 b1 = first_bucket(key, bucket_mask);
    u64 claim = claim_of(b1, alternate_bucket(b1, sig, block_mask), sig);
    for (u32 h = claim_home(claim, claim_mask);; h = (h + 1) & claim_mask) {
        u64 held = atomicCAS(claim_keys + h, 0ull, claim);
        if (held == 0 || held == claim) {
            atomicMax(claim_jobs + h, (u32)job + 1);
            return;
        }
    }
}

// Whether `job` won its claim in index_elect.
__device__ bool elected(u64 claim, u32 job, const u64* claim_keys, const u32* claim_jobs, u32 claim_mask) {
    for (u32 h = claim_home(claim, claim_mask);; h = (h + 1) & claim_mask) {
        if (claim_keys[h] == claim) return claim_jobs[h] == job + 1;
    }
}

// Inserts, second pass (keys absent before): claim an empty slot in either bucket, else evict a
// victim chosen by signature bits and carry it to its alternate bucket, at most MAX_DISPLACEMENTS
// times; the entry still carried after that is dropped and its location reported in
// displaced[job] and counted in *lossy. An insert that lost its election is dropped the same way
// (not counted as lossy). Slots only fill up in this pass (atomicCAS from empty, atomicExch of a full slot
// with a full entry), so every location present is held by one slot or by one carrying tile.
extern "C" __global__ void index_place(u64* table, u32 bucket_mask, u32 block_mask, const u64* __restrict__ keys,
                                       const u32* __restrict__ locations, u32 count, u32* __restrict__ displaced,
                                       const u32* __restrict__ pending, const u64* __restrict__ claim_keys,
                                       const u32* __restrict__ claim_jobs, u32 claim_mask, u32* lossy) {
    u64 job = tile_job();
    if (job >= count) return;
    if (pending[job] == 0) return;  // the same word for the whole tile
    Tile t = this_tile();
    u64 key = keys[job];
    u32 sig = signature_of(key);
    u32 location = locations[job];
    u64 entry = pack_slot(sig, location);
    u32 b1 = first_bucket(key, bucket_mask);
    u32 b2 = alternate_bucket(b1, sig, block_mask);
    if (!elected(claim_of(b1, b2, sig), (u32)job, claim_keys, claim_jobs, claim_mask)) {
        if (t.lane == 0) displaced[job] = location;
        return;
    }
    if (claim_empty(t, table, b1, entry)) return;
    if (b2 != b1 && claim_empty(t, table, b2, entry)) return;

    u64 carried = entry;
    u32 bucket = (mix32(sig) & 1u) ? b2 : b1;
    for (int step = 0; step < MAX_DISPLACEMENTS; ++step) {
        u32 victim_lane = mix32(slot_signature(carried) + (u32)step) >> 29;
        u64 victim = 0;
        if (t.lane == victim_lane) {
            victim = atomicExch(table + (u64)bucket * 8 + t.lane, carried);
        }
        victim = tile_shfl(t, victim, victim_lane);
        if (victim == 0) return;  // the slot was empty after all: placed, nothing evicted
        carried = victim;
        bucket = alternate_bucket(bucket, slot_signature(carried), block_mask);
        if (claim_empty(t, table, bucket, carried)) return;
    }
    if (t.lane == 0) {
        displaced[job] = slot_location(carried);
        atomicAdd(lossy, 1u);
    }
}
