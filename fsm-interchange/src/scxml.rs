//! W3C SCXML.

use std::fmt::Write;

use fsm_model::{ActionId, Machine, Target, xml_escape};

use crate::{ExportError, child, done_event, entries, failed_event, origins_in_spec_order};

/// The namespace of what `fsm export` writes beside SCXML's own elements
/// (roles, guards, owners, deadlines, descriptions, earlier names, hidden
/// actions, the order of the actions): engines
/// ignore elements and attributes of namespaces they do not know, and
/// [`from_scxml`](crate::from_scxml) reads them back.
pub const FSM_NAMESPACE: &str = "urn:fsm:scxml";

/// Text for inside an XML comment, which may not hold `--`.
fn comment(text: &str) -> String {
    text.replace("--", "- -")
}

/// Text for an attribute's value: escaped, and its line breaks and tabs as
/// references (a parser reads them as spaces otherwise).
fn attr(text: &str) -> String {
    xml_escape(text)
        .replace('\n', "&#10;")
        .replace('\r', "&#13;")
        .replace('\t', "&#9;")
}

/// ` fsm:NAME="VALUE"` for each pair whose value is there.
fn fsm_attrs(pairs: impl IntoIterator<Item = (&'static str, Option<String>)>) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        if let Some(value) = value {
            let _ = write!(out, " fsm:{name}=\"{}\"", attr(&value));
        }
    }
    out
}

/// What an action carries besides its moves, as attributes of each of its
/// transitions.
fn action_attrs(m: &Machine, a: ActionId) -> String {
    let action = m.action(a);
    fsm_attrs([
        ("roles", listed(texts(&action.roles))),
        ("guards", listed(m.guard_names(a))),
        ("hidden", action.hidden.then(|| "true".to_owned())),
        (
            "deadline-seconds",
            action.deadline.map(|d| d.as_secs_f64().to_string()),
        ),
        (
            "description",
            action.description.as_deref().map(String::from),
        ),
        ("renamed-from", listed(texts(&action.renamed_from))),
        (
            "to-origin",
            (action.via.is_some() && action.target == Target::Origin).then(|| "true".to_owned()),
        ),
    ])
}

/// Names as the value of an attribute that lists them (separated by
/// spaces), if there are any. A role's or guard's name may hold a space:
/// written `%20` (and `%` as `%25`), as [`from_scxml`](crate::from_scxml)
/// reads it.
fn listed(names: Vec<&str>) -> Option<String> {
    let item = |name: &str| name.replace('%', "%25").replace(' ', "%20");
    (!names.is_empty()).then(|| names.into_iter().map(item).collect::<Vec<_>>().join(" "))
}

/// The names of a spec's list (roles, earlier names), borrowed.
fn texts(texts: &[fsm_model::Text]) -> Vec<&str> {
    texts.iter().map(|t| t.as_ref()).collect()
}

