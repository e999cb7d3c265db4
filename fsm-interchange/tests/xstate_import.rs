//! `fsm import xstate`: every shipped spec exported as an XState config imports
//! back to the same table (states, rules, roles, guards, owners, deadlines,
//! hidden and in-place actions); a config written by hand imports by its
//! events; what a table cannot say is refused with its line and column.

mod round_trip;

use std::collections::BTreeSet;

use fsm_interchange::{ImportError, from_xstate, xstate};
use round_trip::{Back, actions, guards, load, roles, rules, states};

#[test]
fn every_shipped_spec_round_trips_through_its_xstate_export() {
    for Back {
        path,
        original: m,
        back,
        spec,
    } in round_trip::every_spec(xstate, from_xstate)
    {
        let at = path.display();
        // In the spec's order.
        assert_eq!(round_trip::names(&back), round_trip::names(&m), "{at}");
        assert_eq!(back.description(), m.description(), "{at}");
        assert_eq!(back.single_mutator(), m.single_mutator(), "{at}");
        assert_eq!(states(&back), states(&m), "{at}:\n{spec}");
        assert_eq!(rules(&back), rules(&m), "{at}:\n{spec}");
        assert_eq!(actions(&back), actions(&m), "{at}:\n{spec}");
        assert_eq!(roles(&back), roles(&m), "{at}");
        assert_eq!(guards(&back), guards(&m), "{at}");
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
    assert_eq!(
        err(
            r#"{"initial": "a", "states": {"a": {"initial": "x", "meta": {"owner": "ops"}, "states": {"x": {}}}}}"#
        ),
        "line 1, column 34: state `a` has child states: it is no state of the table, so it \
         cannot be final nor have an owner, a deadline, `persisted` or actions in place"
    );
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
    assert_eq!(
        edited(
            "\"decommission_failed\": {\n              \"target\": \"#node.ENABLED\"",
            "\"decommission_failed\": {\n              \"target\": \"#node.MAINTENANCE\"",
        ),
        "line 96, column 25: `decommission_failed` leads to `MAINTENANCE`; a failed action \
         returns to its origin, `ENABLED`"
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
