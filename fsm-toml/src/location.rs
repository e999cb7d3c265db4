//! Where things are in a spec's text.

use std::collections::HashMap;
use std::ops::Range;

use fsm_model::Site;

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

    /// Where `site` is in `text`, as a line and column.
    pub fn locate(&self, text: &str, site: &Site) -> Option<Location> {
        self.span(site).map(|span| Location::of(text, span))
    }
}

/// A position in a source text: 1-based line and column (in characters) and the
/// byte range it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// The bytes at fault, clamped to the text and to character boundaries.
    pub span: Range<usize>,
}

impl Location {
    /// The location of byte range `span` in `text` (clamped to the text).
    ///
    /// ```
    /// let at = fsm_toml::Location::of("a = 1\nbé = 2\n", 10..11);
    /// assert_eq!((at.line, at.column), (2, 4));
    /// ```
    pub fn of(text: &str, span: Range<usize>) -> Location {
        let start = floor_char_boundary(text, span.start.min(text.len()));
        let end = floor_char_boundary(text, span.end.clamp(start, text.len()));
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = text[line_start..start].chars().count() + 1;
        Location {
            line,
            column,
            span: start..end,
        }
    }
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}