/// `machine` as a W3C SCXML document, under the contract in the crate's
/// documentation: state ids are the states' names, a transition state's
/// children are `<STATE>.<ORIGIN>`, an action that changes no state is a
/// targetless transition; roles, guards (with their CEL), owners, deadlines,
/// descriptions, earlier names, hidden actions and the order of the actions
/// (and of an action's origins, where the spec lists them in another order
/// than the states') are elements and attributes in the [`FSM_NAMESPACE`].
///
/// # Errors
///
/// A name SCXML would read as something else ([`ExportError`]).
pub fn scxml(m: &Machine) -> Result<String, ExportError> {
    crate::names::for_scxml(m)?;
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<!-- Exported by fsm from machine `{}`. -->",
        comment(m.name())
    );
    let _ = writeln!(
        out,
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" xmlns:fsm=\"{FSM_NAMESPACE}\" version=\"1.0\" name=\"{}\" initial=\"{}\"{}>",
        attr(m.name()),
        attr(&m.state(m.initial()).name),
        fsm_attrs([
            ("description", m.description().map(String::from)),
            (
                "single-mutator",
                m.single_mutator().then(|| "true".to_owned())
            ),
            // The spec's order, so that the table comes back the same (an
            // action's id is its place in the order).
            (
                "actions",
                listed(m.action_ids().map(|a| m.action(a).name.as_ref()).collect()),
            ),
        ])
    );
    for r in m.roles() {
        let description = (r.description.as_deref())
            .map(|d| format!(" description=\"{}\"", attr(d)))
            .unwrap_or_default();
        let _ = writeln!(out, "  <fsm:role name=\"{}\"{description}/>", attr(&r.name));
    }
    for g in m.guards() {
        let cel = (g.cel.as_deref())
            .map(|cel| format!(" cel=\"{}\"", attr(cel)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  <fsm:guard name=\"{}\" description=\"{}\"{cel}/>",
            attr(&g.name),
            attr(&g.description)
        );
    }
    // The origins of each action that lists them in another order than the
    // states' (the transitions come state by state).
    for a in m.action_ids() {
        if let Some(origins) = origins_in_spec_order(m, a).and_then(listed) {
            let action = attr(&m.action(a).name);
            let _ = writeln!(
                out,
                "  <fsm:origins action=\"{action}\" from=\"{}\"/>",
                attr(&origins)
            );
        }
    }
    for s in m.state_ids() {
        let state = m.state(s);
        let id = attr(&state.name);
        let element = if state.terminal { "final" } else { "state" };
        let ways = if state.is_transition() {
            entries(m, s)
        } else {
            Vec::new()
        };
        let initial = ways
            .first()
            .map(|first| {
                let first = child(m, s, first.action, first.origin);
                format!(" initial=\"{id}.{}\"", attr(&first))
            })
            .unwrap_or_default();
        let notes = fsm_attrs([
            ("owner", state.owner.as_deref().map(String::from)),
            // Anyone removes: `fsm:remove="true"`; some roles: those roles.
            (
                "remove",
                (state.remove.as_deref() == Some(&[])).then(|| "true".to_owned()),
            ),
            (
                "remove-roles",
                listed(texts(state.remove.as_deref().unwrap_or(&[]))),
            ),
            ("persisted", (!state.persisted).then(|| "false".to_owned())),
            (
                "deadline-seconds",
                state.deadline.map(|d| d.as_secs_f64().to_string()),
            ),
            (
                "description",
                state.description.as_deref().map(String::from),
            ),
            ("renamed-from", listed(texts(&state.renamed_from))),
        ]);
        let _ = writeln!(out, "  <{element} id=\"{id}\"{initial}{notes}>");
        for rule in m.rules_from(s) {
            let event = attr(&m.action(rule.action).name);
            let target = match (rule.changes_state, rule.via) {
                (false, _) => String::new(),
                (true, Some(via)) => format!(
                    " target=\"{}.{}\"",
                    attr(&m.state(via).name),
                    attr(&child(m, via, rule.action, s))
                ),
                (true, None) => format!(" target=\"{}\"", attr(&m.state(rule.target).name)),
            };
            let _ = writeln!(
                out,
                "    <transition event=\"{event}\"{target}{}/>",
                action_attrs(m, rule.action)
            );
        }
        for way in &ways {
            let _ = writeln!(
                out,
                "    <state id=\"{id}.{}\">",
                attr(&child(m, s, way.action, way.origin))
            );
            let _ = writeln!(
                out,
                "      <transition event=\"{}\" target=\"{}\"/>",
                attr(&done_event(m, way.action)),
                attr(&m.state(way.target).name)
            );
            let _ = writeln!(
                out,
                "      <transition event=\"{}\" target=\"{}\"/>",
                attr(&failed_event(m, way.action)),
                attr(&m.state(way.origin).name)
            );
            out.push_str("    </state>\n");
        }
        let _ = writeln!(out, "  </{element}>");
    }
    out.push_str("</scxml>\n");
    Ok(out)
}
