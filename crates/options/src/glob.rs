//! The `*`/`?` wildcard matcher behind every glob vmview accepts: class
//! names (`classes=`, `exclude=`, `io=`, `wait=`, `dataflow --method`,
//! `reactions --user/--system`) and thread names (`calltree --thread`).
//!
//! It lives here, once, so that a pattern means the same thing to the agent
//! and to every command; [`crate::ClassFilter`] adds the fast paths for
//! exact names and `package.*` prefixes on top of it.

/// A glob compiled to characters, for matching many names against it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob(Vec<char>);

impl Glob {
    /// `*` matches any run of characters (dots included), `?` exactly one
    /// character, anything else itself; the glob must cover the whole name.
    pub fn new(pattern: &str) -> Glob {
        Glob(pattern.chars().collect())
    }

    /// Whether `text` matches the whole glob.
    pub fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        glob_match_chars(&self.0, &text)
    }
}

/// Whether `text` matches `glob` (see [`Glob::new`]); for one-off tests.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    Glob::new(glob).matches(text)
}

/// Wildcard matching with `*` (any run) and `?` (one character), linear in
/// practice: on a mismatch it only retries from the most recent `*`.
pub(crate) fn glob_match_chars(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_globs_cover_packages_and_single_characters() {
        assert!(glob_matches("com.acme.*", "com.acme.a.B"));
        assert!(!glob_matches("com.acme.*", "com.acmex.B"));
        assert!(glob_matches("shop.Inv?ntory", "shop.Inventory"));
        assert!(glob_matches("*Handler", "a.b.MyHandler"));
        assert!(!glob_matches("shop.Inventory", "shop.Inventory$Clerk"));
    }

    #[test]
    fn thread_globs_match_whole_names_and_case() {
        assert!(glob_matches("main", "main"));
        assert!(!glob_matches("main", "main-2"));
        assert!(glob_matches("worker-*", "worker-12"));
        assert!(!glob_matches("*pool*", "ForkJoinPool.commonPool-worker-1"));
        assert!(glob_matches("*Pool*", "ForkJoinPool.commonPool-worker-1"));
        assert!(glob_matches("w?rker-?", "worker-3"));
        assert!(glob_matches("VM Thread", "VM Thread"));
    }

    #[test]
    fn stars_backtrack_and_match_empty_runs() {
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a**b", "ab"));
        assert!(glob_matches("a*b*c", "aXXbYYbZZc"));
        assert!(!glob_matches("a*b*c", "aXXbYYcZZ"));
        assert!(!glob_matches("?", ""));
        assert!(glob_matches("é?", "éü"), "characters, not bytes");
    }
}
