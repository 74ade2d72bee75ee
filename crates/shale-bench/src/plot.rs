//! SVG plots in the style of the AegonKV paper's figures: throughput over time per backend, and
//! latency percentiles per backend and operation (log scale). Written with plotters' SVG backend,
//! which needs no fonts or system libraries.

use crate::app::RunReport;
use crate::cli::PlotArgs;
use crate::error::{Error, Result};
use crate::measure::OpSummary;
use crate::runner::TimelinePoint;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Plot size in pixels.
pub const PLOT_SIZE: (u32, u32) = (960, 540);
/// Percentiles on the latency plot's x axis.
const PERCENTILE_LABELS: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

fn plot_err(path: &Path) -> impl Fn(String) -> Error + '_ {
    move |e| Error::input(format!("cannot draw {}: {e}", path.display()))
}

/// Per-interval rates (ops/s) from cumulative samples: `(t_end, rate)`.
pub fn rates(timeline: &[TimelinePoint]) -> Vec<(f64, f64)> {
    timeline
        .windows(2)
        .filter_map(|w| {
            let dt = w[1].t_secs - w[0].t_secs;
            (dt > 0.0).then(|| (w[1].t_secs, w[1].ops.saturating_sub(w[0].ops) as f64 / dt))
        })
        .collect()
}

/// Draws throughput over time, one line per `(label, timeline)`.
///
/// # Errors
/// `Input` when the file cannot be written.
pub fn throughput_svg(
    path: &Path,
    title: &str,
    series: &[(String, Vec<TimelinePoint>)],
) -> Result<()> {
    let err = plot_err(path);
    let lines: Vec<(String, Vec<(f64, f64)>)> =
        series.iter().map(|(l, t)| (l.clone(), rates(t))).collect();
    let max_t = lines
        .iter()
        .flat_map(|(_, r)| r.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let max_y = lines
        .iter()
        .flat_map(|(_, r)| r.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, PLOT_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..max_t, 0f64..max_y)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("throughput (ops/s)")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (i, (label, points)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(e.to_string()))?
            .label(label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// Draws latency percentiles (log scale), one line per `(label, op)`.
///
/// # Errors
/// `Input` when the file cannot be written.
pub fn latency_svg(path: &Path, title: &str, series: &[(String, Vec<OpSummary>)]) -> Result<()> {
    let err = plot_err(path);
    let mut lines: Vec<(String, [f64; 5])> = Vec::new();
    for (label, ops) in series {
        for o in ops {
            let v = [o.p50_us, o.p90_us, o.p99_us, o.p999_us, o.p9999_us].map(|x| x.max(0.01));
            lines.push((format!("{label} {}", o.op), v));
        }
    }
    let lo = lines
        .iter()
        .flat_map(|l| l.1)
        .fold(f64::MAX, f64::min)
        .min(1.0);
    let hi = lines.iter().flat_map(|l| l.1).fold(1.0, f64::max) * 2.0;
    let root = SVGBackend::new(path, PLOT_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.2f64..4.2f64, (lo..hi).log_scale())
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_labels(5)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && (0.0..5.0).contains(&i) {
                PERCENTILE_LABELS[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .x_desc("percentile")
        .y_desc("latency (µs)")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (i, (label, v)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = v.iter().enumerate().map(|(x, y)| (x as f64, *y)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// Writes `<prefix>-throughput.svg` and `<prefix>-latency.svg` for labelled reports (the run
/// phase when present, otherwise the load phase). Returns the files written.
///
/// # Errors
/// `Input` when a plot cannot be written.
pub fn plot_reports(prefix: &Path, reports: &[(String, &RunReport)]) -> Result<Vec<PathBuf>> {
    let phase = |r: &RunReport| r.run.clone().or_else(|| r.load.clone());
    let with_phase: Vec<(String, crate::runner::PhaseResult)> = reports
        .iter()
        .filter_map(|(l, r)| phase(r).map(|p| (l.clone(), p)))
        .collect();
    let name = |suffix: &str| {
        let mut s = prefix.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    let which = with_phase
        .first()
        .map_or("Run", |p| if p.1.phase == "Run" { "run" } else { "load" });
    let tp = name("-throughput.svg");
    throughput_svg(
        &tp,
        &format!("Throughput over time ({which} phase)"),
        &with_phase
            .iter()
            .map(|(l, p)| (l.clone(), p.timeline.clone()))
            .collect::<Vec<_>>(),
    )?;
    let lat = name("-latency.svg");
    latency_svg(
        &lat,
        &format!("Latency percentiles ({which} phase)"),
        &with_phase
            .iter()
            .map(|(l, p)| (l.clone(), p.ops.clone()))
            .collect::<Vec<_>>(),
    )?;
    Ok(vec![tp, lat])
}

/// Reads a result file written with `-p resultfile=...`.
///
/// # Errors
/// `Io` or `Input`.
pub fn read_report(path: &Path) -> Result<RunReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|e| {
        Error::input(format!(
            "{} is not a shale-bench result file: {e}",
            path.display()
        ))
    })
}

/// Runs `plot`.
///
/// # Errors
/// As [`read_report`] and [`plot_reports`].
pub fn run_plot(args: &PlotArgs) -> Result<()> {
    let reports: Vec<(String, RunReport)> = args
        .inputs
        .iter()
        .map(|p| {
            let r = read_report(p)?;
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok((format!("{} ({stem})", r.db), r))
        })
        .collect::<Result<_>>()?;
    let refs: Vec<(String, &RunReport)> = reports.iter().map(|(l, r)| (l.clone(), r)).collect();
    for f in plot_reports(&args.out, &refs)? {
        println!("wrote {}", f.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_per_interval_differences() {
        let t = [
            TimelinePoint {
                t_secs: 0.0,
                ops: 0,
            },
            TimelinePoint {
                t_secs: 1.0,
                ops: 100,
            },
            TimelinePoint {
                t_secs: 1.5,
                ops: 200,
            },
        ];
        assert_eq!(rates(&t), vec![(1.0, 100.0), (1.5, 200.0)]);
    }

    #[test]
    fn plots_are_written_as_svg() {
        let dir = tempfile::tempdir().unwrap();
        let tl = vec![
            TimelinePoint {
                t_secs: 0.0,
                ops: 0,
            },
            TimelinePoint {
                t_secs: 1.0,
                ops: 1000,
            },
            TimelinePoint {
                t_secs: 2.0,
                ops: 2500,
            },
        ];
        let p = dir.path().join("t.svg");
        throughput_svg(&p, "t", &[("a".into(), tl)]).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("polyline"),
            "{}",
            &svg[..100.min(svg.len())]
        );
        let o = OpSummary {
            op: "READ".into(),
            count: 10,
            failed: 0,
            max_us: 90.0,
            min_us: 1.0,
            avg_us: 5.0,
            p50_us: 4.0,
            p90_us: 8.0,
            p99_us: 20.0,
            p999_us: 50.0,
            p9999_us: 90.0,
        };
        let p = dir.path().join("l.svg");
        latency_svg(&p, "l", &[("a".into(), vec![o])]).unwrap();
        assert!(std::fs::read_to_string(&p).unwrap().contains("p99.9"));
    }
}
