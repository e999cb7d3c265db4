//! PlantUML and Mermaid state diagrams to specs: one reader for the lines the
//! two share (states, arrows, descriptions), each format's own around it.

use fsm_model::{ActionDef, MachineDef, NamedDef, StateDef, StateKind, TargetDef};

use crate::ImportError;
use crate::spec_text;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A state as the diagram says it.
#[derive(Debug, Default, Clone)]
struct DrawnState {
    name: String,
    transition: bool,
    terminal: bool,
    owner: Option<String>,
    /// `removable`, or `removable by: ROLES`.
    remove: Option<Vec<String>>,
    persisted: bool,
    descriptions: Vec<String>,
    /// `X --> [*]`.
    ends: bool,
    /// The composite state it is drawn in (its id).
    parent: Option<String>,
    /// A composite state's: the line that opens it, and its initial state
    /// (`[*] --> X` inside it).
    composite: Option<Composite>,
}

/// What a composite state (`state A { ... }`) holds besides its states.
#[derive(Debug, Default, Clone)]
struct Composite {
    line: usize,
    initial: Option<String>,
}

/// An arrow between two states (`[*]` for the pseudo-state).
#[derive(Debug, Clone)]
struct Arrow {
    from: String,
    to: String,
    label: String,
}

/// What a label of `fsm diagram` says: the action, its guards and roles, hidden,
/// back to the origin, or the origins a target is for. Free text (a diagram drawn
/// by hand) is an action named after it.
#[derive(Debug, Default, Clone)]
struct Label {
    action: String,
    guards: Vec<String>,
    roles: Vec<String>,
    hidden: bool,
    back: bool,
}

fn is_ident(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !word.starts_with(|c: char| c.is_ascii_digit())
}

/// `Detects an error` → `detects_an_error`.
fn snake(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_').to_owned();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("a_{out}")
    } else {
        out
    }
}

fn parse_label(label: &str) -> Label {
    let label = label.trim();
    let (first, rest) = label.split_once(' ').unwrap_or((label, ""));
    let mut parsed = Label {
        action: first.to_owned(),
        ..Label::default()
    };
    // The annotations `fsm diagram` writes after the action's name.
    let mut rest = rest.trim();
    let mut ours = fsm_model::is_plain_name(first);
    while ours && !rest.is_empty() {
        let close = match rest.chars().next() {
            Some('[') => ']',
            Some('(') => ')',
            _ => {
                ours = false;
                break;
            }
        };
        let Some(Group {
            inner,
            items,
            after,
        }) = group(rest, close)
        else {
            ours = false;
            break;
        };
        let names = || items.iter().map(|(name, _)| name.clone()).collect();
        match (close, inner.trim()) {
            (']', _) => parsed.guards = names(),
            (')', "hidden") => parsed.hidden = true,
            (')', "back") => parsed.back = true,
            (')', from) if from.starts_with("from ") => {}
            // Roles: plain words, or names in quotes (`fsm_model::label_name`).
            (')', _)
                if (items.iter())
                    .all(|(name, quoted)| *quoted || fsm_model::is_plain_name(name)) =>
            {
                parsed.roles = names()
            }
            _ => ours = false,
        }
        rest = after.trim();
    }
    if !ours {
        return Label {
            action: snake(label),
            ..Label::default()
        };
    }
    parsed
}

/// A bracketed part of a label: its text, its items (split at commas outside
/// double quotes, each unquoted, and whether it was quoted), and what follows.
struct Group<'a> {
    inner: &'a str,
    items: Vec<(String, bool)>,
    after: &'a str,
}

/// The group `text` opens (with its first character), up to `close` outside
/// double quotes; `None` when it does not close. In quotes, `\` escapes the
/// next character (as `fsm_model::label_name` writes names).
fn group(text: &str, close: char) -> Option<Group<'_>> {
    let mut items = Vec::new();
    let (mut item, mut quoted, mut in_quotes) = (String::new(), false, false);
    let mut chars = text.char_indices().skip(1);
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' if in_quotes => item.extend(chars.next().map(|(_, next)| next)),
            '"' if in_quotes => in_quotes = false,
            _ if in_quotes => item.push(c),
            '"' => {
                // What stood before the quotes was space.
                item.clear();
                (quoted, in_quotes) = (true, true);
            }
            ',' => {
                items.push(taken(&mut item, quoted));
                quoted = false;
            }
            _ if c == close => {
                items.push(taken(&mut item, quoted));
                return Some(Group {
                    inner: &text[1..at],
                    items,
                    after: &text[at + c.len_utf8()..],
                });
            }
            // After a name in quotes, only space, up to the comma.
            _ if quoted => {}
            _ => item.push(c),
        }
    }
    None
}

/// The item read so far, taken: a name in quotes as it is, a bare one trimmed.
fn taken(item: &mut String, quoted: bool) -> (String, bool) {
    let taken = std::mem::take(item);
    let name = if quoted {
        taken
    } else {
        taken.trim().to_owned()
    };
    (name, quoted)
}

