//! Pictures of a benchmark run, laid out like the PLFS papers' figures:
//! bandwidth (or rate, or time) against the swept quantity, one line per
//! format, strategy or interface, with the `--repeat` range as error bars;
//! a run with one point per interface is drawn as grouped bars instead.
//!
//! A workload's report becomes [`Figure`]s through [`Plot`]; adding a
//! workload is one `impl Plot`. [`write_png`] draws figures into one PNG
//! (side by side), [`write_report`] writes one PNG per figure and a
//! `report.md` with the figures' numbers as markdown tables.
//!
//! Text is drawn by FreeType with the sans-serif font fontconfig picks
//! (scripts/install-deps.sh installs both and fonts-dejavu-core). The pure
//! Rust ab_glyph path of plotters 0.3.7 drops each glyph's left bearing, so
//! "1048576" came out as "104857 6": unreadable numbers are worse than two
//! system libraries.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::mdtest::{MdInterface, MdPhase, MdTarget, MdtestReport, MdtestSummary};
use crate::open::{OpenReport, OpenSweepReport, StrategyReport};
use crate::repeat::RepeatedReport;
use crate::restart::RestartReport;
use crate::spread::Spread;
use crate::store::{StoreRepeatedReport, StoreReport};
use crate::{BenchReport, StreamingReport};

/// One panel's pixels; [`write_png`] puts several side by side.
pub const PANEL_WIDTH: u32 = 800;
pub const PANEL_HEIGHT: u32 = 500;
/// Panels per row of a multi-figure PNG.
const COLUMNS: usize = 2;

/// The family name the figures ask plotters for.
const FAMILY: &str = "sans-serif";

/// How the x axis maps values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum XAxis {
    Linear,
    /// Powers of two evenly spaced (process counts, record sizes).
    Log2,
    /// Named groups at x = 0, 1, …: the series are drawn as grouped bars.
    Categories(Vec<String>),
}

/// One measured point: the median over the runs and their range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub x: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Point {
    pub fn of(x: f64, spread: Spread) -> Point {
        Point { x, median: spread.median, min: spread.min, max: spread.max }
    }

    /// A point measured once (no range).
    pub fn single(x: f64, value: f64) -> Point {
        Point { x, median: value, min: value, max: value }
    }
}

/// One line (or one bar colour): a format, strategy or interface.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

/// One picture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// File stem in a report directory (`name.png`).
    pub name: String,
    pub title: String,
    /// With units, e.g. "processes" or "bandwidth (MiB/s)".
    pub x_label: String,
    pub y_label: String,
    pub x_axis: XAxis,
    pub series: Vec<Series>,
}

/// A report that can be drawn.
pub trait Plot {
    /// The figures, most important first.
    fn figures(&self) -> Vec<Figure>;
}

impl Figure {
    /// The x values of every series, ascending, once each.
    fn xs(&self) -> Vec<f64> {
        let mut xs: Vec<f64> = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.x)).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        xs
    }

    fn x_text(&self, x: f64) -> String {
        match &self.x_axis {
            XAxis::Categories(names) => names.get(x as usize).cloned().unwrap_or_default(),
            XAxis::Linear | XAxis::Log2 => number(x),
        }
    }
}

/// A value for a label or a table cell: whole numbers as they are
/// (47001, 1048576), others to three significant digits (0.824, 0.00880).
fn number(value: f64) -> String {
    if value == value.round() && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let decimals = (2.0 - value.abs().log10().floor()).clamp(0.0, 9.0) as usize;
    format!("{value:.decimals$}")
}

/// Checks once per process that a font can be found, so a host without
/// one gets a message saying what to install rather than plotters' own.
fn font() -> Result<()> {
    static FONT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| match (FAMILY, 12).into_font().box_size("0") {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "no {FAMILY} font for the figures ({e}): install fontconfig and fonts-dejavu-core (scripts/install-deps.sh)"
        )),
    })
    .clone()
    .map_err(BenchError::Invalid)
}

/// A figure's colours, distinct in print and to most colour-blind readers
/// (Okabe-Ito), then repeating.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

fn colour(index: usize) -> RGBColor {
    COLOURS[index % COLOURS.len()]
}

