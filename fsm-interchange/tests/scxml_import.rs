//! `fsm import scxml`: every shipped spec exported as SCXML imports back to the
//! same table (states, rules, roles, guards, owners, deadlines, hidden and
//! in-place actions, descriptions); a document written by
//! hand imports by its events; what a table cannot say is refused with its line
//! and column.

mod round_trip;

use std::collections::BTreeSet;

use fsm_interchange::{ImportError, from_scxml, scxml};
use round_trip::load;

#[test]
fn every_shipped_spec_round_trips_through_its_scxml_export() {
    for back in round_trip::every_spec(scxml, from_scxml) {
        round_trip::the_same(&back);
    }
}

/// Earlier names, a guard's CEL, the order of roles, guards, actions and
/// origins, and an action back to its only origin as its target all come
/// back: what the shipped specs do not have.
#[test]
fn what_a_spec_says_beyond_its_moves_comes_back_through_scxml() {
    round_trip::evolved(scxml, from_scxml);
}

/// What the export writes besides the moves, edited into what no table
/// says, is refused where it is.
#[test]
fn an_edited_guard_order_or_earlier_name_is_refused() {
    let document = round_trip::evolved_in(scxml);
    let edited = |from: &str, to: &str| round_trip::refused_edit(from_scxml, &document, from, to);
    for (from, to, refused) in [
        (
            r#"<fsm:role name="ops" description="The operators"/>"#,
            r#"<fsm:role name="ops" description="The operators" cel="true"/>"#,
            "line 4, column 57: `<fsm:role>` `ops` has a `cel`: only a guard has one",
        ),
        (
            r#"<fsm:origins action="start" from="SUSPENDED NEW"/>"#,
            r#"<fsm:origins action="start"/>"#,
            "line 8, column 3: `<fsm:origins>` needs an `action` and its `from`",
        ),
        (
            r#"<transition event="suspend""#,
            r#"<transition fsm:to-origin="true" event="suspend""#,
            "event `suspend` is said to go back to its origin, but it does not from each of them \
             through a transition state",
        ),
        (
            r#"<transition event="suspend""#,
            r#"<transition fsm:to-origin="yes" event="suspend""#,
            "expected `true` or `false` for `fsm:to-origin`, found `yes`",
        ),
        (
            r#"<transition event="start""#,
            r#"<transition fsm:renamed-from="begin" event="start""#,
            "is not the action it is from `NEW`: its earlier names differ; an action is the same \
             from every origin",
        ),
    ] {
        let error = edited(from, to);
        assert!(error.ends_with(refused), "{from} -> {to}: {error}");
    }
}

