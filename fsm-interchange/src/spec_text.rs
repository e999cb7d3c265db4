//! A definition written as a spec (TOML), for the importers.

use std::fmt::Write as _;

use fsm_model::{MachineDef, NamedDef, StateKind, TargetDef, format_duration};

/// `s` as a TOML basic string: quotes, backslashes and control characters
/// escaped.
pub(crate) fn quote(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(q, "\\u{:04X}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// `s` as a TOML key: bare when it can be (`RUNNING`, `put-in`), else quoted.
pub(crate) fn key(s: &str) -> String {
    let bare = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { s.to_owned() } else { quote(s) }
}

/// A TOML array of strings.
pub(crate) fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| quote(i)).collect();
    format!("[{}]", quoted.join(", "))
}

/// `def` as a spec, under `comments` (each a line, written as `# line`).
pub(crate) fn write(def: &MachineDef, comments: &[String]) -> String {
    let mut out = String::new();
    for c in comments {
        if c.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {c}");
        }
    }
    out.push_str("\n[machine]\n");
    let _ = writeln!(out, "name = {}", quote(&def.name));
    if let Some(d) = &def.description {
        let _ = writeln!(out, "description = {}", quote(d));
    }
    if let Some(initial) = &def.initial {
        let _ = writeln!(out, "initial = {}", quote(initial));
    }
    if def.single_mutator {
        out.push_str("single_mutator = true\n");
    }
    if !def.allow.is_empty() {
        let _ = writeln!(out, "allow = {}", list(&def.allow));
    }
    named(&mut out, "roles", &def.roles);
    named(&mut out, "guards", &def.guards);

    out.push_str("\n[states]\n");
    for s in &def.states {
        let mut fields = Vec::new();
        if s.kind == StateKind::Transition {
            fields.push("transition = true".to_owned());
        }
        if s.terminal {
            fields.push("terminal = true".to_owned());
        }
        if let Some(owner) = &s.owner {
            fields.push(format!("owner = {}", quote(owner)));
        }
        match s.remove.as_deref() {
            None => {}
            Some([]) => fields.push("remove = true".to_owned()),
            Some(roles) => fields.push(format!("remove = {}", list(roles))),
        }
        if !s.persisted {
            fields.push("persisted = false".to_owned());
        }
        if let Some(d) = s.deadline {
            fields.push(format!("deadline = {}", quote(&format_duration(d))));
        }
        if !s.renamed_from.is_empty() {
            fields.push(format!("renamed_from = {}", list(&s.renamed_from)));
        }
        // A description alone is the state's value; a state with nothing
        // to say is `{}` (no description made up from its name).
        let value = match (&s.description, fields.is_empty()) {
            (Some(d), true) => quote(d),
            (None, true) => "{}".to_owned(),
            (d, false) => {
                if let Some(d) = d {
                    fields.push(format!("description = {}", quote(d)));
                }
                format!("{{ {} }}", fields.join(", "))
            }
        };
        let _ = writeln!(out, "{} = {value}", key(&s.name));
    }

    out.push_str("\n[actions]\n");
    for a in &def.actions {
        let from = match a.from.as_slice() {
            [one] => quote(one),
            many => list(many),
        };
        let mut fields = vec![format!("from = {from}")];
        if let Some(via) = &a.via {
            fields.push(format!("via = {}", quote(via)));
        }
        match &a.to {
            TargetDef::Unset => {}
            TargetDef::State(to) => fields.push(format!("to = {}", quote(to))),
            TargetDef::Origin => fields.push("to_origin = true".to_owned()),
            TargetDef::PerOrigin(pairs) => {
                let per: Vec<String> = pairs
                    .iter()
                    .map(|(o, t)| format!("{} = {}", key(o), quote(t)))
                    .collect();
                fields.push(format!("to = {{ {} }}", per.join(", ")));
            }
        }
        if !a.roles.is_empty() {
            fields.push(format!("roles = {}", list(&a.roles)));
        }
        if !a.guards.is_empty() {
            fields.push(format!("guards = {}", list(&a.guards)));
        }
        if a.hidden {
            fields.push("hidden = true".to_owned());
        }
        if let Some(d) = a.deadline {
            fields.push(format!("deadline = {}", quote(&format_duration(d))));
        }
        if !a.renamed_from.is_empty() {
            fields.push(format!("renamed_from = {}", list(&a.renamed_from)));
        }
        if let Some(d) = &a.description {
            fields.push(format!("description = {}", quote(d)));
        }
        let _ = writeln!(out, "{} = {{ {} }}", key(&a.name), fields.join(", "));
    }
    out
}

/// A `[roles]` or `[guards]` table: each name and what it means.
fn named(out: &mut String, table: &str, items: &[NamedDef]) {
    if items.is_empty() {
        return;
    }
    let _ = write!(out, "\n[{table}]\n");
    for item in items {
        let description = item.description.as_deref().unwrap_or("");
        match &item.cel {
            Some(cel) => {
                let _ = writeln!(
                    out,
                    "{} = {{ description = {}, cel = {} }}",
                    key(&item.name),
                    quote(description),
                    quote(cel)
                );
            }
            None => {
                let _ = writeln!(out, "{} = {}", key(&item.name), quote(description));
            }
        }
    }
}
