//! W3C SCXML documents to specs.
//!
//! A flat document (top-level `<state>`s with `<transition event target>`,
//! `<final>` states) reads as it is: each event is an action, allowed from
//! every state with a transition for it. A transition state the way
//! [`scxml`](crate::scxml) writes one (a compound state with a child per way
//! in, `<action>_done` and `<action>_failed` there) reads back as the action's
//! `via`, and what it writes in its own namespace ([`FSM_NAMESPACE`]: roles,
//! guards, owners, deadlines, descriptions, hidden actions) back as the
//! spec's. Compound states flatten: each state without children is one of the
//! table's, by its id, and takes its parents' transitions for the events it
//! has none for, as SCXML does. What would change the machine's moves without
//! a table to say it (parallel or history states, a final state inside a
//! compound one, eventless transitions, events raised or sent, invoked
//! services, several targets or alternatives for one event, wildcards, an
//! event that is the `.`-prefix of another) is refused, with where it is.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::time::Duration;

use fsm_model::{MachineDef, NamedDef, StateDef, StateKind};
use roxmltree::{Document, Node};

use crate::import::{
    Carried, Lines, Order, Pos, Way, assemble, declare_used, distinct, inherited, written,
};
use crate::{FSM_NAMESPACE, ImportError};

/// The document, to say where each node is.
struct Doc<'a> {
    lines: Lines<'a>,
}

impl Doc<'_> {
    fn pos(&self, node: Node<'_, '_>) -> Pos {
        self.lines.pos(node.range().start)
    }

    /// Where the value of `node`'s attribute `name` is (the node's, if it
    /// has none).
    fn attr_pos(&self, node: Node<'_, '_>, name: &str) -> Pos {
        node.attribute_node(name)
            .map_or_else(|| self.pos(node), |a| self.lines.pos(a.range_value().start))
    }

    /// `node`'s attribute `name` in the [`FSM_NAMESPACE`], with where its
    /// value is.
    fn fsm<'n>(&self, node: Node<'n, '_>, name: &str) -> Option<(&'n str, Pos)> {
        let a = node.attribute_node((FSM_NAMESPACE, name))?;
        Some((a.value(), self.lines.pos(a.range_value().start)))
    }

    /// The names `fsm:NAME` lists on `node` (separated by spaces), if any.
    fn fsm_list(&self, node: Node<'_, '_>, name: &str) -> Vec<String> {
        self.fsm(node, name)
            .map(|(names, _)| names.split_whitespace().map(list_item).collect())
            .unwrap_or_default()
    }

    /// `fsm:NAME="true"` or `"false"` on `node`, if it is there.
    fn fsm_flag(&self, node: Node<'_, '_>, name: &str) -> Result<Option<bool>, ImportError> {
        match self.fsm(node, name) {
            None => Ok(None),
            Some(("true", _)) => Ok(Some(true)),
            Some(("false", _)) => Ok(Some(false)),
            Some((other, at)) => Err(at.error(format!(
                "expected `true` or `false` for `fsm:{name}`, found `{other}`"
            ))),
        }
    }

    /// `fsm:deadline-seconds` on `node`, if it is there.
    fn fsm_deadline(&self, node: Node<'_, '_>) -> Result<Option<Duration>, ImportError> {
        let Some((text, at)) = self.fsm(node, "deadline-seconds") else {
            return Ok(None);
        };
        let seconds = text.trim().parse::<f64>().ok();
        match seconds.and_then(|s| Duration::try_from_secs_f64(s).ok()) {
            Some(deadline) => Ok(Some(deadline)),
            None => Err(at.error(format!(
                "expected a number of seconds for `fsm:deadline-seconds`, found `{text}`"
            ))),
        }
    }

    /// The origins of an action in its spec's order, as `fsm export` writes
    /// them when that is not the states' order (`<fsm:origins action from>`).
    fn origins(&self, node: Node<'_, '_>) -> Result<(String, Vec<String>), ImportError> {
        let (Some(action), Some(from)) = (node.attribute("action"), node.attribute("from")) else {
            return Err(self
                .pos(node)
                .error("`<fsm:origins>` needs an `action` and its `from`"));
        };
        Ok((
            action.to_owned(),
            from.split_whitespace().map(list_item).collect(),
        ))
    }

    /// A role or guard `fsm export` declares (`<fsm:role name description>`).
    fn declared(&self, node: Node<'_, '_>) -> Result<NamedDef, ImportError> {
        let Some(name) = node.attribute("name") else {
            return Err(self
                .pos(node)
                .error(format!("`<fsm:{}>` needs a `name`", node.tag_name().name())));
        };
        let cel = node.attribute("cel").map(String::from);
        if cel.is_some() && node.tag_name().name() == "role" {
            return Err(self.attr_pos(node, "cel").error(format!(
                "`<fsm:role>` `{name}` has a `cel`: only a guard has one"
            )));
        }
        Ok(NamedDef {
            name: name.to_owned(),
            description: node.attribute("description").map(String::from),
            cel,
        })
    }
}