#[test]
fn a_document_written_by_hand_imports_by_its_events() {
    let spec = from_scxml(include_str!("scxml/door.scxml"), "unused").unwrap();
    let m = load(&spec);
    assert_eq!(m.name(), "door");
    let rules: Vec<String> = m
        .rules()
        .map(|r| {
            let moves = if r.changes_state { "" } else { " (in place)" };
            format!(
                "{}: {} -> {}{moves}",
                m.action(r.action).name,
                m.state(r.origin).name,
                m.state(r.target).name
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        rules,
        [
            "knock: closed -> closed (in place)",
            "lock: closed -> locked",
            "remove: closed -> removed",
            "remove: open -> removed",
            "take_down: closed -> removed",
            "toggle: closed -> open",
            "toggle: open -> closed",
            "unlock: locked -> closed",
            "wave: open -> open (in place)",
        ]
    );
    assert!(m.state(m.state_id("removed").unwrap()).terminal);
    assert!(
        spec.contains("Left out (a table has no place for them): `<onentry>`."),
        "{spec}"
    );

    // A condition is a guard, named by its expression.
    let guarded = from_scxml(
        r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" initial="a"><state id="a"><transition event="go" cond="x &gt; 1" target="b"/></state><final id="b"/></scxml>"#,
        "m",
    )
    .unwrap();
    let g = load(&guarded);
    assert_eq!(g.name(), "m");
    assert_eq!(g.guard_names(g.find_action("go").unwrap()), ["x > 1"]);
}

#[test]
fn nested_states_flatten_into_the_table() {
    let m = load(&from_scxml(include_str!("scxml/player.scxml"), "unused").unwrap());
    // Each state of the table is a state without children, by its own id
    // (SCXML's ids are the document's); `active` and `buffering` are not
    // states of the table.
    assert_eq!(
        round_trip::names(&m),
        [
            "stopped", "playing", "paused", "fetching", "decoding", "ejected"
        ]
    );
    round_trip::has_moves(
        &m,
        &[
            // A target that is a compound state enters its initial child: by
            // `initial`, by `<initial>`, in turn.
            "play: stopped -> playing",
            "skip: playing -> fetching",
            "decoded: decoding -> playing",
            // The parent's transitions hold in every child...
            "stop: paused -> stopped",
            "eject: decoding -> ejected",
            // ... but where a child has its own for the event.
            "stop: fetching -> playing",
            "reset: fetching -> stopped",
            "reset: decoding -> fetching",
        ],
        17,
    );
}

#[test]
fn what_a_table_cannot_say_is_refused_where_it_is() {
    let err = |body: &str| {
        let text = format!(
            "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" initial=\"a\">\n{body}\n</scxml>\n"
        );
        from_scxml(&text, "m").unwrap_err().to_string()
    };
    assert_eq!(
        err(
            "<state id=\"a\"><transition event=\"go\" target=\"b\"/></state>\n<parallel id=\"b\"/>"
        ),
        "line 3, column 1: a parallel state is in several states at once; a table is in one"
    );
    assert_eq!(
        err("<state id=\"a\">\n  <transition target=\"a\"/>\n</state>"),
        "line 3, column 3: an eventless transition out of `a` moves on its own; a table's \
         moves are each an action"
    );
    assert_eq!(
        err("<state id=\"a\"><transition event=\"go\" target=\"b c\"/></state>"),
        "line 2, column 46: several targets at once are parallel states; a table is in one"
    );
    assert_eq!(
        err("<state id=\"a\"><transition event=\"go\" target=\" \"/></state>"),
        "line 2, column 46: an empty `target`: expected a state's id"
    );
    assert_eq!(
        err("<state id=\"a\"><transition event=\"go\" target=\"nowhere\"/></state>"),
        "line 2, column 46: target `nowhere` is not one of the document's states"
    );
    assert_eq!(
        err(
            "<state id=\"a\"><transition event=\"go\" target=\"b\"/><transition event=\"go.fast\" target=\"b\"/></state><final id=\"b\"/>"
        ),
        "line 2, column 15: event `go` also takes `go.fast` in SCXML; a table's action is \
         taken by its own name only"
    );
    assert_eq!(
        err(
            "<state id=\"a\"><transition event=\"go\" target=\"b\"><raise event=\"again\"/></transition></state><final id=\"b\"/>"
        ),
        "line 2, column 49: `<raise>` makes an event of its own; a table's moves are each one action"
    );
    // Compound states flatten (see `nested_states_flatten_into_the_table`),
    // but for what a table has only among its own states.
    assert_eq!(
        err("<state id=\"a\">\n  <final id=\"a1\"/>\n</state>"),
        "line 3, column 3: state `a1` is a final state inside compound state `a`, which it ends \
         (`done.state.a`); a table has it only among its own states"
    );
    assert_eq!(
        err("<state id=\"a\" initial=\"b\"><state id=\"a1\"/></state><state id=\"b\"/>"),
        "line 2, column 24: the initial state `b` is not one of the states of compound state `a`"
    );
    // An initial state deeper than a child is one (SCXML allows it).
    let deep = from_scxml(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" initial=\"b\">\n\
         <state id=\"a\" initial=\"a12\">\n\
           <state id=\"a1\"><state id=\"a11\"/><state id=\"a12\"/></state>\n\
         </state>\n\
         <state id=\"b\"><transition event=\"go\" target=\"a\"/></state>\n\
         </scxml>\n",
        "m",
    )
    .unwrap();
    assert!(
        deep.contains("go = { from = \"b\", to = \"a12\" }"),
        "{deep}"
    );
    assert_eq!(
        err("<state id=\"a\">\n  <initial/>\n  <state id=\"a1\"/>\n</state>"),
        "line 3, column 3: an `<initial>` needs a `<transition target>`"
    );
    for attribute in [
        "fsm:owner=\"ops\"",
        "fsm:renamed-from=\"old\"",
        "fsm:remove=\"true\"",
        "fsm:remove-roles=\"ops\"",
    ] {
        assert_eq!(
            err(&format!(
                "<state id=\"a\" xmlns:fsm=\"urn:fsm:scxml\" {attribute}><state id=\"a1\"/></state>"
            )),
            "line 2, column 1: compound state `a` is no state of the table, so it cannot have \
             an owner, a removal, a deadline, earlier names or `fsm:persisted`",
            "{attribute}"
        );
    }
    assert_eq!(
        err(
            "<state id=\"a\"><transition event=\"go\" target=\"b\"/><transition event=\"go\" target=\"a\"/></state><final id=\"b\"/>"
        ),
        "line 2, column 50: a second transition for event `go` out of `a`; a table has one \
         target for an action from each state"
    );
    assert_eq!(
        err("<state id=\"a\"><transition event=\"go go\" target=\"b\"/></state><final id=\"b\"/>"),
        "line 2, column 15: event `go` again from `a`; a table has one move for an action from each state"
    );
    assert_eq!(
        err("<state id=\"a\"><transition event=\"go\" target=\"A\"/></state>\n<final id=\"A\"/>"),
        "line 3, column 1: states `A` and `a` differ only in case; a spec compares names ignoring case"
    );
    assert_eq!(
        err(
            "<state id=\"a\"><transition event=\"go\" target=\"b\"/><transition event=\"Go\" target=\"b\"/></state><final id=\"b\"/>"
        ),
        "line 2, column 50: events `Go` and `go` differ only in case; a spec compares names ignoring case"
    );
    assert_eq!(
        err("<state id=\"a\"/>\n<final id=\"a\"/>"),
        "line 3, column 1: state id `a` appears twice; SCXML names each state once"
    );
    assert_eq!(
        err("<state id=\"a\"><transition event=\"*\" target=\"a\"/></state>"),
        "line 2, column 34: the wildcard event `*` takes events a table names one by one"
    );
    assert_eq!(
        err("<state><transition event=\"go\"/></state>"),
        "line 2, column 1: a state needs an `id`: transitions name it"
    );
    assert_eq!(
        err("<state id=\"a\"><history id=\"h\"/></state>"),
        "line 2, column 15: a history state remembers where it was; a table's states are flat"
    );
    // What `fsm export` writes, with a transition state's ends changed.
    let document = round_trip::node_in(scxml);
    let edited = |from: &str, to: &str| round_trip::refused_edit(from_scxml, &document, from, to);
    let failed = "<transition event=\"enable_failed\" target=\"MAINTENANCE\"/>";
    let done = "<transition event=\"enable_done\" target=\"ENABLED\"/>";
    for (from, to, refused) in [
        (
            failed,
            "<transition event=\"enable_failed\" target=\"ENABLED\"/>",
            "`enable_failed` leads to `ENABLED`; a failed action returns to its origin, \
             `MAINTENANCE`",
        ),
        (
            done,
            "",
            "child `ENABLING.MAINTENANCE` of transition state `ENABLING` needs both \
             `enable_done` and `enable_failed`",
        ),
        (
            done,
            "<transition event=\"enable_done\" target=\"DECOMMISSIONING\"/>",
            "`enable_done` in child `ENABLING.MAINTENANCE` of transition state `ENABLING` must \
             lead to one of the document's static states",
        ),
        (
            "target=\"ENABLING.MAINTENANCE\"",
            "target=\"ENABLING\"",
            "target `ENABLING` is a transition state; a way into one names its child for the \
             origin `MAINTENANCE`",
        ),
    ] {
        let error = edited(from, to);
        assert!(error.ends_with(refused), "{error}");
    }
    // What `fsm export` writes in its namespace, with values it never writes.
    let ours = |body: &str| {
        let ns = "xmlns=\"http://www.w3.org/2005/07/scxml\" xmlns:fsm=\"urn:fsm:scxml\"";
        let document = format!("<scxml {ns}>\n{body}\n</scxml>");
        from_scxml(&document, "m").unwrap_err().to_string()
    };
    assert_eq!(
        ours("  <state id=\"a\" fsm:persisted=\"no\"/>"),
        "line 2, column 32: expected `true` or `false` for `fsm:persisted`, found `no`"
    );
    assert_eq!(
        ours(
            "  <state id=\"a\">\n    <transition event=\"go\" fsm:deadline-seconds=\"soon\"/>\n  </state>"
        ),
        "line 3, column 50: expected a number of seconds for `fsm:deadline-seconds`, found `soon`"
    );
    assert_eq!(
        ours("  <fsm:owner name=\"admin\"/>\n  <state id=\"a\"/>"),
        "line 2, column 3: unexpected `<fsm:owner>`: `fsm export` writes `<fsm:role>`, \
         `<fsm:guard>` and `<fsm:origins>` here"
    );
    assert_eq!(
        ours("  <fsm:role description=\"who runs it\"/>\n  <state id=\"a\"/>"),
        "line 2, column 3: `<fsm:role>` needs a `name`"
    );
    assert_eq!(
        ours("  <fsm:guard name=\"g\"/>\n  <fsm:guard name=\"g\"/>\n  <state id=\"a\"/>"),
        "line 3, column 3: `<fsm:guard>` `g` is declared twice"
    );
    assert_eq!(
        from_scxml("<scxml>\n  <state id=\"a\">\n</scxml>", "m").unwrap_err(),
        ImportError {
            line: 3,
            column: 1,
            message: "not XML: expected 'state' tag, not 'scxml'".into()
        }
    );
    assert_eq!(
        from_scxml("<machine/>", "m").unwrap_err().to_string(),
        "line 1, column 1: expected `<scxml>`, found `<machine>`"
    );
}

#[test]
fn descriptions_keep_every_character_xml_holds_and_refuse_the_others() {
    // Quotes, markup, a comment's end, a tab, a newline and a carriage
    // return: XML escapes some, and reads the others as spaces in an
    // attribute unless they are written as references.
    let text = "say \"hi\" & 'bye' <b> -- \\ to\tall\nat once\r\n";
    let spec = |text: &str| {
        // (A JSON string is a TOML basic string, escapes and all.)
        let quoted = serde_json::to_string(text).unwrap();
        format!(
            "[machine]\nname = \"m\"\ninitial = \"A\"\ndescription = {quoted}\n\n\
             [roles]\nadmin = {quoted}\n\n\
             [states]\nA = {{ description = {quoted} }}\nB = {{ terminal = true }}\n\n\
             [actions]\ngo = {{ from = \"A\", to = \"B\", roles = [\"admin\"], description = {quoted} }}\n"
        )
    };
    let m = fsm_core::spec::load_str("m.toml", spec(text)).unwrap();
    let back = load(&from_scxml(&scxml(&m).unwrap(), "unused").unwrap());
    assert_eq!(back.description(), Some(text));
    assert_eq!(
        back.state(back.initial()).description.as_deref(),
        Some(text)
    );
    assert_eq!(back.roles()[0].description.as_deref(), Some(text));
    assert_eq!(
        back.action(back.action_ids().next().unwrap())
            .description
            .as_deref(),
        Some(text)
    );
    // A bell: XML 1.0 has no way to write it, so there is no export.
    let bell = fsm_core::spec::load_str("m.toml", spec("ring \u{7}")).unwrap();
    assert_eq!(
        scxml(&bell).unwrap_err().to_string(),
        "SCXML cannot carry the description of `m`: XML 1.0 cannot hold the character U+0007 in it"
    );
}
