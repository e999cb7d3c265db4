//! XState v5 machine configs (JSON) to specs.
//!
//! A flat machine (states with `on` transitions, final states) reads as it
//! is: each event is an action, allowed from every state that has a
//! transition for it. A transition state the way [`xstate`](crate::xstate)
//! writes one (a compound state with `meta.transition`, a child per way in,
//! `<action>_done` and `<action>_failed` there) reads back as the action's
//! `via`, and the metadata it writes (roles, guards, owners, deadlines, hidden
//! and in-place actions) back as the spec's. Compound states flatten: each
//! state without children is one of the table's, named by its path (`a.b`),
//! and takes its parents' transitions for the events it has none for, as
//! XState does. What would change the machine's moves without a table to say
//! it (parallel and history states, a final state inside a compound one,
//! eventless, delayed and invoked transitions, several guarded targets for
//! one event) is refused, with where it is.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use fsm_model::{MachineDef, NamedDef, StateDef, StateKind};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::ImportError;
use crate::import::{
    Carried, Lines, Order, Pos, Way, assemble, declare_used, distinct, inherited, written,
};

type Raw<'a> = &'a RawValue;

/// The text read, to say where each value is.
struct Json<'a> {
    text: &'a str,
    lines: Lines<'a>,
}

/// An object's members in the order written.
struct Members<'a>(Vec<(String, Raw<'a>)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ordered;
        impl<'de> Visitor<'de> for Ordered {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, Raw<'de>>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Ordered)
    }
}

impl<'a> Json<'a> {
    /// Where `at`, a value of the text, is.
    fn pos(&self, at: Raw<'a>) -> Pos {
        // Every value read is a slice of the text (borrowed, never copied).
        let offset = (at.get().as_ptr() as usize).saturating_sub(self.text.as_ptr() as usize);
        self.lines.pos(offset)
    }

    /// An error at `at`, a value of the text.
    fn error(&self, at: Raw<'a>, message: impl Into<String>) -> ImportError {
        self.pos(at).error(message)
    }

    /// The members of an object; `what` names it in the error otherwise.
    fn object(&self, raw: Raw<'a>, what: &str) -> Result<Vec<(String, Raw<'a>)>, ImportError> {
        let Members(members) = serde_json::from_str(raw.get())
            .map_err(|_| self.error(raw, format!("expected an object for {what}")))?;
        let mut keys = HashSet::with_capacity(members.len());
        for (key, value) in &members {
            if !keys.insert(key.as_str()) {
                return Err(self.error(value, format!("`{key}` appears twice in {what}")));
            }
        }
        Ok(members)
    }

    fn string(&self, raw: Raw<'a>, what: &str) -> Result<String, ImportError> {
        serde_json::from_str(raw.get())
            .map_err(|_| self.error(raw, format!("expected a string for {what}")))
    }

