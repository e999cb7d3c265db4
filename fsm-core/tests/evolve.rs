//! `evolve::diff`: every kind of change, with whom it breaks; the fingerprint;
//! the renames `diff` cannot see (`likely_renames`).

use fsm_core::evolve::{Change, Impact, LikelyRename, Named, diff, fingerprint, likely_renames};

const OLD: &str = r#"
[machine]
name = "server"
initial = "HALTED"
[roles]
admin = "An admin"
ops = "Operations"
[guards]
drained = "No workload left"
[states]
HALTED = "Off"
STARTING = { transition = true }
RUNNING = "On"
PARKED = "Parked"
RETIRED = { terminal = true }
[actions]
start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
stop = { from = ["RUNNING", "PARKED"], to = "HALTED" }
park = { from = "RUNNING", to = "PARKED" }
retire = { from = "HALTED", to = "RETIRED", roles = "admin" }
"#;

fn load(name: &str, text: &str) -> fsm_core::Machine {
    fsm_core::spec::load_str(name, text).unwrap_or_else(|e| panic!("{e}"))
}

fn changes(new: &str) -> Vec<(Impact, String)> {
    diff(&load("old.toml", OLD), &load("new.toml", new))
        .into_iter()
        .map(|c| (c.impact(), c.to_string()))
        .collect()
}

#[test]
fn the_same_spec_reordered_has_no_change_and_the_same_fingerprint() {
    let reordered = OLD.replace(
        "HALTED = \"Off\"\nSTARTING = { transition = true }\n",
        "STARTING = { transition = true }\nHALTED = \"Off\"\n",
    );
    assert_ne!(reordered, OLD);
    assert_eq!(changes(&reordered), []);
    assert_eq!(
        fingerprint(&load("a", OLD)),
        fingerprint(&load("b", &reordered))
    );
    let moved = OLD.replace(
        "park = { from = \"RUNNING\", to = \"PARKED\" }",
        "park = { from = \"RUNNING\", to = \"HALTED\" }",
    );
    assert_ne!(
        fingerprint(&load("a", OLD)),
        fingerprint(&load("c", &moved))
    );
}

#[test]
fn every_kind_of_change_says_whom_it_breaks() {
    let new = OLD
        // PARKED becomes a transition state, RUNNING gets an owner, STARTING is
        // renamed BOOTING, RETIRED goes.
        .replace("PARKED = \"Parked\"", "PARKED = { transition = true }")
        .replace("RUNNING = \"On\"", "RUNNING = { owner = \"ops\" }")
        .replace(
            "STARTING = { transition = true }",
            "BOOTING = { transition = true, renamed_from = \"STARTING\" }",
        )
        .replace("via = \"STARTING\"", "via = \"BOOTING\"")
        .replace(
            "RETIRED = { terminal = true }\n",
            "GONE = { terminal = true }\n",
        )
        .replace(
            "retire = { from = \"HALTED\", to = \"RETIRED\", roles = \"admin\" }",
            "retire = { from = \"HALTED\", to = \"GONE\", roles = \"admin\" }",
        )
        // `stop` no longer starts from PARKED (a transition state now), `park`
        // needs a role and a guard.
        .replace(
            "stop = { from = [\"RUNNING\", \"PARKED\"], to = \"HALTED\" }",
            "stop = { from = \"RUNNING\", to = \"HALTED\", guards = \"drained\" }",
        )
        .replace(
            "park = { from = \"RUNNING\", to = \"PARKED\" }",
            "park = { from = \"RUNNING\", via = \"PARKED\", to = \"HALTED\", roles = \"ops\" }",
        );
    let got = changes(&new);
    let expected = [
        (
            Impact::Callers,
            "state `STARTING` was renamed `BOOTING`: stored objects read as `BOOTING`, callers must use the new name",
        ),
        (
            Impact::Callers,
            "state `RUNNING` is owned by ops (was no one)",
        ),
        (
            Impact::StoredObjects,
            "state `PARKED` became a transition state: objects stored in it now read as busy",
        ),
        (
            Impact::StoredObjects,
            "state `RETIRED` was removed: objects stored in it can no longer be read (if it was renamed, declare `renamed_from`)",
        ),
        (Impact::Callers, "`stop` no longer starts from `PARKED`"),
        (
            Impact::Callers,
            "`stop` checks the guard `drained` it did not",
        ),
        (
            Impact::Callers,
            "`park` from `RUNNING` ends in `HALTED` (was `PARKED`)",
        ),
        (Impact::Callers, "`park` needs the role `ops` it did not"),
        (
            Impact::Callers,
            "`retire` from `HALTED` ends in `GONE` (was `RETIRED`)",
        ),
        (Impact::None, "state `GONE` was added"),
    ];
    let got: Vec<(Impact, &str)> = got.iter().map(|(i, s)| (*i, s.as_str())).collect();
    assert_eq!(got, expected);
}

