//! Specs of any shape, generated: several origins in any order, targets per
//! origin, transition states (shared too), actions that go back to their
//! origin, stay where they are (or move to the state they are in), stay in
//! some origins and move from others, hidden actions, roles, guards with
//! CEL, owners, removals, deadlines, earlier names and descriptions. Each one
//! checks.
//!
//! (A spec that says one thing in another way than the exports write it back
//! is left out, as the crate says: a per-origin `to` with one target for all,
//! or in another order than `from`.)

// Each test file uses what it needs.
#![allow(dead_code)]

use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::sample::{Index, subsequence};

/// Where an action goes, besides its origins and transition state.
#[derive(Debug, Clone)]
enum To {
    /// Nowhere: it changes no state (hidden, maybe).
    Stays { hidden: bool },
    /// One state, by index among the static states.
    State(Index),
    /// Back to each origin, through a transition state.
    Origin,
    /// A state per origin, by index.
    PerOrigin(Vec<Index>),
}

#[derive(Debug, Clone)]
struct Action {
    /// Indexes among the static states that are not terminal, in any order.
    from: Vec<Index>,
    via: Option<Index>,
    to: To,
    roles: Vec<&'static str>,
    guards: Vec<&'static str>,
    renamed: bool,
    described: bool,
    deadline: Option<u8>,
}

#[derive(Debug, Clone)]
pub struct Spec {
    statics: usize,
    terminal: bool,
    transitions: usize,
    roles: Vec<&'static str>,
    owners: Vec<Option<Index>>,
    /// Per static state: no removal (0), by anyone (1), by one role (2) or by
    /// two (3), the owner's among them when the state has one.
    removals: Vec<u8>,
    renamed_states: Vec<bool>,
    deadlines: Vec<Option<u8>>,
    actions: Vec<Action>,
    described: bool,
}

/// Roles and guards may be named with spaces and other printable characters.
const ROLES: [&str; 3] = ["ops", "cloud admin", r#"on-call "night", (100%)"#];
const GUARDS: [&str; 2] = ["quota", "human [approval]"];

fn action() -> impl Strategy<Value = Action> {
    let to = prop_oneof![
        any::<bool>().prop_map(|hidden| To::Stays { hidden }),
        any::<Index>().prop_map(To::State),
        Just(To::Origin),
        prop::collection::vec(any::<Index>(), 6).prop_map(To::PerOrigin),
    ];
    (
        prop::collection::vec(any::<Index>(), 1..4),
        prop::option::of(any::<Index>()),
        to,
        subsequence(ROLES.to_vec(), 0..=3),
        subsequence(GUARDS.to_vec(), 0..=2),
        any::<(bool, bool)>(),
        prop::option::of(1..100u8),
    )
        .prop_map(
            |(from, via, to, roles, guards, (renamed, described), deadline)| Action {
                from,
                via,
                to,
                roles,
                guards,
                renamed,
                described,
                deadline,
            },
        )
}

/// Any spec (its parts; [`text`] writes it).
pub fn spec() -> impl Strategy<Value = Spec> {
    (2..6usize, any::<bool>(), 0..3usize).prop_flat_map(|(statics, terminal, transitions)| {
        let states = (
            Just(ROLES.to_vec()).prop_shuffle(),
            prop::collection::vec(prop::option::of(any::<Index>()), statics),
            prop::collection::vec(any::<bool>(), statics),
            prop::collection::vec(prop::option::of(1..100u8), transitions),
            prop::collection::vec(0..4u8, statics),
        );
        let actions = (prop::collection::vec(action(), 0..6), any::<bool>());
        (states, actions).prop_map(move |(states, (actions, described))| {
            let (roles, owners, renamed_states, deadlines, removals) = states;
            Spec {
                statics,
                terminal,
                transitions,
                roles,
                owners,
                removals,
                renamed_states,
                deadlines,
                actions,
                described,
            }
        })
    })
}

/// A TOML list of names.
fn list<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{:?}", n.as_ref())).collect();
    format!("[{}]", quoted.join(", "))
}

