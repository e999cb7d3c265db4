//! `fsm import xstate`: every shipped spec exported as an XState config imports
//! back to the same table (states, rules, roles, guards, owners, deadlines,
//! hidden and in-place actions); a config written by hand imports by its
//! events; what a table cannot say is refused with its line and column.

mod round_trip;

use std::collections::BTreeSet;

use fsm_interchange::{ImportError, from_xstate, xstate};
use round_trip::{load, rules};

#[test]
fn every_shipped_spec_round_trips_through_its_xstate_export() {
    for back in round_trip::every_spec(xstate, from_xstate) {
        round_trip::the_same(&back);
    }
}

/// Earlier names, a guard's CEL, the order of roles, guards, actions and
/// origins, and an action back to its only origin as its target all come
/// back: what the shipped specs do not have.
#[test]
fn what_a_spec_says_beyond_its_moves_comes_back_through_xstate() {
    round_trip::evolved(xstate, from_xstate);
}

/// A config that does not list its actions (written by hand, or exported
/// before the order was) is read as before: an action with a transition
/// state that ends where it started goes back to its origin. An export says
/// which actions do, so one that names its only origin as its target comes
/// back as it was.
#[test]
fn only_a_config_written_by_hand_has_its_way_back_to_the_origin_inferred() {
    let config = round_trip::evolved_in(xstate);
    let exported = from_xstate(&config, "m").unwrap();
    let listed = "\"actions\": [\n      \"start\",\n      \"suspend\",\n      \"move\",\n      \"end\"\n    ],";
    assert!(config.contains(listed), "{config}");
    let by_hand = from_xstate(&config.replace(listed, ""), "m").unwrap();
    let line = |spec: &str| {
        let line = spec.lines().find(|l| l.starts_with("move = "));
        line.unwrap_or_else(|| panic!("{spec}")).to_owned()
    };
    assert_eq!(
        line(&exported),
        r#"move = { from = "RUNNING", via = "MOVING", to = "RUNNING" }"#
    );
    assert_eq!(
        line(&by_hand),
        r#"move = { from = "RUNNING", via = "MOVING", to_origin = true }"#
    );
    // Without the order, the actions come in the order first met.
    let order = |spec: &str| {
        let m = load(spec);
        let names = m.action_ids().map(|a| m.action(a).name.to_string());
        names.collect::<Vec<_>>()
    };
    assert_eq!(order(&exported), ["start", "suspend", "move", "end"]);
    assert_eq!(order(&by_hand), ["start", "end", "suspend", "move"]);
}

/// What the export writes besides the moves, edited into what no table
/// says, is refused where it is.
#[test]
fn an_edited_guard_order_or_earlier_name_is_refused() {
    let config = round_trip::evolved_in(xstate);
    let edited = |from: &str, to: &str| round_trip::refused_edit(from_xstate, &config, from, to);
    for (from, to, refused) in [
        (
            r#""cel": "object.data.quota > 0""#,
            r#""cel": 1"#,
            "expected a string for `meta.guards.quota.cel`",
        ),
        (
            r#""cel": "object.data.quota > 0""#,
            r#""colour": "red""#,
            "unexpected `meta.guards.quota.colour`: a guard has a `description` and a `cel`",
        ),
        (
            "\"origins\": {\n      \"start\": [",
            "\"origins\": {\n      \"start\": [1, ",
            "expected a string for `meta.origins.start`",
        ),
        (
            r#""action": "suspend","#,
            r#""action": "suspend", "to_origin": true,"#,
            "event `suspend` is said to go back to its origin, but it does not from each of them \
             through a transition state",
        ),
        (
            "\"renamed_from\": [\n              \"pause\"\n            ]",
            "\"renamed_from\": 3",
            "expected an array for `meta.renamed_from`",
        ),
        (
            r#""actions": ["#,
            r#""actions": [1, "#,
            "expected a string for `meta.actions`",
        ),
    ] {
        let error = edited(from, to);
        assert!(error.ends_with(refused), "{from} -> {to}: {error}");
    }
}

