//! Latency-by-percentile charts: x is the "nines" of the percentile
//! (0 = p0, 1 = p90, 2 = p99, 3 = p99.9, ...), y is latency on a log scale,
//! one line per run, with a legend. Rendered as SVG and as PNG from one
//! layout, so both pictures say the same thing.

use crate::font::glyph;
use crate::png::encode_rgb;

/// One run's curve: (percentile 0..1, latency ms) points.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

const WIDTH: u32 = 900;
const HEIGHT: u32 = 560;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const MAX_NINES: f64 = 6.0;
const COLORS: [(u8, u8, u8); 6] =
    [(31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14), (148, 103, 189), (23, 190, 207)];

/// Axis ranges and the mapping from data to pixels.
struct Layout {
    nines_max: f64,
    decade_min: i32,
    decade_max: i32,
}

impl Layout {
    fn new(series: &[Series]) -> Layout {
        let all = series.iter().flat_map(|s| s.points.iter());
        let (mut lo, mut hi, mut nines_max) = (f64::MAX, f64::MIN, 1.0f64);
        for &(q, v) in all {
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
        Layout { nines_max: nines_max.min(MAX_NINES), decade_min, decade_max }
    }

    fn x(&self, q: f64) -> f64 {
        LEFT + nines(q).min(self.nines_max) / self.nines_max * (f64::from(WIDTH) - LEFT - RIGHT)
    }

    fn y(&self, ms: f64) -> f64 {
        let span = f64::from(self.decade_max - self.decade_min);
        let frac = (ms.max(1e-3).log10() - f64::from(self.decade_min)) / span;
        f64::from(HEIGHT) - BOTTOM - frac * (f64::from(HEIGHT) - TOP - BOTTOM)
    }

    fn x_ticks(&self) -> Vec<(f64, String)> {
        (0..=self.nines_max as i32)
            .map(|n| {
                let label = match n {
                    0 => "0%".to_string(),
                    1 => "90%".to_string(),
                    n => format!("99.{}%", "9".repeat(n as usize - 2)).replace("99.%", "99%"),
                };
                (self.x(1.0 - 10f64.powi(-n)), label)
            })
            .collect()
    }

    fn y_ticks(&self) -> Vec<(f64, String)> {
        (self.decade_min..=self.decade_max)
            .map(|d| {
                let ms = 10f64.powi(d);
                let label = if ms >= 1000.0 {
                    format!("{}s", ms / 1000.0)
                } else if ms >= 1.0 {
                    format!("{ms}ms")
                } else {
                    format!("{}us", ms * 1000.0)
                };
                (self.y(ms), label)
            })
            .collect()
    }
}

/// -log10(1 - q), capped: p100 would be infinite.
fn nines(q: f64) -> f64 {
    -(1.0 - q.min(1.0 - 1e-7)).log10()
}

/// The chart as SVG.
pub fn svg(series: &[Series], title: &str) -> String {
    let l = Layout::new(series);
    let mut out = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"monospace\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    out += &format!("<text x=\"{}\" y=\"24\" font-size=\"16\">{}</text>\n", LEFT, escape(title));
    for (x, label) in l.x_ticks() {
        out += &format!(
            "<line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\n",
            f64::from(HEIGHT) - BOTTOM
        );
        out += &format!(
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>\n",
            f64::from(HEIGHT) - BOTTOM + 18.0
        );
    }
    for (y, label) in l.y_ticks() {
        out += &format!(
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n",
            f64::from(WIDTH) - RIGHT
        );
        out += &format!("<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>\n", LEFT - 8.0, y + 4.0);
    }
    out += &format!(
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">percentile</text>\n",
        (LEFT + f64::from(WIDTH) - RIGHT) / 2.0,
        HEIGHT - 12
    );
    out += &format!(
        "<text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">latency</text>\n",
        f64::from(HEIGHT) / 2.0,
        f64::from(HEIGHT) / 2.0
    );
    for (i, s) in series.iter().enumerate() {
        let (r, g, b) = COLORS[i % COLORS.len()];
        let pts: Vec<String> = s.points.iter().map(|&(q, v)| format!("{:.1},{:.1}", l.x(q), l.y(v))).collect();
        out += &format!(
            "<polyline fill=\"none\" stroke=\"rgb({r},{g},{b})\" stroke-width=\"2\" points=\"{}\"/>\n",
            pts.join(" ")
        );
        let ly = TOP + 20.0 + 18.0 * i as f64;
        out += &format!("<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"rgb({r},{g},{b})\" stroke-width=\"3\"/>\n", LEFT + 14.0, LEFT + 40.0);
        out += &format!("<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n", LEFT + 48.0, ly + 4.0, escape(&s.label));
    }
    out + "</svg>\n"
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// An RGB raster to draw the PNG on.
struct Canvas {
    rgb: Vec<u8>,
}

impl Canvas {
    fn new() -> Canvas {
        Canvas { rgb: vec![255; (WIDTH * HEIGHT * 3) as usize] }
    }

