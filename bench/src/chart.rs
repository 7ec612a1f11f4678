//! Latency-by-percentile charts, drawn with plotters: x is the "nines" of
//! the percentile (0 = p0, 1 = p90, 2 = p99, 3 = p99.9, ...), y is latency
//! on a log scale, one line per run, with a legend. SVG and PNG come from
//! one drawing function, so both pictures say the same thing. Text is set
//! in DejaVu Sans, embedded (`bench/fonts`, with its licence).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::sync::Once;

/// One run's curve: (percentile 0..1, latency ms) points.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

const WIDTH: u32 = 900;
const HEIGHT: u32 = 560;
const MAX_NINES: f64 = 6.0;
const FONT: &str = "sans-serif";
const FONT_BYTES: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
];

/// -log10(1 - q), capped: p100 would be infinite.
fn nines(q: f64) -> f64 {
    -(1.0 - q.min(1.0 - 1e-7)).log10()
}

/// The axes' ranges: nines up to the deepest percentile drawn (at most
/// `MAX_NINES`), and whole decades of latency around every point.
struct Axes {
    nines_max: f64,
    ms: std::ops::Range<f64>,
}

impl Axes {
    fn of<'a>(series: impl Iterator<Item = &'a Series>) -> Axes {
        let (mut lo, mut hi, mut nines_max) = (f64::MAX, f64::MIN, 1.0f64);
        for &(q, v) in series.flat_map(|s| s.points.iter()) {
            let v = v.max(1e-3);
            lo = lo.min(v);
            hi = hi.max(v);
            if q < 1.0 {
                nines_max = nines_max.max(nines(q).ceil());
            }
        }
        if lo > hi {
            (lo, hi) = (0.1, 1.0);
        }
        let decade_min = lo.log10().floor() as i32;
        let decade_max = (hi.log10().ceil() as i32).max(decade_min + 1);
        Axes { nines_max: nines_max.min(MAX_NINES), ms: 10f64.powi(decade_min)..10f64.powi(decade_max) }
    }
}

/// "90%", "99.9%" for 1, 3 nines.
fn percentile_label(nines: f64) -> String {
    match nines.round() as usize {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        n => format!("99.{}%", "9".repeat(n - 2)),
    }
}

/// "100us", "1ms", "10s".
fn latency_label(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{}s", ms / 1000.0)
    } else if ms >= 1.0 {
        format!("{ms}ms")
    } else {
        format!("{}us", (ms * 1000.0).round())
    }
}

fn register_font_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if register_font(FONT, FontStyle::Normal, FONT_BYTES).is_err() {
            tracing::warn!("the embedded chart font did not load; chart text may be missing");
        }
    });
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (series, title) = (c.series, c.title);
    let axes = Axes::of(c.series.iter().chain(c.axes_of));
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(16)
        .margin_right(44)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..axes.nines_max, axes.ms.clone().log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_labels(axes.nines_max as usize + 1)
        .x_label_formatter(&|n| percentile_label(*n))
        .y_label_formatter(&|ms| latency_label(*ms))
        .x_desc("percentile")
        .y_desc("latency")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points = s.points.iter().map(|&(q, v)| (nines(q).min(axes.nines_max), v.max(axes.ms.start)));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(e)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

/// A chart of `series`, on axes that also hold `axes_of` (curves of
/// charts meant to sit beside it, not drawn here), so that they compare.
pub struct Chart<'a> {
    pub series: &'a [Series],
    pub axes_of: &'a [Series],
    pub title: &'a str,
}

impl Chart<'_> {
    /// The chart as SVG.
    pub fn svg(&self) -> Result<String, String> {
        register_font_once();
        let mut out = String::new();
        draw(SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area(), self)?;
        Ok(out)
    }

    /// The chart as a PNG file at `path`.
    pub fn png(&self, path: &std::path::Path) -> Result<(), String> {
        register_font_once();
        draw(BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area(), self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_runs_and_a_legend_are_drawn() {
        let series = vec![
            Series { label: "fast".into(), points: vec![(0.0, 0.1), (0.9, 0.2), (0.99, 0.5), (0.999, 1.0)] },
            Series { label: "slow".into(), points: vec![(0.0, 1.0), (0.9, 2.0), (0.99, 5.0), (0.999, 40.0)] },
        ];
        let chart = Chart { series: &series, axes_of: &[], title: "e2e latency" };
        let svg = chart.svg().unwrap();
        for color in ["#1F77B4", "#D62728"] {
            assert_eq!(svg.matches(color).count(), 2, "a curve and its legend mark in {color}");
        }
        for text in ["fast", "slow", "99.9%", "percentile", "latency", "1ms"] {
            assert!(svg.contains(&format!(">\n{text}\n</text>")), "{text} is written: {svg}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.png");
        chart.png(&path).unwrap();
        assert_eq!(&std::fs::read(&path).unwrap()[1..4], b"PNG");
        let axes = Axes::of(series.iter());
        assert_eq!((axes.nines_max, axes.ms.clone()), (3.0, 0.1..100.0), "whole decades around every point");
        let beside = [Series { label: "other".into(), points: vec![(0.99995, 2000.0)] }];
        let axes = Axes::of(series.iter().chain(&beside));
        assert_eq!((axes.nines_max, axes.ms), (5.0, 0.1..10_000.0), "a chart beside it sets the same axes");
        let shared = Chart { series: &series, axes_of: &beside, title: "e2e latency" }.svg().unwrap();
        assert!(!shared.contains(">\nother\n</text>"), "a run beside it is not drawn");
        assert!(shared.contains(">\n99.999%\n</text>") && shared.contains(">\n10s\n</text>"), "on its axes");
    }
}