fn plot_error(path: &Path, error: impl std::fmt::Display) -> BenchError {
    BenchError::Plot { path: path.to_path_buf(), message: error.to_string() }
}

/// Checks the name ends in .png: the encoder picks the format by it.
fn check_png_name(path: &Path) -> Result<()> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("png") => Ok(()),
        _ => Err(BenchError::invalid(format!("{}: a figure file name must end in .png", path.display()))),
    }
}

/// Draws `figures` into one PNG at `path`, [`COLUMNS`] panels a row.
pub fn write_png(path: &Path, figures: &[Figure]) -> Result<()> {
    check_png_name(path)?;
    if figures.is_empty() {
        return Err(BenchError::invalid(format!("{}: the run has nothing to plot", path.display())));
    }
    font()?;
    let columns = figures.len().min(COLUMNS);
    let rows = figures.len().div_ceil(COLUMNS);
    let size = (PANEL_WIDTH * columns as u32, PANEL_HEIGHT * rows as u32);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_error(path, e))?;
    let panels = root.split_evenly((rows, columns));
    for (figure, panel) in figures.iter().zip(&panels) {
        draw(figure, panel).map_err(|e| plot_error(path, format!("{}: {e}", figure.title)))?;
    }
    root.present().map_err(|e| plot_error(path, e))
}

/// An f64 axis ticked only at given values. (plotters' own `with_key_points`
/// on f64 cannot take a label formatter in 0.3.7.)
struct KeyedAxis {
    range: plotters::coord::types::RangedCoordf64,
    keys: Vec<f64>,
}

impl Ranged for KeyedAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.range.map(value, limit)
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.keys.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.range()
    }
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw(figure: &Figure, area: &DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult {
    let xs = figure.xs();
    let top = figure.series.iter().flat_map(|s| &s.points).map(|p| p.max.max(p.median)).fold(0.0, f64::max);
    // Room above the data for the legend, a line per series.
    let headroom = 1.08 + 0.08 * figure.series.len() as f64;
    let y_max = if top > 0.0 { top * headroom } else { 1.0 };
    let (x_min, x_max) = match &figure.x_axis {
        XAxis::Categories(names) => (-0.5, names.len() as f64 - 0.5),
        XAxis::Log2 => {
            let low = xs.first().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE).log2();
            let high = xs.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE).log2();
            let pad = ((high - low) * 0.06).max(0.3);
            (low - pad, high + pad)
        }
        XAxis::Linear => {
            let low = xs.first().copied().unwrap_or(0.0);
            let high = xs.last().copied().unwrap_or(1.0);
            let pad = ((high - low) * 0.06).max(0.5);
            (low - pad, high + pad)
        }
    };
    // One precision for every tick (0.8000 beside 1 reads as noise):
    // enough digits for steps of about a tenth of the axis.
    let decimals = (1.0 - y_max.log10().floor()).clamp(0.0, 9.0) as usize;
    let key_points: Vec<f64> = match &figure.x_axis {
        XAxis::Categories(names) => (0..names.len()).map(|i| i as f64).collect(),
        XAxis::Log2 => xs.iter().map(|x| x.max(f64::MIN_POSITIVE).log2()).collect(),
        XAxis::Linear => xs.clone(),
    };
    // Labels closer than a twelfth of the axis would print over each other
    // (47001 and 49152 B on a log axis): the first one stands for both, and
    // report.md's table has every value.
    let mut labelled: Vec<f64> = Vec::with_capacity(key_points.len());
    for key in key_points {
        if labelled.last().is_none_or(|last| key - last >= (x_max - x_min) / 12.0) {
            labelled.push(key);
        }
    }
    let key_points = labelled;
    let mut chart = ChartBuilder::on(area)
        .caption(&figure.title, (FAMILY, 22))
        .margin(14)
        .x_label_area_size(52)
        .y_label_area_size(78)
        // Ticks where there is data (a category, a measured process count
        // or record size), as in the papers' figures: not at 2^15.5.
        .build_cartesian_2d(KeyedAxis { range: (x_min..x_max).into(), keys: key_points }, 0.0..y_max)?;
    let at_data = |v: &f64| match &figure.x_axis {
        XAxis::Categories(_) => figure.x_text(v.round()),
        XAxis::Log2 => number(v.exp2().round()),
        XAxis::Linear => number(*v),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Bold lines at the labelled values only: the faint ones between
        // them cluttered the bars and doubled the PNG's size.
        .max_light_lines(0)
        .x_labels(xs.len().max(1))
        .x_label_formatter(&at_data)
        .y_label_formatter(&|v| format!("{v:.decimals$}"))
        .x_desc(&figure.x_label)
        .y_desc(&figure.y_label)
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 17))
        .draw()?;

    let to_x = |x: f64| if figure.x_axis == XAxis::Log2 { x.max(f64::MIN_POSITIVE).log2() } else { x };
    let bars = matches!(figure.x_axis, XAxis::Categories(_));
    let count = figure.series.len().max(1) as f64;
    let group = 0.8;
    for (index, series) in figure.series.iter().enumerate() {
        let colour = colour(index);
        let whisker = ShapeStyle::from(&BLACK).stroke_width(2);
        if bars {
            let width = group / count;
            let offset = -group / 2.0 + width * index as f64;
            let rects = series.points.iter().map(|p| {
                let left = p.x + offset + width * 0.06;
                let right = p.x + offset + width * 0.94;
                Rectangle::new([(left, 0.0), (right, p.median)], colour.filled())
            });
            chart
                .draw_series(rects)?
                .label(&series.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], colour.filled()));
            let errors = series.points.iter().filter(|p| p.max > p.min);
            chart.draw_series(
                errors.flat_map(|p| range(p.x + offset + width / 2.0, p, width * 0.2, whisker)),
            )?;
        } else {
            let line: Vec<(f64, f64)> = series.points.iter().map(|p| (to_x(p.x), p.median)).collect();
            let style = colour.stroke_width(3);
            chart
                .draw_series(LineSeries::new(line.iter().copied(), style))?
                .label(&series.name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3)));
            chart.draw_series(line.iter().map(|&(x, y)| Circle::new((x, y), 5, colour.filled())))?;
            let errors = series.points.iter().filter(|p| p.max > p.min);
            let cap = (x_max - x_min) * 0.012;
            chart.draw_series(errors.flat_map(|p| range(to_x(p.x), p, cap, colour.stroke_width(2))))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, 16))
        .draw()?;
    Ok(())
}

