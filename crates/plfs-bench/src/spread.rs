//! The median and range of one figure over several runs (or ranks): the
//! value type every report of several measurements prints, kept apart so
//! the single-run reports and the summaries of many runs both use it
//! without importing each other.

use serde::Serialize;

/// Median, minimum and maximum of one figure over the runs that have it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub(crate) fn of(values: impl Iterator<Item = Option<f64>>) -> Option<Spread> {
        let mut values: Vec<f64> = values.flatten().collect();
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let middle = values.len() / 2;
        let median =
            if values.len() % 2 == 1 { values[middle] } else { (values[middle - 1] + values[middle]) / 2.0 };
        Some(Spread { median, min: values[0], max: values[values.len() - 1] })
    }
}
