//! The summary's lines: every value written through [`crate::error::push_shown`] (a
//! hidden character as `\u{XXXX}`), JSON strings with `"`, `\`, line feed, carriage
//! return and tab as JSON writes them (so an escape in the text cannot pass for one
//! of ours), and long values wrapped at [`WIDTH`] characters onto continuation lines
//! marked `| `: nothing is cut, and no value can start a line of its own.
//!
//! The envelope is written as its canonical JSON pretty-printed: members in name
//! order, one a line, each number as written (with the value a reader takes when
//! that differs: `1e3`, `1.0`, a 20-digit integer), each string quoted. It shows
//! every member whatever the schema says, so no member can be present and not shown.

use crate::envelope::borrowed::{Value, View};

use super::lookalike;

/// The characters of a value on one line before it wraps.
pub(super) const WIDTH: usize = 64;

/// The display columns a summary line may take: 80, the narrowest terminal in use
/// (the Linux console). A wider line would wrap in the terminal itself, unmarked, and
/// whatever a value put at that wrap would begin a row of its own that reads as a
/// line of the summary (`warnings: none`), so [`fit_columns`] splits every line there.
pub(super) const COLUMNS: usize = 80;

/// `lines`, each wider than [`COLUMNS`] display columns (a wide character counts two)
/// split there, each further piece marked `| ` under the line's own indent (at most
/// half the width), as every continuation is.
pub(super) fn fit_columns(lines: Vec<String>) -> Vec<String> {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        if line.width() <= COLUMNS {
            out.push(line);
            continue;
        }
        let lead = line.len() - line.trim_start_matches(' ').len();
        let prefix = format!("{}| ", " ".repeat(lead.min(COLUMNS / 2)));
        let mut piece = String::new();
        let mut col = 0;
        for c in line.chars() {
            let w = c.width().unwrap_or(0);
            if col + w > COLUMNS && col > prefix.len() {
                out.push(std::mem::replace(&mut piece, prefix.clone()));
                col = prefix.len();
            }
            piece.push(c);
            col += w;
        }
        out.push(piece);
    }
    out
}

/// The display columns of `text`.
fn head_width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// The characters `c` takes once escaped in a JSON string.
fn escaped_len(c: char) -> usize {
    let mut unit = String::new();
    push_escaped(&mut unit, c, true);
    unicode_width::UnicodeWidthStr::width(unit.as_str())
}

/// One finding about a value, said before the long sections.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Warning {
    /// Where (a header field, a JSON path, an attachment).
    pub at: String,
    /// What.
    pub what: String,
}

/// The lines, and the warnings met while writing them.
#[derive(Default)]
pub(super) struct Lines {
    pub lines: Vec<String>,
    pub warnings: Vec<Warning>,
}

