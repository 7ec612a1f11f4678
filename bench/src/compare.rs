//! `ringmq-bench compare`: percentiles of several runs side by side with
//! ratios to the first, and a latency-by-percentile chart (SVG and PNG)
//! whose legend names each run's broker and durability (from its
//! summary.json). Charts meant to sit side by side take their axes from
//! every run of the set (`--axes-of`).

use crate::chart::{self, Series};
use crate::histogram::{parse_hgrm, value_at, PERCENTILES};
use std::path::{Path, PathBuf};

/// A run to compare: its curve, and what its summary.json says of it.
pub struct Run {
    /// The run directory's (or .hgrm file's) name: the table's column.
    pub name: String,
    pub series: Series,
    pub about: Option<About>,
}

/// A run's broker, durability and rate, from its summary.json.
pub struct About {
    pub broker: String,
    pub durability: String,
    pub msgs_per_s: f64,
    pub lost: u64,
}

/// A run directory (its e2e.hgrm and summary.json) or an .hgrm file.
pub fn load(input: &Path) -> Result<Run, String> {
    let file = if input.is_dir() { input.join("e2e.hgrm") } else { input.to_path_buf() };
    let text = std::fs::read_to_string(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let points = parse_hgrm(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let name = match input.is_dir() {
        true => input.file_name().map(|n| n.to_string_lossy().into_owned()),
        false => input.file_stem().map(|n| n.to_string_lossy().into_owned()),
    };
    let name = name.unwrap_or_else(|| input.display().to_string());
    let about = match input.is_dir() {
        true => about(&input.join("summary.json"))?,
        false => None,
    };
    let label = match &about {
        Some(a) if !a.broker.is_empty() => format!("{name}: {} ({})", a.broker, a.durability),
        _ => name.clone(),
    };
    Ok(Run { name, series: Series { label, points }, about })
}

/// What `summary` says of its run (None: there is no such file).
fn about(summary: &Path) -> Result<Option<About>, String> {
    let text = match std::fs::read_to_string(summary) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("reading {}: {e}", summary.display())),
    };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", summary.display()))?;
    let text_of = |key: &str| json[key].as_str().unwrap_or_default().to_string();
    Ok(Some(About {
        broker: text_of("broker"),
        durability: text_of("durability"),
        msgs_per_s: json["msgs_per_s"].as_f64().unwrap_or(0.0),
        lost: json["lost"].as_u64().unwrap_or(0),
    }))
}

/// The side-by-side table: what each run drove, then one row per
/// percentile (and msgs/s, when every run has a summary), a column per
/// run, ratios to the first run. Runs are numbered (#1 the first) and
/// named on lines of their own: names often share a prefix ("max-native",
/// "max-kafka") that a column's width would cut them to.
pub fn table(runs: &[Run]) -> String {
    let mut out = String::new();
    for (k, run) in runs.iter().enumerate() {
        out += &format!("#{} {}", k + 1, run.name);
        if let Some(a) = &run.about {
            out += &format!(": {} ({}), {:.0} msgs/s, {} lost", a.broker, a.durability, a.msgs_per_s, a.lost);
        }
        out.push('\n');
    }
    out += &format!("{:>8}", "ms");
    for k in 1..=runs.len() {
        out += &format!(" {:>14}", format!("#{k}"));
    }
    for k in 2..=runs.len() {
        out += &format!(" {:>12}", format!("#{k}/#1"));
    }
    out.push('\n');
    for (name, p) in PERCENTILES {
        let values: Vec<f64> = runs.iter().map(|r| value_at(&r.series.points, p)).collect();
        out += &row(name, &values, 3);
    }
    let rates: Option<Vec<f64>> = runs.iter().map(|r| r.about.as_ref().map(|a| a.msgs_per_s)).collect();
    if let Some(rates) = rates {
        out += &row("msgs/s", &rates, 0);
    }
    out
}

/// A row of `values` with `decimals`, then each one's ratio to the first.
fn row(name: &str, values: &[f64], decimals: usize) -> String {
    let mut out = format!("{name:>8}");
    for v in values {
        out += &format!(" {v:>14.decimals$}");
    }
    for v in values.iter().skip(1) {
        out += &format!(" {:>12.2}", v / values[0].max(1e-9));
    }
    out + "\n"
}

/// Compares `inputs`, prints the table and writes compare.svg and
/// compare.png into `out_dir`, on axes that also hold `axes_of` (runs of
/// other charts meant to sit beside this one).
pub fn run(inputs: &[PathBuf], axes_of: &[PathBuf], out_dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let runs = inputs.iter().map(|i| load(i)).collect::<Result<Vec<_>, _>>()?;
    let others = axes_of.iter().map(|i| load(i).map(|r| r.series)).collect::<Result<Vec<_>, _>>()?;
    print!("{}", table(&runs));
    std::fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let (svg, png) = (out_dir.join("compare.svg"), out_dir.join("compare.png"));
    let title = "end-to-end latency by percentile";
    let series: Vec<Series> = runs.into_iter().map(|r| r.series).collect();
    let chart = chart::Chart { series: &series, axes_of: &others, title };
    std::fs::write(&svg, chart.svg()?).map_err(|e| format!("writing {}: {e}", svg.display()))?;
    chart.png(&png).map_err(|e| format!("writing {}: {e}", png.display()))?;
    Ok((svg, png))
}