    fn array(&self, raw: Raw<'a>, what: &str) -> Result<Vec<Raw<'a>>, ImportError> {
        serde_json::from_str(raw.get())
            .map_err(|_| self.error(raw, format!("expected an array for {what}")))
    }

    fn boolean(&self, raw: Raw<'a>, what: &str) -> Result<bool, ImportError> {
        serde_json::from_str(raw.get())
            .map_err(|_| self.error(raw, format!("expected true or false for {what}")))
    }

    /// A number of seconds, as a duration.
    fn seconds(&self, raw: Raw<'a>, what: &str) -> Result<Duration, ImportError> {
        let seconds: f64 = serde_json::from_str(raw.get())
            .map_err(|_| self.error(raw, format!("expected a number of seconds for {what}")))?;
        Duration::try_from_secs_f64(seconds)
            .map_err(|_| self.error(raw, format!("{what}: {seconds} is not a duration")))
    }

    /// Strings, from a string or an array of them.
    fn strings(&self, raw: Raw<'a>, what: &str) -> Result<Vec<String>, ImportError> {
        if raw.get().starts_with('"') {
            return Ok(vec![self.string(raw, what)?]);
        }
        let items = self.array(raw, what)?;
        items.into_iter().map(|i| self.string(i, what)).collect()
    }

    /// Whether the value is an empty object or array, or null: a key that is
    /// there but says nothing.
    fn is_empty(&self, raw: Raw<'a>) -> bool {
        let text: String = raw.get().chars().filter(|c| !c.is_whitespace()).collect();
        matches!(text.as_str(), "{}" | "[]" | "null")
    }
}

/// A state node, read: a table's state (at the top, or a leaf of compound
/// states), or a compound state, which is not one.
struct Node<'a> {
    /// Its own `id`, which targets may name it by (`#id`).
    id: Option<String>,
    /// Where it is written.
    at: Pos,
    /// As a table's state, named by its path from the top (`a.b` for the
    /// child `b` of the compound state `a`).
    def: StateDef,
    /// The names from the top down to it.
    path: Vec<String>,
    /// The compound state it is a child of (its place among the nodes).
    parent: Option<usize>,
    on: Vec<(String, Raw<'a>)>,
    /// The children of a transition state, by name.
    children: Vec<(String, Raw<'a>)>,
    in_place: Vec<Raw<'a>>,
    /// A compound state's first child, by name: `None` for a table's state.
    initial: Option<(String, Raw<'a>)>,
}

impl Node<'_> {
    fn is_compound(&self) -> bool {
        self.initial.is_some()
    }
}

/// Keys of a state node or the machine that change no move and that a spec
/// has no place for: left out, and said so in a comment.
const LEFT_OUT: [&str; 8] = [
    "entry", "exit", "tags", "context", "output", "types", "version", "schemas",
];

/// The keys of a machine config that are read.
const MACHINE_KEYS: [&str; 6] = ["id", "initial", "description", "states", "meta", "type"];

/// The keys of a state node that are read.
const STATE_KEYS: [&str; 7] = [
    "id",
    "description",
    "type",
    "on",
    "states",
    "initial",
    "meta",
];

/// Keys that make moves a table cannot say.
const REFUSED: [(&str, &str); 4] = [
    ("after", "delayed transitions (`after`)"),
    ("always", "eventless transitions (`always`)"),
    (
        "invoke",
        "invoked actors (`invoke`, with their `onDone` and `onError`)",
    ),
    ("on", "transitions on the machine itself (`on` at its top)"),
];

/// Reads an XState v5 machine config (JSON, what `createMachine` takes) and
/// writes a spec (TOML) with the same moves, named after its `id`, else
/// `name`.
///
/// Each event is an action, allowed from every state with a transition for it
/// (to one target, or a target per origin); a targetless transition is an
/// action that changes no state; `type: "final"` states are terminal; a
/// transition's `guard` is one of the action's guards. A compound state
/// (`states` and `initial`) is not a state of the table: each of its
/// children is, named by its path (`active.playing`), under the compound
/// state's transitions for the events the child has none for (a forbidden
/// one, `[]`, is none); a target that names a compound state enters its
/// initial child, in turn. A config written by
/// [`xstate`](crate::xstate) imports back to the same machine, part for
/// part: its transition states, roles, guards with their CEL, owners,
/// deadlines, earlier names and hidden actions, and the order of its
/// actions (and of each action's origins), which their ids follow. (A
/// spec's accepted lints are no part of a machine, and are not exported.)
///
/// # Errors
///
/// Text that is not JSON, and what a table cannot say: a compound state
/// without its `initial` child, a final or transition state inside a compound
/// one, parallel and history states, delayed,
/// eventless or invoked transitions, an event with several alternative
/// targets from one state, an action whose guards, roles or transition
/// state differ between its origins; each with its line and column.
pub fn from_xstate(text: &str, name: &str) -> Result<String, ImportError> {
    let root: Raw<'_> = serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        ImportError {
            line: e.line().max(1),
            column: e.column().max(1),
            message: format!(
                "not JSON: {}",
                message.strip_suffix(&suffix).unwrap_or(&message)
            ),
        }
    })?;
    let json = Json {
        text,
        lines: Lines::new(text),
    };
    let mut def = MachineDef {
        name: name.to_owned(),
        ..MachineDef::default()
    };
    let mut left_out: Vec<String> = Vec::new();
    let mut initial = None;
    let mut states = None;
    let mut meta = None;
    for (key, value) in json.object(root, "the machine config")? {
        match key.as_str() {
            "id" => def.name = json.string(value, "the machine's `id`")?,
            "initial" => initial = Some(value),
            "description" => def.description = Some(json.string(value, "`description`")?),
            "states" => states = Some(value),
            "meta" => meta = Some(value),
            "type" => {
                let kind = json.string(value, "`type`")?;
                if kind == "parallel" {
                    return Err(json.error(
                        value,
                        "a parallel machine is in several states at once; a table is in one",
                    ));
                }
            }
            k => refuse_or_leave_out(&json, k, value, &MACHINE_KEYS, &mut left_out)?,
        }
    }
    let Some(states) = states else {
        return Err(json.error(root, "the machine has no `states`"));
    };
    let mut nodes = Vec::new();
    for (name, node) in json.object(states, "`states`")? {
        read_node(&json, vec![name], None, node, &mut left_out, &mut nodes)?;
    }
    if nodes.is_empty() {
        return Err(json.error(states, "the machine has no states"));
    }
    let table = || nodes.iter().filter(|n| !n.is_compound());
    distinct("states", table().map(|n| (n.def.name.as_str(), n.at)))?;
    let Some(initial) = initial else {
        return Err(json.error(root, "the machine has no `initial` state"));
    };
    let initial_name = json.string(initial, "`initial`")?;
    let machine = def.name.clone();
    let targets = Targets {
        json: &json,
        machine: &machine,
        nodes: &nodes,
        index: (nodes.iter().enumerate())
            .map(|(i, n)| (n.def.name.as_str(), i))
            .collect(),
        ids: (nodes.iter().enumerate())
            .filter_map(|(i, n)| Some((n.id.as_deref()?, i)))
            .collect(),
    };
    let Some(top) = targets
        .index
        .get(initial_name.as_str())
        .filter(|&&i| nodes[i].parent.is_none())
    else {
        return Err(json.error(
            initial,
            format!("the initial state `{initial_name}` is not one of the machine's states"),
        ));
    };
    def.initial = Some(nodes[targets.first_leaf(*top)].def.name.clone());
    let mut order = Order::default();
    let described = read_machine_meta(&json, meta, &mut def, &mut order)?;

    let mut ways = Vec::new();
    for (origin, node) in (nodes.iter().enumerate())
        .filter(|(_, n)| n.def.kind == StateKind::Static && !n.is_compound())
    {
        // (Its guards passing: a table's moves are those of an action whose
        // guards pass. A forbidden transition, `[]`, is none: XState looks
        // for the event in the parent.)
        let written = |at: usize| {
            let mut out = Vec::new();
            for (event, transition) in &nodes[at].on {
                if let Some(way) = read_way(&targets, origin, at, event, transition)? {
                    out.push((event.clone(), way));
                }
            }
            Ok(out)
        };
        ways.extend(inherited(origin, |at| nodes[at].parent, written)?);
        for raw in &node.in_place {
            let (action, carried) = read_action_meta(&json, raw)?;
            let Some(action) = action else {
                return Err(json.error(raw, "expected `action` in an entry of `meta.in_place`"));
            };
            ways.push((
                action,
                Way {
                    origin: node.def.name.clone(),
                    at: json.pos(raw),
                    via: None,
                    target: None,
                    carried,
                },
            ));
        }
    }
    def.actions = assemble(ways, &order, &mut left_out)?;
    def.states = (nodes.into_iter())
        .filter(|n| !n.is_compound())
        .map(|n| n.def)
        .collect();
    declare_used(&mut def, "XState");

    let mut comments =
        vec!["Imported from an XState machine config by `fsm import xstate`.".to_owned()];
    if !described {
        comments.extend(
            [
                "",
                "A config written by hand cannot say which states are transition states",
                "(an action's status while it runs), nor who may perform each action",
                "(roles): add `via` and `roles` where they apply, and say what each guard",
                "checks.",
            ]
            .map(String::from),
        );
    }
    Ok(written(&def, comments, left_out))
}

