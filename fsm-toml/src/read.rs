//! Reading the spanned TOML document into a definition. Every value is checked for
//! its shape where it stands, so each mistake is reported at its own place, all of
//! them at once.

use std::ops::Range;

use fsm_model::{
    ActionDef, Diagnostic, Lint, MachineDef, NamedDef, Site, StateDef, StateKind, TargetDef,
};
use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

use crate::{Declared, Read, SourceMap};

type Value<'i> = Spanned<DeValue<'i>>;
type Key<'i> = Spanned<DeString<'i>>;

pub(crate) fn read(text: &str) -> Read {
    let doc = match DeTable::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            return Read {
                def: MachineDef::default(),
                map: SourceMap::default(),
                diagnostics: vec![Diagnostic::new(
                    Lint::Syntax,
                    Site::Text(e.span().unwrap_or(0..0)),
                    e.message().trim_end().to_owned(),
                )],
                declared: Declared::default(),
            };
        }
    };
    let mut r = Reader::default();
    let def = r.spec(doc.get_ref(), doc.span());
    #[cfg(feature = "cel")]
    for (expression, what) in std::mem::take(&mut r.cel) {
        r.findings
            .extend(crate::cel::check(text, &expression, &what));
    }
    let mut diagnostics = r.errors;
    diagnostics.append(&mut r.findings);
    Read {
        def,
        map: r.map,
        diagnostics,
        declared: r.declared,
    }
}

#[derive(Default)]
struct Reader {
    map: SourceMap,
    /// Values of the wrong shape: the definition is not usable.
    errors: Vec<Diagnostic>,
    /// Findings that leave the definition usable.
    findings: Vec<Diagnostic>,
    /// The sections read whole, as tables.
    declared: Declared,
    /// The guards' CEL expressions, each with what names it, to parse once the
    /// document is read.
    #[cfg(feature = "cel")]
    cel: Vec<(Spanned<String>, String)>,
}

/// The entries of a table, in the order written, each key checked against the
/// settings the table may have.
struct Fields<'a, 'i> {
    entries: Vec<(&'a Key<'i>, &'a Value<'i>)>,
}

impl<'a, 'i> Fields<'a, 'i> {
    fn get(&self, key: &str) -> Option<&'a Value<'i>> {
        self.entries
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|&(_, v)| v)
    }
}

fn kind_of(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// The entries of `table` in source order (the document keeps them sorted by key).
fn in_order<'a, 'i>(table: &'a DeTable<'i>) -> Vec<(&'a Key<'i>, &'a Value<'i>)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    entries
}

impl Reader {
    fn schema(&mut self, span: Range<usize>, message: String) {
        self.errors
            .push(Diagnostic::new(Lint::Schema, Site::Text(span), message));
    }

    fn expected(&mut self, v: &Value<'_>, what: &str, expected: &str) {
        let message = format!(
            "{what}: expected {expected}, found {}",
            kind_of(v.get_ref())
        );
        self.schema(v.span(), message);
    }

