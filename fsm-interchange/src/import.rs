//! What the importers share: where a place in the file is, the ways of each
//! action as a file says them, assembled into the spec's actions.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use fsm_model::{ActionDef, MachineDef, NamedDef, TargetDef};

/// A place in an imported file (a PlantUML diagram, an XState config, an SCXML
/// document) that the importer could not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What was expected, and what was found.
    pub message: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ImportError {}

/// A place in an imported file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

/// Where each line of a text starts, to tell a byte offset's line and column
/// without reading the text up to it (an importer places every transition).
pub(crate) struct Lines<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        let breaks = text.match_indices('\n').map(|(at, _)| at + 1);
        Lines {
            text,
            starts: std::iter::once(0).chain(breaks).collect(),
        }
    }

    /// The place `offset` bytes into the text.
    pub(crate) fn pos(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&start| start <= offset);
        let start = self.starts[line - 1];
        let column = self
            .text
            .get(start..offset)
            .map_or(0, |l| l.chars().count())
            + 1;
        Pos { line, column }
    }
}

impl Pos {
    /// An error here.
    pub(crate) fn error(self, message: impl Into<String>) -> ImportError {
        ImportError {
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }
}

/// What an action carries besides its moves: what the format says of its
/// guards, and what `fsm export` wrote of the rest.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Carried {
    pub(crate) roles: Vec<String>,
    pub(crate) guards: Vec<String>,
    pub(crate) hidden: bool,
    pub(crate) deadline: Option<Duration>,
    pub(crate) description: Option<String>,
    /// The action's earlier names (`renamed_from`).
    pub(crate) renamed_from: Vec<String>,
    /// Whether the export says the action goes back to its origin
    /// (`to_origin`), rather than to a state that happens to be its only
    /// origin.
    pub(crate) to_origin: bool,
}

/// The spec's order as `fsm export` writes it, once for the machine: its
/// actions, and the origins of each action that lists them in another order
/// than the states'. Empty in a document written by hand.
#[derive(Debug, Default)]
pub(crate) struct Order {
    pub(crate) actions: Vec<String>,
    pub(crate) origins: HashMap<String, Vec<String>>,
}

/// An action from one origin, as the imported file says it.
pub(crate) struct Way {
    pub(crate) origin: String,
    /// Where the transition is written, for errors.
    pub(crate) at: Pos,
    /// The transition state it enters, if any.
    pub(crate) via: Option<String>,
    /// `None`: the action changes no state.
    pub(crate) target: Option<String>,
    pub(crate) carried: Carried,
}

/// The ways out of the table's state `origin`, which may sit in compound
/// states: those written on it, then those written on each compound state it
/// is in (`parent`, nearest first) for the events not taken nearer, as the
/// engines take an event in the innermost state with a transition for it.
/// `written(at)` reads the ways (from `origin`) written on state `at`.
pub(crate) fn inherited(
    origin: usize,
    parent: impl Fn(usize) -> Option<usize>,
    mut written: impl FnMut(usize) -> Result<Vec<(String, Way)>, ImportError>,
) -> Result<Vec<(String, Way)>, ImportError> {
    let mut ways: Vec<(String, Way)> = Vec::new();
    let mut on = Some(origin);
    while let Some(at) = on {
        let taken: HashSet<String> = ways.iter().map(|(event, _)| event.clone()).collect();
        ways.extend(
            written(at)?
                .into_iter()
                .filter(|(event, _)| !taken.contains(event)),
        );
        on = parent(at);
    }
    Ok(ways)
}

/// Refuses the second of two names a spec would read as one: states and
/// actions are compared ignoring (ASCII) case. `what` says what they name.
pub(crate) fn distinct<'n>(
    what: &str,
    names: impl IntoIterator<Item = (&'n str, Pos)>,
) -> Result<(), ImportError> {
    let mut seen: HashMap<String, &str> = HashMap::new();
    for (name, at) in names {
        if let Some(first) = seen.insert(name.to_ascii_lowercase(), name) {
            return Err(at.error(format!(
                "{what} `{name}` and `{first}` differ only in case; a spec compares names ignoring case"
            )));
        }
    }
    Ok(())
}