/// A key of the machine or a state other than those read: refused when it
/// makes moves, left out (and said so) when it does not.
fn refuse_or_leave_out(
    json: &Json<'_>,
    key: &str,
    value: Raw<'_>,
    read: &[&str],
    left_out: &mut Vec<String>,
) -> Result<(), ImportError> {
    if let Some((_, what)) = REFUSED.iter().find(|(k, _)| *k == key) {
        if json.is_empty(value) {
            return Ok(());
        }
        return Err(json.error(value, format!("{what} cannot be said in a table")));
    }
    if LEFT_OUT.contains(&key) {
        left_out.push(format!("`{key}`"));
        return Ok(());
    }
    // The keys read, then those left out, then those refused when not empty.
    let mut known = [read, &LEFT_OUT[..], &REFUSED.map(|(k, _)| k)[..]].concat();
    let mut seen = HashSet::new();
    known.retain(|k| seen.insert(*k));
    Err(json.error(
        value,
        format!("unknown key `{key}`; expected one of: {}", known.join(", ")),
    ))
}

/// A state at `path` (a child of the compound state `parent`), and each of
/// its descendants when it is a compound state, into `nodes`: its kind, its
/// metadata and what it holds.
fn read_node<'a>(
    json: &Json<'a>,
    path: Vec<String>,
    parent: Option<usize>,
    raw: Raw<'a>,
    left_out: &mut Vec<String>,
    nodes: &mut Vec<Node<'a>>,
) -> Result<(), ImportError> {
    let mut node = Node {
        def: StateDef::new(path.join("."), StateKind::Static),
        id: None,
        at: json.pos(raw),
        path,
        parent,
        on: Vec::new(),
        children: Vec::new(),
        in_place: Vec::new(),
        initial: None,
    };
    let what = format!("state `{}`", node.def.name);
    let mut initial = None;
    for (key, value) in json.object(raw, &what)? {
        match key.as_str() {
            "description" => node.def.description = Some(json.string(value, "`description`")?),
            "id" => node.id = Some(json.string(value, "a state's `id`")?),
            "type" => match json.string(value, "`type`")?.as_str() {
                "final" => node.def.terminal = true,
                "atomic" | "compound" => {}
                "parallel" | "history" => {
                    return Err(json.error(
                        value,
                        format!("{what} is a parallel or history state; a table has neither"),
                    ));
                }
                other => {
                    return Err(json.error(
                        value,
                        format!("unknown state type `{other}`; expected atomic, compound or final"),
                    ));
                }
            },
            "on" => node.on = json.object(value, &format!("the `on` of {what}"))?,
            "states" => node.children = json.object(value, &format!("the states of {what}"))?,
            // A compound state's first child (a transition state's, which
            // `fsm export` names, means nothing to a table).
            "initial" => initial = Some(value),
            "meta" => {
                for (k, v) in json.object(value, &format!("the `meta` of {what}"))? {
                    match k.as_str() {
                        "transition" if json.boolean(v, "`meta.transition`")? => {
                            node.def.kind = StateKind::Transition
                        }
                        "owner" => node.def.owner = Some(json.string(v, "`meta.owner`")?),
                        "persisted" => node.def.persisted = json.boolean(v, "`meta.persisted`")?,
                        "remove" => {
                            node.def.remove = match v.get().trim() {
                                "true" => Some(Vec::new()),
                                "false" => None,
                                _ => Some(json.strings(v, "`meta.remove`").map_err(|_| {
                                    json.error(
                                        v,
                                        "expected true, false, a role or an array of roles for \
                                         `meta.remove`",
                                    )
                                })?),
                            }
                        }
                        "deadline_seconds" => {
                            node.def.deadline = Some(json.seconds(v, "`meta.deadline_seconds`")?)
                        }
                        "renamed_from" => {
                            node.def.renamed_from = json.strings(v, "`meta.renamed_from`")?
                        }
                        "in_place" => node.in_place = json.array(v, "`meta.in_place`")?,
                        // Anything else a user keeps in `meta` is theirs.
                        _ => {}
                    }
                }
            }
            k => refuse_or_leave_out(json, k, value, &STATE_KEYS, left_out)?,
        }
    }
    let inside = parent.map(|p| nodes[p].def.name.clone());
    if let Some(parent) = &inside {
        let nested = if node.def.kind == StateKind::Transition {
            Some("a transition state (`meta.transition`)")
        } else if node.def.terminal {
            Some("a final state, which ends its parent (`onDone`),")
        } else {
            None
        };
        if let Some(nested) = nested {
            return Err(json.error(
                raw,
                format!(
                    "{what} is {nested} inside compound state `{parent}`; a table has it only \
                     among its own states"
                ),
            ));
        }
    }
    if node.children.is_empty() || node.def.kind == StateKind::Transition {
        nodes.push(node);
        return Ok(());
    }
    // A compound state: not a table's state, but its children are, each under
    // its transitions (unless the child has its own for the same event).
    let of_a_state = node.def.owner.is_some()
        || node.def.remove.is_some()
        || node.def.deadline.is_some()
        || !node.def.renamed_from.is_empty();
    if node.def.terminal || !node.in_place.is_empty() || of_a_state || !node.def.persisted {
        return Err(json.error(
            raw,
            format!(
                "{what} has child states: it is no state of the table, so it cannot be final \
                 nor have an owner, a removal, a deadline, earlier names, `persisted` or actions \
                 in place"
            ),
        ));
    }
    let Some(initial) = initial else {
        return Err(json.error(raw, format!("compound {what} has no `initial` child")));
    };
    let first = json.string(initial, "`initial`")?;
    if !node.children.iter().any(|(child, _)| *child == first) {
        return Err(json.error(
            initial,
            format!("the initial child `{first}` is not one of the states of {what}"),
        ));
    }
    if node.def.description.is_some() {
        left_out.push(format!("the description of compound {what}"));
    }
    let children = std::mem::take(&mut node.children);
    node.initial = Some((first, initial));
    let at = nodes.len();
    let path = node.path.clone();
    nodes.push(node);
    for (child, raw) in children {
        let path = path.iter().cloned().chain([child]).collect();
        read_node(json, path, Some(at), raw, left_out, nodes)?;
    }
    Ok(())
}