/// A name of a list that `fsm export` writes (separated by spaces): a space
/// in it written `%20`, a `%` as `%25`.
fn list_item(name: &str) -> String {
    name.replace("%20", " ").replace("%25", "%")
}

/// A state, read: one of the table's (at the top, or without children inside
/// compound states), or a compound state, which is not one.
struct State<'a, 'i> {
    def: StateDef,
    /// Where it is written.
    at: Pos,
    /// The compound state it is a child of (its place among the states).
    parent: Option<usize>,
    /// Its transitions (a static or compound state's).
    transitions: Vec<Node<'a, 'i>>,
    /// Its children (a transition state's), by id.
    children: Vec<(String, Node<'a, 'i>)>,
    /// A compound state's initial state (a child, or deeper), by id, and
    /// where it is said: `None` for a table's state.
    initial: Option<(String, Pos)>,
}

impl State<'_, '_> {
    fn is_compound(&self) -> bool {
        self.initial.is_some()
    }
}

/// What an id names: a state (its place among them), or a child of a
/// transition state (that state's place, and the child).
#[derive(Clone, Copy)]
enum Place<'a, 'i> {
    Top(usize),
    Child(usize, Node<'a, 'i>),
}

/// The table's state that entering `at` enters: itself, or for a compound
/// state its initial child's, in turn.
fn first_leaf(
    states: &[State<'_, '_>],
    ids: &HashMap<&str, Place<'_, '_>>,
    mut at: usize,
) -> usize {
    let initial = |at: usize| states[at].initial.as_ref().map(|(id, _)| id.as_str());
    while let Some(Place::Top(child)) = initial(at).and_then(|c| ids.get(c)) {
        at = *child;
    }
    at
}

/// Every state's id, compound states', table states' and children of
/// transition states', each once: SCXML's ids are the document's.
fn index<'s, 'a, 'i>(
    doc: &Doc<'_>,
    states: &'s [State<'a, 'i>],
) -> Result<HashMap<&'s str, Place<'a, 'i>>, ImportError> {
    let mut ids = HashMap::with_capacity(states.len());
    for (i, state) in states.iter().enumerate() {
        let own = (state.def.name.as_str(), Place::Top(i), state.at);
        let children = (state.children.iter())
            .map(|(id, node)| (id.as_str(), Place::Child(i, *node), doc.pos(*node)));
        for (id, place, at) in std::iter::once(own).chain(children) {
            if ids.insert(id, place).is_some() {
                return Err(at.error(format!(
                    "state id `{id}` appears twice; SCXML names each state once"
                )));
            }
        }
    }
    Ok(ids)
}