/// The runs' range at `x`: a vertical line from min to max with caps
/// `half` wide either side (plotters' ErrorBar also rings the median,
/// which hides it on a bar).
fn range(x: f64, point: &Point, half: f64, style: ShapeStyle) -> [PathElement<(f64, f64)>; 3] {
    let (low, high) = (point.min, point.max);
    [
        PathElement::new(vec![(x, low), (x, high)], style),
        PathElement::new(vec![(x - half, low), (x + half, low)], style),
        PathElement::new(vec![(x - half, high), (x + half, high)], style),
    ]
}

/// Writes one PNG per figure into `dir` (created if needed) and
/// `report.md`: `heading`, the run's text report, then per figure its
/// picture and a table of its numbers. Returns the PNGs' paths.
pub fn write_report(dir: &Path, heading: &str, text: &str, figures: &[Figure]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(BenchError::io("creating the report directory", dir))?;
    let mut markdown = format!("# {heading}\n\n```\n{}```\n", text);
    let mut written = Vec::with_capacity(figures.len());
    let mut names: Vec<&str> = Vec::new();
    for figure in figures {
        // Two figures of one name would overwrite each other's PNG.
        if names.contains(&figure.name.as_str()) {
            return Err(BenchError::invalid(format!("two figures are named {:?}", figure.name)));
        }
        names.push(&figure.name);
        let file = format!("{}.png", figure.name);
        let path = dir.join(&file);
        write_png(&path, std::slice::from_ref(figure))?;
        let _ = write!(markdown, "\n## {}\n\n![{}]({file})\n\n{}", figure.title, figure.title, table(figure));
        written.push(path);
    }
    let report = dir.join("report.md");
    std::fs::write(&report, markdown).map_err(BenchError::io("writing", &report))?;
    Ok(written)
}