/// The machine's `meta` as `fsm export` writes it: roles, guards (each
/// guard's description, or its description and CEL), the order of the
/// actions and of their origins (into `order`) and whether one actor may
/// leave each state. `true` when
/// it was there.
fn read_machine_meta(
    json: &Json<'_>,
    meta: Option<Raw<'_>>,
    def: &mut MachineDef,
    order: &mut Order,
) -> Result<bool, ImportError> {
    let Some(meta) = meta else { return Ok(false) };
    let mut described = false;
    for (key, value) in json.object(meta, "the machine's `meta`")? {
        let named = |json: &Json<'_>, guards: bool| -> Result<Vec<NamedDef>, ImportError> {
            let mut out = Vec::new();
            for (name, about) in json.object(value, &format!("`meta.{key}`"))? {
                let what = format!("`meta.{key}.{name}`");
                let (mut description, mut cel) = (None, None);
                if guards && about.get().starts_with('{') {
                    for (k, v) in json.object(about, &what)? {
                        let field = format!("`meta.{key}.{name}.{k}`");
                        match k.as_str() {
                            "description" => description = Some(json.string(v, &field)?),
                            "cel" => cel = Some(json.string(v, &field)?),
                            _ => {
                                return Err(json.error(
                                    v,
                                    format!(
                                        "unexpected {field}: a guard has a `description` and a `cel`"
                                    ),
                                ));
                            }
                        }
                    }
                } else if !json.is_empty(about) {
                    description = Some(json.string(about, &what)?);
                }
                out.push(NamedDef {
                    name,
                    description,
                    cel,
                });
            }
            Ok(out)
        };
        match key.as_str() {
            "roles" => (def.roles, described) = (named(json, false)?, true),
            "guards" => (def.guards, described) = (named(json, true)?, true),
            "actions" => order.actions = json.strings(value, "`meta.actions`")?,
            "origins" => {
                for (action, origins) in json.object(value, "`meta.origins`")? {
                    let what = format!("`meta.origins.{action}`");
                    order.origins.insert(action, json.strings(origins, &what)?);
                }
            }
            "single_mutator" => {
                def.single_mutator = json.boolean(value, "`meta.single_mutator`")?
            }
            _ => {}
        }
    }
    Ok(described)
}

