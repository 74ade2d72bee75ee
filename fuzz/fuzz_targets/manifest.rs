//! Fuzzes the MANIFEST: the bytes as one version edit (which must round-trip if it decodes) and as
//! a whole log of edits.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shale::fuzz_api::manifest_edit(data);
    shale::fuzz_api::manifest_replay(data);
});
