//! The TOML spec format (documented in `specs/README.md`): parsing with spans, and
//! lowering into a [`MachineDef`] plus a [`SourceMap`] that tells where each
//! [`Site`] was written.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use super::def::{ActionDef, MachineDef, NamedDef, Site, StateDef, StateKind, TargetDef};
use crate::analysis::{Diagnostic, Lint};

/// Where each [`Site`] of a definition was written in its source text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMap {
    spans: HashMap<Site, Range<usize>>,
}

impl SourceMap {
    /// Records that `site` was written at `span`.
    pub fn insert(&mut self, site: Site, span: Range<usize>) {
        self.spans.insert(site, span);
    }

    /// The byte range of `site`, or of the nearest enclosing site that has one.
    pub fn span(&self, site: &Site) -> Option<Range<usize>> {
        if let Site::Text(range) = site {
            return Some(range.clone());
        }
        let mut at = Some(site.clone());
        while let Some(s) = at {
            if let Some(span) = self.spans.get(&s) {
                return Some(span.clone());
            }
            at = s.parent();
        }
        None
    }
}

/// A spec file read into a definition.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The machine as written.
    pub def: MachineDef,
    /// Where each site of `def` is in the text.
    pub map: SourceMap,
    /// Findings of the file format itself (such as `to` and `to_origin` both given).
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses TOML spec text into a definition and its source map.
///
/// The error is a syntax error or a value of the wrong shape, with the byte range at
/// fault; checking what the definition means is [`crate::analysis::check`]'s job.
pub fn parse(text: &str) -> Result<Parsed, Box<Diagnostic>> {
    let raw: RawSpec = toml::from_str(text).map_err(|e| {
        // Text that is valid TOML failed on a value of the wrong shape.
        let lint = if toml::from_str::<toml::Table>(text).is_ok() {
            Lint::Schema
        } else {
            Lint::Syntax
        };
        let span = e.span().unwrap_or(0..0);
        Box::new(Diagnostic::new(
            lint,
            Site::Text(span),
            e.message().trim_end().to_owned(),
        ))
    })?;
    Ok(raw.lower())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    machine: Spanned<RawMachine>,
    #[serde(default)]
    roles: BTreeMap<Spanned<String>, Spanned<Description>>,
    #[serde(default)]
    guards: BTreeMap<Spanned<String>, Spanned<Description>>,
    #[serde(default)]
    states: BTreeMap<Spanned<String>, Spanned<RawState>>,
    #[serde(default)]
    actions: BTreeMap<Spanned<String>, Spanned<RawAction>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    name: String,
    description: Option<String>,
    initial: Option<Spanned<String>>,
    #[serde(default)]
    single_mutator: bool,
    #[serde(default)]
    allow: Vec<Spanned<String>>,
}

/// A role or guard entry: `name = "description"`, or a table with a description.
struct Description(Option<String>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptionTable {
    description: Option<String>,
}

impl<'de> Deserialize<'de> for Description {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Description;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a description string or a table with `description`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Description, E> {
                Ok(Description(Some(v.to_owned())))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Description, A::Error> {
                let t = DescriptionTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Description(t.description))
            }
        }
        d.deserialize_any(V)
    }
}

/// A state entry: `NAME = "description"` or a table of settings.
struct RawState(RawStateTable);

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawStateTable {
    #[serde(default)]
    transition: bool,
    #[serde(default)]
    terminal: Option<Spanned<bool>>,
    persisted: Option<bool>,
    owner: Option<Spanned<String>>,
    description: Option<String>,
}

