//! Several runs of one benchmark summarised by their medians: single runs of
//! sub-second phases on a shared disk scatter by ±15%, so the headline
//! figures are medians, with the range beside them.

use std::fmt::Write as _;

use serde::Serialize;

use crate::report::{RankSplit, rank_split_table};
use crate::spread::Spread;
use crate::{BenchReport, InterfaceFigures};

/// Reads one figure out of a run's report.
type Figure = fn(&BenchReport) -> Option<f64>;

/// Reads one figure out of an interface's row.
type InterfaceFigure = fn(&InterfaceFigures) -> Option<f64>;

/// The library's row, when the run had one.
fn lib(report: &BenchReport) -> Option<&InterfaceFigures> {
    report.interfaces.iter().find(|i| i.interface == "lib")
}

/// The medians carry the same names as a single run's report, so scripts
/// read `plfs_mibs` or `ratio_vs_nn` either way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatedReport {
    pub runs: usize,
    pub plfs_mibs: Option<f64>,
    pub direct_n1_mibs: Option<f64>,
    pub nn_mibs: Option<f64>,
    pub ratio_vs_nn: Option<f64>,
    pub ratio_vs_direct: Option<f64>,
    pub read_plfs_mibs: Option<f64>,
    pub read_nn_mibs: Option<f64>,
    pub read_direct_n1_mibs: Option<f64>,
    pub read_ratio_vs_nn: Option<f64>,
    pub read_ratio_vs_direct: Option<f64>,
    /// Every run verified every byte it read back.
    pub verified: bool,
    /// Median, minimum and maximum of each figure above.
    pub spread: Vec<(String, Spread)>,
    /// With the mpiio interface: each phase's clock inside the ranks
    /// (open, I/O, sync+close), every part the median over the runs of
    /// its median over the ranks, with the range of the runs.
    pub ranks: Vec<(String, RankSplit)>,
    pub reports: Vec<BenchReport>,
}

