//! `Text`: a string from the watched system, made safe to show. kitty runs
//! as root on shared nodes and shows names any local user chooses (comm,
//! thread names, job labels, cgroup paths, symbols): every string in a frame
//! is a `Text`, sanitised when it is made and again when it is read from a
//! file, so no control character (C0, DEL, C1, escape sequences) or
//! bidirectional override ever reaches a terminal, a dump, a CSV or an
//! exposition. They are shown as visible escapes (`\e`, `\r`, `\x07`,
//! `\u{202e}`). Lengths are capped with a visible marker.

use std::fmt;
use std::sync::Arc;

/// Shared, not copied: a frame's names are mostly the last frame's (a
/// process's labels, its threads' and culprits' names, its flows'
/// peers), and a clone is a count.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Text(Arc<str>);

impl serde::Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl Text {
    /// Default cap for names and labels, in characters after escaping.
    pub const MAX: usize = 256;
    /// Cap for kitty's own sentences (verdicts, events) built from names.
    pub const MAX_MESSAGE: usize = 2048;

    /// Sanitises and caps at [`Text::MAX`].
    pub fn new(raw: &str) -> Text {
        Text::capped(raw, Text::MAX)
    }

    /// Sanitises and caps at `max` characters (plus the marker).
    pub fn capped(raw: &str, max: usize) -> Text {
        // Plain text (most of it) goes straight into its shared allocation.
        if is_plain(raw, max) {
            return Text(Arc::from(raw));
        }
        Text(Arc::from(sanitize(raw, max)))
    }

    /// One of kitty's own fixed names (a TCP state, a process state): made
    /// once a thread and shared after, where [`Text::new`] would allocate
    /// it again for every socket and rank of every tick.
    pub fn of_static(name: &'static str) -> Text {
        /// More names than any caller has; past it they are made each time.
        const KEPT: usize = 64;
        thread_local! {
            static MADE: std::cell::RefCell<Vec<(&'static str, Text)>> =
                const { std::cell::RefCell::new(Vec::new()) };
        }
        MADE.with_borrow_mut(|made| {
            if let Some((_, t)) = made.iter().find(|(n, _)| *n == name) {
                return t.clone();
            }
            let t = Text::new(name);
            if made.len() < KEPT {
                made.push((name, t.clone()));
            }
            t
        })
    }

    /// A raw name already shared (a thread's, from its task row) as a
    /// `Text`: the same allocation when it needs no escaping, else a
    /// sanitised copy.
    pub fn of_shared(raw: &Arc<str>) -> Text {
        if is_plain(raw, Text::MAX) {
            return Text(raw.clone());
        }
        Text(Arc::from(sanitize(raw, Text::MAX)))
    }

    /// From bytes of unknown encoding (a kernel comm, an environ value).
    pub fn from_bytes(raw: &[u8]) -> Text {
        Text::new(&String::from_utf8_lossy(raw))
    }

    /// A kitty-written sentence (its parts already `Text`), capped generously.
    pub fn message(s: impl AsRef<str>) -> Text {
        Text::capped(s.as_ref(), Text::MAX_MESSAGE)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0.to_string()
    }
}

/// Escapes every character a terminal could act on and caps the length.
pub fn sanitize(raw: &str, max: usize) -> String {
    // Most text needs nothing done: checked in one pass and copied whole.
    // This runs for every thread name and label of every tick.
    if is_plain(raw, max) {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len().min(max + 16));
    let mut shown = 0usize;
    let mut cut = 0usize;
    for c in raw.chars() {
        let esc = escape(c);
        let n = esc.as_deref().map_or(1, |e| e.chars().count());
        if shown + n > max {
            cut += 1;
            continue;
        }
        shown += n;
        match esc {
            Some(e) => out.push_str(&e),
            None => out.push(c),
        }
    }
    if cut > 0 {
        out.push_str(&format!("…[+{cut} chars]"));
    }
    out
}

/// Whether `raw` is shown as it is: no character to escape, and no more
/// than `max` bytes (fewer bytes than `max` is fewer characters too).
/// Printable ASCII (the usual name) is decided a byte at a time.
fn is_plain(raw: &str, max: usize) -> bool {
    raw.len() <= max
        && (raw.bytes().all(|b| (0x20..0x7f).contains(&b))
            || raw.chars().all(|c| escape(c).is_none()))
}

/// How `c` is shown when a terminal could act on it; None: as itself.
fn escape(c: char) -> Option<std::borrow::Cow<'static, str>> {
    Some(match c {
        '\x1b' => "\\e".into(),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        '\0' => "\\0".into(),
        c if (c as u32) < 0x20 || c == '\x7f' => format!("\\x{:02x}", c as u32).into(),
        // C1 controls (CSI is U+009B), bidi overrides and isolates, and
        // the line/paragraph separators.
        c if ('\u{80}'..='\u{9f}').contains(&c)
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
            || c == '\u{2028}'
            || c == '\u{2029}'
            || c == '\u{feff}' =>
        {
            format!("\\u{{{:x}}}", c as u32).into()
        }
        _ => return None,
    })
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::new(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::new(&s)
    }
}

