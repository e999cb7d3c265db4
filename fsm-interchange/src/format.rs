//! Which format a file is in, told from what it holds, for an import that is
//! not told (`fsm import FILE`).

use crate::import::{ImportError, Lines};

/// A format the imports read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// An XState v5 machine config, JSON ([`from_xstate`](crate::from_xstate)).
    Xstate,
    /// A W3C SCXML document ([`from_scxml`](crate::from_scxml)).
    Scxml,
    /// A PlantUML state diagram, or a document holding one as a PlantUML
    /// server's image address ([`plantuml`](crate::plantuml),
    /// [`source_from_url`](crate::source_from_url)).
    Plantuml,
    /// A Mermaid state diagram, or a Markdown document holding one
    /// ([`mermaid`](crate::mermaid)).
    Mermaid,
}

impl Format {
    /// The format's name as `fsm import` takes it: `xstate`, `scxml`,
    /// `plantuml`, `mermaid`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Xstate => "xstate",
            Format::Scxml => "scxml",
            Format::Plantuml => "plantuml",
            Format::Mermaid => "mermaid",
        }
    }

    /// What the format is, in words: "an XState config", ...
    pub fn described(self) -> &'static str {
        match self {
            Format::Xstate => "an XState config",
            Format::Scxml => "an SCXML document",
            Format::Plantuml => "a PlantUML diagram",
            Format::Mermaid => "a Mermaid diagram",
        }
    }

    /// The format `text` is in, from what it holds: a JSON object is an XState
    /// config, an XML document whose root is `<scxml>` an SCXML document;
    /// otherwise a text holding `@startuml` or a PlantUML server's image address
    /// (`/plantuml/`) is a PlantUML diagram, and one holding `stateDiagram` a
    /// Mermaid diagram (a Markdown document holding either too).
    ///
    /// # Errors
    ///
    /// A text that is none of them, at its first character; a text holding
    /// both a PlantUML and a Mermaid diagram, at the second one: the caller
    /// says which to read.
    ///
    /// ```
    /// use fsm_interchange::Format;
    ///
    /// assert_eq!(Format::detect(r#"{ "initial": "a", "states": {} }"#)?, Format::Xstate);
    /// assert_eq!(Format::detect("# Design\n```mermaid\nstateDiagram-v2\n```")?, Format::Mermaid);
    /// let both = Format::detect("@startuml\n@enduml\n```mermaid\nstateDiagram-v2\n```");
    /// assert_eq!(
    ///     both.unwrap_err().to_string(),
    ///     "line 4, column 1: a Mermaid diagram here and a PlantUML diagram at line 1: \
    ///      say which to import (`fsm import plantuml` or `fsm import mermaid`)"
    /// );
    /// # Ok::<(), fsm_interchange::ImportError>(())
    /// ```
    pub fn detect(text: &str) -> Result<Format, ImportError> {
        let lines = Lines::new(text);
        let start = text.len()
            - text
                .trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n'])
                .len();
        let opening = &text[start..];
        if opening.starts_with('{') {
            return Ok(Format::Xstate);
        }
        if opening.starts_with('<') {
            return match opening.contains("<scxml") {
                true => Ok(Format::Scxml),
                false => Err(lines.pos(start).error(
                    "an XML document whose root is not `<scxml>`: expected an SCXML document",
                )),
            };
        }
        let plantuml = ["@startuml", "/plantuml/"]
            .iter()
            .filter_map(|mark| text.find(mark))
            .min();
        let mermaid = text.find("stateDiagram");
        match (plantuml, mermaid) {
            (Some(_), None) => Ok(Format::Plantuml),
            (None, Some(_)) => Ok(Format::Mermaid),
            (Some(p), Some(m)) => {
                let (first, second) = (p.min(m), p.max(m));
                let (here, there) = match m > p {
                    true => (Format::Mermaid, Format::Plantuml),
                    false => (Format::Plantuml, Format::Mermaid),
                };
                Err(lines.pos(second).error(format!(
                    "{} here and {} at line {}: say which to import (`fsm import {}` or `fsm import {}`)",
                    here.described(),
                    there.described(),
                    lines.pos(first).line,
                    Format::Plantuml,
                    Format::Mermaid,
                )))
            }
            (None, None) => Err(lines.pos(start).error(
                "expected an XState config (JSON), an SCXML document, a PlantUML diagram \
                 (`@startuml`, or a PlantUML server's image address) or a Mermaid state \
                 diagram (`stateDiagram-v2`)",
            )),
        }
    }

    /// Reads `text` in this format and writes the spec: the format's own
    /// import (for PlantUML, from the image address a document holds when it
    /// holds no `@startuml`). `name` is the machine's name unless the file
    /// names it.
    ///
    /// # Errors
    ///
    /// The format's import's.
    pub fn import(self, text: &str, name: &str) -> Result<String, ImportError> {
        match self {
            Format::Xstate => crate::from_xstate(text, name),
            Format::Scxml => crate::from_scxml(text, name),
            Format::Plantuml if !text.contains("@startuml") && text.contains("/plantuml/") => {
                crate::plantuml(&crate::source_from_url(text)?, name)
            }
            Format::Plantuml => crate::plantuml(text, name),
            Format::Mermaid => crate::mermaid(text, name),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Imports `text` in whichever format it is in ([`Format::detect`]), as that
/// format's import does.
///
/// ```
/// let spec = fsm_interchange::import("stateDiagram-v2\n[*] --> Off\nOff --> On : flip\nOn --> Off : flip\n", "switch")?;
/// assert!(spec.contains(r#"flip = { from = ["Off", "On"], to = { Off = "On", On = "Off" } }"#));
/// # Ok::<(), fsm_interchange::ImportError>(())
/// ```
///
/// # Errors
///
/// [`Format::detect`]'s, then the format's import's.
pub fn import(text: &str, name: &str) -> Result<String, ImportError> {
    Format::detect(text)?.import(text, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_is_told_by_what_it_holds() {
        let cases = [
            ("\u{feff}\n  {\"states\": {}}", Format::Xstate),
            (
                "<?xml version=\"1.0\"?>\n<scxml initial=\"a\"/>",
                Format::Scxml,
            ),
            (
                "' a comment\n@startuml\n[*] --> A\n@enduml",
                Format::Plantuml,
            ),
            (
                "![diagram](http://www.plantuml.com/plantuml/svg/SoWkIImgAStDuN)",
                Format::Plantuml,
            ),
            ("# Doc\n```mermaid\nstateDiagram-v2\n```", Format::Mermaid),
        ];
        for (text, format) in cases {
            assert_eq!(Format::detect(text), Ok(format), "{text:?}");
        }
    }

    #[test]
    fn a_text_of_no_format_is_refused_where_it_starts() {
        let refused = Format::detect("\n\n  states: [a, b]").unwrap_err();
        assert_eq!((refused.line, refused.column), (3, 3));
        assert!(refused.message.starts_with("expected an XState config"));
        let refused = Format::detect("<html><body/></html>").unwrap_err();
        assert_eq!((refused.line, refused.column), (1, 1));
        assert!(refused.message.contains("not `<scxml>`"), "{refused}");
    }

    #[test]
    fn a_plantuml_diagram_after_a_mermaid_one_is_named_second() {
        let refused = Format::detect("stateDiagram-v2\n\n@startuml").unwrap_err();
        assert_eq!((refused.line, refused.column), (3, 1));
        assert!(
            refused
                .message
                .starts_with("a PlantUML diagram here and a Mermaid diagram at line 1"),
            "{refused}"
        );
    }
}
