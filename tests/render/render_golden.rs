//! Golden renders of the fixture room (`support::render`): the SVG compared structurally (same
//! elements, attributes and text; numbers within 0.05) and the PNG pixel by pixel (at most
//! 0.5 % of pixels off by more than 24 in a channel) against `tests/golden/render/`; plus the
//! properties the goldens stand for, checked on their own: z-order, rotation and the bend.
//!
//! After a deliberate change of the drawing, `FAIRYRING_BLESS=1 cargo test --test
//! render render_golden::` rewrites the expectations (look at the PNG before committing it).

use crate::support;

use std::path::PathBuf;

use fairyring::canvas::geometry::Bounds;
use fairyring::canvas::render::{Caps, View, raster, render_png, render_svg};
use fairyring::canvas::schema::MAIN_PAGE;
use resvg::tiny_skia::Pixmap;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/render")
        .join(name)
}

fn blessing() -> bool {
    std::env::var_os("FAIRYRING_BLESS").is_some()
}

fn view() -> View {
    View::content(&support::render::shapes(), MAIN_PAGE, 1.0, Caps::default()).expect("view")
}

/// Splits an attribute value into numbers and the text between them.
fn tokens(value: &str) -> Vec<Result<f64, String>> {
    let mut out = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        let number_len = rest
            .char_indices()
            .take_while(|(i, c)| c.is_ascii_digit() || *c == '.' || (*i == 0 && *c == '-'))
            .count();
        if number_len > 0 && rest[..number_len].parse::<f64>().is_ok() {
            out.push(Ok(rest[..number_len].parse().unwrap_or(0.0)));
            rest = &rest[number_len..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(Err(c.to_string()));
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn same_value(a: &str, b: &str) -> bool {
    let (ta, tb) = (tokens(a), tokens(b));
    ta.len() == tb.len()
        && ta.iter().zip(&tb).all(|(x, y)| match (x, y) {
            (Ok(x), Ok(y)) => (x - y).abs() <= 0.05,
            (Err(x), Err(y)) => x == y,
            _ => false,
        })
}

fn kids<'a, 'i>(n: roxmltree::Node<'a, 'i>) -> Vec<roxmltree::Node<'a, 'i>> {
    n.children()
        .filter(|c| c.is_element() || c.is_text())
        .collect()
}

/// Compares two element trees; returns where they first differ.
fn compare(a: roxmltree::Node, b: roxmltree::Node, path: &str) -> Result<(), String> {
    if a.tag_name() != b.tag_name() {
        return Err(format!(
            "{path}: <{:?}> vs <{:?}>",
            a.tag_name(),
            b.tag_name()
        ));
    }
    let here = format!("{path}/{}", a.tag_name().name());
    let attrs = |n: roxmltree::Node| {
        let mut v: Vec<(String, String)> = n
            .attributes()
            .map(|x| (x.name().to_owned(), x.value().to_owned()))
            .collect();
        v.sort();
        v
    };
    let (aa, ba) = (attrs(a), attrs(b));
    let names = |v: &[(String, String)]| v.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    if names(&aa) != names(&ba) {
        return Err(format!(
            "{here}: attributes {:?} vs {:?}",
            names(&aa),
            names(&ba)
        ));
    }
    for ((k, va), (_, vb)) in aa.iter().zip(&ba) {
        if !same_value(va, vb) {
            return Err(format!("{here}@{k}: {va:?} vs {vb:?}"));
        }
    }
    let (ka, kb) = (kids(a), kids(b));
    if ka.len() != kb.len() {
        return Err(format!("{here}: {} children vs {}", ka.len(), kb.len()));
    }
    for (i, (ca, cb)) in ka.iter().zip(&kb).enumerate() {
        if ca.is_text() || cb.is_text() {
            if ca.text() != cb.text() {
                return Err(format!(
                    "{here}[{i}]: text {:?} vs {:?}",
                    ca.text(),
                    cb.text()
                ));
            }
        } else {
            compare(*ca, *cb, &format!("{here}[{i}]"))?;
        }
    }
    Ok(())
}

#[test]
fn svg_matches_the_golden_structurally() {
    let svg = render_svg(&support::render::shapes(), MAIN_PAGE, &view());
    let path = golden("fixture.svg");
    if blessing() {
        std::fs::write(&path, &svg).expect("write golden");
    }
    let expected =
        std::fs::read_to_string(&path).expect("golden svg (bless with FAIRYRING_BLESS=1)");
    let (a, b) = (
        roxmltree::Document::parse(&svg).expect("our svg parses"),
        roxmltree::Document::parse(&expected).expect("golden parses"),
    );
    if let Err(diff) = compare(a.root_element(), b.root_element(), "") {
        panic!("the SVG differs from tests/golden/render/fixture.svg: {diff}");
    }
}

fn pixel(p: &Pixmap, x: u32, y: u32) -> [u8; 4] {
    let c = p.pixel(x, y).expect("inside").demultiply();
    [c.red(), c.green(), c.blue(), c.alpha()]
}

#[test]
fn png_matches_the_golden_within_tolerance() {
    let view = view();
    let png = render_png(&support::render::shapes(), MAIN_PAGE, &view).expect("png");
    let path = golden("fixture.png");
    if blessing() {
        std::fs::write(&path, &png).expect("write golden");
    }
    let ours = Pixmap::decode_png(&png).expect("ours decodes");
    let expected =
        Pixmap::decode_png(&std::fs::read(&path).expect("golden png")).expect("golden decodes");
    assert_eq!(
        (ours.width(), ours.height()),
        (expected.width(), expected.height())
    );
    let off = ours
        .pixels()
        .iter()
        .zip(expected.pixels())
        .filter(|(a, b)| {
            let (a, b) = (a.demultiply(), b.demultiply());
            [
                a.red().abs_diff(b.red()),
                a.green().abs_diff(b.green()),
                a.blue().abs_diff(b.blue()),
                a.alpha().abs_diff(b.alpha()),
            ]
            .into_iter()
            .max()
            .unwrap_or(0)
                > 24
        })
        .count();
    let total = ours.pixels().len();
    assert!(
        off * 200 <= total,
        "{off} of {total} pixels differ from tests/golden/render/fixture.png"
    );
}

/// Pixel of page point `(x, y)` in a render of `view`.
fn at(p: &Pixmap, view: &View, x: f64, y: f64) -> [u8; 4] {
    let px = ((x - view.area.x) * view.scale) as u32;
    let py = ((y - view.area.y) * view.scale) as u32;
    pixel(p, px, py)
}

#[test]
fn z_order_rotation_and_bend_are_drawn() {
    let shapes = support::render::shapes();
    let view = view();
    let svg = render_svg(&shapes, MAIN_PAGE, &view);
    // Z-order: groups in the order of the shapes' index keys.
    let doc = roxmltree::Document::parse(&svg).expect("svg");
    let ids: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.attribute("data-shape-id"))
        .collect();
    let expected: Vec<&str> = shapes.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, expected);
    let group = |id: &str| {
        doc.descendants()
            .find(|n| n.attribute("data-shape-id") == Some(id))
            .unwrap_or_else(|| panic!("no group for {id}"))
    };
    assert_eq!(
        group(support::render::ROTATED).attribute("transform"),
        Some("translate(1000,40) rotate(30)")
    );
    let bent = group(support::render::BENT)
        .children()
        .find(|n| n.has_tag_name("path"))
        .and_then(|n| n.attribute("d"));
    assert_eq!(
        bent,
        Some("M100,700 Q300,580 500,700"),
        "bend 60 puts the control 120 above the middle"
    );

    let png =
        Pixmap::decode_png(&render_png(&shapes, MAIN_PAGE, &view).expect("png")).expect("decode");
    // Where the squares overlap, the later (red, over) one shows: red's tint, not blue's.
    assert_eq!(at(&png, &view, 1125.0, 425.0), [0xf4, 0xda, 0xdb, 255]);
    assert_eq!(at(&png, &view, 1070.0, 370.0), [0xdc, 0xe1, 0xf8, 255]);
    // The rotated rectangle covers (1000 + 100cos30 - 60sin30, 40 + 100sin30 + 60cos30), which
    // the unrotated one does not (y > 140); and leaves its unrotated top-right corner area.
    let (s, c) = (std::f64::consts::PI / 6.0).sin_cos();
    let inside = at(
        &png,
        &view,
        1000.0 + 100.0 * c - 60.0 * s,
        40.0 + 100.0 * s + 60.0 * c,
    );
    assert_ne!(
        inside,
        [255, 255, 255, 255],
        "the rotated body is drawn where rotation put it"
    );
    assert_eq!(
        at(&png, &view, 1190.0, 50.0),
        [255, 255, 255, 255],
        "nothing where it was unrotated"
    );
    // The bent arrow bows upwards (its label sits on the apex, so look a quarter of the way
    // along: the curve passes (200, 655)); on the straight chord below it, nothing.
    let on_curve = at(&png, &view, 200.0, 655.0);
    assert!(
        on_curve[2] > 180 && on_curve[0] < 120,
        "blue stroke on the curve: {on_curve:?}"
    );
    assert_eq!(at(&png, &view, 200.0, 700.0), [255, 255, 255, 255]);
}

#[test]
fn the_shipped_font_draws_text() {
    // A text shape alone: some pixels are ink, so the font was found without system fonts.
    let shapes: Vec<_> = support::render::shapes()
        .into_iter()
        .filter(|s| s.id == "title")
        .collect();
    let view = View::fit(Bounds::new(0.0, 580.0, 400.0, 80.0), 1.0, Caps::default()).expect("view");
    let svg = render_svg(&shapes, MAIN_PAGE, &view);
    let pixmap = raster::svg_pixmap(&svg, &view).expect("raster");
    let inked = pixmap.pixels().iter().filter(|p| p.red() < 200).count();
    assert!(inked > 500, "only {inked} inked pixels: no glyphs drawn");
}
