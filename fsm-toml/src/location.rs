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

/// Bytes read as text (a spec, a diagram to import) that are not UTF-8: where
/// the first byte that is not stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotUtf8 {
    /// 1-based line of the first byte that is not UTF-8.
    pub line: usize,
    /// 1-based column of that byte, in the characters before it on its line.
    pub column: usize,
    /// The byte.
    pub byte: u8,
}

impl std::fmt::Display for NotUtf8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "byte 0x{:02x} at line {}, column {} is not UTF-8",
            self.byte, self.line, self.column
        )
    }
}

impl NotUtf8 {
    /// `path:line:column: byte 0x.. is not UTF-8`, where an editor jumps to it.
    pub fn in_file(&self, path: &std::path::Path) -> String {
        format!(
            "{}:{}:{}: byte 0x{:02x} is not UTF-8",
            path.display(),
            self.line,
            self.column,
            self.byte
        )
    }
}

impl std::error::Error for NotUtf8 {}

/// A file's bytes as its text, or where they stop being UTF-8, so that every
/// reader of spec files (the derive's included) and of files to import says
/// where.
///
/// ```
/// let text = fsm_toml::utf8_text(b"[machine]\nname = \"vm\"\n".to_vec()).unwrap();
/// assert!(text.starts_with("[machine]"));
/// let err = fsm_toml::utf8_text(b"[machine]\nname = \"v\xe9\"\n".to_vec()).unwrap_err();
/// assert_eq!((err.line, err.column, err.byte), (2, 10, 0xe9));
/// ```
pub fn utf8_text(bytes: Vec<u8>) -> Result<String, NotUtf8> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let valid = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
        let place = Location::of(valid, at..at);
        NotUtf8 {
            line: place.line,
            column: place.column,
            byte: bytes[at],
        }
    })
}
