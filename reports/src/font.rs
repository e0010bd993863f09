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
    use plotters::style::{FontDesc, FontFamily, FontStyle};

    #[test]
    fn the_bundled_font_registers_and_measures_text() {
        // Twice: registration is idempotent.
        super::register();
        super::register();
        let font = FontDesc::new(
            FontFamily::Name(crate::chart::FONT),
            20.0,
            FontStyle::Normal,
        );
        let (w1, h) = font
            .box_size("H")
            .expect("the registered font lays out text");
        let (w5, _) = font.box_size("HHHHH").unwrap();
        assert!(h > 0 && w1 > 0, "{w1}×{h}");
        // Proportional glyph advances: five letters are about five wide.
        assert!(w5 >= 4 * w1 && w5 <= 6 * w1, "{w1} {w5}");
    }
}
