//! A small hand-drawn SVG chart: axes with round-number ticks, a shaded band (p50..p99), lines
//! and point marks (worst case), a title and a legend. Enough for every scenario's picture.

use std::fmt::Write;

/// One thing drawn on a chart.
#[derive(Debug, Clone)]
pub enum Series {
    /// A shaded area between two curves with the same x values.
    Band {
        /// Legend label.
        name: String,
        /// Lower curve.
        lower: Vec<(f64, f64)>,
        /// Upper curve.
        upper: Vec<(f64, f64)>,
        /// CSS colour.
        color: &'static str,
    },
    /// A polyline.
    Line {
        /// Legend label.
        name: String,
        /// Points.
        points: Vec<(f64, f64)>,
        /// CSS colour.
        color: &'static str,
    },
    /// Point marks.
    Points {
        /// Legend label.
        name: String,
        /// Points.
        points: Vec<(f64, f64)>,
        /// CSS colour.
        color: &'static str,
    },
}

impl Series {
    fn all_points(&self) -> Box<dyn Iterator<Item = &(f64, f64)> + '_> {
        match self {
            Series::Band { lower, upper, .. } => Box::new(lower.iter().chain(upper)),
            Series::Line { points, .. } | Series::Points { points, .. } => Box::new(points.iter()),
        }
    }
}

/// A chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title at the top.
    pub title: String,
    /// Label under the x axis.
    pub x_label: String,
    /// Label beside the y axis.
    pub y_label: String,
    /// What to draw, in drawing order.
    pub series: Vec<Series>,
}

/// The band, p50 and p99 lines and worst-case points of a latency series.
pub fn latency_series(rows: &[(f64, crate::stats::LatencyMs)]) -> Vec<Series> {
    let p50: Vec<_> = rows.iter().map(|(x, l)| (*x, l.p50)).collect();
    let p99: Vec<_> = rows.iter().map(|(x, l)| (*x, l.p99)).collect();
    let max: Vec<_> = rows.iter().map(|(x, l)| (*x, l.max)).collect();
    vec![
        Series::Band {
            name: "p50..p99".into(),
            lower: p50.clone(),
            upper: p99.clone(),
            color: "#4a90d9",
        },
        Series::Line {
            name: "p50".into(),
            points: p50,
            color: "#1f5fa8",
        },
        Series::Line {
            name: "p99".into(),
            points: p99,
            color: "#d9822b",
        },
        Series::Points {
            name: "max".into(),
            points: max,
            color: "#c23030",
        },
    ]
}

const W: f64 = 820.0;
const H: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 90.0;

/// A round step for about `n` ticks over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn label(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v.abs() >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders `charts` one under the other as one standalone SVG document (a soak's panels).
pub fn stack(charts: &[Chart]) -> String {
    let mut s = String::new();
    let height = H * charts.len().max(1) as f64;
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="12">"#
    );
    for (i, chart) in charts.iter().enumerate() {
        let one = chart.render();
        // The chart's drawing, without its own root element.
        let inner = one
            .find('>')
            .map(|end| &one[end + 1..])
            .and_then(|rest| rest.trim_end().strip_suffix("</svg>"))
            .unwrap_or("");
        let _ = write!(
            s,
            r#"<g transform="translate(0 {})">{inner}</g>"#,
            H * i as f64
        );
    }
    s.push_str("</svg>\n");
    s
}