/// What `fsm export` writes in a transition's `meta`: the action's name (if
/// there) and what it carries.
fn read_action_meta(
    json: &Json<'_>,
    raw: Raw<'_>,
) -> Result<(Option<String>, Carried), ImportError> {
    let mut action = None;
    let mut carried = Carried::default();
    for (key, value) in json.object(raw, "an action's `meta`")? {
        match key.as_str() {
            "action" => action = Some(json.string(value, "`meta.action`")?),
            "roles" => carried.roles = json.strings(value, "`meta.roles`")?,
            "guards" => carried.guards = json.strings(value, "`meta.guards`")?,
            "hidden" => carried.hidden = json.boolean(value, "`meta.hidden`")?,
            "deadline_seconds" => {
                carried.deadline = Some(json.seconds(value, "`meta.deadline_seconds`")?)
            }
            "description" => carried.description = Some(json.string(value, "`meta.description`")?),
            "renamed_from" => carried.renamed_from = json.strings(value, "`meta.renamed_from`")?,
            "to_origin" => carried.to_origin = json.boolean(value, "`meta.to_origin`")?,
            _ => {}
        }
    }
    Ok((action, carried))
}

/// What a transition's target is read against: the text, the machine's id
/// and its states.
struct Targets<'n, 'a> {
    json: &'n Json<'a>,
    machine: &'n str,
    nodes: &'n [Node<'a>],
    /// Each state's place in `nodes`, by its path's names joined by `.`.
    index: HashMap<&'n str, usize>,
    /// The same, by the states' own ids.
    ids: HashMap<&'n str, usize>,
}

