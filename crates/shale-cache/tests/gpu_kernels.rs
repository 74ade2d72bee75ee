//! The GPU index's kernels compile with NVRTC (no GPU needed, only libnvrtc).
#![cfg(feature = "gpu")]

use shale_cache::index::gpu::compile_kernels;

#[test]
#[ignore = "needs CUDA 13's NVRTC (libnvrtc.so.13) on LD_LIBRARY_PATH; CI has no CUDA"]
fn kernels_compile_for_turing_ampere_and_hopper() {
    for (major, minor) in [(7, 5), (8, 0), (9, 0)] {
        let ptx =
            compile_kernels(major, minor).unwrap_or_else(|e| panic!("sm_{major}{minor}: {e}"));
        for kernel in [
            "index_search",
            "index_delete",
            "index_update",
            "index_place",
        ] {
            assert!(
                ptx.contains(&format!(".entry {kernel}")),
                "sm_{major}{minor}: no {kernel} in the PTX"
            );
        }
        // Slots change only through 64-bit atomics.
        assert!(
            ptx.contains("atom.global.cas.b64"),
            "no 64-bit CAS in the PTX"
        );
        assert!(
            ptx.contains("atom.global.exch.b64"),
            "no 64-bit exchange in the PTX"
        );
    }
}