impl Chart {
    /// Renders the chart as a standalone SVG document.
    pub fn render(&self) -> String {
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.all_points().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| {
            (a.min(*x), b.max(*x))
        });
        if pts.is_empty() {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 - x0 < 1e-9 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        let ymax = pts.iter().fold(0.0f64, |a, (_, y)| a.max(*y));
        let ystep = nice_step(if ymax > 0.0 { ymax * 1.05 } else { 1.0 }, 6.0);
        let y1 = (ymax * 1.05 / ystep).ceil().max(1.0) * ystep;
        let xstep = nice_step(x1 - x0, 8.0);
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| TOP + ph - y / y1 * ph;

        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = write!(
            s,
            r#"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
            W / 2.0,
            esc(&self.title)
        );
        // Grid and ticks.
        let mut y = 0.0;
        while y <= y1 + ystep * 0.001 {
            let py = sy(y);
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                py + 4.0,
                label(y)
            );
            y += ystep;
        }
        let mut x = (x0 / xstep).ceil() * xstep;
        while x <= x1 + xstep * 0.001 {
            let px = sx(x);
            let _ = write!(
                s,
                r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#f0f0f0"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 18.0,
                label(x)
            );
            x += xstep;
        }
        // Axes.
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b:.1}" stroke="#333"/><line x1="{LEFT}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#333"/>"##,
            b = TOP + ph,
            r = W - RIGHT
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            TOP + ph + 40.0,
            esc(&self.x_label)
        );
        let _ = write!(
            s,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
            TOP + ph / 2.0,
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        // Series.
        let poly = |p: &[(f64, f64)]| -> String {
            p.iter()
                .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        for series in &self.series {
            match series {
                Series::Band {
                    lower,
                    upper,
                    color,
                    ..
                } => {
                    let mut outline: Vec<(f64, f64)> = upper.clone();
                    outline.extend(lower.iter().rev());
                    let _ = write!(
                        s,
                        r#"<polygon points="{}" fill="{color}" fill-opacity="0.2" stroke="none"/>"#,
                        poly(&outline)
                    );
                }
                Series::Line { points, color, .. } => {
                    let _ = write!(
                        s,
                        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                        poly(points)
                    );
                }
                Series::Points { points, color, .. } => {
                    for (x, y) in points {
                        let _ = write!(
                            s,
                            r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"/>"#,
                            sx(*x),
                            sy(*y)
                        );
                    }
                }
            }
        }
        // Legend.
        let mut lx = LEFT;
        let ly = H - 22.0;
        for series in &self.series {
            let (name, color) = match series {
                Series::Band { name, color, .. }
                | Series::Line { name, color, .. }
                | Series::Points { name, color, .. } => (name, *color),
            };
            let mark = match series {
                Series::Band { .. } => format!(
                    r#"<rect x="{lx:.1}" y="{:.1}" width="18" height="10" fill="{color}" fill-opacity="0.2"/>"#,
                    ly - 9.0
                ),
                Series::Line { .. } => format!(
                    r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"/>"#,
                    ly - 4.0,
                    lx + 18.0,
                    ly - 4.0
                ),
                Series::Points { .. } => format!(
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"/>"#,
                    lx + 9.0,
                    ly - 4.0
                ),
            };
            s.push_str(&mark);
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{ly:.1}">{}</text>"#,
                lx + 24.0,
                esc(name)
            );
            lx += 40.0 + 7.0 * name.len() as f64;
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyMs;

    #[test]
    fn renders_well_formed_svg() {
        let rows: Vec<_> = (1..=5)
            .map(|i| {
                (
                    i as f64 * 1000.0,
                    LatencyMs {
                        p50: i as f64,
                        p99: i as f64 * 2.0,
                        max: i as f64 * 3.0,
                    },
                )
            })
            .collect();
        let c = Chart {
            title: "a < b & c".into(),
            x_label: "subscribers".into(),
            y_label: "ms".into(),
            series: latency_series(&rows),
        };
        let svg = c.render();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &lt; b &amp; c"));
        assert_eq!(
            svg.matches("<circle").count(),
            6,
            "5 points and a legend mark"
        );
        assert_eq!(nice_step(98.0, 6.0), 20.0);
        assert_eq!(label(25000.0), "25k");
    }

    #[test]
    fn stacked_charts_are_one_document() {
        let panel = |title: &str| Chart {
            title: title.into(),
            x_label: "minutes".into(),
            y_label: "MB".into(),
            series: vec![Series::Line {
                name: "rss".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                color: "#1f5fa8",
            }],
        };
        let svg = stack(&[panel("memory"), panel("files"), panel("errors")]);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert_eq!(svg.matches("</svg>").count(), 1);
        assert_eq!(svg.matches("<g transform=").count(), 3);
        assert!(svg.contains(">memory<") && svg.contains(">errors<"));
        assert!(svg.contains(&format!("height=\"{}\"", 3.0 * H)));
    }
}
