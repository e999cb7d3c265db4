//! Any spec, not only the shipped ones, comes back through either export and
//! its import as the same machine, part for part, and through either diagram
//! with the same states and moves. The specs are generated (`generate`).

mod generate;
mod round_trip;

use fsm_core::render::{self, Format, View};
use fsm_interchange::{from_scxml, from_xstate, mermaid, plantuml, scxml, xstate};
use generate::{spec, text};
use proptest::prelude::*;
use round_trip::{Back, drawn_moves, drawn_states, load};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_spec_comes_back_the_same_through_either_export(spec in spec()) {
        let text = text(&spec);
        let original = load(&text);
        for (export, import) in [
            (xstate as fn(&_) -> _, from_xstate as fn(&str, &str) -> _),
            (scxml, from_scxml),
        ] {
            let document = export(&original).unwrap();
            let back = import(&document, "unused")
                .unwrap_or_else(|e| panic!("{e}\n{text}\n{document}"));
            round_trip::the_same(&Back {
                path: text.clone().into(),
                back: load(&back),
                original: original.clone(),
                spec: back,
            });
        }
    }

    /// A diagram (the full view) is not an export: it draws the states and
    /// the moves with their roles, guards and hidden actions, which come back.
    #[test]
    fn any_spec_comes_back_with_the_same_moves_through_either_diagram(spec in spec()) {
        let text = text(&spec);
        let original = load(&text);
        for (format, import) in [
            (Format::PlantUml, plantuml as fn(&str, &str) -> _),
            (Format::Mermaid, mermaid),
        ] {
            let drawn = render::render(&original, format, View::Full);
            let back = import(&drawn, "any").unwrap_or_else(|e| panic!("{e}\n{text}\n{drawn}"));
            let back = load(&back);
            prop_assert_eq!(drawn_states(&back), drawn_states(&original), "{}\n{}", text, drawn);
            prop_assert_eq!(drawn_moves(&back), drawn_moves(&original), "{}\n{}", text, drawn);
        }
    }
}
