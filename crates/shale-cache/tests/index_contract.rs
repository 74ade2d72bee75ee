//! The `BatchIndex` contract, run against every backend built here.

use shale_cache::index::cpu::CpuIndex;

shale_cache::contract_tests!(cpu, |slots| Box::new(
    CpuIndex::new(slots).expect("map an index table")
));
