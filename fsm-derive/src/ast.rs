//! From `syn`'s enum to a machine definition: the shape of the input, the container
//! settings, and the table lowered from inline attributes (`spec_file` reads a spec
//! file instead). Every site of the definition keeps the token it came from, then
//! `check` runs the analysis and `expand` generates the code.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::input::{Enum, Variant as EnumVariant};
use fsm_model::{ActionDef, Machine, MachineDef, NamedDef, Site, StateDef, StateKind, TargetDef};
use proc_macro::{Ident, Span, TokenStream};

use crate::attr::{self, Body, Item, Value};
use crate::check::{self, Places, Source};
use crate::ctxt::Errors;

/// A derive input that passed every check.
pub struct Input {
    pub ident: Ident,
    /// The enum's visibility, as written (empty when private).
    pub vis: TokenStream,
    /// The path of the `fsm` crate in the user's crate.
    pub krate: TokenStream,
    /// The generated action enum.
    pub action_enum: Ident,
    /// The generated module of state marker types, when asked for.
    pub markers: Option<Ident>,
    pub machine: Machine,
    /// The variant of each state, indexed by state id.
    pub variants: Vec<Ident>,
    /// Whether the variants are declared in the order of the states, with no
    /// explicit discriminant, so that `self as usize` is the state's id.
    pub in_order: bool,
    /// The spec file, so that editing it rebuilds the user's crate.
    pub spec_file: Option<PathBuf>,
    /// The diagram drawn on the enum's documentation page (feature `diagram`).
    #[cfg_attr(not(feature = "diagram"), allow(dead_code))]
    pub diagram: DocDiagram,
    /// `Serialize`/`Deserialize` by the spec's names when the `serde` feature is
    /// on; `#[fsm(serde = false)]` keeps the enum's own.
    pub serde: bool,
    /// A failed derive's stand-in (see [`stand_in`]): its markers allow every
    /// move, so that typed moves add no error of their own.
    pub stand_in: bool,
}

/// `#[fsm(diagram = folded | full | none)]`: which view of the machine the enum's
/// documentation page draws, with the feature `diagram`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DocDiagram {
    /// Static states, moves labelled with their transition state.
    #[default]
    Folded,
    /// Every state.
    Full,
    /// No diagram.
    None,
}

/// Container settings that are not part of the table.
struct Settings {
    spec: Option<(String, Span)>,
    krate: TokenStream,
    action_enum: Option<Ident>,
    markers: Option<Option<Ident>>,
    diagram: DocDiagram,
    serde: bool,
}

const CONTAINER_KEYS: &str = "spec, name, description, initial, single_mutator, allow, roles, guards, action, actions, markers, diagram, serde, crate";
const VARIANT_KEYS: &str =
    "name, transition, terminal, persisted, owner, remove, deadline, renamed_from, description";

/// Why the derive failed, and what to generate beside the errors.
pub struct Failed {
    pub errors: Errors,
    /// A stand-in for the enum's API (see [`stand_in`]), when the input is an
    /// enum of unit variants.
    pub stand_in: Option<Box<Input>>,
}

impl From<Errors> for Failed {
    fn from(errors: Errors) -> Self {
        Failed {
            errors,
            stand_in: None,
        }
    }
}

