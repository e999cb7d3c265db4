//! Specs change in production: what a change means for stored objects.
//!
//! [`fingerprint`] names one version of a machine's meaning; persistent stores keep
//! it beside each record, to say which version of the spec wrote it. [`diff`] says
//! what a change of spec breaks, for objects already stored and for callers, the
//! way cargo-semver-checks reports an API change (`fsm diff OLD NEW`), and
//! [`likely_renames`] which of its removals look like renames left undeclared.

use std::collections::HashMap;
use std::fmt;

use crate::{Machine, StateId};

/// A fingerprint of what `machine` allows: its name, its states (kind, terminal)
/// and its rules, by name and in no particular order, hashed (64-bit FNV-1a, as 16
/// hex digits). Reordering a spec keeps it; any change of meaning changes it.
///
/// ```
/// let a = fsm_core::spec::load_str("a.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = \"a\"\nB = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"B\" }\n")?;
/// let b = fsm_core::spec::load_str("b.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nB = { terminal = true }\nA = \"a\"\n[actions]\ngo = { from = \"A\", to = \"B\" }\n")?;
/// assert_eq!(fsm_core::evolve::fingerprint(&a), fsm_core::evolve::fingerprint(&b));
/// # Ok::<(), fsm_core::spec::SpecError>(())
/// ```
pub fn fingerprint(machine: &Machine) -> String {
    let mut lines: Vec<String> = machine
        .states()
        .iter()
        .map(|s| format!("state {} {:?} {}", s.name, s.kind, s.terminal))
        .collect();
    for a in machine.action_ids() {
        let action = machine.action(a);
        let mut rules: Vec<String> = machine
            .rules_of(a)
            .map(|r| {
                let (o, t) = (&machine.state(r.origin).name, &machine.state(r.target).name);
                format!("{o}>{t}")
            })
            .collect();
        rules.sort();
        let via = action.via.map_or("", |v| &*machine.state(v).name);
        lines.push(format!(
            "action {} via {via} hidden {} {}",
            action.name,
            action.hidden,
            rules.join(",")
        ));
    }
    lines.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in machine.name().bytes().chain(lines.join("\n").into_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Whom a change of spec breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Impact {
    /// No one: the change adds, or loosens.
    None,
    /// Callers: code, actors or scripts that name what changed, or rely on a move
    /// that is gone or now needs more.
    Callers,
    /// Objects already stored: they would not read back, or would read as
    /// something else.
    StoredObjects,
}

/// One difference between two versions of a machine, states and actions matched
/// by name or by a declared `renamed_from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A state was added.
    StateAdded(String),
    /// A state was removed, with no new state declaring it as an earlier name.
    StateRemoved(String),
    /// A state was renamed (declared with `renamed_from`).
    StateRenamed {
        /// The old name.
        from: String,
        /// The new one.
        to: String,
    },
    /// A state became a transition state, or static.
    StateKind {
        /// The state (its new name).
        state: String,
        /// Whether it is now a transition state.
        transition: bool,
    },
    /// A state became terminal.
    StateTerminal(String),
    /// A state's owner changed.
    Owner {
        /// The state.
        state: String,
        /// The old owner.
        from: Option<String>,
        /// The new one.
        to: Option<String>,
    },
    /// Who may remove an object in a state changed (`None`: no one; an empty
    /// list: anyone; else those roles).
    Removal {
        /// The state.
        state: String,
        /// Who could.
        from: Option<Vec<String>>,
        /// Who may now.
        to: Option<Vec<String>>,
    },
    /// The initial state changed.
    Initial {
        /// The old one.
        from: String,
        /// The new one.
        to: String,
    },
    /// An action was added.
    ActionAdded(String),
    /// An action was removed.
    ActionRemoved(String),
    /// An action was renamed (declared with `renamed_from`).
    ActionRenamed {
        /// The old name.
        from: String,
        /// The new one.
        to: String,
    },
    /// An action no longer starts from a state it started from.
    MoveRemoved {
        /// The action.
        action: String,
        /// The origin.
        origin: String,
    },
    /// An action now starts from a state it did not.
    MoveAdded {
        /// The action.
        action: String,
        /// The origin.
        origin: String,
    },
    /// An action started from a state ends somewhere else.
    TargetChanged {
        /// The action.
        action: String,
        /// The origin.
        origin: String,
        /// Where it ended.
        from: String,
        /// Where it ends now.
        to: String,
    },
    /// An action needs a role it did not (or needed none and now does).
    RoleAdded {
        /// The action.
        action: String,
        /// The role.
        role: String,
    },
    /// An action checks a guard it did not.
    GuardAdded {
        /// The action.
        action: String,
        /// The guard.
        guard: String,
    },
}

impl Change {
    /// The change's kind as a stable name (`fsm diff --json`'s `kind`):
    /// `state-added`, `state-removed`, `state-renamed`, `state-kind`,
    /// `state-terminal`, `owner`, `removal`, `initial`, `action-added`,
    /// `action-removed`, `action-renamed`, `move-removed`, `move-added`,
    /// `target-changed`, `role-added`, `guard-added`.
    pub fn kind(&self) -> &'static str {
        match self {
            Change::StateAdded(_) => "state-added",
            Change::StateRemoved(_) => "state-removed",
            Change::StateRenamed { .. } => "state-renamed",
            Change::StateKind { .. } => "state-kind",
            Change::StateTerminal(_) => "state-terminal",
            Change::Owner { .. } => "owner",
            Change::Removal { .. } => "removal",
            Change::Initial { .. } => "initial",
            Change::ActionAdded(_) => "action-added",
            Change::ActionRemoved(_) => "action-removed",
            Change::ActionRenamed { .. } => "action-renamed",
            Change::MoveRemoved { .. } => "move-removed",
            Change::MoveAdded { .. } => "move-added",
            Change::TargetChanged { .. } => "target-changed",
            Change::RoleAdded { .. } => "role-added",
            Change::GuardAdded { .. } => "guard-added",
        }
    }

    /// Whom the change breaks.
    pub fn impact(&self) -> Impact {
        match self {
            Change::StateRemoved(_) | Change::StateKind { .. } => Impact::StoredObjects,
            Change::StateAdded(_) | Change::ActionAdded(_) | Change::MoveAdded { .. } => {
                Impact::None
            }
            Change::ActionRemoved(_) => Impact::StoredObjects,
            // Loosened: whoever could remove still can.
            Change::Removal {
                from, to: Some(to), ..
            } if to.is_empty()
                || from
                    .as_ref()
                    .is_none_or(|from| !from.is_empty() && from.iter().all(|r| to.contains(r))) =>
            {
                Impact::None
            }
            _ => Impact::Callers,
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::StateAdded(s) => write!(f, "state `{s}` was added"),
            Change::StateRemoved(s) => write!(
                f,
                "state `{s}` was removed: objects stored in it can no longer be read (if it was renamed, declare `renamed_from`)"
            ),
            Change::StateRenamed { from, to } => write!(
                f,
                "state `{from}` was renamed `{to}`: stored objects read as `{to}`, callers must use the new name"
            ),
            Change::StateKind {
                state,
                transition: true,
            } => write!(
                f,
                "state `{state}` became a transition state: objects stored in it now read as busy"
            ),
            Change::StateKind { state, .. } => write!(
                f,
                "state `{state}` became static: objects stored in it now read as at rest, their action forgotten"
            ),
            Change::StateTerminal(s) => {
                write!(f, "state `{s}` became terminal: nothing leaves it now")
            }
            Change::Owner { state, from, to } => write!(
                f,
                "state `{state}` is owned by {} (was {})",
                to.as_deref().unwrap_or("no one"),
                from.as_deref().unwrap_or("no one")
            ),
            Change::Removal { state, from, to } => {
                let who = |roles: &Option<Vec<String>>| match roles.as_deref() {
                    None => "no one".to_owned(),
                    Some([]) => "anyone".to_owned(),
                    Some(roles) => format!("the role {}", roles.join(" or ")),
                };
                write!(
                    f,
                    "an object in `{state}` may be removed by {} (was {})",
                    who(to),
                    who(from)
                )
            }
            Change::Initial { from, to } => {
                write!(f, "new objects start in `{to}` (was `{from}`)")
            }
            Change::ActionAdded(a) => write!(f, "action `{a}` was added"),
            Change::ActionRemoved(a) => write!(
                f,
                "action `{a}` was removed: objects it holds and histories that name it can no longer be read"
            ),
            Change::ActionRenamed { from, to } => {
                write!(
                    f,
                    "action `{from}` was renamed `{to}`: callers must use the new name"
                )
            }
            Change::MoveRemoved { action, origin } => {
                write!(f, "`{action}` no longer starts from `{origin}`")
            }
            Change::MoveAdded { action, origin } => {
                write!(f, "`{action}` now starts from `{origin}`")
            }
            Change::TargetChanged {
                action,
                origin,
                from,
                to,
            } => write!(
                f,
                "`{action}` from `{origin}` ends in `{to}` (was `{from}`)"
            ),
            Change::RoleAdded { action, role } => {
                write!(f, "`{action}` needs the role `{role}` it did not")
            }
            Change::GuardAdded { action, guard } => {
                write!(f, "`{action}` checks the guard `{guard}` it did not")
            }
        }
    }
}

