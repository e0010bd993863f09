//! The fleet around the replicas: what the router sees of them (`view`,
//! kept in indexed trees by `min_tree`) and request routing (`router/`).

pub mod budget;
pub mod disagg;
pub mod fleet;
pub mod min_tree;
pub mod pool_series;
pub mod router;
pub mod routing;
pub mod routing_trace;
pub mod view;

#[cfg(test)]
mod tests;
