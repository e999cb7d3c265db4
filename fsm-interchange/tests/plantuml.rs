//! `fsm import plantuml`: the sabakan seed's own diagram (decoded from the image
//! address in the seed) imports as a machine that agrees with the diagram on every
//! pair of states, and the shipped sabakan spec agrees with every arrow of it; every shipped spec drawn by `fsm diagram --format plantuml`
//! imports back to the same moves, actions, roles and guards; bad input gets its
//! line and column.

mod round_trip;

use round_trip::common;

use std::collections::BTreeSet;
use std::path::Path;

use fsm_core::Machine;
use fsm_core::render::{self, Format, View};
use fsm_interchange::{ImportError, plantuml, source_from_url};

/// Every `(from, to)` the machine allows as one move, by name.
fn moves(m: &Machine) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for from in m.state_ids() {
        for to in m.state_ids() {
            if m.validate_transition(from, to).is_ok() {
                out.insert((m.state(from).name.to_string(), m.state(to).name.to_string()));
            }
        }
    }
    out
}

fn load(spec: &str) -> Machine {
    fsm_core::spec::load_str("imported.toml", spec).unwrap_or_else(|e| panic!("{e}\n{spec}"))
}

/// The sabakan seed's state diagram: its PlantUML source, decoded from the
/// image address in the seed (sabakan's docs/lifecycle.md as the project
/// received it).
fn sabakan_diagram() -> String {
    let seed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/sabakan/seed.md"),
    )
    .unwrap();
    // The seed is Markdown: the diagram is the image's address.
    let source = source_from_url(&seed).unwrap();
    assert!(source.starts_with("@startuml"), "{source}");
    source
}

/// The arrows of a PlantUML state diagram: `(from, to, label)`, `[*]` for the
/// start and end pseudo-states.
fn arrows(source: &str) -> Vec<(String, String, String)> {
    source
        .lines()
        .filter_map(|line| {
            let (arrow, label) = line.split_once(':').unwrap_or((line, ""));
            let mut words = arrow.split_whitespace();
            let (from, link, to) = (words.next()?, words.next()?, words.next()?);
            (link.starts_with('-') && link.ends_with("->"))
                .then(|| (from.to_owned(), to.to_owned(), label.trim().to_owned()))
        })
        .collect()
}

/// The arrows between two states (not from the start or to the end), as
/// `(from, to)`.
fn between_states(arrows: &[(String, String, String)]) -> BTreeSet<(String, String)> {
    arrows
        .iter()
        .filter(|(from, to, _)| from != "[*]" && to != "[*]")
        .map(|(from, to, _)| (from.clone(), to.clone()))
        .collect()
}

#[test]
fn the_sabakan_seed_diagram_imports_as_its_arrows() {
    let source = sabakan_diagram();
    let spec = plantuml(&source, "machine").unwrap();
    let m = load(&spec);
    assert_eq!(m.state(m.initial()).name, "Uninitialized");
    let drawn = between_states(&arrows(&source));
    assert_eq!(drawn.len(), 14, "{source}");
    // On every pair of states, the imported machine agrees with the diagram.
    assert_eq!(moves(&m), drawn, "{spec}");
    // And what the diagram could not say is said.
    assert!(spec.contains("A diagram cannot say which states are transition states"));
    // `Retired --> [*]`: a Retired machine is removed from sabakan.
    assert!(spec.contains("\nRetired = { remove = true"), "{spec}");
    assert!(spec.contains("`Retired --> [*]`"), "{spec}");
    assert!(
        spec.contains("name the roles that may remove them"),
        "{spec}"
    );
    assert!(
        spec.contains("\ndetects_an_error = { from = \"Healthy\""),
        "{spec}"
    );
}

