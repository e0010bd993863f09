//! The bundled font: DejaVu Sans (see `fonts/README.md` and its license),
//! compiled in and registered with plotters' `ab_glyph` text renderer, so
//! charts render identically on a machine without any fonts installed.

use plotters::style::FontStyle;
use std::sync::Once;

static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Registers the font as [`crate::chart::FONT`] (idempotent).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are compiled in; a unit test proves they parse.
        if plotters::style::register_font(crate::chart::FONT, FontStyle::Normal, DEJAVU_SANS)
            .is_err()
        {
            panic!("the bundled DejaVu Sans font does not parse");
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn bundled_font_registers() {
        super::register();
        super::register();
    }
}
