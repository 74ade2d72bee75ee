//! Fuzzes `shale::fuzz_api::blob_file`: never a panic, whatever the bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shale::fuzz_api::blob_file(data);
});