/// How a JSON value is introduced on its line.
#[derive(Clone, Copy)]
pub(super) enum Key<'k> {
    /// An object member: `"name": `.
    Member(&'k str),
    /// A label of the summary: `label: `.
    Label(&'k str),
    /// An array item.
    Item,
}

fn push_escaped(out: &mut String, c: char, json: bool) {
    match c {
        '"' if json => out.push_str("\\\""),
        '\\' if json => out.push_str("\\\\"),
        '\n' if json => out.push_str("\\n"),
        '\r' if json => out.push_str("\\r"),
        '\t' if json => out.push_str("\\t"),
        _ => crate::error::push_shown(out, c),
    }
}

/// A JSON path one step down: `a.b`, `a[3]`; a name that is not a plain word is
/// written quoted and escaped.
pub(super) fn child_path(path: &str, key: Key<'_>, index: usize) -> String {
    match key {
        Key::Item => format!("{path}[{index}]"),
        Key::Member(name) | Key::Label(name) => {
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            let step = if plain {
                name.to_string()
            } else {
                let mut q = String::from("\"");
                name.chars().for_each(|c| push_escaped(&mut q, c, true));
                q.push('"');
                q
            };
            if path.is_empty() {
                step
            } else {
                format!("{path}.{step}")
            }
        }
    }
}

impl Lines {
    /// A line of the summary's own text.
    pub(super) fn line(&mut self, text: impl Into<String>) {
        self.lines.push(text.into());
    }

    /// `head`, then `value` escaped (`json`: as a JSON string's content), wrapped at
    /// [`WIDTH`]: continuation lines are `indent` then `| `; `tail` ends the last.
    pub(super) fn wrapped(
        &mut self,
        head: &str,
        indent: &str,
        value: &str,
        json: bool,
        tail: &str,
    ) {
        let mut line = String::from(head);
        let mut count = 0usize;
        let mut col = head_width(head);
        let mut unit = String::new();
        for c in value.chars() {
            unit.clear();
            push_escaped(&mut unit, c, json);
            let n = head_width(&unit);
            if count > 0 && (count + n > WIDTH || col + n > COLUMNS) {
                self.lines.push(std::mem::take(&mut line));
                line.push_str(indent);
                line.push_str("| ");
                count = 0;
                col = head_width(&line);
            }
            line.push_str(&unit);
            count += n;
            col += n;
        }
        line.push_str(tail);
        self.lines.push(line);
    }

    /// A finding.
    pub(super) fn warn(&mut self, at: &str, what: String) {
        self.warnings.push(Warning {
            at: at.to_string(),
            what,
        });
    }

    /// The findings about a text found at `at`: hidden characters, words mixing
    /// scripts, and for an address or URL its ASCII form and why it may mislead
    /// (returned, so the caller can show the ASCII form beside it).
    pub(super) fn check(&mut self, at: &str, text: &str) -> Option<String> {
        if let Some(what) = lookalike::hidden(text) {
            self.warn(at, what);
        }
        if let Some((user, host)) = lookalike::user_before_host(text) {
            let (mut u, mut h) = (String::new(), String::new());
            user.chars()
                .take(100)
                .for_each(|c| crate::error::push_shown(&mut u, c));
            host.chars()
                .take(100)
                .for_each(|c| crate::error::push_shown(&mut h, c));
            self.warn(
                at,
                format!("names a user (\"{u}\") before the host; it leads to {h}"),
            );
        }
        let found = if lookalike::is_url(text) {
            lookalike::url(text)
        } else if lookalike::is_address(text) {
            lookalike::address(text)
        } else {
            None
        };
        match found {
            Some(found) => {
                for r in &found.reasons {
                    self.warn(at, format!("{r}; ASCII form {}", found.ascii));
                }
                Some(found.ascii)
            }
            None => {
                if let Some(what) = lookalike::mixed_words(text) {
                    self.warn(at, what);
                }
                None
            }
        }
    }

    /// `label: value` (not JSON), checked, wrapped; an address's or URL's ASCII form
    /// on the line after when it is not ASCII.
    pub(super) fn field(&mut self, indent: &str, label: &str, at: &str, value: &str) {
        let ascii = self.check(at, value);
        let cont = format!("{indent}  ");
        // The label wraps with the value: a header field's name is the sender's text
        // too, and may be long.
        self.wrapped(indent, &cont, &format!("{label}: {value}"), false, "");
        if let Some(ascii) = ascii {
            self.wrapped(&format!("{cont}(ASCII form: "), &cont, &ascii, false, ")");
        }
    }

    /// A JSON value at `path`, pretty-printed at `indent` levels of two spaces.
    pub(super) fn json(&mut self, depth: usize, key: Key<'_>, path: &str, v: Value<'_>) {
        let indent = "  ".repeat(depth);
        let mut head = indent.clone();
        match key {
            Key::Member(name) => {
                self.check(path, name);
                if name.chars().count() > WIDTH / 2 {
                    // A long name on lines of its own, the value after it.
                    self.wrapped(&format!("{indent}\""), &indent, name, true, "\":");
                    head.push_str("  ");
                } else {
                    head.push('"');
                    name.chars().for_each(|c| push_escaped(&mut head, c, true));
                    head.push_str("\": ");
                }
            }
            Key::Label(label) => {
                head.push_str(label);
                head.push_str(": ");
            }
            Key::Item => {}
        }
        match v.view() {
            View::Null => self.line(format!("{head}null")),
            View::Bool(b) => self.line(format!("{head}{b}")),
            View::Number(_) => {
                let literal = v.number_literal().unwrap_or("");
                let read = serde_json::from_str::<serde_json::Number>(literal)
                    .map(|n| n.to_string())
                    .unwrap_or_default();
                if read == literal {
                    self.line(format!("{head}{literal}"));
                } else {
                    self.wrapped(
                        &head,
                        &indent,
                        literal,
                        false,
                        &format!(" (read as {read})"),
                    );
                }
            }
            View::String(s) => {
                let ascii = self.check(path, s);
                // A label and value too wide for one line: the value on the next,
                // whole where it fits (a URL is read at a glance, not in pieces).
                let escaped: usize = s.chars().map(escaped_len).sum();
                if head.len() > indent.len() && head_width(&head) + escaped + 2 > COLUMNS {
                    self.line(head.trim_end().to_string());
                    head = format!("{indent}    ");
                }
                head.push('"');
                self.wrapped(&head, &indent, s, true, "\"");
                if let Some(ascii) = ascii {
                    self.wrapped(
                        &format!("{indent}  (ASCII form: "),
                        &indent,
                        &ascii,
                        false,
                        ")",
                    );
                }
            }
            View::Array(items) => {
                if items.len() == 0 {
                    self.line(format!("{head}[]"));
                    return;
                }
                self.line(format!("{head}["));
                for (i, item) in items.iter().enumerate() {
                    self.json(depth + 1, Key::Item, &child_path(path, Key::Item, i), item);
                }
                self.line(format!("{indent}]"));
            }
            View::Object(members) => {
                if members.is_empty() {
                    self.line(format!("{head}{{}}"));
                    return;
                }
                self.line(format!("{head}{{"));
                let mut sorted: Vec<(&str, Value<'_>)> = members.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                for (name, value) in sorted {
                    let key = Key::Member(name);
                    self.json(depth + 1, key, &child_path(path, key, 0), value);
                }
                self.line(format!("{indent}}}"));
            }
        }
    }
}

/// `text` with each continuation (`| `) joined to the line before and a value that
/// went to the next line joined to its label: what a reader of the summary reads, for
/// tests that look for a value whole.
#[cfg(test)]
pub(super) fn flat(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("| ") {
            out.push_str(rest);
        } else if trimmed.starts_with('"') && out.ends_with(':') {
            out.push(' ');
            out.push_str(trimmed);
        } else {
            out.push('\n');
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_a_long_value_wraps_and_nothing_is_cut() {
        let mut out = Lines::default();
        let value = format!("{}\u{202e}{}", "a".repeat(150), "b".repeat(150));
        out.wrapped("text: \"", "  ", &value, true, "\"");
        // 300 characters and an escape, at most WIDTH a line.
        assert_eq!(out.lines.len(), 5, "{:?}", out.lines);
        assert!(out.lines.iter().all(|l| l.chars().count() <= COLUMNS));
        let joined: String = out
            .lines
            .iter()
            .map(|l| l.trim_start_matches("text: \"").trim_start_matches("  | "))
            .collect();
        assert_eq!(
            joined,
            format!("{}\\u{{202e}}{}\"", "a".repeat(150), "b".repeat(150))
        );
        assert!(out.lines[1..].iter().all(|l| l.starts_with("  | ")));
        // A quote and a backslash inside a JSON string cannot close it or forge an
        // escape.
        let mut out = Lines::default();
        out.wrapped("\"", "", "x\", \"url\": \"https://e\\u{202e}", true, "\"");
        assert_eq!(out.lines[0], r#""x\", \"url\": \"https://e\\u{202e}""#);
    }
}
