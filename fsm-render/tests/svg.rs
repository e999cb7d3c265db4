//! The SVG drawing of every shipped spec, both views: well-formed XML; every state
//! drawn once as a box, none overlapping another; every edge drawn, with its label;
//! everything inside the image.

#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;

use fsm_render::{Drawing, View, svg};

fn number(node: roxmltree::Node<'_, '_>, attr: &str) -> f64 {
    node.attribute(attr)
        .unwrap_or_else(|| panic!("no {attr} on {node:?}"))
        .parse()
        .unwrap()
}

#[test]
fn every_spec_draws_as_a_whole_svg() {
    for spec in common::specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        for view in View::ALL {
            let text = svg(&m, view);
            let doc = roxmltree::Document::parse(&text)
                .unwrap_or_else(|e| panic!("{} ({view}): not XML: {e}\n{text}", spec.display()));
            let root = doc.root_element();
            let (width, height) = (number(root, "width"), number(root, "height"));
            let drawing = Drawing::new(&m, view);

            // Boxes: the rounded rectangles with a stroke width, one per state.
            let boxes: Vec<(f64, f64, f64, f64)> = root
                .children()
                .filter(|n| n.has_tag_name("rect") && n.attribute("stroke-width").is_some())
                .map(|n| {
                    (
                        number(n, "x"),
                        number(n, "y"),
                        number(n, "width"),
                        number(n, "height"),
                    )
                })
                .collect();
            assert_eq!(
                boxes.len(),
                drawing.states.len(),
                "{} ({view})",
                spec.display()
            );
            for (i, a) in boxes.iter().enumerate() {
                assert!(
                    a.0 >= 0.0 && a.1 >= 0.0 && a.0 + a.2 <= width && a.1 + a.3 <= height,
                    "{} ({view}): box {a:?} outside {width}x{height}",
                    spec.display()
                );
                for b in &boxes[i + 1..] {
                    let apart = a.0 + a.2 <= b.0
                        || b.0 + b.2 <= a.0
                        || a.1 + a.3 <= b.1
                        || b.1 + b.3 <= a.1;
                    assert!(
                        apart,
                        "{} ({view}): boxes {a:?} and {b:?} overlap",
                        spec.display()
                    );
                }
            }
            // Texts: every state's name (first line of its box), every line and label.
            let texts: Vec<String> = root
                .children()
                .filter(|n| n.has_tag_name("text"))
                .map(|n| n.text().unwrap_or_default().to_owned())
                .collect();
            for s in &drawing.states {
                let name = m.state(s.id).name.to_string();
                assert_eq!(
                    texts.iter().filter(|t| **t == name).count(),
                    1,
                    "{} ({view}): {name}",
                    spec.display()
                );
                for line in &s.loops {
                    assert!(texts.contains(line), "{} ({view}): {line}", spec.display());
                }
            }
            for e in &drawing.edges {
                assert!(
                    texts.contains(&e.label),
                    "{} ({view}): label {}",
                    spec.display(),
                    e.label
                );
            }
            // Paths: one per edge and one from the start, each ending in an arrow.
            let paths: Vec<_> = root.children().filter(|n| n.has_tag_name("path")).collect();
            assert_eq!(
                paths.len(),
                drawing.edges.len() + 1,
                "{} ({view})",
                spec.display()
            );
            assert!(paths.iter().all(|p| p.attribute("marker-end").is_some()));
            // Every path inside the image, sampled along its curve.
            for p in &paths {
                let d = p.attribute("d").unwrap();
                let points: Vec<(f64, f64)> = d
                    .split([' ', 'M', 'C'])
                    .filter(|s| !s.is_empty())
                    .map(|point| {
                        let (x, y) = point.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect();
                let [p0, p1, p2, p3] = points[..] else {
                    panic!("{}: not one cubic curve: {d}", spec.display())
                };
                for step in 0..=20 {
                    let t = step as f64 / 20.0;
                    let u = 1.0 - t;
                    let at = |a: f64, b: f64, c: f64, e: f64| {
                        u * u * u * a + 3.0 * u * u * t * b + 3.0 * u * t * t * c + t * t * t * e
                    };
                    let (x, y) = (at(p0.0, p1.0, p2.0, p3.0), at(p0.1, p1.1, p2.1, p3.1));
                    assert!(
                        (0.0..=width).contains(&x) && (0.0..=height).contains(&y),
                        "{} ({view}): {d} leaves {width}x{height} at ({x:.1}, {y:.1})",
                        spec.display()
                    );
                }
            }
        }
    }
}

/// Two machines on one page do not share an arrow marker.
#[test]
fn markers_are_per_machine() {
    let spec = |name: &str| {
        fsm_core::spec::load_str(
            "a.toml",
            format!(
                r#"
                [machine]
                name = "{name}"
                initial = "OPEN"
                [states]
                OPEN = "Open"
                SHUT = "Shut"
                [actions]
                shut = {{ from = "OPEN", to = "SHUT" }}
                open = {{ from = "SHUT", to = "OPEN" }}
                "#
            ),
        )
        .unwrap()
    };
    let (a, b) = (
        svg(&spec("door"), View::Full),
        svg(&spec("gate"), View::Full),
    );
    assert!(a.contains("<marker id=\"fsm-arrow-door\"") && a.contains("url(#fsm-arrow-door)"));
    assert!(b.contains("<marker id=\"fsm-arrow-gate\"") && !b.contains("fsm-arrow-door"));
}