/// Elements of the document or a state that change no move and that a spec
/// has no place for: left out, and said so in a comment.
const LEFT_OUT: [&str; 5] = ["datamodel", "script", "onentry", "onexit", "donedata"];

/// Reads a W3C SCXML document and writes a spec (TOML) with the same moves,
/// named after its `name`, else `name`.
///
/// Each event is an action, allowed from every state with a transition for
/// it (to one target, or a target per origin); a targetless transition is an
/// action that changes no state; `<final>` states are terminal; a
/// transition's `cond` is one of the action's guards, named by its
/// expression. A compound state (a `<state>` with child states) is not a
/// state of the table: each state without children is, by its id, under its
/// parents' transitions for the events it has none for; a target naming a
/// compound state enters its initial state (its `initial`, its `<initial>`,
/// else its first child; a child or deeper), in turn. A document written by
/// [`scxml`](crate::scxml) imports back to the same table: its states and
/// moves, transition states included, and
/// what it writes in the [`FSM_NAMESPACE`] (roles and guards declared with
/// what they mean, guards' CEL, owners, deadlines, descriptions, earlier
/// names, hidden actions, whether the machine has a single mutator, and the
/// order of its actions and of each action's origins, which their ids
/// follow): the same machine, part for part.
///
/// # Errors
///
/// Text that is not XML or not SCXML, and what a table cannot say: a final
/// state inside a compound state, a compound state's initial state that is
/// not inside it, parallel and history states,
/// eventless transitions, `<raise>` and `<send>`, `<invoke>`, several targets
/// or transitions for one event from one state, wildcard events, an event
/// that is the `.`-prefix of another (SCXML's `go` also takes `go.fast`), an
/// action whose guards or transition state differ between its origins; each
/// with its line and column.
pub fn from_scxml(text: &str, name: &str) -> Result<String, ImportError> {
    let parsed = Document::parse(text).map_err(|e| {
        let at = e.pos();
        let message = e.to_string();
        let suffix = format!(" at {at}");
        ImportError {
            line: at.row as usize,
            column: at.col as usize,
            message: format!(
                "not XML: {}",
                message.strip_suffix(&suffix).unwrap_or(&message)
            ),
        }
    })?;
    let doc = Doc {
        lines: Lines::new(text),
    };
    let root = parsed.root_element();
    if root.tag_name().name() != "scxml" {
        return Err(doc.pos(root).error(format!(
            "expected `<scxml>`, found `<{}>`",
            root.tag_name().name()
        )));
    }
    let mut def = MachineDef {
        name: root.attribute("name").unwrap_or(name).to_owned(),
        description: doc.fsm(root, "description").map(|(d, _)| d.to_owned()),
        single_mutator: doc.fsm_flag(root, "single-mutator")?.unwrap_or(false),
        ..MachineDef::default()
    };
    let mut left_out = Vec::new();
    let mut states: Vec<State<'_, '_>> = Vec::new();
    let mut order = Order {
        actions: doc.fsm_list(root, "actions"),
        ..Order::default()
    };
    for node in root.children().filter(Node::is_element) {
        if node.tag_name().namespace() == Some(FSM_NAMESPACE) {
            let declared = match node.tag_name().name() {
                "role" => &mut def.roles,
                "guard" => &mut def.guards,
                "origins" => {
                    let (action, from) = doc.origins(node)?;
                    order.origins.insert(action, from);
                    continue;
                }
                other => {
                    return Err(doc.pos(node).error(format!(
                        "unexpected `<fsm:{other}>`: `fsm export` writes `<fsm:role>`, \
                         `<fsm:guard>` and `<fsm:origins>` here"
                    )));
                }
            };
            let named = doc.declared(node)?;
            if declared.iter().any(|d| d.name == named.name) {
                return Err(doc.pos(node).error(format!(
                    "`<fsm:{}>` `{}` is declared twice",
                    node.tag_name().name(),
                    named.name
                )));
            }
            declared.push(named);
            continue;
        }
        match node.tag_name().name() {
            "state" | "final" => read_state(&doc, node, None, &mut states, &mut left_out)?,
            other if LEFT_OUT.contains(&other) => left_out.push(format!("`<{other}>`")),
            other => return Err(refused(&doc, node, other)),
        }
    }
    if states.is_empty() {
        return Err(doc.pos(root).error("the document has no states"));
    }
    let ids = index(&doc, &states)?;
    // A compound state's initial state is inside it (a child, or deeper), so
    // that entering it goes down, state by state, and ends.
    for (compound, state) in states.iter().enumerate() {
        let Some((first, at)) = &state.initial else {
            continue;
        };
        let mut inside = match ids.get(first.as_str()) {
            Some(&Place::Top(named)) => states[named].parent,
            _ => None,
        };
        while inside.is_some_and(|p| p != compound) {
            inside = inside.and_then(|p| states[p].parent);
        }
        if inside.is_none() {
            return Err(at.error(format!(
                "the initial state `{first}` is not one of the states of compound state `{}`",
                state.def.name
            )));
        }
    }
    let table = || states.iter().filter(|s| !s.is_compound());
    distinct("states", table().map(|s| (s.def.name.as_str(), s.at)))?;
    def.initial = Some(match root.attribute("initial") {
        Some(initial) => {
            let at = doc.attr_pos(root, "initial");
            if initial.split_whitespace().count() > 1 {
                return Err(
                    at.error("several initial states are parallel states; a table is in one")
                );
            }
            let Some(&Place::Top(named)) = ids.get(initial) else {
                return Err(at.error(format!(
                    "the initial state `{initial}` is not one of the document's states"
                )));
            };
            states[first_leaf(&states, &ids, named)].def.name.clone()
        }
        // SCXML's default: the first state in document order.
        None => states[first_leaf(&states, &ids, 0)].def.name.clone(),
    });

    let mut ways = Vec::new();
    let mut events: Vec<(String, Pos)> = Vec::new();
    let origins = (states.iter().enumerate())
        .filter(|(_, s)| s.def.kind == StateKind::Static && !s.is_compound())
        .map(|(origin, _)| origin);
    for origin in origins {
        // (Its condition passing: a table's moves are those of an action
        // whose guards pass.)
        let written = |at: usize| {
            let mut out = Vec::new();
            for &transition in &states[at].transitions {
                out.extend(read_way(&doc, &states, &ids, origin, at, transition)?);
            }
            Ok(out)
        };
        for (event, way) in inherited(origin, |at| states[at].parent, written)? {
            events.push((event.clone(), way.at));
            ways.push((event, way));
        }
    }
    // Events that start with `go.` follow `go` in sorted order.
    let sorted: BTreeSet<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    for (event, at) in &events {
        let after = sorted.range::<str, _>((Bound::Excluded(event.as_str()), Bound::Unbounded));
        let prefixed = after
            .take_while(|other| other.starts_with(event.as_str()))
            .find(|other| other[event.len()..].starts_with('.'));
        if let Some(other) = prefixed {
            return Err(at.error(format!(
                "event `{event}` also takes `{other}` in SCXML; a table's action is taken by its own name only"
            )));
        }
    }
    def.actions = assemble(ways, &order, &mut left_out)?;
    def.states = (states.into_iter())
        .filter(|s| !s.is_compound())
        .map(|s| s.def)
        .collect();
    declare_used(&mut def, "SCXML");

    let mut comments = vec!["Imported from an SCXML document by `fsm import scxml`.".to_owned()];
    // A document `fsm export` wrote says all that; one written by hand does not.
    if !root.namespaces().any(|ns| ns.uri() == FSM_NAMESPACE) {
        comments.extend(
            [
                "",
                "SCXML cannot say who may perform each action (roles) or who owns a state;",
                "add `roles` and `owner` where they apply, and say what each guard checks.",
            ]
            .map(String::from),
        );
    }
    Ok(written(&def, comments, left_out))
}