/// The state diagram in sabakan-machine-lifecycle.md, decoded from the image URL in
/// the seed itself, is the whole table: its arrows are exactly the spec's moves,
/// `[*] -->` its initial state, `--> [*]` (removal) exactly where `remove` is
/// allowed, and the moves labelled "manually" are the admins'.
#[test]
fn sabakan_agrees_with_every_arrow_of_its_diagram() {
    let source = sabakan_diagram();
    let arrows = arrows(&source);
    assert_eq!(arrows.len(), 16, "{source}");

    let m = fsm_core::spec::load(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/sabakan/machine.toml"),
    )
    .unwrap();
    let name = |id| m.state(id).name.to_string();
    let drawn = between_states(&arrows);
    // A state's actions that keep it where it is draw no arrow.
    let allowed: BTreeSet<(String, String)> = moves(&m)
        .into_iter()
        .filter(|(from, to)| from != to)
        .collect();
    assert_eq!(
        allowed.difference(&drawn).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "moves the diagram does not draw"
    );
    assert_eq!(
        drawn.difference(&allowed).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "arrows the spec refuses"
    );

    let starts: Vec<&str> = arrows
        .iter()
        .filter(|(from, ..)| from == "[*]")
        .map(|(_, to, _)| to.as_str())
        .collect();
    assert_eq!(starts, [name(m.initial())]);
    let ends: BTreeSet<String> = arrows
        .iter()
        .filter(|(_, to, _)| to == "[*]")
        .map(|(from, ..)| from.clone())
        .collect();
    let removable: BTreeSet<String> = m
        .state_ids()
        .filter(|&st| m.state(st).remove.is_some())
        .map(name)
        .collect();
    assert_eq!(ends, removable);

    for (from, to, label) in arrows.iter().filter(|(.., l)| l.contains("manually")) {
        let (from, to) = (m.state_id(from).unwrap(), m.state_id(to).unwrap());
        let rules: Vec<_> = m.rules_from(from).filter(|r| r.target == to).collect();
        assert!(!rules.is_empty());
        for rule in rules {
            let action = m.action(rule.action);
            assert_eq!(&action.roles[..], ["admin"], "{label}: {}", action.name);
        }
    }
}

#[test]
fn every_shipped_spec_round_trips_through_its_plantuml_drawing() {
    for path in common::specs() {
        let m = fsm_core::spec::load(&path).unwrap();
        let drawn = render::render(&m, Format::PlantUml, View::Full);
        let spec = plantuml(&drawn, m.name())
            .unwrap_or_else(|e| panic!("{}: {e}\n{drawn}", path.display()));
        let back = load(&spec);
        let names = |m: &Machine| -> Vec<String> {
            let mut n: Vec<String> = m.states().iter().map(|s| s.name.to_string()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&back), names(&m), "{}", path.display());
        assert_eq!(back.state(back.initial()).name, m.state(m.initial()).name);
        assert_eq!(moves(&back), moves(&m), "{}:\n{spec}", path.display());
        for s in m.states() {
            let b = &back.states()[back.state_id(&s.name).unwrap().0];
            assert_eq!(
                (s.is_transition(), s.terminal, &s.owner),
                (b.is_transition(), b.terminal, &b.owner),
                "{}: {}",
                path.display(),
                s.name
            );
        }
        // Actions that change state come back with their roles and guards.
        for a in m.action_ids() {
            let action = m.action(a);
            let Some(b) = back.find_action(&action.name) else {
                panic!("{}: `{}` lost:\n{spec}", path.display(), action.name);
            };
            assert_eq!(back.action(b).roles, action.roles, "{}", action.name);
            assert_eq!(back.guard_names(b), m.guard_names(a), "{}", action.name);
            assert_eq!(back.action(b).hidden, action.hidden, "{}", action.name);
        }
    }
}

#[test]
fn a_label_both_on_a_move_and_on_an_arrow_back_to_its_state_is_one_action_that_moves() {
    // The move drawn first: the arrow back to its own state, drawn last, once
    // made the whole action one that changes no state, and `B`'s move was lost.
    // One action moves from each origin: to `C` from `B`, to `A` itself from
    // `A` (as `fsm diagram` draws such an action). Drawn the other way round,
    // the same.
    for (first, second) in [
        ("B --> C : go", "A --> A : go"),
        ("A --> A : go", "B --> C : go"),
    ] {
        let spec = plantuml(
            &format!(
                "@startuml\n[*] --> A\nA --> B : next\n{first}\n{second}\nC --> A : back\n@enduml\n"
            ),
            "m",
        )
        .unwrap();
        let m = load(&spec);
        round_trip::has_moves(&m, &["go: B -> C", "go: A -> A"], 4);
        let go = m.find_action("go").unwrap();
        assert!(m.action(go).changes_state(), "{spec}");
    }
}

