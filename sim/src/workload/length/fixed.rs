//! A fixed length (every request alike, as in a fixed-shape benchmark).

use super::LengthModel;
use crate::rng::StreamRng;

/// Always `value` tokens; draws nothing from the random stream.
pub struct Fixed(pub u32);

impl LengthModel for Fixed {
    fn sample(&self, _rng: &mut StreamRng) -> f64 {
        self.0 as f64
    }
}
