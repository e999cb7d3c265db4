//! Rendering findings against their source text, the way rustc shows its own.

use std::ops::Range;

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

use super::{Diagnostic, Severity};
use crate::spec::SourceMap;

/// A position in a source text: 1-based line and column (in characters) and the
/// byte range it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// The bytes at fault.
    pub span: Range<usize>,
}

impl Location {
    /// The location of byte range `span` in `text` (clamped to the text).
    pub fn of(text: &str, span: Range<usize>) -> Location {
        let start = floor_char_boundary(text, span.start.min(text.len()));
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = text[line_start..start].chars().count() + 1;
        Location {
            line,
            column,
            span: start..span.end.clamp(start, text.len()),
        }
    }
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Renders findings in plain text, each with `path:line:column`, the source line and
/// a caret under the part at fault.
pub fn render(diagnostics: &[Diagnostic], path: &str, text: &str, map: &SourceMap) -> String {
    render_with(Renderer::plain(), diagnostics, path, text, map)
}

/// Like [`render`], with terminal colours.
pub fn render_styled(
    diagnostics: &[Diagnostic],
    path: &str,
    text: &str,
    map: &SourceMap,
) -> String {
    render_with(Renderer::styled(), diagnostics, path, text, map)
}

fn render_with(
    renderer: Renderer,
    diagnostics: &[Diagnostic],
    path: &str,
    text: &str,
    map: &SourceMap,
) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let level = match d.severity() {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let clamp = |r: Range<usize>| {
            let start = floor_char_boundary(text, r.start.min(text.len()));
            start..floor_char_boundary(text, r.end.clamp(start, text.len()))
        };
        let mut snippet = Snippet::source(text).path(path).fold(true);
        let primary = map.span(&d.site).map(clamp).unwrap_or(0..0);
        snippet = snippet.annotation(
            AnnotationKind::Primary
                .span(primary)
                .label(d.label.as_deref()),
        );
        for (site, label) in &d.related {
            if let Some(span) = map.span(site) {
                snippet = snippet.annotation(
                    AnnotationKind::Context
                        .span(clamp(span))
                        .label(label.as_str()),
                );
            }
        }
        let mut report = vec![
            level
                .primary_title(d.message.as_str())
                .id(d.lint.code())
                .element(snippet),
        ];
        if let Some(help) = &d.help {
            report.push(Group::with_title(
                Level::HELP.secondary_title(help.as_str()),
            ));
        }
        out.push_str(&renderer.render(&report));
        out.push_str("\n\n");
    }
    out
}
