//! Pictures of `plfs bench cost`: what an open, a write and a close cost
//! against the number of ranks, one line per open strategy, as the
//! federated-metadata paper draws its open times (Figure 3) but in counts,
//! which do not drift with the machine. A measured run has no error bars: a
//! count is exact, and the run exits 1 unless every count is the model's.
//! The extrapolation draws the model alone, at 1K to 64K ranks.

use super::{CostReport, ExtrapolatedRow, Figures, Operation, Pattern};
use crate::plot::{Figure, Plot, Point, Series, XAxis};

/// The collective opens, in the order the figures list them.
const OPENS: [Operation; 5] = [
    Operation::OpenNaive,
    Operation::OpenBroadcast,
    Operation::OpenParallel,
    Operation::OpenUniformRestart,
    Operation::OpenNaiveFlattened,
];

/// The operations that change the namespace or the logs.
const WRITES: [Operation; 5] =
    [Operation::Create, Operation::Write, Operation::Close, Operation::Stat, Operation::Flatten];

/// One counted (or predicted) point: the pattern, the ranks, the backends,
/// the operation and its figures.
struct Sample<'a> {
    pattern: Pattern,
    ranks: u64,
    backends: u64,
    operation: Operation,
    figures: &'a Figures,
}

/// One figure per quantity and pattern, one line per operation, x = ranks;
/// with `log10` the counts are drawn as their decimal logarithm (the
/// extrapolation spans nine orders of magnitude, where a linear axis shows
/// only the naive open).
fn figures<'a>(samples: &[Sample<'a>], scope: &str, log10: bool) -> Vec<Figure> {
    type Quantity = (&'static str, &'static str, &'static str, fn(&Figures) -> u64, &'static [Operation]);
    const QUANTITIES: [Quantity; 4] = [
        ("opens", "Backend opens per open, all ranks", "backend opens", |f| f.opens, &OPENS),
        ("busiest", "Opens of the busiest rank", "opens", |f| f.max_rank_opens, &OPENS),
        ("messages", "Messages per open", "messages", |f| f.messages, &OPENS),
        ("metadata", "Backend metadata operations", "operations", Figures::metadata_ops, &WRITES),
    ];
    let mut patterns: Vec<Pattern> = samples.iter().map(|s| s.pattern).collect();
    patterns.dedup();
    let mut out = Vec::new();
    for pattern in patterns {
        for (name, title, y_label, value, operations) in QUANTITIES {
            let series: Vec<Series> = operations
                .iter()
                .map(|&operation| Series {
                    name: operation.as_str().to_owned(),
                    points: samples
                        .iter()
                        .filter(|s| s.pattern == pattern && s.operation == operation)
                        .map(|s| {
                            let count = value(s.figures) as f64;
                            Point::single(s.ranks as f64, if log10 { count.max(1.0).log10() } else { count })
                        })
                        .collect(),
                })
                .filter(|series| !series.points.is_empty())
                .collect();
            if series.is_empty() {
                continue;
            }
            out.push(Figure {
                name: format!("cost-{name}-{pattern}"),
                title: format!("{title} ({pattern}, {scope})"),
                x_label: "ranks".to_owned(),
                y_label: if log10 { format!("log10({y_label})") } else { y_label.to_owned() },
                x_axis: XAxis::Log2,
                series,
            });
        }
    }
    out
}

/// The measured runs of one `plfs bench cost` invocation.
pub struct CostRuns<'a>(pub &'a [CostReport]);

impl Plot for CostRuns<'_> {
    fn figures(&self) -> Vec<Figure> {
        let samples: Vec<Sample> = self
            .0
            .iter()
            .flat_map(|report| {
                report.rows.iter().map(|row| Sample {
                    pattern: report.params.pattern,
                    ranks: report.params.ranks,
                    backends: report.params.backends,
                    operation: row.operation,
                    figures: &row.measured,
                })
            })
            .collect();
        let backends = samples.first().map(|s| s.backends).unwrap_or_default();
        figures(&samples, &format!("{backends} backends"), false)
    }
}

/// The model's extrapolation; drawn at one backend count (the largest),
/// since the lines' shapes do not change with it.
pub struct Extrapolation<'a>(pub &'a [ExtrapolatedRow]);

impl Plot for Extrapolation<'_> {
    fn figures(&self) -> Vec<Figure> {
        let backends = self.0.iter().map(|row| row.params.backends).max().unwrap_or_default();
        let samples: Vec<Sample> = self
            .0
            .iter()
            .filter(|row| row.params.backends == backends)
            .map(|row| Sample {
                pattern: row.params.pattern,
                ranks: row.params.ranks,
                backends,
                operation: row.operation,
                figures: &row.predicted,
            })
            .collect();
        figures(&samples, &format!("{backends} backends, model"), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::extrapolate;

    #[test]
    fn the_extrapolation_draws_every_open_strategy_against_ranks() {
        let rows = extrapolate();
        let figures = Extrapolation(&rows).figures();
        // Four quantities for each of the two patterns.
        assert_eq!(figures.len(), 8);
        let opens = figures.iter().find(|f| f.name == "cost-opens-regular").expect("opens figure");
        assert_eq!(opens.series.len(), OPENS.len());
        for series in &opens.series {
            let ranks: Vec<f64> = series.points.iter().map(|p| p.x).collect();
            assert_eq!(ranks, [1024.0, 4096.0, 16384.0, 65536.0], "{}", series.name);
        }
        // Drawn as log10 of the counts; a naive open has every reader open
        // every index log: it grows faster with the ranks than the parallel one.
        assert!(opens.y_label.starts_with("log10("));
        let last = |name: &str| opens.series.iter().find(|s| s.name == name).unwrap().points[3].median;
        assert!(last("open naive") > last("open parallel"));
    }
}