impl<'n, 'a> Targets<'n, 'a> {
    fn node(&self, name: &str) -> Option<&'n Node<'a>> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    /// The table's state that entering the state `at` enters: itself, or
    /// for a compound state its initial child's, in turn.
    fn first_leaf(&self, mut at: usize) -> usize {
        while let Some((first, _)) = &self.nodes[at].initial {
            // (Read as one of its children: see `read_node`.)
            match self
                .index
                .get(format!("{}.{first}", self.nodes[at].def.name).as_str())
            {
                Some(&child) => at = child,
                None => break,
            }
        }
        at
    }

    /// The state a target names, as the path of names under the machine:
    /// `#<machine>.A`, `#<machine>.VIA.child`, `#<a state's own id>` (and a
    /// child of it), a child `.a` of the state `on` is the path of, or a
    /// sibling `A` (`VIA.child`) of that state (a top-level state when `on`
    /// is `None`).
    fn resolve(
        &self,
        on: Option<&[String]>,
        target: &str,
        at: Raw<'a>,
    ) -> Result<Vec<String>, ImportError> {
        let from = on.map(|path| path.join(".")).unwrap_or_default();
        let (machine, json) = (self.machine, self.json);
        let path: Vec<String> = if let Some(absolute) = target.strip_prefix('#') {
            let (id, rest) = absolute.split_once('.').unwrap_or((absolute, ""));
            let named = (id != machine)
                .then(|| self.ids.get(id).map(|&i| &self.nodes[i]))
                .flatten();
            match (id == machine, named) {
                (true, _) if !rest.is_empty() => rest.split('.').map(str::to_owned).collect(),
                (_, Some(node)) => (node.path.iter().cloned())
                    .chain(rest.split('.').filter(|p| !p.is_empty()).map(str::to_owned))
                    .collect(),
                _ => {
                    return Err(json.error(
                        at,
                        format!(
                            "target `{target}` names no state: expected `#{machine}.STATE` or a \
                             state's own `id`"
                        ),
                    ));
                }
            }
        } else if let Some(child) = target.strip_prefix('.') {
            match on {
                Some(on) if self.node(&from).is_some_and(Node::is_compound) => {
                    (on.iter().map(String::as_str))
                        .chain(child.split('.'))
                        .map(str::to_owned)
                        .collect()
                }
                _ => {
                    return Err(json.error(
                        at,
                        format!("target `{target}` is a child of state `{from}`, which has none"),
                    ));
                }
            }
        } else {
            let siblings = on.map_or(&[][..], |on| &on[..on.len() - 1]);
            (siblings.iter().map(String::as_str))
                .chain(target.split('.'))
                .map(str::to_owned)
                .collect()
        };
        Ok(path)
    }
}