/// The error for an element a table cannot say, or that SCXML does not have
/// there.
fn refused(doc: &Doc<'_>, node: Node<'_, '_>, name: &str) -> ImportError {
    let why = match name {
        "parallel" => "a parallel state is in several states at once; a table is in one".to_owned(),
        "history" => "a history state remembers where it was; a table's states are flat".to_owned(),
        "invoke" => {
            "an invoked service (`<invoke>`) ends in events a table does not name".to_owned()
        }
        "raise" | "send" => {
            format!("`<{name}>` makes an event of its own; a table's moves are each one action")
        }
        other => format!("unexpected `<{other}>` here"),
    };
    doc.pos(node).error(why)
}

/// A `<state>` or `<final>` (a child of the compound state `parent`), and
/// each of its descendants when it is a compound state, into `states`: its
/// kind, its metadata and what it holds.
fn read_state<'a, 'i>(
    doc: &Doc<'_>,
    node: Node<'a, 'i>,
    parent: Option<usize>,
    states: &mut Vec<State<'a, 'i>>,
    left_out: &mut Vec<String>,
) -> Result<(), ImportError> {
    let Some(id) = node.attribute("id") else {
        return Err(doc
            .pos(node)
            .error("a state needs an `id`: transitions name it"));
    };
    let mut state = State {
        def: StateDef::new(id, StateKind::Static),
        at: doc.pos(node),
        parent,
        transitions: Vec::new(),
        children: Vec::new(),
        initial: None,
    };
    state.def.terminal = node.tag_name().name() == "final";
    state.def.owner = doc.fsm(node, "owner").map(|(o, _)| o.to_owned());
    let removers = doc.fsm_list(node, "remove-roles");
    state.def.remove = match doc.fsm_flag(node, "remove")? {
        _ if !removers.is_empty() => Some(removers),
        Some(true) => Some(Vec::new()),
        Some(false) | None => None,
    };
    state.def.persisted = doc.fsm_flag(node, "persisted")?.unwrap_or(true);
    state.def.deadline = doc.fsm_deadline(node)?;
    state.def.description = doc.fsm(node, "description").map(|(d, _)| d.to_owned());
    state.def.renamed_from = doc.fsm_list(node, "renamed-from");
    if let Some(parent) = parent.map(|p| &states[p].def.name)
        && state.def.terminal
    {
        return Err(state.at.error(format!(
            "state `{id}` is a final state inside compound state `{parent}`, which it ends \
             (`done.state.{parent}`); a table has it only among its own states"
        )));
    }
    let mut initial = None;
    for child in node.children().filter(Node::is_element) {
        match child.tag_name().name() {
            "transition" if !state.def.terminal => state.transitions.push(child),
            "state" | "final" if !state.def.terminal => {
                let Some(id) = child.attribute("id") else {
                    return Err(doc.pos(child).error("a child state needs an `id`"));
                };
                state.children.push((id.to_owned(), child));
            }
            // A compound state's first child, said by a transition (a
            // transition state's, which `fsm export` writes, means nothing to
            // a table).
            "initial" if !state.def.terminal => initial = Some(child),
            other if LEFT_OUT.contains(&other) => left_out.push(format!("`<{other}>`")),
            other => return Err(refused(doc, child, other)),
        }
    }
    if state.children.is_empty() {
        states.push(state);
        return Ok(());
    }
    // A transition state the way `fsm export` writes one (at the top): children
    // that only end the action, and nothing of its own.
    let ends_only = |child: &Node<'_, '_>| {
        child.tag_name().name() == "state"
            && child.children().any(|t| t.is_element())
            && child.children().filter(Node::is_element).all(|t| {
                t.tag_name().name() == "transition"
                    && t.attribute("event")
                        .is_some_and(|e| e.ends_with("_done") || e.ends_with("_failed"))
            })
    };
    if parent.is_none()
        && state.transitions.is_empty()
        && state.children.iter().all(|(_, c)| ends_only(c))
    {
        state.def.kind = StateKind::Transition;
        states.push(state);
        return Ok(());
    }
    // A compound state: not a table's state, but its children are, each under
    // its transitions (unless the child has its own for the same event).
    let what = format!("compound state `{id}`");
    let of_a_state = state.def.owner.is_some()
        || state.def.remove.is_some()
        || state.def.deadline.is_some()
        || !state.def.renamed_from.is_empty();
    if of_a_state || !state.def.persisted {
        return Err(state.at.error(format!(
            "{what} is no state of the table, so it cannot have an owner, a removal, a \
             deadline, earlier names or `fsm:persisted`"
        )));
    }
    let first = match (node.attribute("initial"), initial) {
        (Some(first), _) => {
            let at = doc.attr_pos(node, "initial");
            if first.split_whitespace().count() > 1 {
                return Err(
                    at.error("several initial states are parallel states; a table is in one")
                );
            }
            (first.to_owned(), at)
        }
        (None, Some(element)) => {
            let target = (element.children())
                .find(|t| t.tag_name().name() == "transition")
                .and_then(|t| t.attribute("target"));
            match target {
                Some(first) => (first.trim().to_owned(), doc.pos(element)),
                None => {
                    return Err(doc
                        .pos(element)
                        .error("an `<initial>` needs a `<transition target>`"));
                }
            }
        }
        // SCXML's default: the first child in document order.
        (None, None) => (state.children[0].0.clone(), state.at),
    };
    if state.def.description.is_some() {
        left_out.push(format!("the description of {what}"));
    }
    let children = std::mem::take(&mut state.children);
    state.initial = Some(first);
    let at = states.len();
    states.push(state);
    for (_, child) in children {
        read_state(doc, child, Some(at), states, left_out)?;
    }
    Ok(())
}