/// A traffic light as XState's own docs write one: string targets, a guard,
/// a targetless transition, a forbidden one, a final state.
const LIGHT: &str = include_str!("xstate/light.json");

/// A door: per-origin targets, a self-transition, a target in an array.
const DOOR: &str = include_str!("xstate/door.json");

/// A media player with nested states: a parent's transitions, a child's own
/// for the same event, targets by id, by path and to a child.
const PLAYER: &str = include_str!("xstate/player.json");

/// An event that stays where it is in one state and moves from another is
/// one action, whose target in the first is that state; a transition to its
/// own state, written by hand, stays there (as a targetless one), where in
/// an export it is a move to it.
#[test]
fn an_event_that_stays_in_one_state_and_moves_from_another_is_one_action() {
    let by_hand = r#"{ "id": "m", "initial": "a", "states": {
        "a": { "on": { "home": {}, "poke": "a" } },
        "b": { "on": { "home": "a", "end": "c" } },
        "c": { "type": "final" } } }"#;
    let spec = from_xstate(by_hand, "m").unwrap();
    let line = |name: &str| {
        let line = spec.lines().find(|l| l.starts_with(&format!("{name} = ")));
        line.unwrap_or_else(|| panic!("{spec}")).to_owned()
    };
    assert_eq!(line("home"), r#"home = { from = ["a", "b"], to = "a" }"#);
    assert_eq!(line("poke"), r#"poke = { from = "a" }"#);
    // Exported, a move to the state it is in stays one.
    let m = load(
        "[machine]\nname = \"m\"\ninitial = \"a\"\n[states]\na = {}\nb = {}\n[actions]\nstay = { from = \"a\" }\npoke = { from = \"a\", to = \"a\" }\nhome = { from = [\"a\", \"b\"], to = \"a\" }\ngo = { from = \"a\", to = \"b\" }\n",
    );
    for (export, import) in [
        (xstate as fn(&_) -> _, from_xstate as fn(&str, &str) -> _),
        (fsm_interchange::scxml, fsm_interchange::from_scxml),
    ] {
        let back = load(&import(&export(&m).unwrap(), "m").unwrap());
        assert_eq!(back, m);
        let poke = back.action_ids().find(|&a| back.action(a).name == "poke");
        assert!(back.action(poke.unwrap()).changes_state());
    }
}

#[test]
fn a_config_written_by_hand_imports_by_its_events() {
    let spec = from_xstate(LIGHT, "unused").unwrap();
    let m = load(&spec);
    assert_eq!(m.name(), "light");
    assert_eq!(m.state(m.initial()).name.as_ref(), "green");
    let by_name = |r: &BTreeSet<(String, String, Option<String>, String, bool)>| {
        r.iter()
            .map(|(a, o, _, t, moves)| {
                format!("{a}: {o} -> {t}{}", if *moves { "" } else { " (in place)" })
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        by_name(&rules(&m)),
        [
            "BREAK: green -> broken",
            "BREAK: yellow -> broken",
            "PING: green -> green (in place)",
            "PING: yellow -> yellow (in place)",
            "TIMER: green -> yellow",
            "TIMER: red -> green",
            "TIMER: yellow -> red",
        ]
    );
    let brk = m.find_action("BREAK").unwrap();
    assert_eq!(m.guard_names(brk), ["isBroken"]);
    // A state the config does not describe has no description.
    let green = m.state(m.state_id("green").unwrap());
    assert_eq!(green.description, None, "{spec}");
    let broken = m.state(m.state_id("broken").unwrap());
    assert!(broken.terminal);
    assert_eq!(broken.description.as_deref(), Some("Out of order"));
    // What the spec could not carry is said at its top.
    assert!(
        spec.contains("cannot say which states are transition states"),
        "{spec}"
    );
    assert!(
        spec.contains("Left out (a table has no place for them): `entry`."),
        "{spec}"
    );

    let door = load(&from_xstate(DOOR, "unused").unwrap());
    assert_eq!(
        by_name(&rules(&door)),
        [
            "knock: closed -> closed (in place)",
            "lock: closed -> locked",
            "remove: closed -> removed",
            "remove: open -> removed",
            "toggle: closed -> open",
            "toggle: open -> closed",
            "unlock: locked -> closed",
        ]
    );
    assert_eq!(
        door.description(),
        Some("A door, written by hand for XState")
    );
    // A transition's description and guard stand beside a `meta` of the user's.
    let lock = door.find_action("lock").unwrap();
    assert_eq!(
        door.action(lock).description.as_deref(),
        Some("Turn the key")
    );
    assert_eq!(door.guard_names(lock), ["hasKey"]);
}

#[test]
fn descriptions_keep_every_character_through_the_spec() {
    // Quotes, backslashes, a tab, a newline and a control character, which a
    // TOML string must escape.
    let text = "say \"hi\" \\ to\tall\nat once \u{7}";
    let config = serde_json::json!({
        "id": "m",
        "initial": "a",
        "description": text,
        "states": { "a": { "description": text, "type": "final" } }
    });
    let m = load(&from_xstate(&config.to_string(), "unused").unwrap());
    assert_eq!(m.description(), Some(text));
    assert_eq!(m.state(m.initial()).description.as_deref(), Some(text));
}

#[test]
fn nested_states_flatten_into_the_table() {
    let m = load(&from_xstate(PLAYER, "unused").unwrap());
    let names: Vec<String> = round_trip::names(&m);
    // Each state of the table is a leaf, named by its path; the compound
    // states `active` and `active.buffering` are not states of the table.
    assert_eq!(
        names,
        [
            "stopped",
            "active.playing",
            "active.paused",
            "active.buffering.fetching",
            "active.buffering.decoding",
            "ejected"
        ]
    );
    round_trip::has_moves(
        &m,
        &[
            // A target that is a compound state enters its initial child, in
            // turn; `#on-air` is `active` by its own id.
            "play: stopped -> active.playing",
            "skip: active.playing -> active.buffering.fetching",
            "decoded: active.buffering.decoding -> active.playing",
            // The parent's transitions hold in every child...
            "stop: active.paused -> stopped",
            "eject: active.buffering.decoding -> ejected",
            // ... but where a child has its own for the event,
            "stop: active.buffering.fetching -> active.playing",
            "reset: active.buffering.fetching -> stopped",
            // and a forbidden transition (`[]`) in a child leaves the event to
            // its parent, as XState does.
            "eject: active.paused -> ejected",
            // `.fetching`: a child of the state the transition is written on.
            "reset: active.buffering.decoding -> active.buffering.fetching",
        ],
        17,
    );
    // Exported, its states nest again (`active` holding `playing`...), and
    // import back to the same table.
    let back = load(&from_xstate(&xstate(&m).unwrap(), "unused").unwrap());
    assert_eq!(round_trip::names(&back), names);
    assert_eq!(rules(&back), rules(&m));
}

#[test]
fn an_action_keeps_one_description_and_names_the_others() {
    let spec = from_xstate(
        r#"{"id": "m", "initial": "a", "states": {
            "a": {"on": {"go": {"target": "c", "description": "From a"}}},
            "b": {"on": {"go": {"target": "c", "description": "From b"}}},
            "c": {"on": {"go": {"target": "a"}}}
        }}"#,
        "unused",
    )
    .unwrap();
    let m = load(&spec);
    let go = m.action(m.action_ids().next().unwrap());
    assert_eq!(go.description.as_deref(), Some("From a"));
    assert!(
        spec.contains(
            "# Left out (a table has no place for them): the description of `go` from `b` (the \
             action keeps the one from `a`)."
        ),
        "{spec}"
    );
    // A deadline is the healer's to act on: two are refused, not one dropped.
    let err = from_xstate(
        r#"{"initial": "a", "states": {
            "a": {"on": {"go": {"target": "b", "meta": {"deadline_seconds": 5}}}},
            "b": {"on": {"go": {"target": "a", "meta": {"deadline_seconds": 9}}}}
        }}"#,
        "m",
    )
    .unwrap_err();
    assert!(
        err.message.ends_with(
            "event `go` from `b` is not the action it is from `a`: its deadlines differ; an \
             action is the same from every origin"
        ),
        "{err}"
    );
}