/// The diagram as read, before the spec is written.
#[derive(Default)]
struct Diagram {
    name: Option<String>,
    /// By the id the diagram uses, in the order first met.
    states: Vec<(String, DrawnState)>,
    /// Each id's place in `states`.
    index: HashMap<String, usize>,
    /// The id of the state drawn with each name, lowercased.
    named: HashMap<String, String>,
    arrows: Vec<Arrow>,
    initial: Option<(String, usize)>,
    /// The composite states open at the line being read, innermost last.
    open: Vec<String>,
    /// What flattening its composite states left out, for the spec's comments.
    left_out: Vec<String>,
}

impl Diagram {
    /// The state with diagram id `id`, made when first met (named `id`);
    /// refused when another state is already drawn with that name (a spec
    /// names each state once).
    fn state(&mut self, id: &str) -> Result<&mut DrawnState, String> {
        let at = match self.index.get(id) {
            Some(&at) => at,
            None => self.add(id, id.to_owned())?,
        };
        Ok(&mut self.states[at].1)
    }

    /// The state with id `id`, drawn with the name `name` (made if new).
    fn named_state(&mut self, id: &str, name: String) -> Result<&mut DrawnState, String> {
        let at = match self.index.get(id) {
            Some(&at) => {
                self.named_once(id, &name)?;
                let old = std::mem::replace(&mut self.states[at].1.name, name.clone());
                self.named.remove(&old.to_ascii_lowercase());
                self.named.insert(name.to_ascii_lowercase(), id.to_owned());
                at
            }
            None => self.add(id, name)?,
        };
        Ok(&mut self.states[at].1)
    }

    /// A new state with id `id`, named `name`: its place in `states`.
    fn add(&mut self, id: &str, name: String) -> Result<usize, String> {
        self.named_once(id, &name)?;
        self.named.insert(name.to_ascii_lowercase(), id.to_owned());
        self.index.insert(id.to_owned(), self.states.len());
        self.states.push((
            id.to_owned(),
            DrawnState {
                name,
                persisted: true,
                // A state first met inside a composite state is one of its.
                parent: self.open.last().cloned(),
                ..DrawnState::default()
            },
        ));
        Ok(self.states.len() - 1)
    }

    /// Refuses `name` for the state with id `id` when another state has it.
    fn named_once(&self, id: &str, name: &str) -> Result<(), String> {
        match self.named.get(&name.to_ascii_lowercase()) {
            Some(other) if other != id => Err(format!(
                "two states are named `{name}`: `{other}` and `{id}`; a spec names each state \
                 once, ignoring case"
            )),
            _ => Ok(()),
        }
    }
}

const EXPECTED: &str =
    "expected `state \"NAME\" as ID`, an arrow `A --> B : label`, or a description `A : text`";

/// PlantUML's stereotypes for pseudo-states: points a move passes through,
/// which a table has no state for (other stereotypes only style a state).
const PSEUDO_STATES: [&str; 12] = [
    "choice",
    "fork",
    "join",
    "start",
    "end",
    "entryPoint",
    "exitPoint",
    "inputPin",
    "outputPin",
    "expansionInput",
    "expansionOutput",
    "history",
];

