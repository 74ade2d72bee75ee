//! Redis's glob-style patterns (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`, `[abc]`, `[^a-z]`
//! and `\` escapes, over bytes, with Redis's parsing of odd patterns (an unterminated class runs
//! to the end of the pattern; a reversed range matches as if ordered).
//!
//! Matching never backtracks exponentially: a pattern is compiled into tokens that each match
//! exactly one byte, except `*`; the matcher walks text and tokens once, and on a mismatch
//! returns only to the last `*` seen, moving its start one byte on. Since every token but `*`
//! has width one, a later `*` can always absorb what an earlier one would have, so the last `*`
//! is the only one worth revisiting: O(pattern x text) in the worst case (Redis's recursive
//! matcher is exponential in the number of `*`s there).

/// A single-byte class item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Byte(u8),
    Range(u8, u8),
}

/// One token of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// Any run of bytes.
    Star,
    /// Any one byte.
    Any,
    /// This byte.
    Byte(u8),
    /// A byte in (or, negated, not in) the items.
    Class { items: Vec<Item>, negate: bool },
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    tokens: Vec<Token>,
    nocase: bool,
}

impl Pattern {
    /// Compiles `pattern`.
    pub fn new(pattern: &[u8]) -> Pattern {
        Pattern {
            tokens: compile(pattern),
            nocase: false,
        }
    }

    /// Compiles `pattern` to match ignoring ASCII case (CONFIG GET).
    pub fn nocase(pattern: &[u8]) -> Pattern {
        Pattern {
            tokens: compile(pattern),
            nocase: true,
        }
    }

    /// Whether `text` matches.
    pub fn matches(&self, text: &[u8]) -> bool {
        let toks = &self.tokens;
        let (mut p, mut t) = (0usize, 0usize);
        // The token after the last `*` seen, and where in the text that `*`'s run ends now.
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match toks.get(p) {
                Some(Token::Star) => {
                    star = Some((p + 1, t));
                    p += 1;
                    continue;
                }
                Some(tok) if self.token_matches(tok, text[t]) => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
            match star {
                Some((after, run_end)) => {
                    p = after;
                    t = run_end + 1;
                    star = Some((after, run_end + 1));
                }
                None => return false,
            }
        }
        toks[p.min(toks.len())..]
            .iter()
            .all(|tok| *tok == Token::Star)
    }

    fn token_matches(&self, tok: &Token, c: u8) -> bool {
        let fold = |b: u8| {
            if self.nocase {
                b.to_ascii_lowercase()
            } else {
                b
            }
        };
        match tok {
            Token::Star => true,
            Token::Any => true,
            Token::Byte(b) => fold(*b) == fold(c),
            Token::Class { items, negate } => {
                let c = fold(c);
                let hit = items.iter().any(|item| match *item {
                    Item::Byte(b) => fold(b) == c,
                    Item::Range(lo, hi) => (fold(lo)..=fold(hi)).contains(&c),
                });
                hit != *negate
            }
        }
    }
}

/// Whether `text` matches `pattern` (compiles it each call).
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    Pattern::new(pattern).matches(text)
}

fn compile(mut p: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    while let Some((&c, rest)) = p.split_first() {
        p = rest;
        match c {
            b'*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
            }
            b'?' => out.push(Token::Any),
            b'[' => {
                let negate = p.first() == Some(&b'^');
                if negate {
                    p = &p[1..];
                }
                let mut items = Vec::new();
                loop {
                    match p {
                        [] => break,
                        [b'\\', e, rest @ ..] => {
                            items.push(Item::Byte(*e));
                            p = rest;
                        }
                        [b']', rest @ ..] => {
                            p = rest;
                            break;
                        }
                        [a, b'-', b, rest @ ..] => {
                            let (lo, hi) = if a <= b { (*a, *b) } else { (*b, *a) };
                            items.push(Item::Range(lo, hi));
                            p = rest;
                        }
                        [a, rest @ ..] => {
                            items.push(Item::Byte(*a));
                            p = rest;
                        }
                    }
                }
                out.push(Token::Class { items, negate });
            }
            b'\\' if !p.is_empty() => {
                out.push(Token::Byte(p[0]));
                p = &p[1..];
            }
            _ => out.push(Token::Byte(c)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{matches, Pattern};
    use std::time::{Duration, Instant};

    #[test]
    fn patterns_match_like_redis() {
        assert!(matches(b"*", b"anything"));
        assert!(matches(b"*", b""));
        assert!(matches(b"user:*", b"user:42"));
        assert!(!matches(b"user:*", b"usr:42"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(!matches(b"h?llo", b"hllo"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-b]llo", b"hbllo"));
        assert!(matches(b"h[b-a]llo", b"hbllo"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(matches(b"*a*b*c", b"xxaxxbxxc"));
        assert!(!matches(b"*a*b*c", b"xxaxxcxxb"));
        assert!(matches(b"a*", b"a"));
        assert!(!matches(b"a", b"ab"));
        assert!(
            matches(b"[abc", b"b"),
            "an unterminated class runs to the end"
        );
        assert!(matches(b"x[\\]]y", b"x]y"));
        assert!(Pattern::nocase(b"MaxMemory*").matches(b"maxmemory-policy"));
    }

    #[test]
    fn a_pathological_pattern_answers_within_milliseconds() {
        // Twenty `a*` then `b` against a long run of `a`s: exponential for a recursive matcher.
        let pattern = [b"a*".repeat(20), b"b".to_vec()].concat();
        let text = vec![b'a'; 4096];
        let started = Instant::now();
        assert!(!matches(&pattern, &text));
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "{:?}",
            started.elapsed()
        );
    }

    proptest::proptest! {
        /// The matcher agrees with a plain recursive reference on small inputs.
        #[test]
        fn agrees_with_a_reference(
            pattern in proptest::collection::vec(proptest::sample::select(b"ab*?[]^-\\".to_vec()), 0..8),
            text in proptest::collection::vec(proptest::sample::select(b"ab-]".to_vec()), 0..8),
        ) {
            let tokens = super::compile(&pattern);
            proptest::prop_assert_eq!(Pattern::new(&pattern).matches(&text), reference(&Pattern { tokens: tokens.clone(), nocase: false }, &tokens, &text));
        }
    }

    fn reference(p: &Pattern, toks: &[super::Token], text: &[u8]) -> bool {
        match toks.split_first() {
            None => text.is_empty(),
            Some((super::Token::Star, rest)) => {
                (0..=text.len()).any(|i| reference(p, rest, &text[i..]))
            }
            Some((tok, rest)) => {
                !text.is_empty() && p.token_matches(tok, text[0]) && reference(p, rest, &text[1..])
            }
        }
    }
}