#[test]
fn what_a_table_cannot_say_is_refused_where_it_is() {
    let err = |text: &str| from_xstate(text, "m").unwrap_err().to_string();
    assert_eq!(
        err("{\n  \"initial\": \"a\",\n  \"states\": { \"a\": { \"on\": { \"go\": \"b\" } } \n"),
        "line 4, column 1: not JSON: EOF while parsing an object"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"after": {"1000": "b"}}, "b": {}}}"#),
        "line 1, column 44: delayed transitions (`after`) cannot be said in a table"
    );
    for remove in ["3", "[1]", "{}"] {
        assert_eq!(
            err(&format!(
                r#"{{"initial": "a", "states": {{"a": {{"meta": {{"remove": {remove}}}}}}}}}"#
            )),
            "line 1, column 54: expected true, false, a role or an array of roles for `meta.remove`",
            "{remove}"
        );
    }
    // Compound states flatten (see `nested_states_flatten_into_the_table`),
    // but for what a table has only among its own states.
    assert_eq!(
        err("{\"initial\": \"a\",\n \"states\": {\"a\": {\"states\": {\"x\": {}}}}}"),
        "line 2, column 18: compound state `a` has no `initial` child"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"initial": "y", "states": {"x": {}}}}}"#),
        "line 1, column 46: the initial child `y` is not one of the states of state `a`"
    );
    assert_eq!(
        err(
            r#"{"initial": "a", "states": {"a": {"initial": "x", "states": {"x": {"type": "final"}}}}}"#
        ),
        "line 1, column 67: state `a.x` is a final state, which ends its parent (`onDone`), \
         inside compound state `a`; a table has it only among its own states"
    );
    assert_eq!(
        err(
            r#"{"initial": "a", "states": {"a": {"initial": "x", "states": {"x": {"meta": {"transition": true}}}}}}"#
        ),
        "line 1, column 67: state `a.x` is a transition state (`meta.transition`) inside \
         compound state `a`; a table has it only among its own states"
    );
    for meta in [
        r#""owner": "ops""#,
        r#""renamed_from": "old""#,
        r#""remove": true"#,
    ] {
        assert_eq!(
            err(&format!(
                r#"{{"initial": "a", "states": {{"a": {{"initial": "x", "meta": {{{meta}}}, "states": {{"x": {{}}}}}}}}}}"#
            )),
            "line 1, column 34: state `a` has child states: it is no state of the table, so it \
             cannot be final nor have an owner, a removal, a deadline, earlier names, `persisted` \
             or actions in place",
            "{meta}"
        );
    }
    assert_eq!(
        err(r#"{"initial": "a", "type": "parallel", "states": {"a": {}}}"#),
        "line 1, column 26: a parallel machine is in several states at once; a table is in one"
    );
    assert_eq!(
        err(
            r#"{"initial": "a", "states": {"a": {"on": {"go": [{"target": "b", "guard": "g"}, {"target": "c"}]}}, "b": {}, "c": {}}}"#
        ),
        "line 1, column 80: event `go` has several guarded targets from state `a`; a table has \
         one target for an action from each state"
    );
    assert_eq!(
        err(r##"{"initial": "a", "states": {"a": {"on": {"go": "#elsewhere.b"}}}}"##),
        "line 1, column 48: target `#elsewhere.b` names no state: expected `#m.STATE` or a \
         state's own `id`"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"on": {"go": "nowhere"}}}}"#),
        "line 1, column 48: target `nowhere` is not one of the machine's states"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"on": {"*": "a"}}}}"#),
        "line 1, column 47: the wildcard event `*` takes events a table names one by one"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {}, "a": {}}}"#),
        "line 1, column 43: `a` appears twice in `states`"
    );
    assert_eq!(
        err(
            r#"{"initial": "a", "states": {"a": {"on": {"go": {"target": "b", "guard": "g"}}}, "b": {"on": {"go": "a"}}}}"#
        ),
        "line 1, column 100: event `go` from `b` is not the action it is from `a`: its guards \
         differ; an action is the same from every origin"
    );
    assert_eq!(
        err(
            r#"{"initial": "a", "states": {"a": {"on": {"go": {}}, "meta": {"in_place": [{"action": "go"}]}}}}"#
        ),
        "line 1, column 75: event `go` again from `a`; a table has one move for an action from each state"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"on": {"go": "A"}}, "A": {"type": "final"}}}"#),
        "line 1, column 60: states `A` and `a` differ only in case; a spec compares names ignoring case"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"type": "final"}}, "colour": 1}"#),
        "line 1, column 64: unknown key `colour`; expected one of: id, initial, description, \
         states, meta, type, entry, exit, tags, context, output, types, version, schemas, \
         after, always, invoke, on"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"colour": 1, "type": "final"}}}"#),
        "line 1, column 45: unknown key `colour`; expected one of: id, description, type, on, \
         states, initial, meta, entry, exit, tags, context, output, types, version, schemas, \
         after, always, invoke"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"type": "history"}}}"#),
        "line 1, column 43: state `a` is a parallel or history state; a table has neither"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"on": {"go": ".inner"}}}}"#),
        "line 1, column 48: target `.inner` is a child of state `a`, which has none"
    );
    assert_eq!(
        err(r#"{"initial": "a", "states": {"a": {"meta": {"in_place": [{"hidden": true}]}}}}"#),
        "line 1, column 57: expected `action` in an entry of `meta.in_place`"
    );
    // What `fsm export` writes, with a transition state's ends changed.
    let config = round_trip::node_in(xstate);
    let edited = |from: &str, to: &str| round_trip::refused_edit(from_xstate, &config, from, to);
    // (The target's line: the one after its event's.)
    let target = 2
        + (config.lines())
            .position(|l| l.contains("\"decommission_failed\""))
            .unwrap();
    assert_eq!(
        edited(
            "\"decommission_failed\": {\n              \"target\": \"#node.ENABLED\"",
            "\"decommission_failed\": {\n              \"target\": \"#node.MAINTENANCE\"",
        ),
        format!(
            "line {target}, column 25: `decommission_failed` leads to `MAINTENANCE`; a failed \
             action returns to its origin, `ENABLED`"
        )
    );
    for (from, to, refused) in [
        (
            "\"decommission_done\"",
            "\"decommission_finished\"",
            "unexpected event `decommission_finished` in child `ENABLED` of transition state \
             `DECOMMISSIONING`: expected `decommission_done` and `decommission_failed`",
        ),
        (
            "\"#node.DECOMMISSIONING.ENABLED\"",
            "\"#node.DECOMMISSIONING\"",
            "target `#node.DECOMMISSIONING` is a transition state; a way into one names its \
             child for the origin (`DECOMMISSIONING.ENABLED`)",
        ),
    ] {
        let error = edited(from, to);
        assert!(error.ends_with(refused), "{error}");
    }
    assert_eq!(
        err(r#"{"initial": "z", "states": {"a": {}}}"#),
        "line 1, column 13: the initial state `z` is not one of the machine's states"
    );
    assert_eq!(
        from_xstate("[1, 2]", "m").unwrap_err(),
        ImportError {
            line: 1,
            column: 1,
            message: "expected an object for the machine config".into()
        }
    );
}