/// Reads one line; `Err` with the column at fault.
fn read_line(d: &mut Diagram, text: &str, line: usize) -> Result<(), (usize, String)> {
    let indent = text.len() - text.trim_start().len();
    let t = text.trim();
    let col = |byte: usize| text[..byte].chars().count() + 1;
    if let Some(rest) = t.strip_prefix("state ") {
        // `state A {`: a composite state, whose states follow until `}`.
        let (rest, opens) = match rest.trim().strip_suffix('{') {
            Some(rest) => (rest.trim(), true),
            None => (rest.trim(), false),
        };
        let (rest, stereotype) = match rest.find("<<") {
            Some(at) => {
                let end = rest[at..].find(">>").ok_or((
                    col(indent + 6 + at),
                    "a stereotype `<<...>>` is not closed".to_owned(),
                ))?;
                let stereotype = rest[at + 2..at + end].trim();
                if PSEUDO_STATES.contains(&stereotype) {
                    return Err((
                        col(indent + 6 + at),
                        format!(
                            "`<<{stereotype}>>` is a pseudo-state, not a state an object rests \
                             in: a spec's actions go from state to state"
                        ),
                    ));
                }
                (rest[..at].trim(), Some(stereotype.to_owned()))
            }
            None => (rest, None),
        };
        let (rest, description) = match rest.split_once(':') {
            Some((r, desc)) => (r.trim(), Some(desc.trim().to_owned())),
            None => (rest, None),
        };
        let (name, id) = if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').ok_or((
                col(indent + 6),
                "a state name's quote is not closed".to_owned(),
            ))?;
            let name = &quoted[..end];
            let after = quoted[end + 1..].trim();
            let id = after.strip_prefix("as ").map(str::trim).unwrap_or(name);
            (name.to_owned(), id.to_owned())
        } else {
            let id = rest.split_whitespace().next().unwrap_or("");
            (id.to_owned(), id.to_owned())
        };
        if id.is_empty() || !is_ident(&id) {
            return Err((
                col(indent + 6),
                format!("expected a state id, found `{rest}`"),
            ));
        }
        let at = col(indent + 6);
        let state = d.named_state(&id, name).map_err(|e| (at, e))?;
        match stereotype.as_deref() {
            Some("transition") => state.transition = true,
            Some("terminal") => state.terminal = true,
            _ => {}
        }
        if let Some(desc) = description {
            state.descriptions.push(desc);
        }
        if opens {
            if state.transition || state.terminal || state.composite.is_some() {
                return Err((
                    col(indent),
                    format!(
                        "composite state `{id}` is drawn twice, or as a transition or terminal \
                         state, which holds no states"
                    ),
                ));
            }
            state.composite = Some(Composite {
                line,
                initial: None,
            });
            d.open.push(id);
        }
        return Ok(());
    }
    if t == "}" {
        if d.open.pop().is_none() {
            return Err((col(indent), "`}` closes no composite state".into()));
        }
        return Ok(());
    }
    // An arrow: FROM -...-> TO [: label].
    let (head, label) = match t.split_once(':') {
        Some((h, l)) => (h.trim(), l.trim()),
        None => (t, ""),
    };
    let words: Vec<&str> = head.split_whitespace().collect();
    if let [from, link, to] = words[..]
        && link.starts_with('-')
        && link.ends_with('>')
    {
        for (word, what) in [(from, "state"), (to, "state")] {
            if word != "[*]" && !is_ident(word) {
                let at = text.find(word).unwrap_or(indent);
                return Err((
                    col(at),
                    format!("expected a {what} id or `[*]`, found `{word}`"),
                ));
            }
        }
        match (from, to) {
            ("[*]", "[*]") => return Err((col(indent), "an arrow from `[*]` to `[*]`".into())),
            ("[*]", to) if !d.open.is_empty() => {
                let inside = d.open.last().cloned().unwrap_or_default();
                d.state(to).map_err(|e| (col(indent), e))?;
                let composite = d.state(&inside).ok().and_then(|s| s.composite.as_mut());
                if let Some(composite) = composite {
                    if let Some(first) = &composite.initial {
                        return Err((
                            col(indent),
                            format!(
                                "a second initial state `{to}` in composite state `{inside}`: \
                                 `{first}` is its initial state"
                            ),
                        ));
                    }
                    composite.initial = Some(to.to_owned());
                }
            }
            (from, "[*]") if !d.open.is_empty() => {
                return Err((
                    col(indent),
                    format!(
                        "`{from} --> [*]` inside composite state `{}` ends the composite state, \
                         not the object; a spec has no such move",
                        d.open.last().cloned().unwrap_or_default()
                    ),
                ));
            }
            ("[*]", to) => {
                if let Some((first, at)) = &d.initial {
                    return Err((
                        col(indent),
                        format!(
                            "a second initial state `{to}`: `{first}` is the initial state (line {at})"
                        ),
                    ));
                }
                d.state(to).map_err(|e| (col(indent), e))?;
                d.initial = Some((to.to_owned(), line));
            }
            (from, "[*]") => d.state(from).map_err(|e| (col(indent), e))?.ends = true,
            (from, to) => {
                d.state(from).map_err(|e| (col(indent), e))?;
                d.state(to).map_err(|e| (col(indent), e))?;
                d.arrows.push(Arrow {
                    from: from.to_owned(),
                    to: to.to_owned(),
                    label: label.to_owned(),
                });
            }
        }
        return Ok(());
    }
    // A description: ID : text.
    if let [id] = words[..]
        && is_ident(id)
        && !label.is_empty()
    {
        let state = d.state(id).map_err(|e| (col(indent), e))?;
        if let Some(owner) = label.strip_prefix("owner: ") {
            state.owner = Some(owner.trim().to_owned());
        } else if label == "removable" {
            state.remove = Some(Vec::new());
        } else if let Some(roles) = label.strip_prefix("removable by: ")
            && let Some(Group { items, .. }) = group(&format!("({roles})"), ')')
        {
            state.remove = Some(items.into_iter().map(|(name, _)| name).collect());
        } else if label == "not persisted" {
            state.persisted = false;
        } else {
            state.descriptions.push(label.to_owned());
        }
        return Ok(());
    }
    Err((col(indent), format!("{EXPECTED}; found `{t}`")))
}