pub fn parse(tokens: TokenStream) -> Result<Input, Failed> {
    let input = crate::input::parse(tokens).map_err(Errors::from)?;
    let mut errors = Errors::default();
    if let Some(span) = input.generics {
        errors.at(span, "a state enum cannot be generic");
    }
    let mut variants = Vec::new();
    for v in &input.variants {
        if v.fields {
            errors.at(
                v.name.span(),
                format!(
                    "state `{}` must be a unit variant: a state carries no data",
                    v.name
                ),
            );
        }
        let items = attr::fsm_items(&v.attributes, &mut errors);
        variants.push((v, items));
    }
    let items = attr::fsm_items(&input.attributes, &mut errors);
    let settings = settings(&items, &mut errors);
    // With a spec file, its check names every variant to add.
    if input.variants.is_empty() && settings.spec.is_none() {
        errors.at(input.name.span(), "a state enum needs at least one variant");
    }
    let source = match &settings.spec {
        Some(path) => spec_file(path, &items, &variants, &input.name, &mut errors),
        None => Ok(inline(&input, &items, &variants, &mut errors)),
    };
    let source = match source {
        Ok(source) => source,
        Err(more) => {
            errors.extend(more);
            return Err(Failed {
                stand_in: stand_in(&input, &settings, &[]),
                errors,
            });
        }
    };
    let machine = check::check(&source.def, &source.places, &mut errors);
    if let Err(errors) = errors.finish() {
        let actions: Vec<&str> = source.def.actions.iter().map(|a| a.name.as_str()).collect();
        return Err(Failed {
            stand_in: stand_in(&input, &settings, &actions),
            errors,
        });
    }
    let machine = machine.expect("no error, so the analysis built the machine");
    let variants: Vec<Ident> = source
        .variant_of
        .into_iter()
        .map(|v| v.expect("every state has a variant"))
        .collect();
    let in_order = input
        .variants
        .iter()
        .zip(&variants)
        .all(|(declared, state)| {
            !declared.discriminant && declared.name.to_string() == state.to_string()
        });
    Ok(Input {
        action_enum: action_enum(&input, &settings),
        markers: markers(&input, &settings),
        ident: input.name.clone(),
        vis: input.vis.clone(),
        krate: settings.krate,
        machine,
        variants,
        in_order,
        spec_file: source.spec_file,
        diagram: settings.diagram,
        serde: settings.serde,
        stand_in: false,
    })
}

fn action_enum(input: &Enum, settings: &Settings) -> Ident {
    settings
        .action_enum
        .clone()
        .unwrap_or_else(|| Ident::new(&format!("{}Action", input.name), input.name.span()))
}

fn markers(input: &Enum, settings: &Settings) -> Option<Ident> {
    settings.markers.clone().map(|name| {
        name.unwrap_or_else(|| {
            Ident::new(
                &crate::case::snake(&input.name.to_string()),
                input.name.span(),
            )
        })
    })
}

/// The most states a stand-in's markers allow every move between (their
/// square in `MoveTo` impls, for a build that fails anyway); past it, none.
pub const STAND_IN_MOVES: usize = 64;

/// What the derive generates for an enum it refused, beside its errors: the same
/// API (the action enum with the actions it could read, the traits, the names
/// on the wire) over a stand-in table of the enum's variants, every one terminal
/// and every action changing nothing. The user's code that calls the API then
/// compiles against it, so that the build reports the derive's own errors, not
/// one more at each place the enum is used (thiserror does the same); its
/// markers allow every move, so typed moves (`checked_move`) compile against
/// it too (up to [`STAND_IN_MOVES`] states). Nothing of it runs: the
/// crate does not build. `None` when the variants are not unit
/// variants or the stand-in itself would not check (two actions of one name).
fn stand_in(input: &Enum, settings: &Settings, actions: &[&str]) -> Option<Box<Input>> {
    if input.generics.is_some()
        || input.variants.is_empty()
        || input.variants.iter().any(|v| v.fields)
    {
        return None;
    }
    let mut def = MachineDef {
        name: crate::case::snake(&input.name.to_string()),
        initial: Some(input.variants[0].name.to_string()),
        ..MachineDef::default()
    };
    for v in &input.variants {
        let mut state = StateDef::new(v.name.to_string(), StateKind::Static);
        state.terminal = true;
        def.states.push(state);
    }
    for name in actions {
        def.actions.push(ActionDef {
            name: (*name).to_owned(),
            from: vec![input.variants[0].name.to_string()],
            ..ActionDef::default()
        });
    }
    let machine = fsm_analysis::check(&def).machine?;
    Some(Box::new(Input {
        action_enum: action_enum(input, settings),
        markers: markers(input, settings),
        ident: input.name.clone(),
        vis: input.vis.clone(),
        krate: settings.krate.clone(),
        machine,
        variants: input.variants.iter().map(|v| v.name.clone()).collect(),
        in_order: input.variants.iter().all(|v| !v.discriminant),
        spec_file: None,
        diagram: DocDiagram::None,
        serde: settings.serde,
        stand_in: true,
    }))
}