/// A change of who may remove breaks callers only when someone who could no
/// longer can.
#[test]
fn removal_loosened_breaks_no_one_and_tightened_breaks_callers() {
    let with = |halted: &str| OLD.replace("HALTED = \"Off\"", halted);
    let cases = [
        (
            "HALTED = \"Off\"",
            "HALTED = { remove = \"admin\" }",
            Impact::None,
            "the role admin (was no one)",
        ),
        (
            "HALTED = { remove = \"admin\" }",
            "HALTED = { remove = [\"admin\", \"ops\"] }",
            Impact::None,
            "the role admin or ops (was the role admin)",
        ),
        (
            "HALTED = { remove = \"admin\" }",
            "HALTED = { remove = true }",
            Impact::None,
            "anyone (was the role admin)",
        ),
        (
            "HALTED = { remove = true }",
            "HALTED = { remove = \"admin\" }",
            Impact::Callers,
            "the role admin (was anyone)",
        ),
        (
            "HALTED = { remove = [\"admin\", \"ops\"] }",
            "HALTED = { remove = \"ops\" }",
            Impact::Callers,
            "the role ops (was the role admin or ops)",
        ),
        (
            "HALTED = { remove = \"admin\" }",
            "HALTED = \"Off\"",
            Impact::Callers,
            "no one (was the role admin)",
        ),
    ];
    for (old, new, impact, who) in cases {
        let got: Vec<(Impact, String)> =
            diff(&load("old.toml", &with(old)), &load("new.toml", &with(new)))
                .into_iter()
                .map(|c| (c.impact(), c.to_string()))
                .collect();
        assert_eq!(
            got,
            [(
                impact,
                format!("an object in `HALTED` may be removed by {who}")
            )],
            "{old} -> {new}"
        );
    }
}

#[test]
fn initial_terminal_and_actions_added_removed_and_renamed() {
    let new = OLD
        .replace("initial = \"HALTED\"", "initial = \"PARKED\"")
        .replace("PARKED = \"Parked\"", "PARKED = { terminal = true }")
        .replace("stop = { from = [\"RUNNING\", \"PARKED\"], to = \"HALTED\" }", "halt = { from = \"RUNNING\", to = \"HALTED\", renamed_from = \"stop\" }\nunpark = { from = \"RUNNING\", to = \"HALTED\" }")
        .replace("retire = { from = \"HALTED\", to = \"RETIRED\", roles = \"admin\" }\n", "retire = { from = [\"HALTED\", \"RUNNING\"], to = \"RETIRED\", roles = \"admin\" }\n")
        .replace("park = { from = \"RUNNING\", to = \"PARKED\" }\n", "");
    let d = diff(&load("old.toml", OLD), &load("new.toml", &new));
    assert!(
        d.contains(&Change::Initial {
            from: "HALTED".into(),
            to: "PARKED".into()
        }),
        "{d:#?}"
    );
    assert!(d.contains(&Change::StateTerminal("PARKED".into())));
    assert!(d.contains(&Change::ActionRenamed {
        from: "stop".into(),
        to: "halt".into()
    }));
    assert!(d.contains(&Change::ActionRemoved("park".into())));
    assert!(d.contains(&Change::ActionAdded("unpark".into())));
    assert!(d.contains(&Change::MoveAdded {
        action: "retire".into(),
        origin: "RUNNING".into()
    }));
    assert_eq!(
        Change::ActionRemoved("park".into()).impact(),
        Impact::StoredObjects
    );
    assert_eq!(
        Change::MoveAdded {
            action: "a".into(),
            origin: "b".into()
        }
        .impact(),
        Impact::None
    );
}

