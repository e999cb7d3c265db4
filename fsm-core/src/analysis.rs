//! The analysis (`fsm-analysis`) and its findings; with the `toml` feature, the
//! findings of a spec file rendered against its text the way rustc shows its own.

pub use fsm_analysis::{Analysis, check, check_names};
pub use fsm_model::{Diagnostic, Help, Lint, Severity};

#[cfg(feature = "toml")]
pub use self::text::{Source, render, render_styled};

#[cfg(feature = "toml")]
mod text {
    use std::ops::Range;

    use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

    use super::{Diagnostic, Severity};
    use fsm_toml::SourceMap;

    /// The text findings are rendered against.
    #[derive(Debug, Clone)]
    pub struct Source<'a> {
        /// The file's name, as shown.
        pub path: String,
        /// Its text.
        pub text: &'a str,
        /// Where each site of its definition is.
        pub map: &'a SourceMap,
    }

    /// Renders findings in plain text, each with `path:line:column`, the source line, a
    /// caret under the part at fault, and the fix in the spec file's syntax.
    pub fn render(diagnostics: &[Diagnostic], source: &Source<'_>) -> String {
        render_with(Renderer::plain(), diagnostics, source)
    }

    /// Like [`render`], with terminal colours.
    pub fn render_styled(diagnostics: &[Diagnostic], source: &Source<'_>) -> String {
        render_with(Renderer::styled(), diagnostics, source)
    }

    fn render_with(renderer: Renderer, diagnostics: &[Diagnostic], source: &Source<'_>) -> String {
        let text = source.text;
        let clamp = |r: Range<usize>| fsm_toml::Location::of(text, r).span;
        let mut out = String::new();
        for d in diagnostics {
            let level = match d.severity() {
                Severity::Error => Level::ERROR,
                Severity::Warning => Level::WARNING,
            };
            let primary = source.map.span(&d.site).map(clamp).unwrap_or(0..0);
            let mut snippet = Snippet::source(text)
                .path(source.path.as_str())
                .fold(true)
                .annotation(
                    AnnotationKind::Primary
                        .span(primary)
                        .label(d.label.as_deref()),
                );
            for (site, label) in &d.related {
                if let Some(span) = source.map.span(site) {
                    snippet = snippet.annotation(
                        AnnotationKind::Context
                            .span(clamp(span))
                            .label(label.as_str()),
                    );
                }
            }
            let help = d.help.as_ref().map(fsm_toml::help);
            let mut report = vec![
                level
                    .primary_title(d.message.as_str())
                    .id(d.lint.code())
                    .element(snippet),
            ];
            if let Some(help) = &help {
                report.push(Group::with_title(
                    Level::HELP.secondary_title(help.as_str()),
                ));
            }
            out.push_str(&renderer.render(&report));
            out.push_str("\n\n");
        }
        out
    }
}
