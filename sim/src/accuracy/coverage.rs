//! Coverage: how many measured points servesim can express, and why not
//! the others. Each point goes through the same scenario building and
//! resolution as `accuracy` ([`express`]) but is not simulated, so the
//! figure follows whatever models, chips, precisions and layouts the
//! catalog and the scenario resolution know.

use super::express::{express, ReasonKind, Settings, Unexpressible};
use super::MeasuredPoint;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// One point's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CoverageRow {
    pub source: String,
    pub id: String,
    pub model: Option<String>,
    pub chip: Option<String>,
    pub precision: Option<String>,
    /// `None`: expressible.
    pub unexpressible: Option<Unexpressible>,
}

/// Rows that share a reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReasonCount {
    pub kind: ReasonKind,
    pub group: String,
    pub rows: usize,
    /// One full reason from the group, as an example.
    pub example: String,
}

/// Coverage of a set of points.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Coverage {
    pub inputs: Vec<String>,
    pub rows: usize,
    pub expressible: usize,
    /// Reasons, most rows first (ties by kind, then text).
    pub reasons: Vec<ReasonCount>,
    /// Rows by reason kind.
    pub by_kind: BTreeMap<String, usize>,
    pub per_row: Vec<CoverageRow>,
}

/// Decides for every point whether it can be expressed (in parallel;
/// results in input order).
pub fn coverage(
    inputs: Vec<String>,
    points: &[MeasuredPoint],
    base: Option<(&toml::Table, &str)>,
    settings: &Settings,
) -> Coverage {
    let origin = base.map_or("<accuracy>", |b| b.1);
    let per_row: Vec<CoverageRow> = points
        .par_iter()
        .map(|p| CoverageRow {
            source: p.source.clone(),
            id: p.id.clone(),
            model: p.model.clone(),
            chip: p.chip.clone(),
            precision: p.precision.clone(),
            unexpressible: express(base.map(|b| b.0), origin, settings, p).err(),
        })
        .collect();
    let mut groups: BTreeMap<(ReasonKind, String), (usize, String)> = BTreeMap::new();
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for r in &per_row {
        if let Some(u) = &r.unexpressible {
            let g = groups
                .entry((u.kind, u.group.clone()))
                .or_insert_with(|| (0, u.reason.clone()));
            g.0 += 1;
            *by_kind.entry(u.kind.name().to_string()).or_default() += 1;
        }
    }
    let mut reasons: Vec<ReasonCount> = groups
        .into_iter()
        .map(|((kind, group), (rows, example))| ReasonCount {
            kind,
            group,
            rows,
            example,
        })
        .collect();
    reasons.sort_by(|a, b| {
        b.rows
            .cmp(&a.rows)
            .then(a.kind.cmp(&b.kind))
            .then(a.group.cmp(&b.group))
    });
    Coverage {
        inputs,
        rows: per_row.len(),
        expressible: per_row.iter().filter(|r| r.unexpressible.is_none()).count(),
        reasons,
        by_kind,
        per_row,
    }
}