/// `likely_renames` of OLD to `new`, as (what, from, to).
fn renames(new: &str) -> Vec<(Named, String, String)> {
    likely_renames(&load("old.toml", OLD), &load("new.toml", new))
        .into_iter()
        .map(|LikelyRename { of, from, to }| (of, from, to))
        .collect()
}

fn renamed(of: Named, from: &str, to: &str) -> (Named, String, String) {
    (of, from.into(), to.into())
}

#[test]
fn a_state_renamed_without_saying_so_is_named_with_its_new_name() {
    let new = OLD
        .replace("PARKED = \"Parked\"", "SHELVED = \"Parked\"")
        .replace("\"PARKED\"", "\"SHELVED\"");
    assert_eq!(renames(&new), [renamed(Named::State, "PARKED", "SHELVED")]);
    let hint = likely_renames(&load("old.toml", OLD), &load("new.toml", &new))[0].to_string();
    assert_eq!(
        hint,
        "state `SHELVED` has the moves `PARKED` had: if it is `PARKED` renamed, declare \
         `renamed_from = \"PARKED\"` on `SHELVED`, so that objects stored in `PARKED` read as `SHELVED`"
    );
    // Declared, it is a rename `diff` sees, and nothing is left to guess.
    let declared = new.replace(
        "SHELVED = \"Parked\"",
        "SHELVED = { description = \"Parked\", renamed_from = \"PARKED\" }",
    );
    assert_eq!(renames(&declared), []);
    // Renamed and given another way in, it no longer has PARKED's moves.
    let moved = new.replace(
        "park = { from = \"RUNNING\", to = \"SHELVED\" }",
        "park = { from = [\"RUNNING\", \"HALTED\"], to = \"SHELVED\" }",
    );
    assert_eq!(renames(&moved), []);
}

/// An action and its transition state renamed together: each has a name the
/// other spec lacks in its moves, which stands for any, so both are found.
#[test]
fn an_action_and_its_transition_state_renamed_together_are_both_found() {
    let new = OLD
        .replace(
            "STARTING = { transition = true }",
            "BOOTING = { transition = true }",
        )
        .replace(
            "start = { from = \"HALTED\", via = \"STARTING\", to = \"RUNNING\" }",
            "boot = { from = \"HALTED\", via = \"BOOTING\", to = \"RUNNING\" }",
        );
    assert_eq!(
        renames(&new),
        [
            renamed(Named::State, "STARTING", "BOOTING"),
            renamed(Named::Action, "start", "boot"),
        ]
    );
    // A state of another kind is not the same state.
    let static_state = new.replace(
        "BOOTING = { transition = true }\n",
        "BOOTING = \"Booting\"\n",
    );
    let static_state = static_state.replace(
        "boot = { from = \"HALTED\", via = \"BOOTING\", to = \"RUNNING\" }",
        "boot = { from = \"HALTED\", to = \"BOOTING\" }\nup = { from = \"BOOTING\", to = \"RUNNING\" }",
    );
    assert_eq!(renames(&static_state), []);
}

/// Two new states that could each be the removed one: neither is given.
#[test]
fn a_rename_with_two_candidates_is_not_guessed() {
    let new = OLD
        .replace("RETIRED = { terminal = true }", "SCRAPPED = { terminal = true }\nSOLD = { terminal = true }")
        .replace(
            "retire = { from = \"HALTED\", to = \"RETIRED\", roles = \"admin\" }",
            "scrap = { from = \"HALTED\", to = \"SCRAPPED\", roles = \"admin\" }\nsell = { from = \"HALTED\", to = \"SOLD\", roles = \"admin\" }",
        );
    assert_eq!(renames(&new), []);
    // With one of them, it is.
    let one = OLD
        .replace(
            "RETIRED = { terminal = true }",
            "SCRAPPED = { terminal = true }",
        )
        .replace(
            "retire = { from = \"HALTED\", to = \"RETIRED\", roles = \"admin\" }",
            "scrap = { from = \"HALTED\", to = \"SCRAPPED\", roles = \"admin\" }",
        );
    assert_eq!(
        renames(&one),
        [
            renamed(Named::State, "RETIRED", "SCRAPPED"),
            renamed(Named::Action, "retire", "scrap"),
        ]
    );
}