/// The states and actions of `old` matched in `new`: same name, or a new one that
/// declares the old name in `renamed_from`.
fn matched<'a, T>(
    old: &'a [T],
    new: &'a [T],
    name: impl Fn(&'a T) -> &'a str,
    renames: impl Fn(&'a T) -> Vec<&'a str>,
) -> Vec<Option<usize>> {
    // By name, then by an earlier name; the first of `new` to claim one wins.
    let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(new.len());
    let mut by_earlier: HashMap<&str, usize> = HashMap::new();
    for (i, x) in new.iter().enumerate() {
        by_name.entry(name(x)).or_insert(i);
        for earlier in renames(x) {
            by_earlier.entry(earlier).or_insert(i);
        }
    }
    old.iter()
        .map(|o| {
            let n = name(o);
            by_name.get(n).or_else(|| by_earlier.get(n)).copied()
        })
        .collect()
}

/// For each of `len` states (actions) of the new spec, the old one matched to
/// it, if any: `matching` read the other way.
fn reversed(matching: &[Option<usize>], len: usize) -> Vec<Option<usize>> {
    let mut old_of = vec![None; len];
    for (o, n) in matching.iter().enumerate() {
        if let Some(n) = *n {
            old_of[n].get_or_insert(o);
        }
    }
    old_of
}

/// Which of `old`'s states and actions are which of `new`'s (by index).
struct Matching {
    states: Vec<Option<usize>>,
    actions: Vec<Option<usize>>,
}

impl Matching {
    fn of(old: &Machine, new: &Machine) -> Self {
        Matching {
            states: matched(
                old.states(),
                new.states(),
                |s| &s.name,
                |s| s.renamed_from.iter().map(|r| &**r).collect(),
            ),
            actions: matched(
                old.actions(),
                new.actions(),
                |a| &a.name,
                |a| a.renamed_from.iter().map(|r| &**r).collect(),
            ),
        }
    }
}

/// Every difference between `old` and `new` that matters to stored objects or to
/// callers, in the order of `old`'s states, then its actions, then what `new` adds.
/// Reordering states or actions is not a difference.
///
/// ```
/// use fsm_core::evolve::{diff, Impact};
/// let old = fsm_core::spec::load_str("old.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = \"a\"\nB = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"B\" }\n")?;
/// let new = fsm_core::spec::load_str("new.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = \"a\"\nDONE = { terminal = true, renamed_from = \"B\" }\n[actions]\ngo = { from = \"A\", to = \"DONE\" }\n")?;
/// let changes = diff(&old, &new);
/// assert_eq!(changes.len(), 1);
/// assert_eq!(changes[0].impact(), Impact::Callers);
/// assert_eq!(changes[0].to_string(), "state `B` was renamed `DONE`: stored objects read as `DONE`, callers must use the new name");
/// # Ok::<(), fsm_core::spec::SpecError>(())
/// ```
pub fn diff(old: &Machine, new: &Machine) -> Vec<Change> {
    let mut out = Vec::new();
    let Matching { states, actions } = Matching::of(old, new);
    let old_state_of = reversed(&states, new.states().len());
    let old_action_of = reversed(&actions, new.actions().len());
    for (o, m) in old.states().iter().zip(&states) {
        let Some(n) = m.map(|i| &new.states()[i]) else {
            out.push(Change::StateRemoved(o.name.to_string()));
            continue;
        };
        if n.name != o.name {
            out.push(Change::StateRenamed {
                from: o.name.to_string(),
                to: n.name.to_string(),
            });
        }
        if n.kind != o.kind {
            out.push(Change::StateKind {
                state: n.name.to_string(),
                transition: n.is_transition(),
            });
        }
        if n.terminal && !o.terminal {
            out.push(Change::StateTerminal(n.name.to_string()));
        }
        if n.owner != o.owner {
            out.push(Change::Owner {
                state: n.name.to_string(),
                from: o.owner.as_ref().map(|x| x.to_string()),
                to: n.owner.as_ref().map(|x| x.to_string()),
            });
        }
        if n.remove != o.remove {
            let roles = |r: &Option<std::borrow::Cow<'static, [fsm_model::Text]>>| {
                r.as_ref()
                    .map(|r| r.iter().map(|x| x.to_string()).collect())
            };
            out.push(Change::Removal {
                state: n.name.to_string(),
                from: roles(&o.remove),
                to: roles(&n.remove),
            });
        }
    }
    let old_initial = states[old.initial().0];
    if old_initial != Some(new.initial().0) {
        out.push(Change::Initial {
            from: old.state(old.initial()).name.to_string(),
            to: new.state(new.initial()).name.to_string(),
        });
    }
    for (a, m) in old.action_ids().zip(&actions) {
        let o = old.action(a);
        let Some(na) = m.map(crate::ActionId) else {
            out.push(Change::ActionRemoved(o.name.to_string()));
            continue;
        };
        let n = new.action(na);
        if n.name != o.name {
            out.push(Change::ActionRenamed {
                from: o.name.to_string(),
                to: n.name.to_string(),
            });
        }
        for rule in old.rules_of(a) {
            let origin = old.state(rule.origin).name.to_string();
            let Some(new_origin) = states[rule.origin.0].map(StateId) else {
                continue; // reported with its state
            };
            match new.rule(na, new_origin) {
                None => out.push(Change::MoveRemoved {
                    action: n.name.to_string(),
                    origin,
                }),
                Some(r) if Some(r.target.0) != states[rule.target.0] => {
                    out.push(Change::TargetChanged {
                        action: n.name.to_string(),
                        origin,
                        from: old.state(rule.target).name.to_string(),
                        to: new.state(r.target).name.to_string(),
                    })
                }
                Some(_) => {}
            }
        }
        for r in new.rules_of(na) {
            let was = old_state_of[r.origin.0]
                .is_some_and(|old_origin| old.rule(a, StateId(old_origin)).is_some());
            if !was {
                out.push(Change::MoveAdded {
                    action: n.name.to_string(),
                    origin: new.state(r.origin).name.to_string(),
                });
            }
        }
        // Roles narrow who may act; none means anyone.
        for role in n.roles.iter().filter(|r| !o.roles.contains(r)) {
            out.push(Change::RoleAdded {
                action: n.name.to_string(),
                role: role.to_string(),
            });
        }
        let old_guards: Vec<&str> = o.guards.iter().map(|&g| &*old.guard(g).name).collect();
        for &g in n.guards.iter() {
            let guard = &new.guard(g).name;
            if !old_guards.contains(&&**guard) {
                out.push(Change::GuardAdded {
                    action: n.name.to_string(),
                    guard: guard.to_string(),
                });
            }
        }
    }
    for (i, s) in new.states().iter().enumerate() {
        if old_state_of[i].is_none() {
            out.push(Change::StateAdded(s.name.to_string()));
        }
    }
    for (i, a) in new.actions().iter().enumerate() {
        if old_action_of[i].is_none() {
            out.push(Change::ActionAdded(a.name.to_string()));
        }
    }
    out
}

