//! What a run keeps of its requests while it runs, sized by what is in
//! flight rather than by how many requests the run served: exact streaming
//! distributions and compacted records of ended requests.

pub mod gap_log;
pub mod itl;
pub mod pair_counts;

pub use itl::ItlHistogram;
pub mod stream;
pub mod timeseries;

pub use stream::RecordStream;