/// Roles and guards named with spaces, quotes, commas or brackets are written
/// in quotes by `fsm diagram`, and read back whole; words in parentheses
/// written by hand stay part of a free-text label.
#[test]
fn quoted_roles_and_guards_read_back_whole() {
    let spec = plantuml(
        "@startuml\n[*] --> A\nA --> B : go [\"human [approval]\", quota] (\"cloud admin\", \"on-call \\\"night\\\", (100%)\", ops)\nB --> A : retry (after a while)\n@enduml\n",
        "m",
    )
    .unwrap();
    let line = |name: &str| {
        let line = spec.lines().find(|l| l.starts_with(&format!("{name} = ")));
        line.unwrap_or_else(|| panic!("{spec}")).to_owned()
    };
    assert_eq!(
        line("go"),
        r#"go = { from = "A", to = "B", roles = ["cloud admin", "on-call \"night\", (100%)", "ops"], guards = ["human [approval]", "quota"] }"#
    );
    assert_eq!(
        line("retry_after_a_while"),
        r#"retry_after_a_while = { from = "B", to = "A" }"#
    );
}

#[test]
fn labels_that_differ_only_in_case_are_one_action() {
    // A spec compares names ignoring case: `Go` and `go` are one action, from
    // each of its origins to its own target.
    let spec = plantuml(
        "@startuml\n[*] --> A\nA --> B : Go\nB --> A : go\n@enduml\n",
        "m",
    )
    .unwrap();
    let m = load(&spec);
    let go = m.find_action("go").unwrap();
    assert_eq!(m.action(go).name.as_ref(), "Go", "{spec}");
    assert_eq!(
        moves(&m),
        BTreeSet::from([("A".into(), "B".into()), ("B".into(), "A".into())])
    );
}

#[test]
fn composite_states_flatten_into_the_table() {
    let spec = plantuml(
        "@startuml player
[*] --> Stopped
Stopped --> Active : play
Stopped --> Ejected : eject
state Active : the player is on
state Active {
  [*] --> Playing
  Playing --> Paused : pause
  Paused --> Playing : play
  Playing --> Buffering : skip
  state Buffering {
    [*] --> Fetching
    Fetching --> Decoding : fetched
    Fetching --> Stopped : reset
    Decoding --> Active : decoded
  }
  Buffering --> Fetching : reset
  Buffering --> Active : stop
}
Active --> Stopped : stop
Active --> Ejected : eject
Ejected --> [*]
@enduml
",
        "unused",
    )
    .unwrap();
    let m = load(&spec);
    // The states drawn inside composite states are the spec's; `Active` and
    // `Buffering` are not, and what was said of them is named as left out.
    assert_eq!(
        round_trip::names(&m),
        [
            "Stopped", "Ejected", "Playing", "Paused", "Fetching", "Decoding"
        ]
    );
    assert!(
        spec.contains(
            "Left out (a table has no place for them): the description of composite state `Active`."
        ),
        "{spec}"
    );
    round_trip::has_moves(
        &m,
        &[
            // An arrow into a composite state enters its initial state, in turn.
            "play: Stopped -> Playing",
            "skip: Playing -> Fetching",
            "decoded: Decoding -> Playing",
            // A composite state's arrows leave each state inside it...
            "stop: Paused -> Stopped",
            "eject: Decoding -> Ejected",
            // ... but for the actions a state inside has its own arrow for.
            "stop: Fetching -> Playing",
            "reset: Fetching -> Stopped",
            "reset: Decoding -> Fetching",
        ],
        17,
    );
}

