//! tldraw's light-theme palette as the web demo draws it (`web-demo/src/palette.ts`): per colour
//! name a stroke, a light tint, a hatch colour and the sticky-note paper; and what each fill
//! style paints. Pure data; unknown names draw black, as in the demo.

/// One colour's swatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Swatch {
    /// Strokes, arrowheads, free text.
    pub solid: &'static str,
    /// The `semi` and `solid` fills.
    pub semi: &'static str,
    /// The hatch lines of the `pattern` fill.
    pub pattern: &'static str,
    /// Sticky-note paper.
    pub note: &'static str,
}

const fn sw(
    solid: &'static str,
    semi: &'static str,
    pattern: &'static str,
    note: &'static str,
) -> Swatch {
    Swatch {
        solid,
        semi,
        pattern,
        note,
    }
}

/// The colour of labels on geo shapes, notes and connectors.
pub const LABEL_INK: &str = "#1d1d1d";

/// The swatch of a colour name (schema v1's names; anything else is black).
pub fn swatch(name: &str) -> Swatch {
    match name {
        "grey" => sw("#9fa8b2", "#eceef0", "#bcc3c9", "#c0cad3"),
        "light-violet" => sw("#e085f4", "#f5eafa", "#e9acf8", "#dfb0f9"),
        "violet" => sw("#ae3ec9", "#ecdcf2", "#bd63d3", "#db91fd"),
        "blue" => sw("#4465e9", "#dce1f8", "#6681ee", "#8aa3ff"),
        "light-blue" => sw("#4ba1f1", "#ddedfa", "#6fbbf8", "#9bc4fd"),
        "yellow" => sw("#f1ac4b", "#f9f0e6", "#fecb92", "#fed49a"),
        "orange" => sw("#e16919", "#f8e2d4", "#f78438", "#faa475"),
        "green" => sw("#099268", "#d3e9e3", "#39a785", "#6fc896"),
        "light-green" => sw("#4cb05e", "#dbf0e0", "#65cb78", "#98d08a"),
        "light-red" => sw("#f87777", "#f4dadb", "#fe9e9e", "#f7a5a1"),
        "red" => sw("#e03131", "#f4dadb", "#e83d3d", "#fc8282"),
        "white" => sw("#ffffff", "#f5f5f5", "#f9f9f9", "#ffffff"),
        _ => sw("#1d1d1d", "#e8e8e8", "#494949", "#fce19c"),
    }
}

/// The colour name a shape is drawn with: its own when schema v1 knows it, else `black`.
pub fn known_color(name: &str) -> &str {
    if crate::canvas::schema::COLORS.contains(&name) {
        name
    } else {
        "black"
    }
}

/// What a fill style paints inside a closed shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Paint {
    /// Nothing (`none`).
    None,
    /// A flat colour with an opacity (`semi`: the tint at 0.6, `solid`: the tint at 1).
    Flat(&'static str, f64),
    /// The hatch pattern of a colour (`pattern`), defined once per colour in `<defs>`.
    Hatch(String),
}

/// The paint of `fill` in `color` (unknown fills paint nothing, as in the demo).
pub fn fill_paint(color: &str, fill: &str) -> Paint {
    let color = known_color(color);
    match fill {
        "semi" => Paint::Flat(swatch(color).semi, 0.6),
        "solid" => Paint::Flat(swatch(color).semi, 1.0),
        "pattern" => Paint::Hatch(color.to_owned()),
        _ => Paint::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_color_has_its_own_swatch_and_unknown_is_black() {
        let black = swatch("black");
        for c in crate::canvas::schema::COLORS {
            let s = swatch(c);
            assert_eq!(*c == "black", s == black, "{c}");
        }
        assert_eq!(swatch("magenta"), black);
        assert_eq!(
            fill_paint("blue", "semi"),
            Paint::Flat("#dce1f8", 0.6),
            "semi is the tint at 0.6"
        );
        assert_eq!(fill_paint("nope", "pattern"), Paint::Hatch("black".into()));
        assert_eq!(fill_paint("red", "weird"), Paint::None);
    }
}
