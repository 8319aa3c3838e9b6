//! Plots like the papers' figures: device bytes per payload byte (the headline), journal
//! throughput, final-location throughput and sync latency against the number of streams, one
//! line per mode, latency on a log scale; each title says its quantity first. Drawn as
//! SVG with plotters and rasterised to PNG with resvg, with a font compiled in (DejaVu Sans,
//! assets/DejaVuSans.LICENSE), so plots look the same on every machine.

use crate::report::Run;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const W: u32 = 800;
const H: u32 = 520;
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// What a chart shows on its y axis.
#[derive(Clone, Copy)]
enum Metric {
    /// Device bytes (journal and final location, through unmount) per payload byte: the
    /// headline figure.
    Bytes,
    Journal,
    Final,
    Latency,
}

impl Metric {
    fn get(self, r: &Run) -> Option<f64> {
        match self {
            Metric::Bytes => Some(r.journal_amp()? + r.final_amp()?),
            Metric::Journal => r.journal_mb_s,
            Metric::Final => r.final_mb_s,
            Metric::Latency => Some(r.sync_latency_us.p50 / 1e3).filter(|&v| v > 0.0),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Metric::Bytes => "bytes",
            Metric::Journal => "journal",
            Metric::Final => "final",
            Metric::Latency => "latency",
        }
    }
    fn axis(self) -> &'static str {
        match self {
            Metric::Bytes => "device bytes per payload byte",
            Metric::Journal => "journal throughput (MB/s)",
            Metric::Final => "final-location throughput (MB/s)",
            Metric::Latency => "sync latency (ms, log scale): p50 solid, p99 dashed",
        }
    }
    /// What the chart shows, first in its title.
    fn quantity(self) -> &'static str {
        match self {
            Metric::Bytes => "Device bytes per payload byte, journal and final location (lower is better)",
            Metric::Journal => "Journal throughput",
            Metric::Final => "Final-location throughput",
            Metric::Latency => "Sync latency (lower is better)",
        }
    }
}

/// Writes four charts (SVG and PNG) for every group of multistream runs that share request
/// size, rate, sync and target family and cover more than one stream count. Returns the files.
pub fn plot_multistream(dir: &Path, prefix: &str, runs: &[Run]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut groups: BTreeMap<(usize, String, String), Vec<&Run>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.workload == "multistream" && r.error.is_none()) {
        groups.entry((r.size, r.rate.clone(), r.sync.clone())).or_default().push(r);
    }
    let mut out = Vec::new();
    for ((size, rate, _sync), group) in groups {
        let mut counts: Vec<usize> = group.iter().map(|r| r.streams).collect();
        counts.sort_unstable();
        counts.dedup();
        if counts.len() < 2 {
            continue;
        }
        for metric in [Metric::Bytes, Metric::Journal, Metric::Final, Metric::Latency] {
            let stem = format!("{prefix}-{size}B-{}-{}", rate.replace('/', "per"), metric.name());
            let how = if rate == "closed" { "in a closed loop".to_string() } else { format!("at {rate}/s per stream") };
            let targets: std::collections::BTreeSet<&str> = group.iter().map(|r| r.target.as_str()).collect();
            let on = targets.into_iter().collect::<Vec<_>>().join(", ");
            let title = format!("{prefix} on {on}: {size}-byte writes {how}");
            let svg = chart(&title, metric, &group)?;
            let svg_path = dir.join(format!("{stem}.svg"));
            std::fs::write(&svg_path, &svg).map_err(|e| format!("{}: {e}", svg_path.display()))?;
            let png_path = dir.join(format!("{stem}.png"));
            rasterize(&svg, &png_path)?;
            out.push(svg_path);
            out.push(png_path);
        }
    }
    Ok(out)
}

/// One line label per mode; the target is added when a mode ran on several targets.
fn label(r: &Run, group: &[&Run]) -> String {
    let targets: std::collections::BTreeSet<&str> = group.iter().filter(|x| x.mode == r.mode).map(|x| x.target.as_str()).collect();
    if targets.len() > 1 {
        format!("{} ({})", r.mode, r.target)
    } else {
        r.mode.clone()
    }
}