/// Reads a PlantUML state diagram (`@startuml` … `@enduml`) and writes a spec
/// (TOML) with the same moves, named `name` unless the diagram names itself.
///
/// Arrows become actions: labelled `fsm diagram` style (`deploy [guard] (role)`,
/// a name that is not a plain word in quotes: `("cloud admin")`),
/// or named after their free-text label (`Detects an error` → `detects_an_error`),
/// or `to_<target>` when unlabelled. States drawn `<<transition>>` become
/// transition states, and the arrows in and out of them one action with a `via`;
/// `<<terminal>>`, or `X --> [*]` with no way out, terminal states. A composite
/// state (`state A { ... }`, its initial state `[*] --> X` inside) is not a
/// state of the spec: the states drawn in it are, each under the composite
/// state's arrows for the actions it has no arrow of its own for, and an arrow
/// into it enters its initial state, in turn. What a diagram
/// cannot say (which states are transition states, roles and guards, unless it
/// was drawn by `fsm diagram`) is said in comments at the top of the spec.
pub fn plantuml(text: &str, name: &str) -> Result<String, ImportError> {
    let mut d = Diagram::default();
    let mut in_block: Option<&str> = None;
    let mut started = false;
    let lines: Vec<&str> = text.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if let Some(end) = in_block {
            if t == end || t.starts_with(end) {
                in_block = None;
            }
            continue;
        }
        if t.is_empty() || t.starts_with('\'') {
            continue;
        }
        if let Some(rest) = t.strip_prefix("@startuml") {
            started = true;
            let rest = rest.trim();
            if !rest.is_empty() {
                d.name = Some(rest.to_owned());
            }
            continue;
        }
        if !started {
            let column = raw.len() - raw.trim_start().len() + 1;
            return Err(ImportError {
                line,
                column,
                message: format!("expected `@startuml`, found `{t}`"),
            });
        }
        if t.starts_with("@enduml") {
            break;
        }
        if t.starts_with("skinparam") && t.ends_with('{') {
            in_block = Some("}");
            continue;
        }
        if t.starts_with("note ") && !t.contains(':') {
            in_block = Some("end note");
            continue;
        }
        if [
            "hide ",
            "skinparam ",
            "title ",
            "left to right",
            "top to bottom",
            "note ",
            "scale ",
        ]
        .iter()
        .any(|p| t.starts_with(p))
        {
            continue;
        }
        read_line(&mut d, raw, line).map_err(|(column, message)| ImportError {
            line,
            column,
            message,
        })?;
    }
    let missing = "expected `@startuml`: the text holds no PlantUML diagram";
    let from = "a PlantUML state diagram by `fsm import plantuml`";
    finished(&d, started.then_some(lines.len()), missing, name, from)
}

/// The spec of a diagram read to its end (`Some(lines)` when its header was
/// met, `missing` the error otherwise), named `name` unless it names itself;
/// `from` says what it was imported from.
fn finished(
    d: &Diagram,
    read: Option<usize>,
    missing: &str,
    name: &str,
    from: &str,
) -> Result<String, ImportError> {
    let Some(lines) = read else {
        return Err(ImportError {
            line: 1,
            column: 1,
            message: missing.into(),
        });
    };
    let Some((initial, _)) = &d.initial else {
        return Err(ImportError {
            line: lines.max(1),
            column: 1,
            message: "no initial state: expected an arrow `[*] --> STATE`".into(),
        });
    };
    let flat = flatten(d)?;
    Ok(write_spec(&flat, name, &d.entry(initial), from))
}

impl Diagram {
    /// The state an arrow into `id` enters: `id`, or a composite state's
    /// initial state, in turn.
    fn entry(&self, id: &str) -> String {
        let mut id = id.to_owned();
        while let Some(first) = (self.index.get(&id))
            .and_then(|&at| self.states[at].1.composite.as_ref())
            .and_then(|c| c.initial.clone())
        {
            id = first;
        }
        id
    }

    /// The composite state `id` is drawn in.
    fn parent(&self, id: &str) -> Option<&str> {
        let at = *self.index.get(id)?;
        self.states[at].1.parent.as_deref()
    }
}

