//! Text that may not read as what it is: hidden characters, words that mix scripts,
//! and addresses and URLs whose display form is not ASCII. An address or URL is
//! given its ASCII form (the domain in punycode, by `idna`; anything else that is not
//! ASCII written `\u{XXXX}` in an address, percent-encoded in a URL), and is flagged
//! when a label mixes scripts or when every non-ASCII character in it is a confusable
//! of an ASCII one (UTS #39 mixed-script and confusable data, by `unicode-security`;
//! no hand-written table): `bаnk@bank.example` with a Cyrillic `а` reads as
//! `bank@bank.example` and is not that address.

use unicode_script::{Script, UnicodeScript};
use unicode_security::MixedScript;

use crate::error::is_hidden;

/// The hidden characters of `s` ([`is_hidden`]), each once, as `U+XXXX` (at most eight
/// named); `None` when there are none. Line feed, carriage return and tab are escaped
/// as JSON escapes them but not flagged: text has lines.
pub(super) fn hidden(s: &str) -> Option<String> {
    let mut found: Vec<char> = Vec::new();
    let flagged = |c: &char| is_hidden(*c) && !matches!(c, '\n' | '\r' | '\t');
    for c in s.chars().filter(flagged) {
        if !found.contains(&c) {
            found.push(c);
            if found.len() > 8 {
                break;
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    let named: Vec<String> = found
        .iter()
        .take(8)
        .map(|&c| format!("U+{:04X}", c as u32))
        .collect();
    let more = if found.len() > 8 { ", and others" } else { "" };
    Some(format!(
        "hidden or invisible characters {}{more} (shown escaped)",
        named.join(", ")
    ))
}

/// The scripts of the letters of `s`, in the order first met (Common and Inherited
/// characters, digits and punctuation, belong to every script and are left out).
fn scripts(s: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in s.chars() {
        let script = c.script();
        if matches!(script, Script::Common | Script::Inherited | Script::Unknown) {
            continue;
        }
        let name = script.full_name();
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Whether `word` mixes scripts the way no single writing system does (UTS #39: its
/// resolved script set is empty; Japanese kana with Han is one set, Latin with
/// Cyrillic is none).
fn mixes_scripts(word: &str) -> bool {
    !word.is_ascii() && !word.is_single_script()
}

/// The words of `s` (split at white space) that mix scripts, as one finding.
pub(super) fn mixed_words(s: &str) -> Option<String> {
    let words: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || is_hidden(c))
        .filter(|w| mixes_scripts(w))
        .collect();
    let first = words.first()?;
    let mut shown = String::new();
    for c in first.chars().take(40) {
        crate::error::push_shown(&mut shown, c);
    }
    let more = match words.len() {
        1 => " mixes".to_string(),
        2 => " and 1 other word mix".to_string(),
        n => format!(" and {} other words mix", n - 1),
    };
    Some(format!(
        "\"{shown}\"{more} scripts ({})",
        scripts(first).join(", ")
    ))
}

/// What an address or URL needs said: its ASCII form, and why it may mislead.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Lookalike {
    /// The ASCII form.
    pub ascii: String,
    /// Why the display form may not be what it seems (empty: not ASCII, nothing worse).
    pub reasons: Vec<String>,
}

/// `s` with each non-ASCII character replaced by the ASCII text it is confusable with
/// (its UTS #39 skeleton), when every one has such a text; `None` when `s` is ASCII or
/// holds a character that looks like nothing in ASCII.
fn ascii_lookalike(s: &str) -> Option<String> {
    if s.is_ascii() {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let mut buf = [0; 4];
        let skeleton: String = unicode_security::skeleton(c.encode_utf8(&mut buf)).collect();
        if skeleton.is_empty() || !skeleton.is_ascii() {
            return None;
        }
        out.push_str(&skeleton);
    }
    Some(out)
}

/// The reasons a non-ASCII `display` (an address or URL; `part`, the part of it that
/// decides where it leads) whose parts are `labels` may mislead.
fn reasons(display: &str, part: &str, labels: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(like) = ascii_lookalike(display).or_else(|| ascii_lookalike(part)) {
        let mut shown = String::new();
        like.chars()
            .take(200)
            .for_each(|c| crate::error::push_shown(&mut shown, c));
        out.push(format!("looks like \"{shown}\" (confusable characters)"));
    }
    // Label by label too: a whole-script look-alike label (all Cyrillic `раураӏ`)
    // beside a local part or user name that looks like nothing in ASCII (`иван`)
    // would otherwise hide behind it.
    for label in labels {
        if let Some(like) = ascii_lookalike(label) {
            let mut shown = String::new();
            like.chars()
                .take(200)
                .for_each(|c| crate::error::push_shown(&mut shown, c));
            let said = format!("looks like \"{shown}\"");
            if !out.iter().any(|r| r.contains(&said)) {
                out.push(format!(
                    "\"{}\" {said} (confusable characters)",
                    crate::error::quoted(label)
                ));
            }
        }
    }
    for label in labels.iter().filter(|l| mixes_scripts(l)) {
        out.push(format!(
            "\"{}\" mixes scripts ({})",
            crate::error::quoted(label),
            scripts(label).join(", ")
        ));
    }
    out
}

/// `s` with every character outside printable ASCII written `\u{XXXX}`.
fn escaped_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_graphic() {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        }
    }
    out
}

/// A domain in its ASCII form: IDNA (UTS #46) punycode, or escaped when IDNA refuses it.
fn ascii_domain(domain: &str) -> String {
    if domain.is_ascii() {
        return escaped_ascii(domain);
    }
    match idna::domain_to_ascii(domain) {
        Ok(d) if d.is_ascii() && !d.is_empty() => d,
        _ => escaped_ascii(domain),
    }
}

/// Whether `s` has the shape of an address: one `@`, text on both sides, no white
/// space.
pub(super) fn is_address(s: &str) -> bool {
    match s.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && s.len() <= 998
                && !s.chars().any(|c| c.is_whitespace() || c == '/' || c == ':')
        }
        None => false,
    }
}