/// A transition out of the table's state `origin`, written on the state `on`
/// (`origin` itself, or a compound state it is in), as a way of each of its
/// events' actions.
fn read_way<'a, 'i>(
    doc: &Doc<'_>,
    states: &[State<'a, 'i>],
    ids: &HashMap<&str, Place<'a, 'i>>,
    origin: usize,
    on: usize,
    transition: Node<'a, 'i>,
) -> Result<Vec<(String, Way)>, ImportError> {
    // (`origin` names it from here on; `from` is its place.)
    let (state, from) = (&states[on], origin);
    let origin = &states[from].def.name;
    let at = doc.pos(transition);
    if let Some(made) = transition
        .descendants()
        .find(|n| matches!(n.tag_name().name(), "raise" | "send"))
    {
        return Err(refused(doc, made, made.tag_name().name()));
    }
    let Some(events) = transition.attribute("event") else {
        return Err(at.error(format!(
            "an eventless transition out of `{origin}` moves on its own; a table's moves are each an action"
        )));
    };
    let mut carried = Carried {
        roles: doc.fsm_list(transition, "roles"),
        guards: doc.fsm_list(transition, "guards"),
        hidden: doc.fsm_flag(transition, "hidden")?.unwrap_or(false),
        deadline: doc.fsm_deadline(transition)?,
        description: doc
            .fsm(transition, "description")
            .map(|(d, _)| d.to_owned()),
        renamed_from: doc.fsm_list(transition, "renamed-from"),
        to_origin: doc.fsm_flag(transition, "to-origin")?.unwrap_or(false),
    };
    if let Some(cond) = transition.attribute("cond") {
        carried.guards.push(cond.trim().to_owned());
    }
    let (via, target) = match transition.attribute("target") {
        None => (None, None),
        Some(targets) => {
            let target_at = doc.attr_pos(transition, "target");
            let mut listed = targets.split_whitespace();
            let id = match (listed.next(), listed.next()) {
                (Some(id), None) => id,
                (None, _) => {
                    return Err(target_at.error("an empty `target`: expected a state's id"));
                }
                (Some(_), Some(_)) => {
                    return Err(target_at
                        .error("several targets at once are parallel states; a table is in one"));
                }
            };
            match ids.get(id) {
                Some(&Place::Top(i)) if states[i].def.kind == StateKind::Transition => {
                    return Err(target_at.error(format!(
                        "target `{id}` is a transition state; a way into one names its child for the origin `{origin}`"
                    )));
                }
                Some(&Place::Top(i)) => {
                    // (To its own state: `assemble` decides what it is.)
                    let entered = first_leaf(states, ids, i);
                    (None, Some(states[entered].def.name.clone()))
                }
                Some(&Place::Child(i, child)) => (Some((&states[i], child)), None),
                None => {
                    return Err(target_at
                        .error(format!("target `{id}` is not one of the document's states")));
                }
            }
        }
    };
    let mut out = Vec::new();
    for event in events.split_whitespace() {
        if event == "*" || event.ends_with(".*") {
            return Err(doc.attr_pos(transition, "event").error(format!(
                "the wildcard event `{event}` takes events a table names one by one"
            )));
        }
        let earlier = state.transitions.iter().take_while(|t| **t != transition);
        if earlier
            .filter_map(|t| t.attribute("event"))
            .any(|e| e.split_whitespace().any(|e| e == event))
        {
            return Err(at.error(format!(
                "a second transition for event `{event}` out of `{origin}`; a table has one \
                 target for an action from each state"
            )));
        }
        let (via, target) = match &via {
            Some((via, child)) => {
                let done = ends(doc, states, ids, via, child, event, origin, at)?;
                (Some(via.def.name.clone()), Some(done))
            }
            None => (None, target.clone()),
        };
        out.push((
            event.to_owned(),
            Way {
                origin: origin.clone(),
                at,
                via,
                target,
                carried: carried.clone(),
            },
        ));
    }
    Ok(out)
}

