//! The analysis on the definition (the same checks `fsm check` runs), its findings
//! turned into compile errors at the token at fault, with fixes said in the syntax
//! the user wrote: attributes for an inline table, TOML for a spec file.

use std::collections::{HashMap, HashSet};

use fsm_model::{Diagnostic, Help, Machine, MachineDef, Site};
use proc_macro::Span;

use crate::ctxt::Errors;

/// Where the sites of a definition were written.
pub enum Places {
    /// Inline attributes: a token per site, the enum's name for the rest, and the
    /// sites whose attributes had an error of their own.
    Tokens {
        spans: HashMap<Site, Span>,
        fallback: Span,
        broken: HashSet<Site>,
    },
    /// A spec file: findings say file, line and column, at the `spec = "..."` token.
    #[cfg(feature = "toml")]
    File(SpecText),
}

/// A definition read from the input, and where each part of it was written.
pub struct Source {
    pub def: MachineDef,
    pub places: Places,
    /// The variant of each state of `def`, where one was found.
    pub variant_of: Vec<Option<proc_macro::Ident>>,
    pub spec_file: Option<std::path::PathBuf>,
}

#[cfg(feature = "toml")]
/// A spec file's text and where its sites are.
pub struct SpecText {
    pub shown_path: String,
    pub text: String,
    pub map: fsm_toml::SourceMap,
    pub literal: Span,
}

#[cfg(feature = "toml")]
impl SpecText {
    /// The `spec = "..."` token, and the message prefixed with file, line and column.
    pub fn resolve(&self, site: &Site, message: String) -> (Span, String) {
        let prefix = match self
            .map
            .span(site)
            .map(|span| fsm_toml::Location::of(&self.text, span))
        {
            Some(l) => format!("{}:{}:{}", self.shown_path, l.line, l.column),
            None => self.shown_path.clone(),
        };
        (self.literal, format!("{prefix}: {message}"))
    }
}

impl Places {
    fn resolve(&self, site: &Site, message: String) -> (Span, String) {
        match self {
            Places::Tokens {
                spans, fallback, ..
            } => (
                nearest(site, |s| spans.get(s).copied()).unwrap_or(*fallback),
                message,
            ),
            #[cfg(feature = "toml")]
            Places::File(file) => file.resolve(site, message),
        }
    }

    /// Whether a finding at `site` may follow from an attribute error there.
    fn follows_error(&self, site: &Site) -> bool {
        match self {
            Places::Tokens { broken, .. } => nearest(site, |s| broken.get(s)).is_some(),
            #[cfg(feature = "toml")]
            Places::File(_) => false,
        }
    }

    fn help(&self, help: &Help) -> String {
        match self {
            Places::Tokens { .. } => attribute_help(help),
            #[cfg(feature = "toml")]
            Places::File(_) => fsm_toml::help(help),
        }
    }
}

/// The first of `site` and its enclosing sites for which `find` answers.
fn nearest<T>(site: &Site, find: impl Fn(&Site) -> Option<T>) -> Option<T> {
    let mut at = Some(site.clone());
    while let Some(s) = at {
        if let Some(found) = find(&s) {
            return Some(found);
        }
        at = s.parent();
    }
    None
}

/// Runs the analysis and reports its errors; the machine when there is none.
///
/// After attribute errors (`errors` is not empty), findings that may follow from
/// them are left out: those at a site whose attribute was wrong, and those about
/// the machine as a whole, which a missing part can cause.
pub fn check(def: &MachineDef, places: &Places, errors: &mut Errors) -> Option<Machine> {
    let attribute_errors = !errors.is_empty();
    let analysis = fsm_analysis::check(def);
    let reported = analysis
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .filter(|d| !(attribute_errors && (d.lint.is_global() || places.follows_error(&d.site))));
    for d in reported {
        let (span, message) = places.resolve(&d.site, message(d, |h| places.help(h)));
        errors.at(span, message);
    }
    analysis.machine
}

/// A finding's message, its label as a note and its fix (`help`, said in the
/// syntax of where the table comes from) after it.
pub(crate) fn message(d: &Diagnostic, help: impl Fn(&Help) -> String) -> String {
    let mut message = format!("{} [{}]", d.message, d.lint);
    if let Some(label) = &d.label {
        message.push_str(&format!("\n  = note: {label}"));
    }
    if let Some(fix) = &d.help {
        message.push_str(&format!("\n  = help: {}", help(fix)));
    }
    message
}

/// How to apply `help` to `#[fsm(...)]` attributes.
fn attribute_help(help: &Help) -> String {
    match help {
        Help::DidYouMean(name) => format!("did you mean `{name}`?"),
        Help::NameInitial => "name it on the enum: `#[fsm(initial = Variant)]`".into(),
        Help::DeclareRole(role) => {
            format!("declare it: `#[fsm(roles({role} = \"who holds it\"))]`")
        }
        Help::DeclareGuard(guard) => {
            format!("describe it: `#[fsm(guards({guard} = \"what must hold\"))]`")
        }
        Help::DescribeGuard(guard) => format!("`#[fsm(guards({guard} = \"what must hold\"))]`"),
        Help::AddOrigin => "list the states it may start from: `from = [Variant, ...]`".into(),
        Help::AddTarget => "add `to = Variant`, or `to_origin` to return where it started".into(),
        Help::MarkTransition(state) => {
            format!("mark it `#[fsm(transition)]`, or make `{state}` the target with `to`")
        }
        Help::UseOrMakeStatic(state) => {
            format!("name it in an action's `via`, or remove `#[fsm(transition)]` from `{state}`")
        }
        Help::LeaveOrTerminal => {
            "add an action that leaves it, or mark it `#[fsm(terminal)]`".into()
        }
        Help::KeepHiddenStill => "remove `via` and `to`, or make the action visible".into(),
        Help::NameOwner => {
            "add `#[fsm(owner = role)]` to the state or `roles = ...` to the actions leaving it"
                .into()
        }
        Help::Text(text) => text.clone(),
    }
}
