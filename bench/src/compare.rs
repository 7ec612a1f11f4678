//! `ringmq-bench compare`: percentiles of several runs side by side with
//! ratios to the first, and a latency-by-percentile chart (SVG and PNG).

use crate::chart::{self, Series};
use crate::histogram::{parse_hgrm, value_at, PERCENTILES};
use std::path::{Path, PathBuf};

/// A run to compare: a run directory (its e2e.hgrm) or an .hgrm file.
pub fn load(input: &Path) -> Result<Series, String> {
    let file = if input.is_dir() { input.join("e2e.hgrm") } else { input.to_path_buf() };
    let text = std::fs::read_to_string(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let points = parse_hgrm(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let label = if input.is_dir() {
        input.file_name().map_or_else(|| input.display().to_string(), |n| n.to_string_lossy().into_owned())
    } else {
        input.file_stem().map_or_else(|| input.display().to_string(), |n| n.to_string_lossy().into_owned())
    };
    Ok(Series { label, points })
}

/// The side-by-side table: one row per percentile, a column per run, ratios to the first run.
pub fn table(series: &[Series]) -> String {
    let mut out = format!("{:>8}", "ms");
    for s in series {
        out += &format!(" {:>14}", truncate(&s.label, 14));
    }
    for s in series.iter().skip(1) {
        out += &format!(" {:>12}", format!("{}/{}", truncate(&s.label, 5), truncate(&series[0].label, 5)));
    }
    out.push('\n');
    for (name, p) in PERCENTILES {
        let values: Vec<f64> = series.iter().map(|s| value_at(&s.points, p)).collect();
        out += &format!("{name:>8}");
        for v in &values {
            out += &format!(" {v:>14.3}");
        }
        for v in values.iter().skip(1) {
            out += &format!(" {:>12.2}", v / values[0].max(1e-9));
        }
        out.push('\n');
    }
    out
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Compares `inputs`, prints the table and writes compare.svg and compare.png into `out_dir`.
pub fn run(inputs: &[PathBuf], out_dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let series = inputs.iter().map(|i| load(i)).collect::<Result<Vec<_>, _>>()?;
    print!("{}", table(&series));
    std::fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let (svg, png) = (out_dir.join("compare.svg"), out_dir.join("compare.png"));
    let title = "end-to-end latency by percentile";
    std::fs::write(&svg, chart::svg(&series, title)?).map_err(|e| format!("writing {}: {e}", svg.display()))?;
    chart::png(&series, title, &png).map_err(|e| format!("writing {}: {e}", png.display()))?;
    Ok((svg, png))
}