/// Where `event`, entering transition state `via` by its child `child` from
/// `origin`, ends: the target of `<event>_done` there; `<event>_failed` must
/// lead back to `origin`.
#[allow(clippy::too_many_arguments)]
fn ends(
    doc: &Doc<'_>,
    states: &[State<'_, '_>],
    ids: &HashMap<&str, Place<'_, '_>>,
    via: &State<'_, '_>,
    child: &Node<'_, '_>,
    event: &str,
    origin: &str,
    at: Pos,
) -> Result<String, ImportError> {
    let (done, failed) = (format!("{event}_done"), format!("{event}_failed"));
    let what = format!(
        "child `{}` of transition state `{}`",
        child.attribute("id").unwrap_or_default(),
        via.def.name
    );
    let target = |name: &str| -> Result<Option<(String, Pos)>, ImportError> {
        let Some(t) = child
            .children()
            .find(|t| t.attribute("event") == Some(name))
        else {
            return Ok(None);
        };
        let target_at = doc.attr_pos(t, "target");
        match t.attribute("target") {
            Some(id) if matches!(ids.get(id), Some(&Place::Top(i)) if states[i].def.kind == StateKind::Static && !states[i].is_compound()) => {
                Ok(Some((id.to_owned(), target_at)))
            }
            _ => Err(target_at.error(format!(
                "`{name}` in {what} must lead to one of the document's static states"
            ))),
        }
    };
    match (target(&done)?, target(&failed)?) {
        (Some((done, _)), Some((back, back_at))) => {
            if back != origin {
                return Err(back_at.error(format!(
                    "`{failed}` leads to `{back}`; a failed action returns to its origin, `{origin}`"
                )));
            }
            Ok(done)
        }
        _ => Err(at.error(format!("{what} needs both `{done}` and `{failed}`"))),
    }
}