fn chart(title: &str, metric: Metric, group: &[&Run]) -> Result<String, String> {
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    // The latency chart's second line per mode: p99, dashed.
    let mut p99: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in group {
        if let Some(y) = metric.get(r) {
            lines.entry(label(r, group)).or_default().push((r.streams as f64, y));
        }
        if matches!(metric, Metric::Latency) && r.sync_latency_us.p99 > 0.0 {
            p99.entry(label(r, group)).or_default().push((r.streams as f64, r.sync_latency_us.p99 / 1e3));
        }
    }
    for pts in lines.values_mut().chain(p99.values_mut()) {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let xs: Vec<f64> = lines.values().flatten().map(|p| p.0).collect();
    let ys: Vec<f64> = lines.values().chain(p99.values()).flatten().map(|p| p.1).collect();
    let (xmin, xmax) = (xs.iter().cloned().fold(f64::MAX, f64::min).max(1.0), xs.iter().cloned().fold(1.0, f64::max));
    let ymax = ys.iter().cloned().fold(0.0, f64::max);
    let ymin_pos = ys.iter().cloned().filter(|&y| y > 0.0).fold(f64::MAX, f64::min);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        // The quantity first, as the title; the workload under it.
        let root = root.titled(metric.quantity(), ("sans-serif", 19)).map_err(|e| e.to_string())?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", 14)).margin(12).margin_right(30).x_label_area_size(40).y_label_area_size(70);
        let x_range = (xmin * 0.8..xmax * 1.25).log_scale();
        macro_rules! draw {
            ($chart:expr) => {{
                let mut c = $chart;
                c.configure_mesh()
                    .x_label_formatter(&|v: &f64| format!("{}", v.round() as u64))
                    .y_label_formatter(&|v: &f64| significant(*v))
                    .x_desc("streams (log scale)")
                    .y_desc(metric.axis())
                    .label_style(("sans-serif", 13))
                    .draw()
                    .map_err(|e| e.to_string())?;
                for (i, (name, pts)) in lines.iter().enumerate() {
                    let color = COLORS[i % COLORS.len()];
                    c.draw_series(LineSeries::new(pts.iter().cloned(), color.stroke_width(2)))
                        .map_err(|e| e.to_string())?
                        .label(name.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                    c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| e.to_string())?;
                    if let Some(q) = p99.get(name) {
                        c.draw_series(DashedLineSeries::new(q.iter().cloned(), 6, 4, color.stroke_width(2))).map_err(|e| e.to_string())?;
                        c.draw_series(q.iter().map(|&p| TriangleMarker::new(p, 4, color.filled()))).map_err(|e| e.to_string())?;
                    }
                }
                c.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).label_font(("sans-serif", 13)).position(SeriesLabelPosition::UpperLeft).draw().map_err(|e| e.to_string())?;
            }};
        }
        match metric {
            Metric::Latency => {
                let lo = if ymin_pos == f64::MAX { 0.001 } else { ymin_pos / 2.0 };
                draw!(b.build_cartesian_2d(x_range, (lo..(ymax * 2.0).max(lo * 10.0)).log_scale()).map_err(|e| e.to_string())?)
            }
            _ => draw!(b.build_cartesian_2d(x_range, 0.0..(ymax * 1.15).max(1e-6)).map_err(|e| e.to_string())?),
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// A tick label with two significant digits and no trailing zeros: 0.05, 0.25, 1.5, 20, 300
/// (log-scale ticks below 1 ms stay readable and distinct).
fn significant(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return "0".into();
    }
    let decimals = (1 - v.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Renders an SVG to a PNG with the compiled-in font.
fn rasterize(svg: &str, png: &Path) -> Result<(), String> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options { font_family: "DejaVu Sans".into(), ..Default::default() };
    let db = opt.fontdb_mut();
    db.load_font_data(FONT.to_vec());
    db.set_sans_serif_family("DejaVu Sans");
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("plot: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("plot: empty image")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.save_png(png).map_err(|e| format!("{}: {e}", png.display()))
}

/// Recovery time by pass (the thesis' Figure 6.6): one stacked bar per mode and target —
/// scan, revoke, replay — for every group of recovery runs with the same streams and size.
pub fn plot_recovery(dir: &Path, prefix: &str, runs: &[Run]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut groups: BTreeMap<(usize, usize), Vec<&Run>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.workload == "recovery" && r.error.is_none()) {
        groups.entry((r.streams, r.size)).or_default().push(r);
    }
    let mut out = Vec::new();
    for ((n, size), group) in groups {
        let ms = |r: &Run, k: &str| r.extra[k].as_f64().unwrap_or(0.0);
        let ymax = group.iter().map(|r| ms(r, "scan_ms") + ms(r, "revoke_ms") + ms(r, "replay_ms")).fold(0.0, f64::max).max(1e-3);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| e.to_string())?;
            let title = format!("{prefix}: recovery time by pass, {n} streams of {size}-byte records");
            let labels: Vec<String> = group.iter().map(|r| label(r, &group)).collect();
            let mut c = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 18))
                .margin(12)
                .margin_right(30)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..group.len() as f64, 0.0..ymax * 1.2)
                .map_err(|e| e.to_string())?;
            let l2 = labels.clone();
            c.configure_mesh()
                .disable_x_mesh()
                .x_labels(group.len() * 2 + 1)
                .x_label_formatter(&move |x: &f64| {
                    let i = x.floor() as usize;
                    if (x - x.floor() - 0.5).abs() < 0.01 { l2.get(i).cloned().unwrap_or_default() } else { String::new() }
                })
                .y_desc("recovery time (ms)")
                .label_style(("sans-serif", 13))
                .draw()
                .map_err(|e| e.to_string())?;
            for (p, (pass, color)) in [("scan_ms", COLORS[0]), ("revoke_ms", COLORS[1]), ("replay_ms", COLORS[2])].into_iter().enumerate() {
                let bars: Vec<Rectangle<(f64, f64)>> = group
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let below: f64 = ["scan_ms", "revoke_ms", "replay_ms"][..p].iter().map(|k| ms(r, k)).sum();
                        Rectangle::new([(i as f64 + 0.2, below), (i as f64 + 0.8, below + ms(r, pass))], color.filled())
                    })
                    .collect();
                c.draw_series(bars)
                    .map_err(|e| e.to_string())?
                    .label(pass.trim_end_matches("_ms"))
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
            }
            c.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).label_font(("sans-serif", 13)).position(SeriesLabelPosition::UpperRight).draw().map_err(|e| e.to_string())?;
            root.present().map_err(|e| e.to_string())?;
        }
        let stem = format!("{prefix}-{n}x{size}B");
        let svg_path = dir.join(format!("{stem}.svg"));
        std::fs::write(&svg_path, &svg).map_err(|e| format!("{}: {e}", svg_path.display()))?;
        let png_path = dir.join(format!("{stem}.png"));
        rasterize(&svg, &png_path)?;
        out.push(svg_path);
        out.push(png_path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::significant;

    #[test]
    fn tick_labels_below_a_millisecond_are_readable_and_distinct() {
        let ticks = [0.02, 0.03, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 200.0];
        let labels: Vec<String> = ticks.iter().map(|&t| significant(t)).collect();
        assert_eq!(labels, ["0.02", "0.03", "0.05", "0.1", "0.2", "0.25", "0.5", "1", "2", "5", "10", "200"]);
        let mut d = labels.clone();
        d.dedup();
        assert_eq!(d.len(), labels.len());
    }
}

