//! From `syn`'s enum to a checked [`Machine`]: the table is read from the attributes
//! or from a spec file, then checked by `fsm_core::analysis`, the same checks
//! `fsm check` runs. Every finding becomes a compile error at the token at fault.

use std::collections::HashMap;
use std::path::PathBuf;

use fsm_core::analysis::{self, Location};
use fsm_core::spec::{
    ActionDef, Machine, MachineDef, NamedDef, Site, SourceMap, StateDef, StateKind, TargetDef,
};
use heck::ToSnakeCase;
use proc_macro2::Span;
use syn::{Data, DeriveInput, Fields, Ident, Visibility};

use crate::attr::{self, Body, Item, Value};

/// Every error found, reported together.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// A derive input that passed every check.
pub struct Input {
    pub ident: Ident,
    pub vis: Visibility,
    /// The path of the `fsm` crate in the user's crate.
    pub krate: syn::Path,
    /// The generated action enum.
    pub action_enum: Ident,
    /// The generated module of state marker types.
    pub markers: Ident,
    pub machine: Machine,
    /// The variant of each state, indexed by state id.
    pub variants: Vec<Ident>,
    /// The spec file, so that editing it rebuilds the user's crate.
    pub spec_file: Option<PathBuf>,
}

/// Container settings that are not part of the table.
struct Settings {
    spec: Option<syn::LitStr>,
    krate: syn::Path,
    action_enum: Option<Ident>,
    markers: Option<Ident>,
}

const CONTAINER_KEYS: &str = "spec, name, description, initial, single_mutator, allow, roles, guards, action, actions, markers, crate";
const VARIANT_KEYS: &str = "name, transition, terminal, persisted, owner, description";

pub fn parse(input: &DeriveInput) -> syn::Result<Input> {
    let mut errors = Errors::default();
    let Data::Enum(data) = &input.data else {
        return Err(syn::Error::new(
            input.ident.span(),
            "StateMachine can only be derived for an enum of states",
        ));
    };
    if !input.generics.params.is_empty() {
        errors.at(
            input.generics.params[0].span_of(),
            "a state enum cannot be generic",
        );
    }
    if data.variants.is_empty() {
        errors.at(
            input.ident.span(),
            "a state enum needs at least one variant",
        );
    }
    let mut variants = Vec::new();
    for v in &data.variants {
        if !matches!(v.fields, Fields::Unit) {
            errors.at(
                v.ident.span(),
                format!(
                    "state `{}` must be a unit variant: a state carries no data",
                    v.ident
                ),
            );
        }
        let items = attr::fsm_items(&v.attrs, &mut errors);
        variants.push((v, items));
    }
    let items = attr::fsm_items(&input.attrs, &mut errors);
    let settings = settings(&items, &mut errors);
    let (def, spans, spec_file, variant_of) = match &settings.spec {
        Some(path) => {
            let (def, file) = from_spec_file(path, &items, &variants, &mut errors)?;
            let variant_of = match_variants(&def, &variants, &input.ident, path, &mut errors);
            (def, Spans::File(file), Some(file_path(path)), variant_of)
        }
        None => {
            let (def, spans, variant_of) = inline(input, &items, &variants, &mut errors);
            (
                def,
                Spans::Tokens(spans, input.ident.span()),
                None,
                variant_of,
            )
        }
    };
    errors.finish()?;
    let mut errors = Errors::default();
    let checked = analysis::check(&def);
    for d in checked.diagnostics.iter().filter(|d| d.is_error()) {
        let mut message = format!("{} [{}]", d.message, d.lint);
        if let Some(label) = &d.label {
            message.push_str(&format!("\n  = note: {label}"));
        }
        if let Some(help) = &d.help {
            message.push_str(&format!("\n  = help: {help}"));
        }
        let (span, message) = spans.resolve(&d.site, message);
        errors.at(span, message);
    }
    errors.finish()?;
    let machine = checked
        .machine
        .expect("no error, so the analysis built the machine");
    let snake = input.ident.to_string().to_snake_case();
    Ok(Input {
        ident: input.ident.clone(),
        vis: input.vis.clone(),
        krate: settings.krate,
        action_enum: settings
            .action_enum
            .unwrap_or_else(|| quote::format_ident!("{}Action", input.ident)),
        markers: settings
            .markers
            .unwrap_or_else(|| Ident::new(&snake, input.ident.span())),
        variants: variant_of
            .into_iter()
            .map(|v| v.expect("every state has a variant"))
            .collect(),
        machine,
        spec_file,
    })
}

