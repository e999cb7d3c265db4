//! `#[fsm(spec = "path.toml")]`: the table read from a spec file by the TOML front
//! end, and the enum's variants matched to the spec's states.

use std::path::PathBuf;

use crate::input::Variant as EnumVariant;
use fsm_model::MachineDef;
use fsm_toml::SourceMap;
use proc_macro::{Ident, Span};

use crate::attr::{Body, Item};
use crate::check::{Places, Source, SpecText, message};
use crate::ctxt::{Error, Errors};

/// Spec paths are relative to `FSM_SPEC_DIR` when set (for builds that move sources
/// away from `Cargo.toml`, and for compile-fail tests), else to the crate's
/// `CARGO_MANIFEST_DIR`.
fn file_path(literal: &str) -> PathBuf {
    let dir = std::env::var_os("FSM_SPEC_DIR")
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR"))
        .map(PathBuf::from)
        .unwrap_or_default();
    dir.join(literal)
}

/// The definition in the spec file, its places, and the variant of each state.
pub fn read(
    (literal, literal_span): &(String, Span),
    items: &[Item],
    variants: &[(&EnumVariant, Vec<Item>)],
    enum_ident: &Ident,
    errors: &mut Errors,
) -> Result<Source, Errors> {
    for item in items {
        if !crate::attr::SETTING_KEYS.contains(&item.name().as_str()) {
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
    let unreadable =
        |why: String| Error::new(*literal_span, format!("cannot read spec file {why}"));
    let bytes = std::fs::read(&path).map_err(|e| unreadable(format!("{}: {e}", path.display())))?;
    let text = fsm_toml::utf8_text(bytes)
        .map_err(|e| unreadable(format!("{} (a spec is UTF-8 text)", e.in_file(&path))))?;
    let mut file = SpecText {
        shown_path: literal.clone(),
        text,
        map: SourceMap::default(),
        literal: *literal_span,
    };
    // With values of the wrong shape, the names the spec gets wrong beside
    // them (as `fsm check` reports them).
    let read = fsm_toml::read(&file.text).check_names_with(fsm_analysis::check_names);
    let usable = read.is_usable();
    file.map = read.map;
    for d in &read.diagnostics {
        let (span, message) = file.resolve(&d.site, message(d, fsm_toml::help));
        errors.at(span, message);
    }
    if !usable {
        // No table to check further: every error so far, the attributes' too.
        return Err(std::mem::take(errors));
    }
    let variant_of = match_variants(&read.def, variants, enum_ident, literal, errors);
    Ok(Source {
        def: read.def,
        places: Places::File(file),
        variant_of,
        spec_file: Some(path),
    })
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
    variants: &[(&EnumVariant, Vec<Item>)],
    enum_ident: &Ident,
    literal: &str,
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
    // Each variant's key, once: its explicit name, or its normalised identifier.
    let keys: Vec<(bool, String)> = variants
        .iter()
        .map(|(v, items)| match explicit(items) {
            Some(name) => (true, name),
            None => (false, normalise(&v.name.to_string())),
        })
        .collect();
    let mut used = vec![false; variants.len()];
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for state in &def.states {
        let normalised = normalise(&state.name);
        let found = keys.iter().position(|(exact, key)| {
            if *exact {
                *key == state.name
            } else {
                *key == normalised
            }
        });
        match found {
            Some(i) => {
                used[i] = true;
                out.push(Some(variants[i].0.name.clone()));
            }
            None => {
                missing.push(state.name.as_str());
                out.push(None);
            }
        }
    }
    // One error for every state without a variant, with the variants to paste:
    // an enum started empty (or a spec grown by ten states) is one fix.
    let wanted = |names: &[&str]| {
        let variants: Vec<String> = names.iter().map(|n| crate::case::upper_camel(n)).collect();
        variants.join(", ")
    };
    match missing.as_slice() {
        [] => {}
        [state] => errors.at(
            enum_ident.span(),
            format!(
                "no variant for state `{state}` of {literal}: add a variant `{}`",
                wanted(&missing)
            ),
        ),
        states => errors.at(
            enum_ident.span(),
            format!(
                "no variant for the {} states {} of {literal}: add the variants `{}`",
                states.len(),
                states
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                wanted(states)
            ),
        ),
    }
    for (i, (v, _)) in variants.iter().enumerate() {
        if !used[i] {
            errors.at(
                v.name.span(),
                format!("variant `{}` is not a state of {literal}", v.name),
            );
        }
    }
    out
}
