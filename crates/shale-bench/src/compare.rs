//! `shale-bench compare` (placeholder while written).
use crate::cli::CompareArgs;
use crate::error::Result;
/// Runs a comparison.
pub fn run_compare(_args: &CompareArgs) -> Result<()> {
    Ok(())
}