/// The actions, one per event, from their ways. An action has one
/// description: the first way's that has one; another way's that differs is
/// named in `left_out`.
///
/// `order` is the spec's order as `fsm export` wrote it ([`Order`]), empty
/// in a document written by hand. An exported document comes back as the
/// same table: its actions and their origins in that order, and an action
/// goes back to its origins (`to_origin`) where the export says so
/// ([`Carried::to_origin`]). In a document written by hand the actions come
/// in the order first met, an action with a transition state that goes back
/// to each of its origins is one that goes back to its origin, and a
/// transition to its own state is one that changes no state there.
pub(crate) fn assemble(
    ways: Vec<(String, Way)>,
    order: &Order,
    left_out: &mut Vec<String>,
) -> Result<Vec<ActionDef>, ImportError> {
    let mut by_action: Vec<(String, Vec<Way>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (action, way) in ways {
        match index.get(&action) {
            Some(&at) => by_action[at].1.push(way),
            None => {
                index.insert(action.clone(), by_action.len());
                by_action.push((action, vec![way]));
            }
        }
    }
    distinct(
        "events",
        by_action
            .iter()
            .map(|(name, ways)| (name.as_str(), ways[0].at)),
    )?;
    let mut actions = Vec::new();
    for (name, mut ways) in by_action {
        // A transition to its own state: in a document written by hand, an
        // action that changes no state there (as a targetless one); an
        // export writes those targetless, so in its document it is a move
        // (`to` the state it is in, which the table tells apart).
        let exported = !order.actions.is_empty();
        if !exported {
            for way in ways.iter_mut().filter(|w| w.via.is_none()) {
                if way.target.as_ref() == Some(&way.origin) {
                    way.target = None;
                }
            }
        }
        let first = &ways[0];
        let mut origins = HashSet::with_capacity(ways.len());
        origins.insert(first.origin.as_str());
        for way in &ways[1..] {
            if !origins.insert(way.origin.as_str()) {
                return Err(way.at.error(format!(
                    "event `{name}` again from `{}`; a table has one move for an action from \
                     each state",
                    way.origin
                )));
            }
            let differs = if way.via != first.via {
                Some("it enters another transition state")
            } else if way.carried.guards != first.carried.guards {
                Some("its guards differ")
            } else if way.carried.roles != first.carried.roles {
                Some("its roles differ")
            } else if way.carried.hidden != first.carried.hidden {
                Some("it is hidden from one only")
            } else if way.carried.deadline != first.carried.deadline {
                Some("its deadlines differ")
            } else if way.carried.renamed_from != first.carried.renamed_from {
                Some("its earlier names differ")
            } else if way.carried.to_origin != first.carried.to_origin {
                Some("it goes back to its origin from one only")
            } else {
                None
            };
            if let Some(differs) = differs {
                return Err(way.at.error(format!(
                    "event `{name}` from `{}` is not the action it is from `{}`: {differs}; an \
                     action is the same from every origin",
                    way.origin, first.origin
                )));
            }
        }
        // The spec's order of origins, where the export wrote it (stable:
        // origins it does not name, added by hand, after those it names).
        if let Some(origins) = order.origins.get(&name) {
            by_place(&mut ways, origins, |w| &w.origin);
        }
        let first = &ways[0];
        let from: Vec<String> = ways.iter().map(|w| w.origin.clone()).collect();
        // An action that moves from some origins stays where it is in the
        // others (`go` to `A` from `A` and `B`): its target there is its origin.
        let targets: Vec<(String, String)> = if ways.iter().any(|w| w.target.is_some()) {
            let target = |w: &Way| w.target.clone().unwrap_or_else(|| w.origin.clone());
            ways.iter().map(|w| (w.origin.clone(), target(w))).collect()
        } else {
            Vec::new()
        };
        let back_to_origins = targets.iter().all(|(o, t)| o == t);
        if first.carried.to_origin && !(first.via.is_some() && back_to_origins) {
            return Err(first.at.error(format!(
                "event `{name}` is said to go back to its origin, but it does not from each \
                 of them through a transition state"
            )));
        }
        let inferred = !exported && first.via.is_some() && back_to_origins;
        let to = if targets.is_empty() {
            TargetDef::Unset
        } else if first.carried.to_origin || inferred {
            TargetDef::Origin
        } else if targets.iter().all(|(_, t)| *t == targets[0].1) {
            TargetDef::State(targets[0].1.clone())
        } else {
            TargetDef::PerOrigin(targets)
        };
        let mut carried = first.carried.clone();
        // The first description given; another that differs is named.
        let described = ways.iter().find(|w| w.carried.description.is_some());
        if let Some(kept) = described {
            carried.description = kept.carried.description.clone();
            for way in ways.iter().filter(|w| w.carried.description.is_some()) {
                if way.carried.description != carried.description {
                    left_out.push(format!(
                        "the description of `{name}` from `{}` (the action keeps the one from `{}`)",
                        way.origin, kept.origin
                    ));
                }
            }
        }
        actions.push(ActionDef {
            name,
            from,
            via: first.via.clone(),
            to,
            roles: carried.roles,
            guards: carried.guards,
            hidden: carried.hidden,
            deadline: carried.deadline,
            renamed_from: carried.renamed_from,
            description: carried.description,
        });
    }
    // An action's id is its place in the spec. Actions the order does not
    // name (added by hand) come after those it names, and names without an
    // action are passed over.
    by_place(&mut actions, &order.actions, |a| &a.name);
    Ok(actions)
}

/// Sorts `items` by the place of each one's name (`name`) in `order`, those
/// it does not name after those it names; stable, so the unnamed keep the
/// order they were in. Linear in the names and `order` (one lookup each).
fn by_place<T>(items: &mut [T], order: &[String], name: impl Fn(&T) -> &str) {
    if order.is_empty() {
        return;
    }
    let mut places: HashMap<&str, usize> = HashMap::with_capacity(order.len());
    for (place, n) in order.iter().enumerate() {
        places.entry(n.as_str()).or_insert(place);
    }
    items.sort_by_cached_key(|item| places.get(name(item)).copied().unwrap_or(order.len()));
}

/// Declares the roles and guards the actions and owners name that the
/// machine's `meta` did not (all of them, for a config written by hand).
pub(crate) fn declare_used(def: &mut MachineDef, format: &str) {
    let note = format!("Imported from {format}: say what must hold");
    let owners = def.states.iter().flat_map(|s| {
        let removers = s.remove.iter().flatten().cloned();
        s.owner.clone().into_iter().chain(removers)
    });
    let roles: Vec<String> = def
        .actions
        .iter()
        .flat_map(|a| a.roles.clone())
        .chain(owners)
        .collect();
    for role in roles {
        if !def.roles.iter().any(|r| r.name == role) {
            def.roles.push(NamedDef {
                name: role,
                description: Some(format!("Imported from {format}")),
                cel: None,
            });
        }
    }
    let guards: Vec<String> = def.actions.iter().flat_map(|a| a.guards.clone()).collect();
    for guard in guards {
        if !def.guards.iter().any(|g| g.name == guard) {
            def.guards.push(NamedDef {
                name: guard,
                description: Some(note.clone()),
                cel: None,
            });
        }
    }
}

/// The spec of `def`, under `comments` and a line naming what the file held
/// that was `left_out`.
pub(crate) fn written(
    def: &MachineDef,
    mut comments: Vec<String>,
    mut left_out: Vec<String>,
) -> String {
    if !left_out.is_empty() {
        left_out.sort();
        left_out.dedup();
        comments.push(String::new());
        comments.push(format!(
            "Left out (a table has no place for them): {}.",
            left_out.join(", ")
        ));
    }
    crate::spec_text::write(def, &comments)
}