trait SpanOf {
    fn span_of(&self) -> Span;
}

impl<T: quote::ToTokens> SpanOf for T {
    fn span_of(&self) -> Span {
        syn::spanned::Spanned::span(self)
    }
}

/// Where the sites of the definition were written.
enum Spans {
    /// Inline attributes: a token per site, the enum's name for the rest.
    Tokens(HashMap<Site, Span>, Span),
    /// A spec file: findings say file, line and column, at the `spec = "..."` token.
    File(SpecText),
}

struct SpecText {
    shown_path: String,
    text: String,
    map: SourceMap,
    literal: Span,
}

impl Spans {
    fn resolve(&self, site: &Site, message: String) -> (Span, String) {
        match self {
            Spans::Tokens(spans, fallback) => {
                let mut at = Some(site.clone());
                while let Some(s) = at {
                    if let Some(span) = spans.get(&s) {
                        return (*span, message);
                    }
                    at = s.parent();
                }
                (*fallback, message)
            }
            Spans::File(file) => file.resolve(site, message),
        }
    }
}

impl SpecText {
    /// The `spec = "..."` token, and the message prefixed with file, line and column.
    fn resolve(&self, site: &Site, message: String) -> (Span, String) {
        let prefix = match self
            .map
            .span(site)
            .map(|span| Location::of(&self.text, span))
        {
            Some(l) => format!("{}:{}:{}", self.shown_path, l.line, l.column),
            None => self.shown_path.clone(),
        };
        (self.literal, format!("{prefix}: {message}"))
    }
}