#[test]
fn bad_plantuml_says_where() {
    let err = |text: &str| plantuml(text, "m").unwrap_err();
    assert_eq!(
        err("@startuml\n[*] --> A\nA --> B\n  A ==> C : x\n@enduml\n"),
        ImportError {
            line: 4,
            column: 3,
            message: "expected `state \"NAME\" as ID`, an arrow `A --> B : label`, or a \
                      description `A : text`; found `A ==> C : x`"
                .into()
        }
    );
    assert_eq!(
        err("A --> B\n").to_string(),
        "line 1, column 1: expected `@startuml`, found `A --> B`"
    );
    assert_eq!(
        err("@startuml\nA --> B\n@enduml\n").to_string(),
        "line 3, column 1: no initial state: expected an arrow `[*] --> STATE`"
    );
    assert_eq!(
        err("@startuml\n[*] --> A\n[*] --> B\n@enduml\n").to_string(),
        "line 3, column 1: a second initial state `B`: `A` is the initial state (line 2)"
    );
    // Composite states flatten (see `composite_states_flatten_into_the_table`),
    // but for what a table has only among its own states.
    for (body, refused) in [
        (
            "state A {\n}",
            "line 3, column 1: composite state `A` has no initial state: expected \
             `[*] --> STATE` inside it",
        ),
        (
            "state A {\n  [*] --> B",
            "line 3, column 1: composite state `A` is not closed with `}`",
        ),
        ("}", "line 3, column 1: `}` closes no composite state"),
        (
            "state A {\n  [*] --> B\n  B --> [*]\n}",
            "line 5, column 3: `B --> [*]` inside composite state `A` ends the composite state, \
             not the object; a spec has no such move",
        ),
        (
            "state A {\n  [*] --> B\n}\nA --> [*]",
            "line 3, column 1: `A --> [*]`: composite state `A` holds states; end those instead",
        ),
        (
            "state A {\n  [*] --> B\n  [*] --> C\n}",
            "line 5, column 3: a second initial state `C` in composite state `A`: `B` is its \
             initial state",
        ),
        (
            "state A {\n  [*] --> A\n}",
            "line 3, column 1: the initial state `A` of composite state `A` is not drawn inside it",
        ),
        (
            "state A {\n  [*] --> B\n  state C <<transition>>\n  B --> C : go\n}",
            "line 3, column 1: transition state `C` is drawn inside composite state `A`; a spec \
             has transition states only among its own states",
        ),
        (
            "state A <<transition>> {\n}",
            "line 3, column 1: composite state `A` is drawn twice, or as a transition or \
             terminal state, which holds no states",
        ),
    ] {
        let text = format!("@startuml\n[*] --> A\n{body}\n@enduml\n");
        assert_eq!(err(&text).to_string(), refused, "{text}");
    }
    // A pseudo-state is no state of a table; a stereotype that only styles
    // a state is read as the state.
    assert_eq!(
        err("@startuml\n[*] --> A\nstate C <<choice>>\nA --> C\n@enduml\n").to_string(),
        "line 3, column 9: `<<choice>>` is a pseudo-state, not a state an object rests in: a \
         spec's actions go from state to state"
    );
    let styled = plantuml(
        "@startuml\n[*] --> A\nstate B <<Warning>>\nA --> B : go\nB --> A : back\n@enduml\n",
        "m",
    )
    .unwrap();
    assert_eq!(moves(&load(&styled)).len(), 2, "{styled}");
    // An id may be another state's name, as long as no two names meet.
    let swapped = plantuml(
        "@startuml\nstate \"X\" as Y\nstate \"B\" as X\n[*] --> Y\nY --> X : go\nX --> Y : back\n@enduml\n",
        "m",
    )
    .unwrap();
    let m = load(&swapped);
    assert_eq!(
        moves(&m),
        BTreeSet::from([("X".into(), "B".into()), ("B".into(), "X".into())]),
        "{swapped}"
    );
    // Two ids drawn with one name would write the state twice.
    assert_eq!(
        err("@startuml\nstate \"B\" as X\n[*] --> A\nA --> B\n@enduml\n").to_string(),
        "line 4, column 1: two states are named `B`: `X` and `B`; a spec names each state once, \
         ignoring case"
    );
    assert_eq!(
        err("@startuml\n[*] --> A\nA --> B\nstate \"B\" as X\n@enduml\n").to_string(),
        "line 4, column 7: two states are named `B`: `B` and `X`; a spec names each state once, \
         ignoring case"
    );
    assert_eq!(
        err("@startuml\n[*] --> A\nA --> B!\n@enduml\n").to_string(),
        "line 3, column 7: expected a state id or `[*]`, found `B!`"
    );
    assert_eq!(
        source_from_url("http://www.plantuml.com/plantuml/svg/ab*c")
            .unwrap_err()
            .to_string(),
        "line 1, column 38: the address's code is not a compressed diagram (FailedCannotMakeProgress)"
    );
}

/// `X --> [*]` from a state with ways out is a removal there, except from a
/// transition state, whose object an action holds: that arrow stays a
/// comment, and the spec still checks.
#[test]
fn an_end_drawn_where_objects_go_on_is_a_removal_but_not_from_a_transition_state() {
    let spec = plantuml(
        "@startuml\n[*] --> Idle\nstate Busy <<transition>>\nIdle --> Busy : work\nBusy --> Idle : work\nIdle --> [*]\nBusy --> [*]\n@enduml\n",
        "worker",
    )
    .unwrap();
    let m = load(&spec);
    let removal = |name: &str| m.state(m.state_named(name).unwrap()).remove.clone();
    assert_eq!(removal("Idle"), Some(Vec::new().into()), "{spec}");
    assert_eq!(removal("Busy"), None, "{spec}");
    assert!(
        spec.contains(
            "The diagram ends objects in Busy (`Busy --> [*]`), which also has ways out.\n"
        ),
        "{spec}"
    );
}