    /// The entries of a table value, every key one of `known`.
    fn fields<'a, 'i>(
        &mut self,
        v: &'a Value<'i>,
        what: &str,
        expected: &str,
        known: &[&str],
    ) -> Option<Fields<'a, 'i>> {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, what, expected);
            return None;
        };
        Some(self.known(table, what, known))
    }

    fn known<'a, 'i>(
        &mut self,
        table: &'a DeTable<'i>,
        what: &str,
        known: &[&str],
    ) -> Fields<'a, 'i> {
        let entries = in_order(table);
        for (k, _) in &entries {
            if !known.contains(&k.get_ref().as_ref()) {
                let near = fsm_model::suggest(k.get_ref(), known.iter().copied())
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                self.schema(
                    k.span(),
                    format!(
                        "unknown setting `{}` in {what}; expected one of: {}{near}",
                        k.get_ref(),
                        known.join(", ")
                    ),
                );
            }
        }
        Fields { entries }
    }

    fn string(&mut self, v: &Value<'_>, what: &str) -> Option<Spanned<String>> {
        match v.get_ref() {
            DeValue::String(s) => Some(Spanned::new(v.span(), s.to_string())),
            _ => {
                self.expected(v, what, "a string");
                None
            }
        }
    }

    fn bool(&mut self, v: &Value<'_>, what: &str) -> Option<Spanned<bool>> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(Spanned::new(v.span(), *b)),
            _ => {
                self.expected(v, what, "`true` or `false`");
                None
            }
        }
    }

    /// `"x"` or `["x", "y"]`, each name with its span.
    fn names(&mut self, v: &Value<'_>, what: &str, of: &str) -> Vec<Spanned<String>> {
        match v.get_ref() {
            DeValue::String(s) => vec![Spanned::new(v.span(), s.to_string())],
            DeValue::Array(items) => items
                .iter()
                .filter_map(|item| self.string(item, &format!("an entry of {what}")))
                .collect(),
            _ => {
                self.expected(v, what, &format!("{of} or an array of them"));
                Vec::new()
            }
        }
    }

    /// A state's `remove`: `true` (anyone), `false` (no one), a role or an
    /// array of roles, each role's span kept.
    fn remove(&mut self, v: &Value<'_>, what: &str, state: usize) -> Option<Vec<String>> {
        self.map.insert(Site::StateRemove(state), v.span());
        match v.get_ref() {
            DeValue::Boolean(anyone) => anyone.then(Vec::new),
            DeValue::String(_) | DeValue::Array(_) => {
                let roles = self.names(v, what, "a role");
                Some(
                    roles
                        .into_iter()
                        .enumerate()
                        .map(|(k, role)| {
                            self.map
                                .insert(Site::StateRemoveRole(state, k), role.span());
                            role.into_inner()
                        })
                        .collect(),
                )
            }
            _ => {
                self.expected(v, what, "`true`, `false`, a role or an array of roles");
                None
            }
        }
    }

    /// A table of named entries (`[roles]`, `[states]`, ...), in the order written;
    /// `None`, reported, when it is not a table.
    fn section<'a, 'i>(
        &mut self,
        v: &'a Value<'i>,
        what: &str,
    ) -> Option<Vec<(&'a Key<'i>, &'a Value<'i>)>> {
        match v.get_ref() {
            DeValue::Table(table) => Some(in_order(table)),
            _ => {
                self.expected(v, what, "a table");
                None
            }
        }
    }

    fn spec(&mut self, doc: &DeTable<'_>, span: Range<usize>) -> MachineDef {
        let top = self.known(
            doc,
            "the spec",
            &["machine", "roles", "guards", "states", "actions"],
        );
        let mut def = MachineDef::default();
        match top.get("machine") {
            Some(machine) => self.machine(machine, &mut def),
            None => self.schema(
                span.start..span.start,
                "the spec has no `[machine]` table; it needs at least `name` and `initial`".into(),
            ),
        }
        if let Some(roles) = top.get("roles")
            && let Some(roles) = self.named(roles, "[roles]", "a role", Site::Role)
        {
            def.roles = roles;
            self.declared.roles = true;
        }
        if let Some(guards) = top.get("guards")
            && let Some(guards) = self.named(guards, "[guards]", "a guard", Site::Guard)
        {
            def.guards = guards;
            self.declared.guards = true;
        }
        if let Some(states) = top.get("states")
            && let Some(states) = self.section(states, "[states]")
        {
            self.declared.states = true;
            for (i, (name, v)) in states.into_iter().enumerate() {
                self.map.insert(Site::State(i), name.span());
                let state = self.state(i, name.get_ref(), v);
                def.states.push(state);
            }
        }
        if let Some(actions) = top.get("actions") {
            for (a, (name, v)) in self
                .section(actions, "[actions]")
                .into_iter()
                .flatten()
                .enumerate()
            {
                self.map.insert(Site::Action(a), name.span());
                let action = self.action(a, name.get_ref(), v);
                def.actions.push(action);
            }
        }
        def
    }

    fn machine(&mut self, v: &Value<'_>, def: &mut MachineDef) {
        self.map.insert(Site::Machine, v.span());
        let what = "[machine]";
        let known = ["name", "description", "initial", "single_mutator", "allow"];
        let Some(fields) = self.fields(v, what, "a table", &known) else {
            return;
        };
        match fields.get("name") {
            Some(name) => {
                if let Some(name) = self.string(name, "`name` of [machine]") {
                    self.map.insert(Site::MachineName, name.span());
                    def.name = name.into_inner();
                }
            }
            None => self.schema(v.span(), "[machine] has no `name`".into()),
        }
        if let Some(d) = fields.get("description") {
            def.description = self
                .string(d, "`description` of [machine]")
                .map(Spanned::into_inner);
        }
        if let Some(initial) = fields.get("initial")
            && let Some(initial) = self.string(initial, "`initial` of [machine]")
        {
            self.map.insert(Site::Initial, initial.span());
            def.initial = Some(initial.into_inner());
        }
        if let Some(single) = fields.get("single_mutator") {
            def.single_mutator = self
                .bool(single, "`single_mutator` of [machine]")
                .is_some_and(|b| *b.get_ref());
        }
        if let Some(allow) = fields.get("allow") {
            for (i, lint) in self
                .names(allow, "`allow` of [machine]", "a lint name")
                .into_iter()
                .enumerate()
            {
                self.map.insert(Site::Allow(i), lint.span());
                def.allow.push(lint.into_inner());
            }
        }
    }

    /// Roles or guards: `name = "description"`, or a table with `description`;
    /// `None`, reported, when the section is not a table.
    fn named(
        &mut self,
        section: &Value<'_>,
        what: &str,
        one: &str,
        site: fn(usize) -> Site,
    ) -> Option<Vec<NamedDef>> {
        let mut out = Vec::new();
        for (i, (name, v)) in self.section(section, what)?.into_iter().enumerate() {
            self.map.insert(site(i), name.span());
            let entry = format!("{one} `{}`", name.get_ref());
            // Guards may say their condition in CEL; roles are only described.
            let keys: &[&str] = if what == "[guards]" {
                &["description", "cel"]
            } else {
                &["description"]
            };
            let (description, cel) = match v.get_ref() {
                DeValue::String(s) => (Some(s.to_string()), None),
                DeValue::Table(_) => {
                    let fields = self.fields(v, &entry, "", keys);
                    let mut text = |key: &str| {
                        fields
                            .as_ref()
                            .and_then(|f| f.get(key))
                            .and_then(|d| self.string(d, &format!("`{key}` of {entry}")))
                    };
                    let description = text("description").map(Spanned::into_inner);
                    let cel = text("cel");
                    #[cfg(feature = "cel")]
                    if let Some(cel) = &cel {
                        self.cel.push((cel.clone(), format!("`cel` of {entry}")));
                    }
                    (description, cel.map(Spanned::into_inner))
                }
                _ => {
                    self.expected(v, &entry, "a description or a table with `description`");
                    (None, None)
                }
            };
            out.push(NamedDef {
                name: name.get_ref().to_string(),
                description,
                cel,
            });
        }
        Some(out)
    }

    /// `NAME = "description"` or a table of settings.
    fn state(&mut self, i: usize, name: &str, v: &Value<'_>) -> StateDef {
        let mut state = StateDef::new(name, StateKind::Static);
        let what = format!("state `{name}`");
        if let DeValue::String(d) = v.get_ref() {
            state.description = Some(d.to_string());
            return state;
        }
        let known = [
            "transition",
            "terminal",
            "persisted",
            "owner",
            "remove",
            "deadline",
            "renamed_from",
            "description",
        ];
        let Some(fields) = self.fields(v, &what, "a description or a table of settings", &known)
        else {
            return state;
        };
        let of = |key: &str| format!("`{key}` of {what}");
        if let Some(t) = fields.get("transition")
            && self
                .bool(t, &of("transition"))
                .is_some_and(|b| *b.get_ref())
        {
            state.kind = StateKind::Transition;
        }
        if let Some(t) = fields
            .get("terminal")
            .and_then(|t| self.bool(t, &of("terminal")))
        {
            self.map.insert(Site::StateTerminal(i), t.span());
            state.terminal = *t.get_ref();
        }
        if let Some(p) = fields
            .get("persisted")
            .and_then(|p| self.bool(p, &of("persisted")))
        {
            state.persisted = *p.get_ref();
        }
        if let Some(owner) = fields
            .get("owner")
            .and_then(|o| self.string(o, &of("owner")))
        {
            self.map.insert(Site::StateOwner(i), owner.span());
            state.owner = Some(owner.into_inner());
        }
        if let Some(r) = fields.get("remove") {
            state.remove = self.remove(r, &of("remove"), i);
        }
        if let Some(d) = fields.get("deadline") {
            state.deadline = self.deadline(d, &of("deadline"), Site::StateDeadline(i));
        }
        if let Some(r) = fields.get("renamed_from") {
            for (k, old) in self
                .names(r, &of("renamed_from"), "a name")
                .into_iter()
                .enumerate()
            {
                self.map.insert(Site::StateRename(i, k), old.span());
                state.renamed_from.push(old.into_inner());
            }
        }
        if let Some(d) = fields.get("description") {
            state.description = self.string(d, &of("description")).map(Spanned::into_inner);
        }
        state
    }

    fn action(&mut self, a: usize, name: &str, v: &Value<'_>) -> ActionDef {
        let mut action = ActionDef {
            name: name.to_owned(),
            ..Default::default()
        };
        let what = format!("action `{name}`");
        let known = [
            "from",
            "via",
            "to",
            "to_origin",
            "roles",
            "guards",
            "hidden",
            "deadline",
            "renamed_from",
            "description",
        ];
        let Some(fields) = self.fields(v, &what, "a table of settings", &known) else {
            return action;
        };
        let of = |key: &str| format!("`{key}` of {what}");
        if let Some(from) = fields.get("from") {
            for (i, origin) in self
                .names(from, &of("from"), "a state name")
                .into_iter()
                .enumerate()
            {
                self.map.insert(Site::ActionFrom(a, i), origin.span());
                action.from.push(origin.into_inner());
            }
        }
        if let Some(via) = fields.get("via").and_then(|v| self.string(v, &of("via"))) {
            self.map.insert(Site::ActionVia(a), via.span());
            action.via = Some(via.into_inner());
        }
        let to = fields.get("to");
        let to_origin = fields
            .get("to_origin")
            .and_then(|o| self.bool(o, &of("to_origin")));
        if let (Some(to), Some(origin)) = (to, &to_origin) {
            // Reported, then `to` is kept, so nothing cascades from it.
            self.findings.push(
                Diagnostic::new(
                    Lint::ConflictingTarget,
                    Site::Text(origin.span()),
                    format!("action `{name}` has both `to` and `to_origin`"),
                )
                .with_label("remove this or `to`")
                .with_related(Site::Text(to.span()), "the target is given here"),
            );
        }
        action.to = match (to, to_origin) {
            (Some(to), _) => {
                self.map.insert(Site::ActionTo(a), to.span());
                self.target(a, to, &of("to"))
            }
            (None, Some(origin)) => {
                self.map.insert(Site::ActionTo(a), origin.span());
                if *origin.get_ref() {
                    TargetDef::Origin
                } else {
                    TargetDef::Unset
                }
            }
            (None, None) => TargetDef::Unset,
        };
        if let Some(roles) = fields.get("roles") {
            for (i, role) in self
                .names(roles, &of("roles"), "a role")
                .into_iter()
                .enumerate()
            {
                self.map.insert(Site::ActionRole(a, i), role.span());
                action.roles.push(role.into_inner());
            }
        }
        if let Some(guards) = fields.get("guards") {
            for (i, guard) in self
                .names(guards, &of("guards"), "a guard")
                .into_iter()
                .enumerate()
            {
                self.map.insert(Site::ActionGuard(a, i), guard.span());
                action.guards.push(guard.into_inner());
            }
        }
        if let Some(hidden) = fields.get("hidden") {
            action.hidden = self
                .bool(hidden, &of("hidden"))
                .is_some_and(|b| *b.get_ref());
        }
        if let Some(d) = fields.get("deadline") {
            action.deadline = self.deadline(d, &of("deadline"), Site::ActionDeadline(a));
        }
        if let Some(r) = fields.get("renamed_from") {
            for (k, old) in self
                .names(r, &of("renamed_from"), "a name")
                .into_iter()
                .enumerate()
            {
                self.map.insert(Site::ActionRename(a, k), old.span());
                action.renamed_from.push(old.into_inner());
            }
        }
        if let Some(d) = fields.get("description") {
            action.description = self.string(d, &of("description")).map(Spanned::into_inner);
        }
        action
    }

    /// `"30s"`, `"10m"`, `"1h30m"`: a duration, at `site`.
    fn deadline(&mut self, v: &Value<'_>, what: &str, site: Site) -> Option<std::time::Duration> {
        let text = self.string(v, what)?;
        self.map.insert(site, text.span());
        match fsm_model::parse_duration(text.get_ref()) {
            Ok(d) => Some(d),
            Err(e) => {
                self.schema(text.span(), format!("{what}: {e}"));
                None
            }
        }
    }

    /// `"STATE"` or `{ ORIGIN = "TARGET", ... }`.
    fn target(&mut self, a: usize, to: &Value<'_>, what: &str) -> TargetDef {
        match to.get_ref() {
            DeValue::String(s) => TargetDef::State(s.to_string()),
            DeValue::Table(pairs) => TargetDef::PerOrigin(
                in_order(pairs)
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, (origin, target))| {
                        let entry = format!("the target from `{}` in {what}", origin.get_ref());
                        let target = self.string(target, &entry)?;
                        self.map.insert(Site::ActionToOrigin(a, i), origin.span());
                        self.map.insert(Site::ActionToTarget(a, i), target.span());
                        Some((origin.get_ref().to_string(), target.into_inner()))
                    })
                    .collect(),
            ),
            _ => {
                self.expected(
                    to,
                    what,
                    "a state name or a table mapping each origin to its target",
                );
                TargetDef::Unset
            }
        }
    }
}