#[cfg(feature = "toml")]
fn spec_file(
    path: &(String, Span),
    items: &[Item],
    variants: &[(&EnumVariant, Vec<Item>)],
    ident: &Ident,
    errors: &mut Errors,
) -> Result<Source, Errors> {
    crate::spec_file::read(path, items, variants, ident, errors)
}

#[cfg(not(feature = "toml"))]
fn spec_file(
    path: &(String, Span),
    _: &[Item],
    _: &[(&EnumVariant, Vec<Item>)],
    _: &Ident,
    _: &mut Errors,
) -> Result<Source, Errors> {
    Err(crate::ctxt::Error::new(
        path.1,
        "reading a spec file needs the `toml` feature of fsm: `fsm = { version = \"0.1\", features = [\"toml\"] }`",
    )
    .into())
}

fn settings(items: &[Item], errors: &mut Errors) -> Settings {
    let mut s = Settings {
        spec: None,
        krate: "::fsm".parse().expect("a path lexes"),
        action_enum: None,
        markers: None,
        diagram: DocDiagram::default(),
        serde: true,
    };
    for item in items {
        match (item.name().as_str(), &item.body) {
            ("spec", Body::Value(Value::Str(path, span))) => s.spec = Some((path.clone(), *span)),
            ("crate", Body::Value(Value::Str(path, span))) => match path.parse() {
                Ok(p) => s.krate = p,
                Err(_) => errors.at(*span, format!("`{path}` is not a path")),
            },
            ("actions", Body::Value(Value::Name(name))) => s.action_enum = Some(name.clone()),
            ("markers", Body::Flag) => s.markers = Some(None),
            ("markers", Body::Value(Value::Name(name))) => s.markers = Some(Some(name.clone())),
            ("spec" | "crate", _) => {
                errors.at(item.span(), format!("expected `{} = \"...\"`", item.name()))
            }
            ("actions", _) => errors.at(item.span(), "expected `actions = Name`"),
            ("markers", _) => errors.at(item.span(), "expected `markers` or `markers = name`"),
            ("diagram", Body::Value(Value::Name(view))) => match view.to_string().as_str() {
                "folded" => s.diagram = DocDiagram::Folded,
                "full" => s.diagram = DocDiagram::Full,
                "none" => s.diagram = DocDiagram::None,
                other => errors.at(
                    view.span(),
                    format!("unknown diagram view `{other}`; expected `folded`, `full` or `none`"),
                ),
            },
            ("diagram", _) => errors.at(
                item.span(),
                "expected `diagram = folded`, `diagram = full` or `diagram = none`",
            ),
            ("serde", Body::Value(Value::Bool(on))) => s.serde = *on,
            ("serde", _) => errors.at(
                item.span(),
                "expected `serde = false` (the enum keeps its own `Serialize` and `Deserialize`) or `serde = true`",
            ),
            (
                "name" | "description" | "initial" | "single_mutator" | "allow" | "roles"
                | "guards" | "action",
                _,
            ) => {}
            (other, _) => errors.at(
                item.span(),
                format!("unknown fsm attribute `{other}`; expected one of: {CONTAINER_KEYS}"),
            ),
        }
    }
    s
}

/// Records the token of each site, and which sites had an attribute error.
struct Spans {
    spans: HashMap<Site, Span>,
    broken: HashSet<Site>,
}