/// One transition of `event` out of the table's state `origin`, written on
/// the state `on` (`origin` itself, or a compound state it is in), as a way
/// of its action; `None` for a forbidden transition (`[]`).
fn read_way<'a>(
    cx: &Targets<'_, 'a>,
    origin: usize,
    on: usize,
    event: &str,
    raw: Raw<'a>,
) -> Result<Option<Way>, ImportError> {
    let json = cx.json;
    let node = &cx.nodes[origin];
    if event == "*" || event.ends_with(".*") {
        return Err(json.error(
            raw,
            format!("the wildcard event `{event}` takes events a table names one by one"),
        ));
    }
    let mut transition = raw;
    if raw.get().starts_with('[') {
        match json.array(raw, "a transition")?.as_slice() {
            [] => return Ok(None),
            [one] => transition = one,
            [_, second, ..] => {
                return Err(json.error(
                    second,
                    format!(
                        "event `{event}` has several guarded targets from state `{}`; a table has \
                         one target for an action from each state",
                        node.def.name
                    ),
                ));
            }
        }
    }
    let mut target = None;
    // What `fsm export` wrote in `meta`, then the transition's own guards
    // and description over it, whatever the order of the keys.
    let mut carried = Carried::default();
    let (mut guards, mut description) = (Vec::new(), None);
    if transition.get().starts_with('"') {
        target = Some((json.string(transition, "a target")?, transition));
    } else {
        for (key, value) in json.object(transition, &format!("the transition of `{event}`"))? {
            match key.as_str() {
                "target" => {
                    let targets = json.strings(value, "`target`")?;
                    match targets.as_slice() {
                        [] => {}
                        [one] => target = Some((one.clone(), value)),
                        _ => {
                            return Err(json.error(
                                value,
                                "several targets at once are parallel states; a table is in one",
                            ));
                        }
                    }
                }
                "guard" | "cond" => {
                    let guard = if value.get().starts_with('{') {
                        let typed = json.object(value, "a guard")?;
                        match typed.iter().find(|(k, _)| k == "type") {
                            Some((_, name)) => json.string(name, "a guard's `type`")?,
                            None => return Err(json.error(value, "expected a guard's `type`")),
                        }
                    } else {
                        json.string(value, "a guard")?
                    };
                    guards.push(guard);
                }
                "meta" => carried = read_action_meta(json, value)?.1,
                "description" => description = Some(json.string(value, "`description`")?),
                // Side effects, and how a self-transition re-enters.
                "actions" | "reenter" | "internal" => {}
                k => {
                    return Err(json.error(
                        value,
                        format!("unknown key `{k}` in a transition; expected target, guard, actions, description or meta"),
                    ));
                }
            }
        }
    }
    for guard in guards {
        if !carried.guards.contains(&guard) {
            carried.guards.push(guard);
        }
    }
    carried.description = description.or(carried.description);
    let Some((target, at)) = target else {
        return Ok(Some(Way {
            origin: node.def.name.clone(),
            at: json.pos(transition),
            via: None,
            target: None,
            carried,
        }));
    };
    let path = cx.resolve(Some(&cx.nodes[on].path), &target, at)?;
    let via = match path.as_slice() {
        [via, child] => cx
            .node(via)
            .filter(|via| via.def.kind == StateKind::Transition)
            .map(|via| (via, child)),
        _ => None,
    };
    let (via, target) = match via {
        Some((via, child)) => {
            let done = ends(cx, via, child, event, &node.def.name, at)?;
            (Some(via.def.name.clone()), Some(done))
        }
        None => {
            let Some(&named) = cx.index.get(path.join(".").as_str()) else {
                return Err(json.error(
                    at,
                    format!("target `{target}` is not one of the machine's states"),
                ));
            };
            let entered = cx.first_leaf(named);
            let state = &cx.nodes[entered];
            if state.def.kind == StateKind::Transition {
                return Err(json.error(
                    at,
                    format!(
                        "target `{target}` is a transition state; a way into one names its child \
                         for the origin (`{}.{}`)",
                        state.def.name, node.def.name
                    ),
                ));
            }
            // (To its own state: `assemble` decides what it is.)
            (None, Some(state.def.name.clone()))
        }
    };
    Ok(Some(Way {
        origin: node.def.name.clone(),
        at: json.pos(transition),
        via,
        target,
        carried,
    }))
}

