//! Plots (placeholder while written).
use crate::cli::PlotArgs;
use crate::error::Result;
/// Runs `plot`.
pub fn run_plot(_args: &PlotArgs) -> Result<()> {
    Ok(())
}
