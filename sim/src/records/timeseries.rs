//! The per-replica time series (`timeseries.csv`) the run samples: its row
//! lives with the series' writer and store (`output::timeseries`).

pub use crate::output::timeseries::TimeseriesRow;
