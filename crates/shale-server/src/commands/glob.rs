//! Redis's glob-style pattern matching (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`,
//! `[abc]`, `[^a-z]` and `\` escapes, over bytes.

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    match_from(pattern, text, 0)
}

/// Deepest recursion on `*`: beyond it the match fails rather than exhausting the stack
/// (Redis bounds it the same way).
const MAX_DEPTH: usize = 1000;

fn match_from(mut p: &[u8], mut t: &[u8], depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    while let Some((&c, rest)) = p.split_first() {
        match c {
            b'*' => {
                let mut rest = rest;
                while rest.first() == Some(&b'*') {
                    rest = &rest[1..];
                }
                if rest.is_empty() {
                    return true;
                }
                return (0..=t.len()).any(|i| match_from(rest, &t[i..], depth + 1));
            }
            b'?' => {
                if t.is_empty() {
                    return false;
                }
                t = &t[1..];
                p = rest;
            }
            b'[' => {
                let Some((&ch, trest)) = t.split_first() else {
                    return false;
                };
                let (matched, after) = class(rest, ch);
                if !matched {
                    return false;
                }
                p = after;
                t = trest;
            }
            b'\\' if !rest.is_empty() => {
                if t.first() != Some(&rest[0]) {
                    return false;
                }
                t = &t[1..];
                p = &rest[1..];
            }
            _ => {
                if t.first() != Some(&c) {
                    return false;
                }
                t = &t[1..];
                p = rest;
            }
        }
    }
    t.is_empty()
}

/// Matches `ch` against the class starting after `[`; returns the result and the pattern after `]`.
fn class(mut p: &[u8], ch: u8) -> (bool, &[u8]) {
    let negate = p.first() == Some(&b'^');
    if negate {
        p = &p[1..];
    }
    let mut matched = false;
    loop {
        match p {
            [] => break,
            [b']', rest @ ..] => {
                p = rest;
                break;
            }
            [b'\\', c, rest @ ..] => {
                matched |= *c == ch;
                p = rest;
            }
            [a, b'-', b, rest @ ..] if *b != b']' => {
                let (lo, hi) = if a <= b { (*a, *b) } else { (*b, *a) };
                matched |= (lo..=hi).contains(&ch);
                p = rest;
            }
            [c, rest @ ..] => {
                matched |= *c == ch;
                p = rest;
            }
        }
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_like_redis() {
        assert!(matches(b"*", b"anything"));
        assert!(matches(b"user:*", b"user:42"));
        assert!(!matches(b"user:*", b"usr:42"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-b]llo", b"hbllo"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
    }
}