impl<'de> Deserialize<'de> for RawState {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawState;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a description string or a table of state settings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawState, E> {
                Ok(RawState(RawStateTable {
                    description: Some(v.to_owned()),
                    ..Default::default()
                }))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawState, A::Error> {
                RawStateTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawState)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction {
    from: Names,
    via: Option<Spanned<String>>,
    to: Option<Spanned<RawTarget>>,
    to_origin: Option<Spanned<bool>>,
    #[serde(default)]
    roles: Names,
    #[serde(default)]
    guards: Names,
    #[serde(default)]
    hidden: bool,
    description: Option<String>,
}

/// `"STATE"` or `{ ORIGIN = "TARGET", ... }`.
enum RawTarget {
    State(String),
    PerOrigin(BTreeMap<Spanned<String>, Spanned<String>>),
}

impl<'de> Deserialize<'de> for RawTarget {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTarget;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a state name or a table mapping each origin to its target")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawTarget, E> {
                Ok(RawTarget::State(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawTarget, A::Error> {
                BTreeMap::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawTarget::PerOrigin)
            }
        }
        d.deserialize_any(V)
    }
}

/// `"x"` or `["x", "y"]`, each name with its span.
#[derive(Default)]
struct Names(Vec<Spanned<String>>);

enum OneOrMany {
    One(String),
    Many(Vec<Spanned<String>>),
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a name or an array of names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany::One(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<OneOrMany, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(OneOrMany::Many)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let outer = Spanned::<OneOrMany>::deserialize(d)?;
        let span = outer.span();
        Ok(Names(match outer.into_inner() {
            OneOrMany::One(name) => vec![Spanned::new(span, name)],
            OneOrMany::Many(names) => names,
        }))
    }
}

/// Map keys come back sorted by name; the spec's order is the order they were written.
fn in_source_order<K, V>(map: BTreeMap<Spanned<K>, V>) -> Vec<(Spanned<K>, V)>
where
    K: Ord,
{
    let mut entries: Vec<_> = map.into_iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    entries
}

impl RawSpec {
    fn lower(self) -> Parsed {
        let mut map = SourceMap::default();
        let mut diagnostics = Vec::new();
        let machine_span = self.machine.span();
        let m = self.machine.into_inner();
        map.insert(Site::Machine, machine_span);
        let mut def = MachineDef {
            name: m.name,
            description: m.description,
            single_mutator: m.single_mutator,
            ..Default::default()
        };
        if let Some(initial) = m.initial {
            map.insert(Site::Initial, initial.span());
            def.initial = Some(initial.into_inner());
        }
        for (i, lint) in m.allow.into_iter().enumerate() {
            map.insert(Site::Allow(i), lint.span());
            def.allow.push(lint.into_inner());
        }
        for (i, (name, desc)) in in_source_order(self.roles).into_iter().enumerate() {
            map.insert(Site::Role(i), name.span());
            def.roles.push(NamedDef {
                name: name.into_inner(),
                description: desc.into_inner().0,
            });
        }
        for (i, (name, desc)) in in_source_order(self.guards).into_iter().enumerate() {
            map.insert(Site::Guard(i), name.span());
            def.guards.push(NamedDef {
                name: name.into_inner(),
                description: desc.into_inner().0,
            });
        }
        for (i, (name, state)) in in_source_order(self.states).into_iter().enumerate() {
            map.insert(Site::State(i), name.span());
            let s = state.into_inner().0;
            if let Some(owner) = &s.owner {
                map.insert(Site::StateOwner(i), owner.span());
            }
            if let Some(terminal) = &s.terminal {
                map.insert(Site::StateTerminal(i), terminal.span());
            }
            def.states.push(StateDef {
                name: name.into_inner(),
                kind: if s.transition {
                    StateKind::Transition
                } else {
                    StateKind::Static
                },
                terminal: s.terminal.is_some_and(|t| *t.get_ref()),
                persisted: s.persisted.unwrap_or(true),
                owner: s.owner.map(Spanned::into_inner),
                description: s.description,
            });
        }
        for (a, (name, action)) in in_source_order(self.actions).into_iter().enumerate() {
            map.insert(Site::Action(a), name.span());
            let raw = action.into_inner();
            let mut action = ActionDef {
                name: name.into_inner(),
                hidden: raw.hidden,
                description: raw.description,
                ..Default::default()
            };
            for (i, from) in raw.from.0.into_iter().enumerate() {
                map.insert(Site::ActionFrom(a, i), from.span());
                action.from.push(from.into_inner());
            }
            if let Some(via) = raw.via {
                map.insert(Site::ActionVia(a), via.span());
                action.via = Some(via.into_inner());
            }
            if let (Some(to), Some(origin)) = (&raw.to, &raw.to_origin) {
                // Report the conflict, then go on with `to` so nothing cascades from it.
                diagnostics.push(
                    Diagnostic::new(
                        Lint::ConflictingTarget,
                        Site::Text(origin.span()),
                        format!("action `{}` has both `to` and `to_origin`", action.name),
                    )
                    .with_label("remove this or `to`")
                    .with_related(Site::Text(to.span()), "the target is given here"),
                );
            }
            action.to = match (raw.to, raw.to_origin) {
                (Some(to), _) => {
                    map.insert(Site::ActionTo(a), to.span());
                    match to.into_inner() {
                        RawTarget::State(s) => TargetDef::State(s),
                        RawTarget::PerOrigin(pairs) => TargetDef::PerOrigin(
                            in_source_order(pairs)
                                .into_iter()
                                .enumerate()
                                .map(|(i, (o, t))| {
                                    map.insert(Site::ActionToOrigin(a, i), o.span());
                                    map.insert(Site::ActionToTarget(a, i), t.span());
                                    (o.into_inner(), t.into_inner())
                                })
                                .collect(),
                        ),
                    }
                }
                (None, Some(origin)) => {
                    map.insert(Site::ActionTo(a), origin.span());
                    if *origin.get_ref() {
                        TargetDef::Origin
                    } else {
                        TargetDef::Unset
                    }
                }
                (None, None) => TargetDef::Unset,
            };
            for (i, role) in raw.roles.0.into_iter().enumerate() {
                map.insert(Site::ActionRole(a, i), role.span());
                action.roles.push(role.into_inner());
            }
            for (i, guard) in raw.guards.0.into_iter().enumerate() {
                map.insert(Site::ActionGuard(a, i), guard.span());
                action.guards.push(guard.into_inner());
            }
            def.actions.push(action);
        }
        Parsed {
            def,
            map,
            diagnostics,
        }
    }
}