impl RepeatedReport {
    pub fn new(reports: Vec<BenchReport>) -> RepeatedReport {
        let figures: [(&str, Figure); 16] = [
            ("plfs_mibs", |r| lib(r).map(|_| r.plfs_mibs)),
            ("direct_n1_mibs", |r| r.direct_n1_mibs),
            ("nn_mibs", |r| Some(r.nn_mibs)),
            ("ratio_vs_nn", |r| lib(r).map(|_| r.ratio_vs_nn)),
            ("ratio_vs_direct", |r| r.ratio_vs_direct),
            ("read_plfs_mibs", |r| r.read_plfs_mibs),
            ("read_nn_mibs", |r| r.read_nn_mibs),
            ("read_direct_n1_mibs", |r| r.read_direct_n1_mibs),
            ("read_ratio_vs_nn", |r| r.read_ratio_vs_nn),
            ("read_ratio_vs_direct", |r| r.read_ratio_vs_direct),
            // In ms: the table prints two decimals.
            ("plfs_cpu_ms", |r| r.write_plfs_cpu_seconds.map(|s| s * 1e3)),
            ("read_plfs_cpu_ms", |r| r.read_plfs_cpu_seconds.map(|s| s * 1e3)),
            ("mpiio_plain_mibs", |r| r.mpiio_plain_mibs),
            ("read_mpiio_plain_mibs", |r| r.read_mpiio_plain_mibs),
            ("mpiio_plain_ratio_vs_direct", |r| r.mpiio_plain_ratio_vs_direct),
            ("read_mpiio_plain_ratio_vs_direct", |r| r.read_mpiio_plain_ratio_vs_direct),
        ];
        let mut spread: Vec<(String, Spread)> = figures
            .iter()
            .filter_map(|(name, get)| Spread::of(reports.iter().map(get)).map(|s| (name.to_string(), s)))
            .collect();
        // The other interfaces' figures, named like the library's with the
        // interface in place of "plfs" (preload_mibs, read_mpiio_ratio_vs_nn).
        let names: Vec<String> = reports
            .first()
            .map(|r| r.interfaces.iter().map(|i| i.interface.clone()).filter(|i| i != "lib").collect())
            .unwrap_or_default();
        for interface in &names {
            let per_interface: [(&str, InterfaceFigure); 8] = [
                ("mibs", |i| Some(i.write_mibs)),
                ("ratio_vs_nn", |i| i.ratio_vs_nn),
                ("ratio_vs_direct", |i| i.ratio_vs_direct),
                ("read_mibs", |i| i.read_mibs),
                ("read_ratio_vs_nn", |i| i.read_ratio_vs_nn),
                ("read_ratio_vs_direct", |i| i.read_ratio_vs_direct),
                ("ratio_vs_mpiio_plain", |i| i.ratio_vs_mpiio_plain),
                ("read_ratio_vs_mpiio_plain", |i| i.read_ratio_vs_mpiio_plain),
            ];
            for (figure, get) in per_interface {
                let values = reports
                    .iter()
                    .map(|r| r.interfaces.iter().find(|i| &i.interface == interface).and_then(get));
                if let Some(s) = Spread::of(values) {
                    let name = match figure.strip_prefix("read_") {
                        Some(rest) => format!("read_{interface}_{rest}"),
                        None => format!("{interface}_{figure}"),
                    };
                    spread.push((name, s));
                }
            }
        }
        let median = |name: &str| spread.iter().find(|(n, _)| n == name).map(|(_, s)| s.median);
        RepeatedReport {
            runs: reports.len(),
            plfs_mibs: median("plfs_mibs"),
            direct_n1_mibs: median("direct_n1_mibs"),
            nn_mibs: median("nn_mibs"),
            ratio_vs_nn: median("ratio_vs_nn"),
            ratio_vs_direct: median("ratio_vs_direct"),
            read_plfs_mibs: median("read_plfs_mibs"),
            read_nn_mibs: median("read_nn_mibs"),
            read_direct_n1_mibs: median("read_direct_n1_mibs"),
            read_ratio_vs_nn: median("read_ratio_vs_nn"),
            read_ratio_vs_direct: median("read_ratio_vs_direct"),
            verified: reports.iter().all(|r| r.verified),
            spread,
            ranks: rank_splits(&reports),
            reports,
        }
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "median of {} runs (min .. max):", self.runs);
        for (name, spread) in &self.spread {
            let _ = writeln!(
                out,
                "  {name:<27} {:>10.2}   ({:.2} .. {:.2})",
                spread.median, spread.min, spread.max
            );
        }
        if self
            .spread
            .iter()
            .any(|(name, _)| ["preload_", "mpiio_", "fuse_"].iter().any(|prefix| name.starts_with(prefix)))
        {
            out.push_str(&self.table());
        }
        if !self.ranks.is_empty() {
            let what = "median over the runs of the ranks' median (the runs' range)";
            out.push_str(&rank_split_table(what, &self.ranks));
        }
        let verdict =
            if self.verified { "every run verified every byte it read" } else { "MISMATCH in some run" };
        let _ = writeln!(out, "verified: {verdict}");
        out
    }
}

impl RepeatedReport {
    fn figure(&self, name: &str) -> Option<Spread> {
        self.spread.iter().find(|(n, _)| n == name).map(|(_, s)| *s)
    }