/// The figure's numbers: a row per series, a column per x value, each
/// cell the median with the range of the runs when there was one.
pub fn table(figure: &Figure) -> String {
    let xs = figure.xs();
    let mut out = format!("| {} \\ {} |", figure.y_label, figure.x_label);
    for x in &xs {
        let _ = write!(out, " {} |", figure.x_text(*x));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(xs.len()));
    out.push('\n');
    for series in &figure.series {
        let _ = write!(out, "| {} |", series.name);
        for x in &xs {
            match series.points.iter().find(|p| p.x == *x) {
                Some(p) if p.max > p.min => {
                    let _ = write!(out, " {} ({}–{}) |", number(p.median), number(p.min), number(p.max));
                }
                Some(p) => {
                    let _ = write!(out, " {} |", number(p.median));
                }
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------
// The figures of each workload.

const MIBS: &str = "bandwidth (MiB/s)";

/// One bar group per way of writing the file (direct N-1, N-N, and each
/// plfs interface), write and read bars, the `--repeat` range as whiskers.
impl Plot for RepeatedReport {
    fn figures(&self) -> Vec<Figure> {
        let Some(first) = self.reports.first() else { return Vec::new() };
        let figure = |name: &str| self.spread.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
        let mut rows: Vec<(&str, String, String)> = vec![
            ("direct N-1", "direct_n1_mibs".into(), "read_direct_n1_mibs".into()),
            ("N-N", "nn_mibs".into(), "read_nn_mibs".into()),
            ("MPI-IO plain file", "mpiio_plain_mibs".into(), "read_mpiio_plain_mibs".into()),
            ("plfs", "plfs_mibs".into(), "read_plfs_mibs".into()),
        ];
        for (interface, label) in
            [("preload", "plfs LD_PRELOAD"), ("mpiio", "plfs MPI-IO"), ("fuse", "plfs FUSE")]
        {
            rows.push((label, format!("{interface}_mibs"), format!("read_{interface}_mibs")));
        }
        rows.retain(|(_, write, _)| figure(write).is_some());
        let categories: Vec<String> = rows.iter().map(|(label, _, _)| (*label).to_owned()).collect();
        let mut series = Vec::new();
        for (name, column) in [("write", 1), ("read", 2)] {
            let points: Vec<Point> = rows
                .iter()
                .enumerate()
                .filter_map(|(index, row)| {
                    let key = if column == 1 { &row.1 } else { &row.2 };
                    figure(key).map(|s| Point::of(index as f64, s))
                })
                .collect();
            if !points.is_empty() {
                series.push(Series { name: name.to_owned(), points });
            }
        }
        let runs = match self.runs {
            1 => String::new(),
            n => format!(", median of {n}"),
        };
        vec![Figure {
            name: first.workload.as_str().to_owned(),
            title: format!(
                "{}: {} processes x {} x {} B{runs}",
                first.workload, first.writers, first.records, first.record_bytes
            ),
            x_label: "how the file is written".to_owned(),
            y_label: MIBS.to_owned(),
            x_axis: XAxis::Categories(categories),
            series,
        }]
    }
}

impl Plot for BenchReport {
    fn figures(&self) -> Vec<Figure> {
        RepeatedReport::new(vec![self.clone()]).figures()
    }
}

/// Bandwidth against record size, a line per target and direction, and
/// plfs / raw against record size.
impl Plot for StoreRepeatedReport {
    fn figures(&self) -> Vec<Figure> {
        let Some(first) = self.reports.first() else { return Vec::new() };
        type Get = fn(&crate::store::SizeSpread) -> Option<Spread>;
        let line = |name: &str, get: Get| {
            let points: Vec<Point> = self
                .sizes
                .iter()
                .filter_map(|s| get(s).map(|v| Point::of(s.record_bytes as f64, v)))
                .collect();
            (!points.is_empty()).then(|| Series { name: name.to_owned(), points })
        };
        let bandwidth: [(&str, Get); 4] = [
            ("plfs write", |s| s.plfs_write_mibs),
            ("raw N-N write", |s| s.raw_write_mibs),
            ("plfs read", |s| s.plfs_read_mibs),
            ("raw N-N read", |s| s.raw_read_mibs),
        ];
        let ratios: [(&str, Get); 2] = [("write", |s| s.write_ratio), ("read", |s| s.read_ratio)];
        let stores: Vec<&str> =
            first.backends.iter().map(|b| b.split("://").next().unwrap_or(b.as_str())).collect();
        let title = format!("{}: {} writers on {}", first.workload, first.writers, stores.join("+"));
        vec![
            Figure {
                name: format!("store-{}", first.workload),
                title: title.clone(),
                x_label: "record size (B)".to_owned(),
                y_label: MIBS.to_owned(),
                x_axis: XAxis::Log2,
                series: bandwidth.iter().filter_map(|(name, get)| line(name, *get)).collect(),
            },
            Figure {
                name: format!("store-{}-ratio", first.workload),
                title: format!("{title}: plfs / raw"),
                x_label: "record size (B)".to_owned(),
                y_label: "plfs / raw bandwidth".to_owned(),
                x_axis: XAxis::Log2,
                series: ratios.iter().filter_map(|(name, get)| line(name, *get)).collect(),
            },
        ]
    }
}

impl Plot for StoreReport {
    fn figures(&self) -> Vec<Figure> {
        StoreRepeatedReport::new(vec![self.clone()]).figures()
    }
}

/// One strategy's runs of a figure as a point at `x`.
fn runs_point(x: f64, runs: &[f64]) -> Option<Point> {
    Spread::of(runs.iter().map(|value| Some(*value))).map(|spread| Point::of(x, spread))
}

/// Per strategy, the repeats' range as whiskers (seed 000 §3 at one
/// (N, M)): the read open (Figure 3), read open + write close (Figure 4),
/// read bandwidth counting the open (Figure 5), and the largest reader's
/// memory growth.
impl Plot for OpenReport {
    fn figures(&self) -> Vec<Figure> {
        let categories: Vec<String> = self.strategies.iter().map(|s| s.strategy.clone()).collect();
        let bars = |runs: fn(&StrategyReport) -> &[f64]| -> Vec<Point> {
            self.strategies
                .iter()
                .enumerate()
                .filter_map(|(index, s)| runs_point(index as f64, runs(s)))
                .collect()
        };
        let open = bars(|s| &s.open_seconds_runs);
        let memory: Vec<Point> = self
            .strategies
            .iter()
            .enumerate()
            .map(|(index, s)| Point::single(index as f64, s.rss_delta_kib_max.max(0) as f64 / 1024.0))
            .collect();
        let title = format!(
            "open: {} writers, {} readers{}",
            self.writers,
            self.readers,
            if self.caches_dropped { ", cold cache" } else { ", warm cache" }
        );
        vec![
            Figure {
                name: "open-time".to_owned(),
                title: title.clone(),
                x_label: "index strategy".to_owned(),
                y_label: "open time, slowest reader (s)".to_owned(),
                x_axis: XAxis::Categories(categories.clone()),
                series: vec![Series { name: format!("median of {}", self.repeat), points: open }],
            },
            Figure {
                name: "open-close-time".to_owned(),
                title: title.clone(),
                x_label: "index strategy".to_owned(),
                y_label: "read open + write close, slowest rank (s)".to_owned(),
                x_axis: XAxis::Categories(categories.clone()),
                series: vec![Series {
                    name: format!("median of {}", self.repeat),
                    points: bars(|s| &s.open_close_seconds_runs),
                }],
            },
            Figure {
                name: "open-read-bandwidth".to_owned(),
                title: title.clone(),
                x_label: "index strategy".to_owned(),
                y_label: "read bandwidth, open + read (MiB/s)".to_owned(),
                x_axis: XAxis::Categories(categories.clone()),
                series: vec![Series {
                    name: format!("median of {}", self.repeat),
                    points: bars(|s| &s.read_mib_per_s_runs),
                }],
            },
            Figure {
                name: "open-memory".to_owned(),
                title,
                x_label: "index strategy".to_owned(),
                y_label: "resident memory growth, largest reader (MiB)".to_owned(),
                x_axis: XAxis::Categories(categories),
                series: vec![Series { name: "merged index".to_owned(), points: memory }],
            },
        ]
    }
}

/// The sweep as the paper draws it: against processes (N = M), one line
/// per strategy, the repeats' range as error bars. One point is drawn as
/// [`OpenReport`]'s bars.
impl Plot for OpenSweepReport {
    fn figures(&self) -> Vec<Figure> {
        if let [point] = self.points.as_slice() {
            return point.figures();
        }
        let Some(first) = self.points.first() else { return Vec::new() };
        let names: Vec<String> = first.strategies.iter().map(|s| s.strategy.clone()).collect();
        let lines = |runs: fn(&StrategyReport) -> &[f64]| -> Vec<Series> {
            names
                .iter()
                .enumerate()
                .map(|(index, name)| Series {
                    name: name.clone(),
                    points: self
                        .points
                        .iter()
                        .filter_map(|point| {
                            runs_point(point.readers as f64, runs(point.strategies.get(index)?))
                        })
                        .collect(),
                })
                .collect()
        };
        let title = format!(
            "{} records x {} B per process, {} backends{}",
            first.records,
            first.record_bytes,
            first.backends,
            if first.caches_dropped { ", cold cache" } else { ", warm cache" }
        );
        let figure = |name: &str, y_label: &str, series: Vec<Series>| Figure {
            name: name.to_owned(),
            title: title.clone(),
            x_label: "processes (N writers = M readers)".to_owned(),
            y_label: y_label.to_owned(),
            x_axis: XAxis::Log2,
            series,
        };
        vec![
            figure("open-sweep-open", "read open time, slowest reader (s)", lines(|s| &s.open_seconds_runs)),
            figure(
                "open-sweep-open-close",
                "read open + write close, slowest rank (s)",
                lines(|s| &s.open_close_seconds_runs),
            ),
            figure(
                "open-sweep-read",
                "read bandwidth, open + read (MiB/s)",
                lines(|s| &s.read_mib_per_s_runs),
            ),
        ]
    }
}

/// Create, stat, read and remove rates against backends K, a line per
/// target and interface (the paper's federated metadata figure). Targets
/// that do not spread over backends (direct) are drawn flat across K as a
/// reference.
impl Plot for MdtestSummary {
    fn figures(&self) -> Vec<Figure> {
        let ks: Vec<usize> = {
            let mut ks: Vec<usize> = self.cases.iter().map(|c| c.backends).collect();
            ks.sort_unstable();
            ks.dedup();
            ks
        };
        let mut lines: Vec<(MdTarget, Option<MdInterface>)> = Vec::new();
        for case in &self.cases {
            if !lines.contains(&(case.target, case.interface)) {
                lines.push((case.target, case.interface));
            }
        }
        let runs = match self.repeat {
            1 => String::new(),
            n => format!(", median of {n}"),
        };
        MdPhase::ALL
            .iter()
            .map(|&phase| {
                let series = lines
                    .iter()
                    .filter_map(|&(target, interface)| {
                        let cases: Vec<_> = self
                            .cases
                            .iter()
                            .filter(|c| c.target == target && c.interface == interface)
                            .collect();
                        let first = cases.first()?;
                        let (name, points) = match cases.as_slice() {
                            [only] if !target.federated() => (
                                format!("{} (no backends)", only.label()),
                                ks.iter().map(|k| Point::of(*k as f64, only.rate(phase))).collect(),
                            ),
                            _ => (
                                first.label(),
                                cases.iter().map(|c| Point::of(c.backends as f64, c.rate(phase))).collect(),
                            ),
                        };
                        Some(Series { name, points })
                    })
                    .collect();
                let phase = phase.as_str();
                Figure {
                    name: format!("mdtest-{phase}"),
                    title: format!(
                        "mdtest {phase}: {} processes x {} files{runs}",
                        self.procs, self.files_per_proc
                    ),
                    x_label: "backends K".to_owned(),
                    y_label: format!("{phase}s per second"),
                    x_axis: XAxis::Log2,
                    series,
                }
            })
            .collect()
    }
}

impl Plot for MdtestReport {
    fn figures(&self) -> Vec<Figure> {
        MdtestSummary::new(vec![self.clone()]).figures()
    }
}

/// One process streaming through the library and through the FUSE mount.
impl Plot for [StreamingReport] {
    fn figures(&self) -> Vec<Figure> {
        let Some(first) = self.first() else { return Vec::new() };
        type Get = fn(&StreamingReport) -> f64;
        let spread = |get: Get| Spread::of(self.iter().map(|r| Some(get(r))));
        let bars = |write: Get, read: Get| [spread(write), spread(read)];
        let rows = [
            bars(|r| r.write_library_mibs, |r| r.read_library_mibs),
            bars(|r| r.write_fuse_mibs, |r| r.read_fuse_mibs),
        ];
        let series = ["write", "read"]
            .iter()
            .enumerate()
            .map(|(column, name)| Series {
                name: (*name).to_owned(),
                points: rows
                    .iter()
                    .enumerate()
                    .filter_map(|(index, row)| row[column].map(|s| Point::of(index as f64, s)))
                    .collect(),
            })
            .collect();
        vec![Figure {
            name: "streaming".to_owned(),
            title: format!(
                "streaming {} MiB in {} KiB blocks, one process{}",
                first.bytes >> 20,
                first.block_bytes >> 10,
                if first.cold_reads { ", cold reads" } else { ", warm reads" }
            ),
            x_label: "interface".to_owned(),
            y_label: MIBS.to_owned(),
            x_axis: XAxis::Categories(vec!["library".to_owned(), "FUSE mount".to_owned()]),
            series,
        }]
    }
}

#[cfg(test)]
mod tests;

/// Restart: bandwidth of the write and of each read decomposition, one bar
/// per format (plfs, the direct file, the peers), like the seed's restart
/// figures; then the largest reader's peak RSS per decomposition.
impl Plot for RestartReport {
    fn figures(&self) -> Vec<Figure> {
        // The phases in the order the run made them: the write, then each
        // decomposition; a category names its process count.
        let mut phases: Vec<(String, Option<String>)> = Vec::new();
        for point in &self.points {
            let key = (point.op.clone(), point.decomp.clone());
            if !phases.contains(&key) {
                phases.push(key);
            }
        }
        let processes = |op: &str, decomp: &Option<String>| {
            self.points.iter().find(|p| p.op == op && &p.decomp == decomp).map_or(0, |p| p.processes)
        };
        let label = |(op, decomp): &(String, Option<String>)| match decomp {
            Some(name) => format!("{name} (M={})", processes(op, decomp)),
            None => format!("{op} (N={})", processes(op, decomp)),
        };
        let mut targets: Vec<String> = Vec::new();
        for point in &self.points {
            if !targets.contains(&point.target) {
                targets.push(point.target.clone());
            }
        }
        // One series per format over `phases` (x = the phase's position).
        let series_of = |phases: &[(String, Option<String>)],
                         value: &dyn Fn(&crate::restart::RestartPoint) -> Spread| {
            targets
                .iter()
                .map(|target| Series {
                    name: target.clone(),
                    points: phases
                        .iter()
                        .enumerate()
                        .filter_map(|(index, (op, decomp))| {
                            let point = self
                                .points
                                .iter()
                                .find(|p| &p.target == target && &p.op == op && &p.decomp == decomp)?;
                            Some(Point::of(index as f64, value(point)))
                        })
                        .collect(),
                })
                .filter(|series| !series.points.is_empty())
                .collect::<Vec<Series>>()
        };
        let reads: Vec<(String, Option<String>)> =
            phases.iter().filter(|(_, decomp)| decomp.is_some()).cloned().collect();
        let shape = match (&self.block, self.global) {
            (Some(block), Some([x, y, z])) => format!("pixie3d {block}, {x}x{y}x{z}"),
            _ => self.pattern.clone(),
        };
        let title = format!(
            "restart: {shape}, {} writers, {} MiB{}",
            self.writers,
            self.file_bytes >> 20,
            if self.warm { ", warm cache" } else { ", cold cache" }
        );
        let mib = |spread: Spread| Spread {
            median: spread.median / 1024.0,
            min: spread.min / 1024.0,
            max: spread.max / 1024.0,
        };
        vec![
            Figure {
                name: "restart-bandwidth".to_owned(),
                title: title.clone(),
                x_label: "phase (processes)".to_owned(),
                y_label: "bandwidth (MiB/s)".to_owned(),
                x_axis: XAxis::Categories(phases.iter().map(label).collect()),
                series: series_of(&phases, &|p| p.mibs),
            },
            Figure {
                name: "restart-memory".to_owned(),
                title,
                x_label: "read decomposition (readers)".to_owned(),
                y_label: "peak RSS, largest reader (MiB)".to_owned(),
                x_axis: XAxis::Categories(reads.iter().map(label).collect()),
                series: series_of(&reads, &|p| mib(p.max_rss_kib)),
            },
        ]
    }
}