impl Spans {
    fn at(&mut self, site: Site, span: Span) {
        self.spans.insert(site, span);
    }
}

/// Builds the definition from inline attributes, recording each site's token.
fn inline(
    input: &Enum,
    items: &[Item],
    variants: &[(&EnumVariant, Vec<Item>)],
    errors: &mut Errors,
) -> Source {
    let mut spans = Spans {
        spans: HashMap::new(),
        broken: HashSet::new(),
    };
    spans.at(Site::Machine, input.name.span());
    let mut def = MachineDef {
        name: crate::case::snake(&input.name.to_string()),
        description: attr::doc(&input.attributes),
        ..Default::default()
    };
    // Variant identifiers used in actions stand for the states' names.
    let mut state_name: HashMap<String, String> = HashMap::new();
    for (i, (v, vitems)) in variants.iter().enumerate() {
        spans.at(Site::State(i), v.name.span());
        let before = errors.count();
        let state = state(i, v, vitems, &mut spans, errors);
        if errors.count() > before {
            spans.broken.insert(Site::State(i));
        }
        state_name.insert(v.name.to_string(), state.name.clone());
        def.states.push(state);
    }
    let name_of = |n: String| state_name.get(&n).cloned().unwrap_or(n);
    for item in items {
        let before = errors.count();
        match (item.name().as_str(), &item.body) {
            ("name", Body::Value(Value::Str(s, span))) => {
                spans.at(Site::MachineName, *span);
                def.name = s.clone();
            }
            ("description", Body::Value(Value::Str(s, _))) => def.description = Some(s.clone()),
            ("initial", Body::Value(v)) if v.as_name().is_some() => {
                if let Some((name, span)) = v.as_name() {
                    spans.at(Site::Initial, span);
                    def.initial = Some(name_of(name));
                }
            }
            ("single_mutator", Body::Flag) => def.single_mutator = true,
            ("single_mutator", Body::Value(Value::Bool(b))) => def.single_mutator = *b,
            ("allow", Body::Value(v)) if v.as_names().is_some() => {
                for (k, (lint, span)) in v.as_names().unwrap_or_default().into_iter().enumerate() {
                    spans.at(Site::Allow(k), span);
                    def.allow.push(lint);
                }
            }
            ("roles" | "guards", Body::Args(entries)) => {
                for entry in entries {
                    let description = match &entry.body {
                        Body::Value(Value::Str(s, _)) => Some(s.clone()),
                        Body::Flag => None,
                        _ => {
                            errors.at(
                                entry.span(),
                                format!("expected `{} = \"description\"`", entry.name()),
                            );
                            None
                        }
                    };
                    let named = NamedDef {
                        name: entry.name(),
                        description,
                        ..NamedDef::default()
                    };
                    if item.name() == "roles" {
                        spans.at(Site::Role(def.roles.len()), entry.span());
                        def.roles.push(named);
                    } else {
                        spans.at(Site::Guard(def.guards.len()), entry.span());
                        def.guards.push(named);
                    }
                }
            }
            ("action", Body::Args(args)) => {
                let a = def.actions.len();
                if let Some(action) = action(a, args, &name_of, &mut spans, errors) {
                    spans.at(Site::Action(a), item.span());
                    if errors.count() > before {
                        spans.broken.insert(Site::Action(a));
                    }
                    def.actions.push(action);
                }
            }
            ("name" | "description", _) => {
                errors.at(item.span(), format!("expected `{} = \"...\"`", item.name()))
            }
            ("initial", _) => errors.at(item.span(), "expected `initial = Variant`"),
            ("single_mutator", _) => errors.at(
                item.span(),
                "expected `single_mutator` or `single_mutator = true`",
            ),
            ("allow", _) => errors.at(item.span(), "expected `allow = [\"lint\", ...]`"),
            ("roles" | "guards", _) => errors.at(
                item.span(),
                format!("expected `{}(name = \"description\", ...)`", item.name()),
            ),
            ("action", _) => {
                errors.at(item.span(), "expected `action(name, from = ..., to = ...)`")
            }
            _ => {}
        }
    }
    let variant_of = variants.iter().map(|(v, _)| Some(v.name.clone())).collect();
    Source {
        def,
        places: Places::Tokens {
            spans: spans.spans,
            fallback: input.name.span(),
            broken: spans.broken,
        },
        variant_of,
        spec_file: None,
    }
}