/// `d` with its composite states (`state A { ... }`) flattened: each state
/// drawn in one is a state of the spec, under the composite state's arrows
/// for the actions it has no arrow of its own for (as the formats' engines
/// take an event in the innermost state that has a transition for it); an
/// arrow into a composite state enters its initial state, in turn; the
/// composite states themselves are not states of the spec.
fn flatten(d: &Diagram) -> Result<Diagram, ImportError> {
    let error = |line: usize, message: String| ImportError {
        line,
        column: 1,
        message,
    };
    let composite_line = |id: &str| {
        (d.index.get(id))
            .and_then(|&at| d.states[at].1.composite.as_ref())
            .map_or(1, |c| c.line)
    };
    if let Some(open) = d.open.last() {
        return Err(error(
            composite_line(open),
            format!("composite state `{open}` is not closed with `}}`"),
        ));
    }
    let mut flat = Diagram {
        name: d.name.clone(),
        ..Diagram::default()
    };
    for (id, s) in &d.states {
        if let Some(composite) = &s.composite {
            let Some(initial) = &composite.initial else {
                return Err(error(
                    composite.line,
                    format!(
                        "composite state `{id}` has no initial state: expected `[*] --> STATE` \
                         inside it"
                    ),
                ));
            };
            // (So that entering it goes down, state by state, and ends.)
            if d.parent(initial) != Some(id.as_str()) {
                return Err(error(
                    composite.line,
                    format!(
                        "the initial state `{initial}` of composite state `{id}` is not drawn \
                         inside it"
                    ),
                ));
            }
            if s.ends {
                return Err(error(
                    composite.line,
                    format!(
                        "`{id} --> [*]`: composite state `{id}` holds states; end those instead"
                    ),
                ));
            }
            if !s.descriptions.is_empty() {
                flat.left_out
                    .push(format!("the description of composite state `{}`", s.name));
            }
            continue;
        }
        if let Some(parent) = s.parent.as_deref().filter(|_| s.transition) {
            return Err(error(
                composite_line(parent),
                format!(
                    "transition state `{id}` is drawn inside composite state `{parent}`; a spec \
                     has transition states only among its own states"
                ),
            ));
        }
        flat.index.insert(id.clone(), flat.states.len());
        flat.states.push((id.clone(), s.clone()));
    }
    if d.states.iter().all(|(_, s)| s.composite.is_none()) {
        flat.arrows = d.arrows.clone();
        return Ok(flat);
    }
    // The action an arrow is, as `write_spec` names it.
    let display =
        |id: &str| (d.index.get(id)).map_or(id.to_owned(), |&at| d.states[at].1.name.clone());
    let action = |a: &Arrow, to: &str| match a.label.as_str() {
        "" => format!("to_{}", snake(&display(to))),
        label => parse_label(label).action,
    };
    let own: HashSet<(&str, String)> = (d.arrows.iter())
        .map(|a| (a.from.as_str(), action(a, &d.entry(&a.to))))
        .collect();
    for a in &d.arrows {
        let to = d.entry(&a.to);
        let is_composite = |id: &str| {
            d.index
                .get(id)
                .is_some_and(|&at| d.states[at].1.composite.is_some())
        };
        if !is_composite(&a.from) {
            flat.arrows.push(Arrow { to, ..a.clone() });
            continue;
        }
        let act = action(a, &to);
        for (leaf, _) in &flat.states {
            // Under `a.from`, and with no arrow of its own (or of a composite
            // state between) for the action.
            let mut at = Some(leaf.as_str());
            let mut under = false;
            while let Some(id) = at {
                if id == a.from {
                    under = true;
                    break;
                }
                if own.contains(&(id, act.clone())) {
                    break;
                }
                at = d.parent(id);
            }
            if under {
                flat.arrows.push(Arrow {
                    from: leaf.clone(),
                    to: to.clone(),
                    label: a.label.clone(),
                });
            }
        }
    }
    Ok(flat)
}