/// What a [`LikelyRename`] renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Named {
    /// A state.
    State,
    /// An action.
    Action,
}

impl Named {
    /// `state` or `action`.
    pub fn as_str(self) -> &'static str {
        match self {
            Named::State => "state",
            Named::Action => "action",
        }
    }
}

/// A state or action of the old spec that [`diff`] reports removed, beside one
/// of the new spec it reports added with the same moves: most likely the same
/// one, renamed without `renamed_from`, which stored objects need to read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikelyRename {
    /// A state or an action.
    pub of: Named,
    /// The old name.
    pub from: String,
    /// The new name.
    pub to: String,
}

impl fmt::Display for LikelyRename {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LikelyRename { of, from, to } = self;
        let keeps = match of {
            Named::State => format!("objects stored in `{from}` read as `{to}`"),
            Named::Action => {
                format!("objects `{from}` holds and histories that name it read as `{to}`")
            }
        };
        let what = of.as_str();
        write!(
            f,
            "{what} `{to}` has the moves `{from}` had: if it is `{from}` renamed, declare \
             `renamed_from = \"{from}\"` on `{to}`, so that {keeps}"
        )
    }
}

/// The renames [`diff`] could not see: each state (action) of `old` it reports
/// removed, paired with the one state (action) of `new` it reports added that
/// has the same moves, the same kind and, for an action, the same transition
/// state and visibility. A move is compared by the names both specs share, and
/// any name either spec alone has stands for any other, so a state and the
/// actions through it renamed together are each found. A pair is given only
/// when neither has another candidate, and a state or action with no move is
/// never paired.
///
/// ```
/// use fsm_core::evolve::{likely_renames, LikelyRename, Named};
/// let old = fsm_core::spec::load_str("old.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = \"a\"\nB = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"B\" }\n")?;
/// let new = fsm_core::spec::load_str("new.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = \"a\"\nDONE = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"DONE\" }\n")?;
/// assert_eq!(
///     likely_renames(&old, &new),
///     [LikelyRename { of: Named::State, from: "B".into(), to: "DONE".into() }]
/// );
/// # Ok::<(), fsm_core::spec::SpecError>(())
/// ```
pub fn likely_renames(old: &Machine, new: &Machine) -> Vec<LikelyRename> {
    let Matching { states, actions } = Matching::of(old, new);
    // Each spec's states and actions by their index in the new spec, `OTHER`
    // for a name only that spec has (removed, or added): it stands for any.
    let old_names = |matching: &[Option<usize>]| -> Vec<usize> {
        matching.iter().map(|m| m.unwrap_or(OTHER)).collect()
    };
    let new_names = |matching: &[Option<usize>], len: usize| -> Vec<usize> {
        let old_of = reversed(matching, len);
        (0..len).map(|n| old_of[n].map_or(OTHER, |_| n)).collect()
    };
    let sides = [
        (old, old_names(&states), old_names(&actions)),
        (
            new,
            new_names(&states, new.states().len()),
            new_names(&actions, new.actions().len()),
        ),
    ];
    // Every removed (added) state's and action's moves, itself named `ITSELF`;
    // the same moves and flags on both sides are a candidate pair.
    let mut groups: HashMap<Signature, [Vec<usize>; 2]> = HashMap::new();
    for (side, (m, state, action)) in sides.iter().enumerate() {
        let mut of_state: HashMap<usize, Vec<Move>> = HashMap::new();
        let mut of_action: HashMap<usize, Vec<Move>> = HashMap::new();
        for r in m.rules() {
            let named = |itself: Option<usize>| {
                let name = |s: StateId| match Some(s.0) == itself {
                    true => ITSELF,
                    false => state[s.0],
                };
                let action = match itself {
                    None => ITSELF,
                    Some(_) => action[r.action.0],
                };
                (action, name(r.origin), r.via.map(name), name(r.target))
            };
            let mut touched = vec![r.origin.0, r.target.0];
            touched.extend(r.via.map(|v| v.0));
            touched.sort_unstable();
            touched.dedup();
            for s in touched.into_iter().filter(|&s| state[s] == OTHER) {
                of_state.entry(s).or_default().push(named(Some(s)));
            }
            if action[r.action.0] == OTHER {
                of_action.entry(r.action.0).or_default().push(named(None));
            }
        }
        for (s, mut moves) in of_state {
            moves.sort_unstable();
            let st = m.state(StateId(s));
            let flags = [st.is_transition(), st.terminal];
            groups.entry((Named::State, flags, moves)).or_default()[side].push(s);
        }
        for (a, mut moves) in of_action {
            moves.sort_unstable();
            let ac = m.action(crate::ActionId(a));
            let flags = [ac.hidden, ac.via.is_some()];
            groups.entry((Named::Action, flags, moves)).or_default()[side].push(a);
        }
    }
    let name = |m: &Machine, of: Named, i: usize| match of {
        Named::State => m.states()[i].name.to_string(),
        Named::Action => m.actions()[i].name.to_string(),
    };
    let mut renames: Vec<(usize, LikelyRename)> = groups
        .into_iter()
        .filter_map(
            |((of, _, _), [olds, news])| match (olds.as_slice(), news.as_slice()) {
                (&[o], &[n]) => Some((
                    // In the old spec's order: its states, then its actions.
                    o + if of == Named::Action {
                        old.states().len()
                    } else {
                        0
                    },
                    LikelyRename {
                        of,
                        from: name(old, of, o),
                        to: name(new, of, n),
                    },
                )),
                _ => None,
            },
        )
        .collect();
    renames.sort_by_key(|(place, _)| *place);
    renames.into_iter().map(|(_, rename)| rename).collect()
}

/// A move in the new spec's indices: its action, origin, transition state (if
/// it has one) and target; [`OTHER`] where the name is one only its own spec
/// has, [`ITSELF`] where it is the state or action the move is listed for.
type Move = (usize, usize, Option<usize>, usize);

/// What a removed or added state (action) is compared by: the kind, two flags
/// (a state's transition and terminal; an action's hidden and transition
/// state), its moves, sorted.
type Signature = (Named, [bool; 2], Vec<Move>);

/// A name only one of the two specs has: it stands for any such name.
const OTHER: usize = usize::MAX;

/// The state or action whose moves are listed.
const ITSELF: usize = usize::MAX - 1;