impl From<&String> for Text {
    fn from(s: &String) -> Text {
        Text::new(s)
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// A string read from a file (a recording someone gave you) is sanitised too.
impl<'de> serde::Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Text::capped(&s, Text::MAX_MESSAGE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_name_is_made_once_and_shared() {
        let a = Text::of_static("ESTABLISHED");
        let b = Text::of_static("ESTABLISHED");
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, Text::new("ESTABLISHED"));
        assert!(!Arc::ptr_eq(&a.0, &Text::of_static("LISTEN").0));
        assert_eq!(Text::of_static("LISTEN").as_str(), "LISTEN");
    }

    #[test]
    fn a_shared_raw_name_is_taken_as_is_only_when_plain() {
        let plain: Arc<str> = Arc::from("pt_autograd_0");
        let t = Text::of_shared(&plain);
        assert!(Arc::ptr_eq(&t.0, &plain));
        // One a terminal could act on is a sanitised copy, as `new` makes it.
        let evil: Arc<str> = Arc::from("w\x1b[2Jorker\u{202e}");
        let t = Text::of_shared(&evil);
        assert!(!Arc::ptr_eq(&t.0, &evil));
        assert_eq!(t, Text::new(&evil));
        assert!(!t.chars().any(|c| c.is_control() || c == '\u{202e}'));
        // Too long: capped, as `new` caps it.
        let long: Arc<str> = Arc::from("x".repeat(Text::MAX + 10));
        assert_eq!(Text::of_shared(&long), Text::new(&long));
    }

    #[test]
    fn control_characters_become_visible_escapes() {
        let t = Text::new("evil\x1b]0;PWNED\x07\r\n\u{9b}2J\u{202e}x\u{7f}");
        assert_eq!(
            t.as_str(),
            "evil\\e]0;PWNED\\x07\\r\\n\\u{9b}2J\\u{202e}x\\x7f"
        );
        assert!(!t.chars().any(|c| c.is_control()));
    }

    #[test]
    fn the_byte_check_agrees_with_the_character_check() {
        // Every ASCII character, alone and inside a name, and a few others.
        let odd = [
            '\u{80}', '\u{9b}', '\u{a0}', '\u{202e}', '\u{2069}', '\u{feff}', '日',
        ];
        for c in (0u8..0x80).map(char::from).chain(odd) {
            for s in [c.to_string(), format!("rank{c}0")] {
                let by_chars = s.chars().all(|c| escape(c).is_none());
                assert_eq!(is_plain(&s, Text::MAX), by_chars, "{s:?}");
                // Made from an owned string: the same.
                assert_eq!(Text::from(s.clone()), Text::new(&s), "{s:?}");
            }
        }
        assert_eq!(Text::from("a".repeat(300)), Text::new(&"a".repeat(300)));
    }

    #[test]
    fn plain_names_are_untouched() {
        assert_eq!(Text::new("train.py").as_str(), "train.py");
        assert_eq!(Text::new("gpt2-ddp/日本").as_str(), "gpt2-ddp/日本");
    }

    #[test]
    fn a_clone_shares_the_text_and_compares_by_content() {
        let t = Text::new("rank-3");
        let c = t.clone();
        assert_eq!(c.as_str().as_ptr(), t.as_str().as_ptr(), "no copy made");
        assert_eq!(c, Text::new("rank-3"), "equal by content, not place");
        assert_eq!(Text::default().as_str(), "");
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"rank-3\"");
    }

    #[test]
    fn long_strings_are_capped_with_a_marker() {
        let t = Text::new(&"a".repeat(100_000));
        assert!(t.len() < 300, "{}", t.len());
        assert!(t.ends_with(&format!("…[+{} chars]", 100_000 - Text::MAX)));
    }

    #[test]
    fn the_cap_counts_characters_shown_at_the_boundary() {
        // Plain text of exactly the cap stays whole; one more is cut.
        assert_eq!(sanitize("abcd", 4), "abcd");
        assert_eq!(sanitize("abcde", 4), "abcd…[+1 chars]");
        // Multi-byte characters: more bytes than the cap, within it in chars.
        assert_eq!(sanitize("日本日本", 4), "日本日本");
        // An escape that does not fit whole is left out, not split.
        assert_eq!(sanitize("ab\x1bc", 4), "ab\\e…[+1 chars]");
        assert_eq!(sanitize("abc\x1b", 4), "abc…[+1 chars]");
    }

    proptest::proptest! {
        #[test]
        fn nothing_a_terminal_acts_on_survives(raw in "\\PC*|[\\x00-\\x20\\x7f-\\u{a0}\\u{2028}\\u{202e}a]*", max in 1usize..40) {
            let out = sanitize(&raw, max);
            proptest::prop_assert!(!out.chars().any(|c| c.is_control() || escape(c).is_some()));
            let plain = raw.chars().all(|c| escape(c).is_none());
            if plain && raw.chars().count() <= max {
                proptest::prop_assert_eq!(out, raw);
            }
        }
    }

    #[test]
    fn reading_sanitises_too() {
        let t: Text = serde_json::from_str("\"a\\u001bb\"").unwrap();
        assert_eq!(t.as_str(), "a\\eb");
    }
}