/// Reads a Mermaid state diagram (`stateDiagram-v2` ... ), or the first one
/// in a Markdown document's fenced ```` ```mermaid ```` blocks, and writes a
/// spec (TOML) with the same moves, named `name` unless the diagram's front
/// matter gives it a `title`.
///
/// The lines Mermaid shares with PlantUML read as [`plantuml`] reads them
/// (`state "NAME" as ID`, arrows and their labels, `[*]`, `ID : text`).
/// `class ID transition` and `class ID terminal`, as `fsm diagram` writes
/// them, mark transition and terminal states, and so do `ID:::transition` and
/// `ID:::terminal`; `note right of ID` says what `ID : text` says (an owner,
/// `not persisted`, a description). `classDef`, `direction`, other classes,
/// notes left of a state and `%%` comments change no move and are skipped.
///
/// # Errors
///
/// Text that holds no state diagram, a line neither format reads,
/// pseudo-states and concurrent regions (`--`), a composite state with no
/// initial state or not closed, no initial state; each with its line and
/// column (in the whole document).
pub fn mermaid(text: &str, name: &str) -> Result<String, ImportError> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(range) = mermaid_block(&lines) else {
        return Err(ImportError {
            line: 1,
            column: 1,
            message: NO_MERMAID.into(),
        });
    };
    let mut d = Diagram::default();
    let mut started = false;
    let mut front_matter = false;
    // Inside a note block: the state it is on (`None` for one left of it).
    let mut note: Option<Option<String>> = None;
    for i in range {
        let (raw, line) = (lines[i], i + 1);
        let t = raw.trim();
        let indent = raw.len() - raw.trim_start().len();
        let at = |column: usize, message: String| ImportError {
            line,
            column,
            message,
        };
        let col = |byte: usize| raw[..byte].chars().count() + 1;
        if let Some(on) = &note {
            if t == "end note" {
                note = None;
            } else if let Some(id) = on
                && !t.is_empty()
            {
                read_line(&mut d, &format!("{id} : {t}"), line)
                    .map_err(|(_, message)| at(col(indent), message))?;
            }
            continue;
        }
        if !started {
            if t == "---" {
                front_matter = !front_matter;
            } else if front_matter {
                if let Some(title) = t.strip_prefix("title:") {
                    d.name = Some(title.trim().to_owned());
                }
            } else if t == "stateDiagram-v2" || t == "stateDiagram" {
                started = true;
            } else if !t.is_empty() && !t.starts_with("%%") {
                return Err(at(
                    col(indent),
                    format!("expected `stateDiagram-v2`, found `{t}`"),
                ));
            }
            continue;
        }
        if t.is_empty()
            || t.starts_with("%%")
            || ["classDef ", "direction ", "accTitle", "accDescr"]
                .iter()
                .any(|p| t.starts_with(p))
        {
            continue;
        }
        if t == "--" {
            return Err(at(
                col(indent),
                "concurrent regions (`--`) are in several states at once; a spec is in one".into(),
            ));
        }
        if let Some(rest) = t.strip_prefix("class ") {
            let (ids, class) = rest.trim().rsplit_once(' ').unwrap_or((rest, ""));
            for id in ids.split(',').map(str::trim) {
                mark(&mut d, id, class.trim()).map_err(|message| at(col(indent), message))?;
            }
            continue;
        }
        if let Some(rest) = t.strip_prefix("note ") {
            let (head, text) = match rest.split_once(':') {
                Some((head, text)) => (head, Some(text.trim())),
                None => (rest, None),
            };
            let of = head.trim().strip_prefix("right of ").map(str::trim);
            match (of, text) {
                (Some(id), Some(text)) => read_line(&mut d, &format!("{id} : {text}"), line)
                    .map_err(|(_, message)| at(col(indent), message))?,
                (_, Some(_)) => {}
                (of, None) => note = Some(of.map(str::to_owned)),
            }
            continue;
        }
        // `ID:::class` marks a state where it stands.
        let mut classes = Vec::new();
        let mut plain = String::with_capacity(raw.len());
        let mut rest = raw;
        while let Some(at) = rest.find(":::") {
            let id_start = rest[..at]
                .char_indices()
                .rev()
                .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let after = &rest[at + 3..];
            let class_len = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(after.len());
            classes.push((rest[id_start..at].to_owned(), after[..class_len].to_owned()));
            plain.push_str(&rest[..at]);
            rest = &after[class_len..];
        }
        plain.push_str(rest);
        read_line(&mut d, &plain, line).map_err(|(column, message)| at(column, message))?;
        for (id, class) in classes {
            mark(&mut d, &id, &class).map_err(|message| at(col(indent), message))?;
        }
    }
    let from = "a Mermaid state diagram by `fsm import mermaid`";
    finished(&d, started.then_some(lines.len()), NO_MERMAID, name, from)
}

/// The error for a text with no Mermaid state diagram.
const NO_MERMAID: &str = "expected `stateDiagram-v2`: the text holds no Mermaid state diagram";

/// The lines of a Markdown document's first fenced `mermaid` block that
/// holds a state diagram, or every line of a text with no `mermaid` fence;
/// `None` for a document whose `mermaid` blocks hold no state diagram.
fn mermaid_block(lines: &[&str]) -> Option<std::ops::Range<usize>> {
    let fence = |l: &str| l.trim_start().starts_with("```") || l.trim_start().starts_with("~~~");
    let mut fenced = false;
    let mut i = 0;
    while i < lines.len() {
        let opens = lines[i].trim_start();
        if fence(opens) && opens[3..].trim_start().starts_with("mermaid") {
            fenced = true;
            let end = (i + 1..lines.len())
                .find(|&j| fence(lines[j]))
                .unwrap_or(lines.len());
            if lines[i + 1..end]
                .iter()
                .any(|l| l.trim().starts_with("stateDiagram"))
            {
                return Some(i + 1..end);
            }
            i = end;
        }
        i += 1;
    }
    (!fenced).then_some(0..lines.len())
}

/// Applies Mermaid class `class` to state `id`: `transition` and `terminal`
/// as `fsm diagram` writes them; any other class only styles the state.
fn mark(d: &mut Diagram, id: &str, class: &str) -> Result<(), String> {
    if !is_ident(id) {
        return Err(format!("expected a state id, found `{id}`"));
    }
    let state = d.state(id)?;
    match class {
        "transition" => state.transition = true,
        "terminal" => state.terminal = true,
        _ => {}
    }
    Ok(())
}

/// An action being assembled from arrows.
#[derive(Default)]
struct Assembled {
    /// Origins and their targets, in the order drawn.
    moves: Vec<(String, String)>,
    via: Option<String>,
    back: bool,
    in_place: bool,
    label: Label,
}

/// An arrow out of a transition state: its target, its label read, and as
/// drawn.
type Finish<'d> = (String, Label, &'d str);