/// Where `event`, entering transition state `via` by its child `child` from
/// `origin`, ends: the target of `<event>_done` there; `<event>_failed` must
/// lead back to `origin`.
fn ends<'a>(
    cx: &Targets<'_, 'a>,
    via: &Node<'a>,
    child: &str,
    event: &str,
    origin: &str,
    at: Raw<'a>,
) -> Result<String, ImportError> {
    let json = cx.json;
    let Some((_, raw)) = via.children.iter().find(|(name, _)| name == child) else {
        return Err(json.error(
            at,
            format!("transition state `{}` has no child `{child}`", via.def.name),
        ));
    };
    let what = format!("child `{child}` of transition state `{}`", via.def.name);
    let mut on = Vec::new();
    for (key, value) in json.object(raw, &what)? {
        match key.as_str() {
            "on" => on = json.object(value, &format!("the `on` of {what}"))?,
            _ => {
                return Err(json.error(
                    value,
                    format!("unexpected `{key}` in {what}: it holds only `on`, with `{event}_done` and `{event}_failed`"),
                ));
            }
        }
    }
    let (done, failed) = (format!("{event}_done"), format!("{event}_failed"));
    let mut found = (None, None);
    for (name, transition) in &on {
        let target = if transition.get().starts_with('"') {
            (json.string(transition, "a target")?, *transition)
        } else {
            let members = json.object(transition, &format!("`{name}`"))?;
            match members.iter().find(|(k, _)| k == "target") {
                Some((_, t)) => (json.string(t, "`target`")?, *t),
                None => return Err(json.error(transition, format!("`{name}` has no target"))),
            }
        };
        let path = cx.resolve(None, &target.0, target.1)?;
        let state = match path.as_slice() {
            [one] if cx.node(one).is_some() => one.clone(),
            _ => {
                return Err(json.error(
                    target.1,
                    format!(
                        "`{name}` must lead to one of the machine's states, not `{}`",
                        target.0
                    ),
                ));
            }
        };
        if *name == done {
            found.0 = Some(state);
        } else if *name == failed {
            if state != origin {
                return Err(json.error(
                    target.1,
                    format!("`{failed}` leads to `{state}`; a failed action returns to its origin, `{origin}`"),
                ));
            }
            found.1 = Some(state);
        } else {
            return Err(json.error(
                transition,
                format!("unexpected event `{name}` in {what}: expected `{done}` and `{failed}`"),
            ));
        }
    }
    match found {
        (Some(done), Some(_)) => Ok(done),
        _ => Err(json.error(raw, format!("{what} needs both `{done}` and `{failed}`"))),
    }
}