/// Named lines of (x, y) points on one chart, written as `dir/stem.svg` and `.png`: the trace
/// replay's latency CDFs (log x) and speed-ups by percentile (the manylogs paper's Fig. 6).
pub fn plot_lines(dir: &Path, stem: &str, title: &str, axes: (&str, &str), log_x: bool, series: &[(String, Vec<(f64, f64)>)]) -> Result<Vec<PathBuf>, String> {
    let pts = || series.iter().flat_map(|(_, p)| p.iter());
    let (xmin, xmax) = pts().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = pts().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if xmin > xmax {
        return Ok(Vec::new());
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", 16)).margin(12).margin_right(30).x_label_area_size(40).y_label_area_size(70);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut c = $chart;
                c.configure_mesh().x_label_formatter(&|v: &f64| significant(*v)).y_label_formatter(&|v: &f64| significant(*v)).x_desc(axes.0).y_desc(axes.1).label_style(("sans-serif", 13)).draw().map_err(|e| e.to_string())?;
                for (i, (name, p)) in series.iter().enumerate() {
                    let color = COLORS[i % COLORS.len()];
                    c.draw_series(LineSeries::new(p.iter().cloned(), color.stroke_width(2)))
                        .map_err(|e| e.to_string())?
                        .label(name.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                }
                c.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).label_font(("sans-serif", 13)).position(SeriesLabelPosition::LowerRight).draw().map_err(|e| e.to_string())?;
            }};
        }
        let y = (ymin.min(0.0))..(ymax * 1.1).max(1e-6);
        if log_x {
            let lo = xmin.max(1e-3);
            draw!(b.build_cartesian_2d((lo * 0.8..xmax * 1.25).log_scale(), y).map_err(|e| e.to_string())?)
        } else {
            draw!(b.build_cartesian_2d(xmin..xmax, y).map_err(|e| e.to_string())?)
        }
        root.present().map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let svg_path = dir.join(format!("{stem}.svg"));
    std::fs::write(&svg_path, &svg).map_err(|e| format!("{}: {e}", svg_path.display()))?;
    let png_path = dir.join(format!("{stem}.png"));
    rasterize(&svg, &png_path)?;
    Ok(vec![svg_path, png_path])
}