/// The spec of diagram `d`, named `name` unless it names itself, starting
/// in `initial`; `from` says what it was imported from, for its first line.
fn write_spec(d: &Diagram, name: &str, initial: &str, from: &str) -> String {
    let drawn = |id: &str| d.index.get(id).map(|&at| &d.states[at].1);
    let display = |id: &str| drawn(id).map_or(id.to_owned(), |s| s.name.clone());
    let is_transition = |id: &str| drawn(id).is_some_and(|s| s.transition);
    let mut actions: Vec<(String, Assembled)> = Vec::new();
    // Each action's place in `actions`, by its name lowercased (a spec
    // compares names ignoring case).
    let mut slots: HashMap<String, usize> = HashMap::new();
    let slot = |name: &str,
                actions: &mut Vec<(String, Assembled)>,
                slots: &mut HashMap<String, usize>|
     -> usize {
        *slots.entry(name.to_ascii_lowercase()).or_insert_with(|| {
            actions.push((name.to_owned(), Assembled::default()));
            actions.len() - 1
        })
    };
    // Arrows out of a transition state end the action that entered it (with
    // their labels as drawn, which may name the origins they are for).
    let mut finishes: HashMap<(String, String), Vec<Finish<'_>>> = HashMap::new();
    for a in &d.arrows {
        if is_transition(&a.from) {
            let label = parse_label(&a.label);
            finishes
                .entry((a.from.clone(), label.action.clone()))
                .or_default()
                .push((a.to.clone(), label, &a.label));
        }
    }
    // States an arrow leaves for another.
    let left: HashSet<&str> = (d.arrows.iter())
        .filter(|a| a.from != a.to)
        .map(|a| a.from.as_str())
        .collect();
    for a in d.arrows.iter().filter(|a| !is_transition(&a.from)) {
        let label = if a.label.is_empty() {
            Label {
                action: format!("to_{}", snake(&display(&a.to))),
                ..Label::default()
            }
        } else {
            parse_label(&a.label)
        };
        let (from, to) = (display(&a.from), display(&a.to));
        if is_transition(&a.to) {
            let ends = finishes
                .get(&(a.to.clone(), label.action.clone()))
                .cloned()
                .unwrap_or_default();
            let at = slot(&label.action, &mut actions, &mut slots);
            let action = &mut actions[at].1;
            action.via = Some(display(&a.to));
            action.label = label.clone();
            action.back = ends.iter().any(|(_, l, _)| l.back);
            // The target from this origin: the one finish arrow, or the one whose
            // label names this origin.
            let target = (ends.iter())
                .find(|(_, l, _)| !l.back)
                .map(|(t, _, _)| display(t));
            let per_origin = ends.iter().find(|(_, _, raw)| {
                raw.split("(from ").nth(1).is_some_and(|o| {
                    o.trim_end_matches(')')
                        .split(" / ")
                        .any(|o| o.trim() == from)
                })
            });
            let target = per_origin
                .map(|(to, _, _)| display(to))
                .or(target)
                .unwrap_or_else(|| from.clone());
            action.moves.push((from, target));
        } else {
            // Several arrows with one name but different targets from one origin
            // cannot be one action: the later ones are named after their target.
            let mut key = label.action.clone();
            let in_place = a.from == a.to;
            if let Some(&at) = slots.get(&key.to_ascii_lowercase())
                && (actions[at].1.moves.iter()).any(|(o, t)| *o == from && *t != to)
            {
                key = format!("{}_to_{}", key, snake(&to));
            }
            let at = slot(&key, &mut actions, &mut slots);
            let action = &mut actions[at].1;
            action.label = label;
            // An action changes no state when each of its arrows is one back
            // to its own state; one that also moves elsewhere moves to the
            // state itself there (as `fsm diagram` draws an action that does).
            action.in_place = in_place && (action.in_place || action.moves.is_empty());
            action.moves.push((from, to));
        }
    }

    let mut comments = vec![format!("Imported from {from}.")];
    if !d.left_out.is_empty() {
        comments.push(format!(
            "Left out (a table has no place for them): {}.",
            d.left_out.join(", ")
        ));
    }
    let drawn_by_fsm = d.states.iter().any(|(_, s)| s.transition || s.terminal);
    if !drawn_by_fsm {
        comments.extend(
            [
                "",
                "A diagram cannot say which states are transition states (an action's",
                "status while it runs), nor who may perform each action (roles) or what",
                "must hold first (guards): add `via`, `roles` and `guards` where they apply.",
            ]
            .map(String::from),
        );
    }
    for (id, s) in &d.states {
        if s.ends && !s.terminal && left.contains(id.as_str()) && s.remove.is_none() {
            // A transition state's object is held: the arrow cannot mean a removal.
            let meaning = if s.transition {
                "."
            } else {
                ": they are removed there (`remove = true`); name the roles that may remove them."
            };
            comments.push(format!(
                "The diagram ends objects in {} (`{id} --> [*]`), which also has ways out{meaning}",
                s.name
            ));
        }
    }
    let mut def = MachineDef {
        name: snake(d.name.as_deref().unwrap_or(name)),
        initial: Some(display(initial)),
        ..MachineDef::default()
    };
    let declared = |names: Vec<String>, description: &str| -> Vec<NamedDef> {
        let mut names = names;
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|name| NamedDef {
                name,
                description: Some(description.to_owned()),
                cel: None,
            })
            .collect()
    };
    let roles = actions
        .iter()
        .flat_map(|(_, a)| a.label.roles.clone())
        .chain(d.states.iter().filter_map(|(_, s)| s.owner.clone()))
        .chain(
            d.states
                .iter()
                .flat_map(|(_, s)| s.remove.iter().flatten().cloned()),
        )
        .collect();
    def.roles = declared(roles, "Imported from the diagram");
    let guards = actions
        .iter()
        .flat_map(|(_, a)| a.label.guards.clone())
        .collect();
    def.guards = declared(guards, "Imported from the diagram: say what must hold");

    for (id, s) in &d.states {
        let has_exit = left.contains(id.as_str());
        let kind = if s.transition {
            StateKind::Transition
        } else {
            StateKind::Static
        };
        let mut state = StateDef::new(s.name.clone(), kind);
        state.terminal = s.terminal || (s.ends && !has_exit);
        state.owner = s.owner.clone();
        // An object that ends where it has ways out leaves the table there: it
        // is removed (by whom, a note as `fsm diagram` writes it says).
        // (Not a transition state's: an object there is held, never removed.)
        state.remove =
            (s.remove.clone()).or_else(|| (s.ends && has_exit && !s.transition).then(Vec::new));
        state.persisted = s.persisted;
        if !s.descriptions.is_empty() {
            state.description = Some(s.descriptions.join("; "));
        }
        def.states.push(state);
    }

    for (name, a) in actions {
        let mut from: Vec<String> = Vec::new();
        for (o, _) in &a.moves {
            if !from.contains(o) {
                from.push(o.clone());
            }
        }
        let targets: BTreeMap<&str, &str> = a
            .moves
            .iter()
            .map(|(o, t)| (o.as_str(), t.as_str()))
            .collect();
        let mut distinct: Vec<&str> = targets.values().copied().collect();
        distinct.sort();
        distinct.dedup();
        let to = if a.back || (a.via.is_some() && a.moves.iter().all(|(o, t)| o == t)) {
            TargetDef::Origin
        } else if a.in_place && a.via.is_none() {
            // An action that changes no state: allowed in its origins only.
            TargetDef::Unset
        } else if distinct.len() == 1 {
            TargetDef::State(distinct[0].to_owned())
        } else {
            TargetDef::PerOrigin(
                from.iter()
                    .map(|o| (o.clone(), targets[o.as_str()].to_owned()))
                    .collect(),
            )
        };
        def.actions.push(ActionDef {
            name,
            from,
            via: a.via,
            to,
            roles: a.label.roles,
            guards: a.label.guards,
            hidden: a.label.hidden,
            ..ActionDef::default()
        });
    }
    spec_text::write(&def, &comments)
}