/// The spec's text: the static states `S0`.. (the last terminal, maybe) in a
/// ring, so that each has a way out and all are reachable; the transition
/// states `T0`.., each passed through by an action of its own, and by any
/// generated action that names it.
pub fn text(spec: &Spec) -> String {
    let name = |i: usize| format!("S{i}");
    // The states an action may leave: all but a terminal one.
    let open = spec.statics - usize::from(spec.terminal);
    let mut out = String::from("[machine]\nname = \"any\"\ninitial = \"S0\"\n");
    if spec.described {
        out.push_str("description = \"A generated machine\"\n");
    }
    let _ = writeln!(out, "\n[roles]");
    for role in &spec.roles {
        let _ = writeln!(out, "{role:?} = {:?}", format!("The {role}"));
    }
    out.push_str("\n[guards]\nquota = { description = \"Quota left\", cel = \"object.data.quota > 0\" }\n\"human [approval]\" = \"Approved by a human\"\n");
    out.push_str("\n[states]\n");
    for s in 0..spec.statics {
        let mut fields = vec![format!("description = \"state {s}\"")];
        if spec.terminal && s == spec.statics - 1 {
            fields.push("terminal = true".into());
        } else if let Some(owner) = &spec.owners[s] {
            fields.push(format!("owner = {:?}", owner.get(&spec.roles)));
        }
        // The owner's role first, if the state has one (else anyone's).
        let owner = (spec.owners[s].as_ref())
            .filter(|_| !(spec.terminal && s == spec.statics - 1))
            .map_or(spec.roles[0], |o| *o.get(&spec.roles));
        let other = *spec.roles.iter().find(|r| **r != owner).unwrap();
        match spec.removals[s] {
            0 => {}
            1 => fields.push("remove = true".into()),
            2 => fields.push(format!("remove = {owner:?}")),
            _ => fields.push(format!("remove = {}", list(&[other, owner]))),
        }
        if spec.renamed_states[s] {
            fields.push(format!("renamed_from = \"OLD{s}\""));
        }
        let _ = writeln!(out, "{} = {{ {} }}", name(s), fields.join(", "));
    }
    for t in 0..spec.transitions {
        let deadline = (spec.deadlines[t])
            .map(|d| format!(", deadline = \"{d}s\""))
            .unwrap_or_default();
        let _ = writeln!(out, "T{t} = {{ transition = true{deadline} }}");
    }
    out.push_str("\n[actions]\n");
    for s in 0..open {
        let _ = writeln!(
            out,
            "ring{s} = {{ from = \"{}\", to = \"{}\" }}",
            name(s),
            name((s + 1) % spec.statics)
        );
    }
    for t in 0..spec.transitions {
        let _ = writeln!(
            out,
            "through{t} = {{ from = \"S0\", via = \"T{t}\", to = \"S1\" }}"
        );
    }
    for (a, action) in spec.actions.iter().enumerate() {
        // Distinct origins, in the order drawn.
        let mut from: Vec<usize> = Vec::new();
        for i in &action.from {
            let origin = i.index(open);
            if !from.contains(&origin) {
                from.push(origin);
            }
        }
        let via = (spec.transitions > 0)
            .then_some(action.via)
            .flatten()
            .map(|i| i.index(spec.transitions));
        let mut fields = vec![format!(
            "from = {}",
            list(&from.iter().map(|&s| name(s)).collect::<Vec<_>>())
        )];
        if let Some(via) = via {
            fields.push(format!("via = \"T{via}\""));
        }
        let mut hidden = false;
        match &action.to {
            // Through a transition state, staying is going back to the origin.
            To::Stays { .. } | To::Origin if via.is_some() => {
                fields.push("to_origin = true".into())
            }
            To::Stays { hidden: h } => hidden = *h,
            // Without a transition state, back to the origin is staying.
            To::Origin => {}
            To::State(i) => fields.push(format!("to = \"{}\"", name(i.index(spec.statics)))),
            To::PerOrigin(targets) => {
                let targets: Vec<usize> = (from.iter().zip(targets))
                    .map(|(_, i)| i.index(spec.statics))
                    .collect();
                // (One target for all is written as one: see the module.)
                if targets.iter().all(|&t| t == targets[0]) {
                    fields.push(format!("to = \"{}\"", name(targets[0])));
                } else {
                    let pairs: Vec<String> = (from.iter().zip(&targets))
                        .map(|(&o, &t)| format!("{} = \"{}\"", name(o), name(t)))
                        .collect();
                    fields.push(format!("to = {{ {} }}", pairs.join(", ")));
                }
            }
        }
        if hidden {
            fields.push("hidden = true".into());
        }
        if !action.roles.is_empty() {
            fields.push(format!("roles = {}", list(&action.roles)));
        }
        if !action.guards.is_empty() {
            fields.push(format!("guards = {}", list(&action.guards)));
        }
        if action.renamed {
            fields.push(format!("renamed_from = \"old{a}\""));
        }
        if action.described {
            fields.push(format!("description = \"Action {a}\""));
        }
        if let Some(d) = action.deadline {
            fields.push(format!("deadline = \"{d}s\""));
        }
        let _ = writeln!(out, "a{a} = {{ {} }}", fields.join(", "));
    }
    out
}

/// `n` specs' texts, the same ones on every run.
pub fn samples(n: usize) -> Vec<String> {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    (0..n)
        .map(|_| text(&spec().new_tree(&mut runner).unwrap().current()))
        .collect()
}