/// A state from its variant and the variant's `#[fsm(...)]` items.
fn state(
    i: usize,
    v: &EnumVariant,
    items: &[Item],
    spans: &mut Spans,
    errors: &mut Errors,
) -> StateDef {
    let mut state = StateDef::new(v.name.to_string(), StateKind::Static);
    state.description = attr::doc(&v.attributes);
    for item in items {
        match (item.name().as_str(), &item.body) {
            ("name", Body::Value(Value::Str(s, span))) => {
                // The state's name is this string, not the variant's identifier.
                spans.at(Site::State(i), *span);
                state.name = s.clone();
            }
            ("transition", Body::Flag) => state.kind = StateKind::Transition,
            ("terminal", Body::Flag) => {
                state.terminal = true;
                spans.at(Site::StateTerminal(i), item.span());
            }
            ("persisted", Body::Value(Value::Bool(b))) => state.persisted = *b,
            ("owner", Body::Value(v)) if v.as_name().is_some() => {
                if let Some((name, span)) = v.as_name() {
                    spans.at(Site::StateOwner(i), span);
                    state.owner = Some(name);
                }
            }
            // `remove`: anyone; `remove = "role"` or `remove = ["a", "b"]`.
            ("remove", Body::Flag) => {
                spans.at(Site::StateRemove(i), item.span());
                state.remove = Some(Vec::new());
            }
            ("remove", Body::Value(v)) if v.as_names().is_some_and(|n| !n.is_empty()) => {
                spans.at(Site::StateRemove(i), item.span());
                let roles = v.as_names().unwrap_or_default().into_iter().enumerate();
                let roles = roles.map(|(k, (role, span))| {
                    spans.at(Site::StateRemoveRole(i, k), span);
                    role
                });
                state.remove = Some(roles.collect());
            }
            ("description", Body::Value(Value::Str(s, _))) => state.description = Some(s.clone()),
            ("remove", _) => errors.at(
                item.span(),
                "expected `remove`, `remove = \"role\"` or `remove = [\"a\", \"b\"]`",
            ),
            ("name" | "description", _) => {
                errors.at(item.span(), format!("expected `{} = \"...\"`", item.name()))
            }
            ("transition" | "terminal", _) => {
                errors.at(item.span(), format!("`{}` takes no value", item.name()))
            }
            ("persisted", _) => errors.at(
                item.span(),
                "expected `persisted = true` or `persisted = false`",
            ),
            ("owner", _) => errors.at(item.span(), "expected `owner = \"role\"`"),
            (other, _) => errors.at(
                item.span(),
                format!(
                    "unknown fsm attribute `{other}` on a state; expected one of: {VARIANT_KEYS}"
                ),
            ),
        }
    }
    state
}

const ACTION_KEYS: &str =
    "from, via, to, to_origin, roles, guards, hidden, deadline, renamed_from, description";

