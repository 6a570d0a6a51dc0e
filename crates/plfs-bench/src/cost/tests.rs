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

#[test]
fn the_model_follows_readers_groups_nodes_backends_and_hostdirs() {
    for pattern in [Pattern::Regular, Pattern::Irregular] {
        let base = CostParams::checkpoint(7, pattern);
        // Fewer readers than writers, each with several logs to read.
        check(&CostParams { readers: 3, ..base.clone() });
        // Groups given: one rank each (every rank a leader), and all in one.
        check(&CostParams { group_ranks: Some(1), ..base.clone() });
        check(&CostParams { group_ranks: Some(7), ..base.clone() });
        check(&CostParams { readers: 5, group_ranks: Some(2), ..base.clone() });
        // A node per rank over one backend; three hostdirs shared by 7 nodes.
        check(&CostParams { nodes: 7, backends: 1, ..base.clone() });
        check(&CostParams { nodes: 7, num_hostdirs: 3, backends: 5, ..base.clone() });
        // Every rank on one node.
        check(&CostParams { nodes: 1, ..base });
    }
}

#[test]
fn the_model_follows_index_flushes_read_ahead_and_single_records() {
    for pattern in [Pattern::Regular, Pattern::Irregular] {
        let base = CostParams::checkpoint(3, pattern);
        // Past the 256 KiB flush threshold twice: frames appended while
        // writing, and a last one at close.
        check(&CostParams { records: 2 * 4370 + 3, record_bytes: 3, ..base.clone() });
        // Exactly two frames' worth: nothing left for close.
        check(&CostParams { records: 2 * 4369, record_bytes: 2, ..base.clone() });
        // Records read back through more than one read-ahead window.
        check(&CostParams { records: 300, record_bytes: 10_000, ..base.clone() });
        // Records too large for the window, read straight.
        check(&CostParams { records: 4, record_bytes: 40_000, ..base.clone() });
        // One record per rank: no run to find.
        check(&CostParams { records: 1, ..base });
    }
}

#[test]
fn the_extrapolation_covers_every_scale_and_operation() {
    let rows = extrapolate();
    assert_eq!(rows.len(), 2 * EXTRAPOLATED_RANKS.len() * EXTRAPOLATED_BACKENDS.len() * Operation::ALL.len());
    let text = extrapolation_text(&rows);
    for ranks in EXTRAPOLATED_RANKS {
        assert!(text.contains(&format!("{ranks} ranks on {} nodes", ranks / RANKS_PER_NODE)), "{text}");
    }
    // At 64K ranks an irregular merged index (64K x 1000 entries of 32
    // bytes) no longer fits a rank's memory comfortably: 2000 MiB.
    let naive = rows
        .iter()
        .find(|row| {
            row.params.ranks == 1 << 16
                && row.params.pattern == Pattern::Irregular
                && row.operation == Operation::OpenNaive
        })
        .unwrap();
    assert_eq!(naive.index_memory_per_rank, Some((1u64 << 16) * 1000 * 32));
}
