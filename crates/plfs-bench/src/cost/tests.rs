use super::*;

/// Every operation and strategy, measured with thread ranks, costs
/// exactly what the model predicts: counts are deterministic, so any
/// difference is a wrong term (or code doing something the model does
/// not say).
fn check(params: &CostParams) {
    let dir = tempfile::tempdir().unwrap();
    let report = run_cost(params, dir.path()).unwrap();
    let mut wrong = Vec::new();
    for row in &report.rows {
        if !row.agrees() {
            wrong.push(format!(
                "{}:\n  measured  {:?}\n  predicted {:?}",
                row.operation, row.measured, row.predicted
            ));
        }
    }
    assert!(wrong.is_empty(), "{params:?}\n{}", wrong.join("\n"));
    assert_eq!(report.rows.len(), Operation::ALL.len());
}

#[test]
fn the_model_predicts_every_count_exactly_for_regular_writes() {
    for ranks in [1, 2, 3, 4, 5, 8, 16] {
        check(&CostParams::checkpoint(ranks, Pattern::Regular));
    }
}

#[test]
fn the_model_predicts_every_count_exactly_for_irregular_writes() {
    for ranks in [1, 2, 3, 4, 5, 8, 16] {
        check(&CostParams::checkpoint(ranks, Pattern::Irregular));
    }
}