const ALPHABET: &[u8; 64] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_";

/// The PlantUML source a PlantUML server's image address carries
/// (`http://www.plantuml.com/plantuml/svg/<code>`, or the code alone): PlantUML's
/// base64 alphabet (`0-9A-Za-z-_`) over raw deflate. The first such address in
/// `text` is read, so a Markdown document holding the image works too (the
/// sabakan seed draws its diagram that way).
pub fn source_from_url(text: &str) -> Result<String, ImportError> {
    let (code, line, column) = match text.find("/plantuml/") {
        Some(at) => {
            let after = &text[at + "/plantuml/".len()..];
            // `svg/`, `png/`, `uml/`, ... then the code.
            let start = after.find('/').map_or(0, |s| s + 1);
            let code: String = after[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            let before = &text[..at + "/plantuml/".len() + start];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            (code, line, column)
        }
        None => (text.trim().to_owned(), 1, 1),
    };
    let error = |message: String| ImportError {
        line,
        column,
        message,
    };
    let mut deflated = Vec::with_capacity(code.len() * 3 / 4);
    let sextets: Vec<u32> = code
        .bytes()
        .map(|c| {
            ALPHABET
                .iter()
                .position(|&a| a == c)
                .map(|p| p as u32)
                .ok_or_else(|| error(format!("`{}` is not in PlantUML's alphabet", c as char)))
        })
        .collect::<Result<_, _>>()?;
    if sextets.is_empty() {
        return Err(error(
            "expected a PlantUML server address or its code".into(),
        ));
    }
    for chunk in sextets.chunks(4) {
        let n = chunk
            .iter()
            .chain(std::iter::repeat(&0))
            .take(4)
            .fold(0, |n, &s| (n << 6) | s);
        deflated.extend_from_slice(&n.to_be_bytes()[1..]);
    }
    let source = miniz_oxide::inflate::decompress_to_vec(&deflated).map_err(|e| {
        error(format!(
            "the address's code is not a compressed diagram ({:?})",
            e.status
        ))
    })?;
    String::from_utf8(source).map_err(|_| error("the diagram is not UTF-8 text".into()))
}