    /// Medians (and ranges) as one table: the baselines, then each
    /// interface with its ratios to both.
    fn table(&self) -> String {
        let cell = |spread: Option<Spread>, digits: usize| match spread {
            Some(s) => format!("{:.*} ({:.*}..{:.*})", digits, s.median, digits, s.min, digits, s.max),
            None => "-".to_owned(),
        };
        let mut out = String::new();
        let _ = writeln!(out, "\nmedians (min..max) over {} runs:", self.runs);
        let _ = writeln!(
            out,
            "{:<12} {:>22} {:>22} {:>19} {:>19} {:>19} {:>19}",
            "", "write MiB/s", "read MiB/s", "write / N-N", "write / direct", "read / N-N", "read / direct"
        );
        let mut rows: Vec<(String, [Option<Spread>; 6])> = vec![
            (
                "direct N-1".to_owned(),
                [self.figure("direct_n1_mibs"), self.figure("read_direct_n1_mibs"), None, None, None, None],
            ),
            ("N-N".to_owned(), [self.figure("nn_mibs"), self.figure("read_nn_mibs"), None, None, None, None]),
        ];
        if self.figure("plfs_mibs").is_some() {
            rows.push((
                "lib".to_owned(),
                [
                    self.figure("plfs_mibs"),
                    self.figure("read_plfs_mibs"),
                    self.figure("ratio_vs_nn"),
                    self.figure("ratio_vs_direct"),
                    self.figure("read_ratio_vs_nn"),
                    self.figure("read_ratio_vs_direct"),
                ],
            ));
        }
        if self.figure("mpiio_plain_mibs").is_some() {
            rows.push((
                "mpiio-plain".to_owned(),
                [
                    self.figure("mpiio_plain_mibs"),
                    self.figure("read_mpiio_plain_mibs"),
                    None,
                    self.figure("mpiio_plain_ratio_vs_direct"),
                    None,
                    self.figure("read_mpiio_plain_ratio_vs_direct"),
                ],
            ));
        }
        for interface in ["preload", "mpiio", "fuse"] {
            let Some(write) = self.figure(&format!("{interface}_mibs")) else { continue };
            rows.push((
                interface.to_owned(),
                [
                    Some(write),
                    self.figure(&format!("read_{interface}_mibs")),
                    self.figure(&format!("{interface}_ratio_vs_nn")),
                    self.figure(&format!("{interface}_ratio_vs_direct")),
                    self.figure(&format!("read_{interface}_ratio_vs_nn")),
                    self.figure(&format!("read_{interface}_ratio_vs_direct")),
                ],
            ));
        }
        for (label, [write, read, w_nn, w_direct, r_nn, r_direct]) in rows {
            let _ = writeln!(
                out,
                "{label:<12} {:>22} {:>22} {:>19} {:>19} {:>19} {:>19}",
                cell(write, 0),
                cell(read, 0),
                cell(w_nn, 2),
                cell(w_direct, 2),
                cell(r_nn, 2),
                cell(r_direct, 2)
            );
        }
        if let Some(write) = self.figure("mpiio_ratio_vs_mpiio_plain") {
            let _ = writeln!(
                out,
                "mpiio / mpiio-plain: write {}  read {}",
                cell(Some(write), 2),
                cell(self.figure("read_mpiio_ratio_vs_mpiio_plain"), 2)
            );
        }
        out
    }
}

/// The phases whose ranks told their split in every run (with the mpiio
/// interface only, as the single run's text shows it), each part's
/// per-run rank median summarised over the runs.
fn rank_splits(reports: &[BenchReport]) -> Vec<(String, RankSplit)> {
    let Some(first) = reports.first() else { return Vec::new() };
    if !first.phases.iter().any(|p| p.target == crate::Target::MpiioPlain) {
        return Vec::new();
    }
    first
        .phases
        .iter()
        .filter_map(|phase| {
            let splits: Vec<RankSplit> = reports
                .iter()
                .map(|r| r.phases.iter().find(|p| p.name == phase.name).and_then(|p| p.ranks))
                .collect::<Option<_>>()?;
            let part = |get: fn(&RankSplit) -> Spread| Spread::of(splits.iter().map(|s| Some(get(s).median)));
            let split = RankSplit {
                open_ms: part(|s| s.open_ms)?,
                io_ms: part(|s| s.io_ms)?,
                close_ms: part(|s| s.close_ms)?,
            };
            Some((phase.name.clone(), split))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_the_middle_value() {
        let spread = Spread::of([Some(3.0), None, Some(1.0), Some(2.0)].into_iter()).unwrap();
        assert_eq!(spread, Spread { median: 2.0, min: 1.0, max: 3.0 });
        let even = Spread::of([Some(4.0), Some(1.0), Some(2.0), Some(3.0)].into_iter()).unwrap();
        assert_eq!(even.median, 2.5);
        assert!(Spread::of([None, None].into_iter()).is_none());
    }
}