/// `action(name, from = A | B, via = X, to = Y, roles = "r", guards = ["g"], hidden)`.
fn action(
    a: usize,
    args: &[Item],
    name_of: &dyn Fn(String) -> String,
    spans: &mut Spans,
    errors: &mut Errors,
) -> Option<ActionDef> {
    let Some((first, rest)) = args
        .split_first()
        .filter(|(f, _)| matches!(f.body, Body::Flag))
    else {
        let span = args.first().map_or_else(Span::call_site, Item::span);
        errors.at(
            span,
            "an action starts with its name: `action(name, from = ..., to = ...)`",
        );
        return None;
    };
    let mut action = ActionDef {
        name: first.name(),
        ..Default::default()
    };
    let names = |item: &Item, errors: &mut Errors| {
        let names = match &item.body {
            Body::Value(v) => v.as_names(),
            _ => None,
        };
        names.unwrap_or_else(|| {
            errors.at(
                item.span(),
                format!(
                    "expected `{} = Name` or `{} = [A, B]`",
                    item.name(),
                    item.name()
                ),
            );
            Vec::new()
        })
    };
    for item in rest {
        match item.name().as_str() {
            "from" => {
                for (k, (name, span)) in names(item, errors).into_iter().enumerate() {
                    spans.at(Site::ActionFrom(a, k), span);
                    action.from.push(name_of(name));
                }
            }
            "via" => {
                if let Some((name, span)) = names(item, errors).into_iter().next() {
                    spans.at(Site::ActionVia(a), span);
                    action.via = Some(name_of(name));
                }
            }
            "to" => match &item.body {
                Body::Args(pairs) => {
                    spans.at(Site::ActionTo(a), item.span());
                    let mut out = Vec::new();
                    for (k, pair) in pairs.iter().enumerate() {
                        match &pair.body {
                            Body::Value(v) if v.as_name().is_some() => {
                                if let Some((target, span)) = v.as_name() {
                                    spans.at(Site::ActionToOrigin(a, k), pair.span());
                                    spans.at(Site::ActionToTarget(a, k), span);
                                    out.push((name_of(pair.name()), name_of(target)));
                                }
                            }
                            _ => errors.at(pair.span(), "expected `Origin = Target`"),
                        }
                    }
                    action.to = TargetDef::PerOrigin(out);
                }
                _ => {
                    if let Some((name, span)) = names(item, errors).into_iter().next() {
                        spans.at(Site::ActionTo(a), span);
                        if !matches!(action.to, TargetDef::Unset) {
                            errors.at(span, "the target is given twice");
                        }
                        action.to = TargetDef::State(name_of(name));
                    }
                }
            },
            "to_origin" => {
                spans.at(Site::ActionTo(a), item.span());
                if !matches!(action.to, TargetDef::Unset) {
                    errors.at(
                        item.span(),
                        format!("action `{}` has both `to` and `to_origin`", action.name),
                    );
                }
                action.to = TargetDef::Origin;
            }
            "roles" => {
                for (k, (name, span)) in names(item, errors).into_iter().enumerate() {
                    spans.at(Site::ActionRole(a, k), span);
                    action.roles.push(name);
                }
            }
            "guards" => {
                for (k, (name, span)) in names(item, errors).into_iter().enumerate() {
                    spans.at(Site::ActionGuard(a, k), span);
                    action.guards.push(name);
                }
            }
            "hidden" => action.hidden = true,
            "deadline" => match &item.body {
                Body::Value(Value::Str(text, span)) => {
                    spans.at(Site::ActionDeadline(a), *span);
                    match fsm_model::parse_duration(text) {
                        Ok(d) => action.deadline = Some(d),
                        Err(e) => errors.at(*span, e),
                    }
                }
                _ => errors.at(item.span(), "expected `deadline = \"10m\"`"),
            },
            "renamed_from" => {
                for (k, (old, span)) in names(item, errors).into_iter().enumerate() {
                    spans.at(Site::ActionRename(a, k), span);
                    action.renamed_from.push(old);
                }
            }
            "description" => match &item.body {
                Body::Value(Value::Str(s, _)) => action.description = Some(s.clone()),
                _ => errors.at(item.span(), "expected `description = \"...\"`"),
            },
            other => errors.at(
                item.span(),
                format!("unknown action setting `{other}`; expected one of: {ACTION_KEYS}"),
            ),
        }
    }
    Some(action)
}