fn settings(items: &[Item], errors: &mut Errors) -> Settings {
    let mut s = Settings {
        spec: None,
        krate: syn::parse_quote!(::fsm),
        action_enum: None,
        markers: None,
    };
    for item in items {
        match (item.name().as_str(), &item.body) {
            ("spec", Body::Value(Value::Str(path))) => s.spec = Some(path.clone()),
            ("crate", Body::Value(Value::Str(path))) => match path.parse() {
                Ok(p) => s.krate = p,
                Err(e) => errors.push(e),
            },
            ("actions", Body::Value(Value::Name(name))) => s.action_enum = Some(name.clone()),
            ("markers", Body::Value(Value::Name(name))) => s.markers = Some(name.clone()),
            ("spec" | "crate", _) => {
                errors.at(item.span(), format!("expected `{} = \"...\"`", item.name()))
            }
            ("actions" | "markers", _) => {
                errors.at(item.span(), format!("expected `{} = Name`", item.name()))
            }
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

/// Spec paths are relative to `FSM_SPEC_DIR` when set (for builds that move sources
/// away from `Cargo.toml`, and for compile-fail tests), else to the crate's
/// `CARGO_MANIFEST_DIR`.
fn file_path(literal: &syn::LitStr) -> PathBuf {
    let dir = std::env::var_os("FSM_SPEC_DIR")
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR"))
        .map(PathBuf::from)
        .unwrap_or_default();
    dir.join(literal.value())
}

fn from_spec_file(
    literal: &syn::LitStr,
    items: &[Item],
    variants: &[(&syn::Variant, Vec<Item>)],
    errors: &mut Errors,
) -> syn::Result<(MachineDef, SpecText)> {
    for item in items {
        if !matches!(
            item.name().as_str(),
            "spec" | "crate" | "actions" | "markers"
        ) {
            errors.at(
                item.span(),
                format!(
                    "`{}` cannot be given here: the table comes from the spec file",
                    item.name()
                ),
            );
        }
    }
    for (_, items) in variants {
        for item in items.iter().filter(|i| i.name() != "name") {
            errors.at(
                item.span(),
                format!("`{}` cannot be given here: the table comes from the spec file (only `name` maps a variant to a state)", item.name()),
            );
        }
    }
    let path = file_path(literal);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        syn::Error::new(
            literal.span(),
            format!("cannot read spec file {}: {e}", path.display()),
        )
    })?;
    let shown_path = literal.value();
    match fsm_core::spec::parse(&text) {
        Err(d) => {
            let file = SpecText {
                shown_path,
                text,
                map: SourceMap::default(),
                literal: literal.span(),
            };
            let (span, message) = file.resolve(&d.site, d.message.clone());
            Err(syn::Error::new(span, format!("{message} [{}]", d.lint)))
        }
        Ok(parsed) => {
            let file = SpecText {
                shown_path,
                text,
                map: parsed.map,
                literal: literal.span(),
            };
            for d in &parsed.diagnostics {
                let (span, message) = file.resolve(&d.site, d.message.clone());
                errors.at(span, format!("{message} [{}]", d.lint));
            }
            Ok((parsed.def, file))
        }
    }
}

/// `ADDING_DISK`, `AddingDisk` and `adding-disk` all normalise to `addingdisk`.
fn normalise(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The variant of each spec state: the one whose `name` is the state's, or whose
/// identifier matches it ignoring case and `_`/`-`.
fn match_variants(
    def: &MachineDef,
    variants: &[(&syn::Variant, Vec<Item>)],
    enum_ident: &Ident,
    literal: &syn::LitStr,
    errors: &mut Errors,
) -> Vec<Option<Ident>> {
    let explicit = |items: &[Item]| {
        items
            .iter()
            .find(|i| i.name() == "name")
            .and_then(|i| match &i.body {
                Body::Value(v) => v.as_name().map(|n| n.0),
                _ => None,
            })
    };
    let mut used = vec![false; variants.len()];
    let mut out = Vec::new();
    for state in &def.states {
        let found = variants
            .iter()
            .position(|(v, items)| match explicit(items) {
                Some(name) => name == state.name,
                None => normalise(&v.ident.to_string()) == normalise(&state.name),
            });
        match found {
            Some(i) => {
                used[i] = true;
                out.push(Some(variants[i].0.ident.clone()));
            }
            None => {
                let wanted = heck::ToUpperCamelCase::to_upper_camel_case(state.name.as_str());
                errors.at(
                    enum_ident.span(),
                    format!(
                        "no variant for state `{}` of {}: add a variant `{wanted}`",
                        state.name,
                        literal.value()
                    ),
                );
                out.push(None);
            }
        }
    }
    for (i, (v, _)) in variants.iter().enumerate() {
        if !used[i] {
            errors.at(
                v.ident.span(),
                format!(
                    "variant `{}` is not a state of {}",
                    v.ident,
                    literal.value()
                ),
            );
        }
    }
    out
}

/// Builds the definition from inline attributes, recording each site's token.
#[allow(clippy::type_complexity)]
fn inline(
    input: &DeriveInput,
    items: &[Item],
    variants: &[(&syn::Variant, Vec<Item>)],
    errors: &mut Errors,
) -> (MachineDef, HashMap<Site, Span>, Vec<Option<Ident>>) {
    let mut spans = HashMap::new();
    spans.insert(Site::Machine, input.ident.span());
    let mut def = MachineDef {
        name: input.ident.to_string().to_snake_case(),
        description: attr::doc(&input.attrs),
        ..Default::default()
    };
    // Variant identifiers used in actions stand for the states' names.
    let mut state_name: HashMap<String, String> = HashMap::new();
    for (i, (v, vitems)) in variants.iter().enumerate() {
        spans.insert(Site::State(i), v.ident.span());
        let mut state = StateDef::new(v.ident.to_string(), StateKind::Static);
        state.description = attr::doc(&v.attrs);
        for item in vitems {
            match (item.name().as_str(), &item.body) {
                ("name", Body::Value(Value::Str(s))) => state.name = s.value(),
                ("transition", Body::Flag) => state.kind = StateKind::Transition,
                ("terminal", Body::Flag) => {
                    state.terminal = true;
                    spans.insert(Site::StateTerminal(i), item.span());
                }
                ("persisted", Body::Value(Value::Bool(b))) => state.persisted = b.value,
                ("owner", Body::Value(v)) if v.as_name().is_some() => {
                    if let Some((name, span)) = v.as_name() {
                        spans.insert(Site::StateOwner(i), span);
                        state.owner = Some(name);
                    }
                }
                ("description", Body::Value(Value::Str(s))) => state.description = Some(s.value()),
                ("name" | "description", _) => errors.at(item.span(), format!("expected `{} = \"...\"`", item.name())),
                ("transition" | "terminal", _) => errors.at(item.span(), format!("`{}` takes no value", item.name())),
                ("persisted", _) => errors.at(item.span(), "expected `persisted = true` or `persisted = false`"),
                ("owner", _) => errors.at(item.span(), "expected `owner = \"role\"`"),
                (other, _) => errors.at(item.span(), format!("unknown fsm attribute `{other}` on a state; expected one of: {VARIANT_KEYS}")),
            }
        }
        state_name.insert(v.ident.to_string(), state.name.clone());
        def.states.push(state);
    }
    let name_of = |n: String| state_name.get(&n).cloned().unwrap_or(n);
    for item in items {
        match (item.name().as_str(), &item.body) {
            ("name", Body::Value(Value::Str(s))) => def.name = s.value(),
            ("description", Body::Value(Value::Str(s))) => def.description = Some(s.value()),
            ("initial", Body::Value(v)) if v.as_name().is_some() => {
                if let Some((name, span)) = v.as_name() {
                    spans.insert(Site::Initial, span);
                    def.initial = Some(name_of(name));
                }
            }
            ("single_mutator", Body::Flag) => def.single_mutator = true,
            ("single_mutator", Body::Value(Value::Bool(b))) => def.single_mutator = b.value,
            ("allow", Body::Value(v)) if v.as_names().is_some() => {
                for (k, (lint, span)) in v.as_names().unwrap_or_default().into_iter().enumerate() {
                    spans.insert(Site::Allow(k), span);
                    def.allow.push(lint);
                }
            }
            ("roles" | "guards", Body::Args(entries)) => {
                for entry in entries {
                    let description = match &entry.body {
                        Body::Value(Value::Str(s)) => Some(s.value()),
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
                    };
                    if item.name() == "roles" {
                        spans.insert(Site::Role(def.roles.len()), entry.span());
                        def.roles.push(named);
                    } else {
                        spans.insert(Site::Guard(def.guards.len()), entry.span());
                        def.guards.push(named);
                    }
                }
            }
            ("action", Body::Args(args)) => {
                let a = def.actions.len();
                if let Some(action) = action(a, args, &name_of, &mut spans, errors) {
                    spans.insert(Site::Action(a), item.span());
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
    let variant_of = variants
        .iter()
        .map(|(v, _)| Some(v.ident.clone()))
        .collect();
    (def, spans, variant_of)
}

const ACTION_KEYS: &str = "from, via, to, to_origin, roles, guards, hidden, description";

/// `action(name, from = A | B, via = X, to = Y, roles = "r", guards = ["g"], hidden)`.
fn action(
    a: usize,
    args: &[Item],
    name_of: &dyn Fn(String) -> String,
    spans: &mut HashMap<Site, Span>,
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
                    spans.insert(Site::ActionFrom(a, k), span);
                    action.from.push(name_of(name));
                }
            }
            "via" => {
                if let Some((name, span)) = names(item, errors).into_iter().next() {
                    spans.insert(Site::ActionVia(a), span);
                    action.via = Some(name_of(name));
                }
            }
            "to" => match &item.body {
                Body::Args(pairs) => {
                    spans.insert(Site::ActionTo(a), item.span());
                    let mut out = Vec::new();
                    for (k, pair) in pairs.iter().enumerate() {
                        match &pair.body {
                            Body::Value(v) if v.as_name().is_some() => {
                                if let Some((target, span)) = v.as_name() {
                                    spans.insert(Site::ActionToOrigin(a, k), pair.span());
                                    spans.insert(Site::ActionToTarget(a, k), span);
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
                        spans.insert(Site::ActionTo(a), span);
                        if !matches!(action.to, TargetDef::Unset) {
                            errors.at(span, "the target is given twice");
                        }
                        action.to = TargetDef::State(name_of(name));
                    }
                }
            },
            "to_origin" => {
                spans.insert(Site::ActionTo(a), item.span());
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
                    spans.insert(Site::ActionRole(a, k), span);
                    action.roles.push(name);
                }
            }
            "guards" => {
                for (k, (name, span)) in names(item, errors).into_iter().enumerate() {
                    spans.insert(Site::ActionGuard(a, k), span);
                    action.guards.push(name);
                }
            }
            "hidden" => action.hidden = true,
            "description" => match &item.body {
                Body::Value(Value::Str(s)) => action.description = Some(s.value()),
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