/// The scheme and the rest of a URL-shaped `s` (`scheme://...` or `mailto:...`).
fn url_parts(s: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = s.split_once(':')?;
    let mut chars = scheme.chars();
    let shaped = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    (shaped && (rest.starts_with("//") || scheme.eq_ignore_ascii_case("mailto")))
        .then_some((scheme, rest))
}

/// The user name of a URL that names one before its host, and the host it leads to
/// (`https://bank.example@evil.example/` reads as `bank.example` and leads to
/// `evil.example`), ASCII or not.
pub(super) fn user_before_host(s: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url_parts(s)?;
    if scheme.eq_ignore_ascii_case("mailto") {
        return None;
    }
    let after = &rest[2..];
    let end = after.find(['/', '?', '#', '\\']).unwrap_or(after.len());
    after[..end].rsplit_once('@')
}

/// Whether `s` has the shape of a URL (`scheme://...`, `mailto:...`).
pub(super) fn is_url(s: &str) -> bool {
    url_parts(s).is_some()
}

/// An address that is not ASCII: its ASCII form and why it may mislead; `None` for
/// an ASCII address.
pub(super) fn address(s: &str) -> Option<Lookalike> {
    if s.is_ascii() {
        return None;
    }
    let (local, domain) = s.rsplit_once('@').unwrap_or((s, ""));
    let ascii = if domain.is_empty() {
        escaped_ascii(s)
    } else {
        format!("{}@{}", escaped_ascii(local), ascii_domain(domain))
    };
    let mut labels = vec![local];
    labels.extend(domain.split('.'));
    Some(Lookalike {
        ascii,
        reasons: reasons(s, s, &labels),
    })
}

/// Non-ASCII characters and those no URL holds as they are, percent-encoded (UTF-8).
fn percent_encoded(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_graphic() {
            out.push(c);
        } else {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

/// A URL that is not ASCII: its ASCII form (the host in punycode, the rest
/// percent-encoded) and why it may mislead; `None` for an ASCII URL or text that is
/// not one.
pub(super) fn url(s: &str) -> Option<Lookalike> {
    if s.is_ascii() {
        return None;
    }
    let (scheme, rest) = url_parts(s)?;
    if scheme.eq_ignore_ascii_case("mailto") {
        let found = address(rest)?;
        return Some(Lookalike {
            ascii: format!("{scheme}:{}", found.ascii),
            reasons: found.reasons,
        });
    }
    let after = &rest[2..];
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, path) = after.split_at(end);
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => (h, Some(p)),
        _ => (hostport, None),
    };
    let mut ascii = format!("{scheme}://");
    if let Some(u) = userinfo {
        ascii.push_str(&percent_encoded(u));
        ascii.push('@');
    }
    ascii.push_str(&ascii_domain(host));
    if let Some(p) = port {
        ascii.push(':');
        ascii.push_str(p);
    }
    ascii.push_str(&percent_encoded(path));
    let mut labels: Vec<&str> = host.split('.').collect();
    labels.extend(userinfo);
    Some(Lookalike {
        ascii,
        reasons: reasons(s, authority, &labels),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_a_cyrillic_a_in_an_address_is_flagged_with_its_ascii_form() {
        let found = address("b\u{430}nk@bank.example").expect("not ASCII");
        assert_eq!(found.ascii, "b\\u{0430}nk@bank.example");
        assert!(
            found
                .reasons
                .iter()
                .any(|r| r.contains("looks like \"bank@bank.example\"")),
            "{found:?}"
        );
        assert!(
            found
                .reasons
                .iter()
                .any(|r| r.contains("Latin") && r.contains("Cyrillic")),
            "{found:?}"
        );
        // In the domain: punycode.
        let found = address("pay@b\u{430}nk.example").expect("not ASCII");
        assert!(found.ascii.starts_with("pay@xn--"), "{found:?}");
        assert!(!found.reasons.is_empty());
        // A whole-script look-alike label (all Cyrillic) still reads as ASCII.
        let found = url("https://\u{430}\u{440}\u{440}\u{4cf}\u{435}.example/pay").expect("URL");
        assert!(found.ascii.starts_with("https://xn--"), "{found:?}");
        assert!(
            found.reasons.iter().any(|r| r.contains("looks like")),
            "{found:?}"
        );
    }

    #[test]
    fn plain_ascii_and_single_script_text_is_not_flagged() {
        assert_eq!(address("bank@bank.example"), None);
        assert_eq!(url("https://bank.example/a?b=c"), None);
        // Not ASCII, one script, nothing like ASCII: the ASCII form, no warning.
        let found = address("用户@例子.example").expect("not ASCII");
        assert!(found.reasons.is_empty(), "{found:?}");
        assert!(found.ascii.contains("xn--"), "{found:?}");
        assert_eq!(mixed_words("Привет, world: 日本語のテキスト"), None);
        assert!(mixed_words("please p\u{430}y now").is_some());
        assert_eq!(hidden("plain text"), None);
        assert!(hidden("a\u{202e}b").expect("found").contains("U+202E"));
    }
}
