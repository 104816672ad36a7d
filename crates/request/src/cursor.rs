//! A character cursor with Parsec-like error reporting, shared by all query-string grammars.
//!
//! PostgREST reports parse errors as `"failed to parse <what> (<input>)" (line 1, column N)`,
//! with N counted in characters, so the cursor works on `char`s rather than bytes.

use crate::RequestError;

/// A failed parse: where it failed and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PErr {
    /// Zero-based character position of the failure.
    pub pos: usize,
    /// The offending character, `None` at the end of input.
    pub unexpected: Option<char>,
    /// Parsec-style "expecting ..." text (without the word "expecting").
    pub expecting: String,
}

impl PErr {
    /// Turns the failure into PostgREST's PGRST100 error for the parameter `what`.
    pub(crate) fn into_request_error(self, what: &str, input: &str) -> RequestError {
        let source = format!("failed to parse {what} ({input})");
        let message = format!("{} (line 1, column {})", haskell_show(&source), self.pos.saturating_add(1));
        let unexpected = match self.unexpected {
            // Parsec's `eof` reports the character it found as `show c` ('t'), and that message
            // wins over the others' ("t") wherever the end of input was one of the options.
            Some(c) if self.expecting.ends_with("end of input") => {
                format!("unexpected {}", haskell_show_char(c))
            }
            Some(c) => format!("unexpected {}", haskell_show(&c.to_string())),
            None => "unexpected end of input".to_string(),
        };
        let details = if self.expecting.is_empty() {
            unexpected
        } else {
            format!("{unexpected} expecting {}", self.expecting)
        };
        RequestError::Parse { message, details }
    }
}

/// Quotes a character the way Haskell's `show` does: `'t'`, `'\''`, `'\\'`, `'\233'`.
fn haskell_show_char(c: char) -> String {
    match c {
        '\'' => "'\\''".to_owned(),
        '"' => "'\"'".to_owned(),
        _ => {
            let shown = haskell_show(&c.to_string());
            format!("'{}'", &shown[1..shown.len() - 1])
        }
    }
}

/// Quotes a string the way Haskell's `show` does, because PostgREST's messages embed
/// `show sourceName` and clients may compare them byte for byte.
pub(crate) fn haskell_show(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut numeric_escape = false;
    for c in s.chars() {
        if numeric_escape && c.is_ascii_digit() {
            out.push_str("\\&");
        }
        numeric_escape = false;
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' '..='~' => out.push(c),
            _ => {
                out.push('\\');
                out.push_str(&u32::from(c).to_string());
                numeric_escape = true;
            }
        }
    }
    out.push('"');
    out
}

/// A position in a parameter value, with one-character lookahead helpers.
#[derive(Debug, Clone)]
pub(crate) struct Cursor {
    chars: Vec<char>,
    /// Zero-based character position.
    pub pos: usize,
}

impl Cursor {
    /// Starts at the beginning of `input`.
    pub(crate) fn new(input: &str) -> Self {
        Self { chars: input.chars().collect(), pos: 0 }
    }

    /// The current character, if any.
    pub(crate) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    /// The character `n` positions ahead, if any.
    pub(crate) fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos.saturating_add(n)).copied()
    }

    /// Consumes and returns the current character.
    pub(crate) fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    /// Consumes `c` if it is next.
    pub(crate) fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Whether the remaining input starts with `s`.
    pub(crate) fn starts_with(&self, s: &str) -> bool {
        (self.pos..).zip(s.chars()).all(|(i, c)| self.chars.get(i) == Some(&c))
    }

    /// Consumes `s` only if all of it is next (Parsec's `try (string s)`).
    pub(crate) fn eat_str(&mut self, s: &str) -> bool {
        if self.starts_with(s) {
            self.pos += s.chars().count();
            true
        } else {
            false
        }
    }

    /// Whether all input is consumed.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.chars.len()
    }

    /// Skips spaces and tabs, PostgREST's `ws`.
    pub(crate) fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
    }

    /// Consumes characters while `f` holds and returns them.
    pub(crate) fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if !f(c) {
                break;
            }
            out.push(c);
            self.pos += 1;
        }
        out
    }

    /// Everything from the current position on, consumed.
    pub(crate) fn take_rest(&mut self) -> String {
        let out: String = self.chars.get(self.pos..).unwrap_or_default().iter().collect();
        self.pos = self.chars.len();
        out
    }

    /// A failure at the current position.
    pub(crate) fn err(&self, expecting: &str) -> PErr {
        self.err_at(self.pos, expecting)
    }

    /// A failure at position `pos`.
    pub(crate) fn err_at(&self, pos: usize, expecting: &str) -> PErr {
        PErr { pos, unexpected: self.chars.get(pos).copied(), expecting: expecting.to_string() }
    }
}