    fn dot(&mut self, x: i64, y: i64, c: (u8, u8, u8)) {
        if x >= 0 && y >= 0 && x < i64::from(WIDTH) && y < i64::from(HEIGHT) {
            let i = ((y as u32 * WIDTH + x as u32) * 3) as usize;
            self.rgb[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
        }
    }

    fn line(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), c: (u8, u8, u8), width: i64) {
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).ceil().max(1.0) as i64;
        for s in 0..=steps {
            let t = s as f64 / steps as f64;
            let (x, y) = ((x0 + (x1 - x0) * t).round() as i64, (y0 + (y1 - y0) * t).round() as i64);
            for dx in 0..width {
                for dy in 0..width {
                    self.dot(x + dx - width / 2, y + dy - width / 2, c);
                }
            }
        }
    }

    /// Draws `text` at (x, y) top-left with pixels of `scale`; anchor 0 left, 0.5 middle, 1 right.
    fn text(&mut self, x: f64, y: f64, text: &str, scale: i64, anchor: f64) {
        let w = text.chars().count() as f64 * 6.0 * scale as f64;
        let x0 = (x - w * anchor).round() as i64;
        for (i, ch) in text.chars().enumerate() {
            for (row, bits) in glyph(ch).iter().enumerate() {
                for col in 0..5 {
                    if bits & (0x10 >> col) != 0 {
                        for sx in 0..scale {
                            for sy in 0..scale {
                                let px = x0 + (i as i64 * 6 + col) * scale + sx;
                                self.dot(px, y as i64 + row as i64 * scale + sy, (0, 0, 0));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The chart as PNG.
pub fn png(series: &[Series], title: &str) -> Vec<u8> {
    let l = Layout::new(series);
    let mut c = Canvas::new();
    let (right, bottom) = (f64::from(WIDTH) - RIGHT, f64::from(HEIGHT) - BOTTOM);
    let grid = (221, 221, 221);
    for (x, label) in l.x_ticks() {
        c.line((x, TOP), (x, bottom), grid, 1);
        c.text(x, bottom + 8.0, &label, 2, 0.5);
    }
    for (y, label) in l.y_ticks() {
        c.line((LEFT, y), (right, y), grid, 1);
        c.text(LEFT - 8.0, y - 7.0, &label, 2, 1.0);
    }
    c.line((LEFT, TOP), (LEFT, bottom), (0, 0, 0), 1);
    c.line((LEFT, bottom), (right, bottom), (0, 0, 0), 1);
    c.text(LEFT, 10.0, title, 2, 0.0);
    c.text((LEFT + right) / 2.0, f64::from(HEIGHT) - 24.0, "percentile", 2, 0.5);
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        for w in s.points.windows(2) {
            c.line((l.x(w[0].0), l.y(w[0].1)), (l.x(w[1].0), l.y(w[1].1)), color, 2);
        }
        let ly = TOP + 20.0 + 22.0 * i as f64;
        c.line((LEFT + 14.0, ly), (LEFT + 40.0, ly), color, 4);
        c.text(LEFT + 48.0, ly - 7.0, &s.label, 2, 0.0);
    }
    encode_rgb(WIDTH, HEIGHT, &c.rgb)
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
        let svg = svg(&series, "e2e latency");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">fast<") && svg.contains(">slow<") && svg.contains("99.9%"));
        let png = png(&series, "e2e latency");
        assert_eq!(&png[1..4], b"PNG");
        let l = Layout::new(&series);
        assert!(l.y(40.0) < l.y(0.1), "higher latency is drawn higher");
        assert!(l.x(0.999) > l.x(0.9));
    }
}
