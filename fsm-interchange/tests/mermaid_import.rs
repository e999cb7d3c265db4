//! `fsm import mermaid`: every shipped spec drawn by `fsm diagram --format
//! mermaid` imports back to the same states, moves, roles and guards; a
//! diagram in a Markdown document written by hand imports as drawn; what a
//! table cannot say is refused with its line and column in the document.

mod round_trip;

use std::collections::BTreeSet;

use fsm_core::Machine;
use fsm_core::render::{self, Format, View};
use fsm_interchange::mermaid;
use round_trip::{Back, drawn_moves, drawn_states, load};

#[test]
fn every_shipped_spec_round_trips_through_its_mermaid_drawing() {
    let drawn = |m: &Machine| Ok(render::render(m, Format::Mermaid, View::Full));
    for Back {
        path,
        original: m,
        back,
        spec,
    } in round_trip::every_spec(drawn, mermaid)
    {
        let at = path.display();
        assert_eq!(drawn_states(&back), drawn_states(&m), "{at}:\n{spec}");
        assert_eq!(drawn_moves(&back), drawn_moves(&m), "{at}:\n{spec}");
    }
}

#[test]
fn a_diagram_in_a_markdown_document_imports_as_drawn() {
    let spec = mermaid(include_str!("mermaid/door.md"), "unused").unwrap();
    let m = load(&spec);
    assert_eq!(m.name(), "door");
    let rules: BTreeSet<String> = m
        .rules()
        .map(|r| {
            format!(
                "{}: {} -> {}",
                m.action(r.action).name,
                m.state(r.origin).name,
                m.state(r.target).name
            )
        })
        .collect();
    assert_eq!(
        rules.into_iter().collect::<Vec<_>>(),
        [
            "close: Open -> Closed",
            "lock: Closed -> Locked",
            "open: Closed -> Open",
            "remove: Closed -> Removed",
            "unlock: Locked -> Closed",
        ]
    );
    let remove = m.find_action("remove").unwrap();
    assert_eq!(
        m.action(remove).via.map(|v| m.state(v).name.to_string()),
        Some("Removing".to_owned())
    );
    let lock = m.find_action("lock").unwrap();
    assert_eq!(m.guard_names(lock), ["has_key"]);
    let roles: Vec<&str> = m.action(lock).roles.iter().map(|r| r.as_ref()).collect();
    assert_eq!(roles, ["resident"]);
    let closed = m.state(m.state_id("Closed").unwrap());
    assert_eq!(closed.owner.as_deref(), Some("resident"));
    assert!(m.state(m.state_id("Removed").unwrap()).terminal);
    let open = m.state(m.state_id("Open").unwrap());
    assert_eq!(open.description.as_deref(), Some("Wide open"));
}

#[test]
fn composite_states_flatten_into_the_table() {
    let m = load(&mermaid(include_str!("mermaid/player.md"), "unused").unwrap());
    assert_eq!(
        round_trip::names(&m),
        [
            "Stopped", "Ejected", "Playing", "Paused", "Fetching", "Decoding"
        ]
    );
    round_trip::has_moves(
        &m,
        &[
            "play: Stopped -> Playing",
            "stop: Paused -> Stopped",
            "stop: Fetching -> Playing",
            "reset: Decoding -> Fetching",
            "eject: Fetching -> Ejected",
        ],
        17,
    );
}

#[test]
fn what_a_table_cannot_say_is_refused_where_it_is() {
    let err = |text: &str| mermaid(text, "m").unwrap_err().to_string();
    assert_eq!(
        err("# Doc\n\n```mermaid\nflowchart LR\n```\n"),
        "line 1, column 1: expected `stateDiagram-v2`: the text holds no Mermaid state diagram"
    );
    assert_eq!(
        err("# Doc\n\n```mermaid\nstateDiagram-v2\n  [*] --> A\n  state B {\n  }\n```\n"),
        "line 6, column 1: composite state `B` has no initial state: expected `[*] --> STATE` \
         inside it"
    );
    assert_eq!(
        err("stateDiagram-v2\n  [*] --> A\n  state C <<fork>>\n"),
        "line 3, column 11: `<<fork>>` is a pseudo-state, not a state an object rests in: a \
         spec's actions go from state to state"
    );
    assert_eq!(
        err("stateDiagram-v2\n  [*] --> A\n  A --> B\n  --\n"),
        "line 4, column 3: concurrent regions (`--`) are in several states at once; a spec is \
         in one"
    );
    assert_eq!(
        err("stateDiagram-v2\n  A --> B\n"),
        "line 2, column 1: no initial state: expected an arrow `[*] --> STATE`"
    );
    // Classes mark transition and terminal states where they stand, or in a
    // `class` line naming several states.
    let classed = load(
        &mermaid(
            "stateDiagram-v2\n  [*] --> A\n  A --> Going:::transition : go\n  Going --> B : go\n  B --> C : stop\n  B --> D : drop\n  class C,D terminal\n",
            "m",
        )
        .unwrap(),
    );
    let state = |name: &str| classed.state(classed.state_id(name).unwrap());
    assert!(state("Going").is_transition());
    assert!(state("C").terminal && state("D").terminal);
    assert!(!state("B").terminal);
    assert_eq!(
        err("graph TD\n"),
        "line 1, column 1: expected `stateDiagram-v2`, found `graph TD`"
    );
}
