//! Class-name globs (`classes=`, `exclude=`), compiled once so the agent can
//! decide quickly whether a class is traced.
//!
//! The agent asks once per class and caches the answer, but it asks while
//! the JVM is loading classes, so the common shapes skip the general glob
//! matcher: an exact name is a hash lookup and `com.acme.*` is a prefix
//! test. Only patterns with inner wildcards run the backtracking matcher.

use std::collections::HashSet;

use crate::glob::glob_match_chars;
use std::fmt;

/// A set of class-name globs over dotted binary names (`shop.Inventory$Clerk`).
///
/// - `com.acme.*` matches every class of the package `com.acme` and of its
///   subpackages (`*` matches any run of characters, dots included);
/// - `shop.Inventory` matches that class only (not its nested classes:
///   write `shop.Inventory*` for those);
/// - `?` matches exactly one character;
/// - `/` is read as `.`, so JVM-style names work too.
#[derive(Clone, Default)]
pub struct ClassFilter {
    patterns: Vec<String>,
    exact: HashSet<Box<str>>,
    prefixes: Vec<Box<str>>,
    globs: Vec<Vec<char>>,
}

/// A pattern that is not a class-name glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("expected one or more class patterns, e.g. com.acme.*+shop.Inventory")]
    Empty,
    #[error("'{pattern}' is not a class pattern: '{ch}' cannot appear in a class name")]
    BadChar { pattern: String, ch: char },
}

impl ClassFilter {
    /// Compiles a `+`- or `;`-separated list of globs.
    pub fn parse(list: &str) -> Result<ClassFilter, GlobError> {
        ClassFilter::new(crate::split_list(list))
    }

    /// Compiles globs.
    pub fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<ClassFilter, GlobError> {
        let mut f = ClassFilter::default();
        for p in patterns {
            f.add(p)?;
        }
        if f.patterns.is_empty() {
            return Err(GlobError::Empty);
        }
        Ok(f)
    }

    fn add(&mut self, pattern: &str) -> Result<(), GlobError> {
        let p = pattern.trim().replace('/', ".");
        if let Some(ch) = p
            .chars()
            .find(|c| c.is_whitespace() || matches!(c, ',' | '[' | ']' | ';' | '<' | '>' | '='))
        {
            return Err(GlobError::BadChar {
                pattern: pattern.to_string(),
                ch,
            });
        }
        if p.is_empty() {
            return Ok(());
        }
        let wild = |c: char| c == '*' || c == '?';
        match p.find(wild) {
            None => {
                self.exact.insert(p.as_str().into());
            }
            Some(i) if i == p.len() - 1 && p.ends_with('*') => {
                self.prefixes.push(p[..i].into());
            }
            Some(_) => self.globs.push(p.chars().collect()),
        }
        self.patterns.push(p);
        Ok(())
    }

    /// Whether `dotted` (a dotted binary class name) matches any pattern.
    pub fn matches(&self, dotted: &str) -> bool {
        if self.exact.contains(dotted) || self.prefixes.iter().any(|p| dotted.starts_with(&**p)) {
            return true;
        }
        if self.globs.is_empty() {
            return false;
        }
        let text: Vec<char> = dotted.chars().collect();
        self.globs.iter().any(|g| glob_match_chars(g, &text))
    }

    /// True when no pattern was given: nothing matches.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns as compiled (slashes turned into dots).
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

impl PartialEq for ClassFilter {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl fmt::Debug for ClassFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ClassFilter").field(&self.patterns).finish()
    }
}

impl fmt::Display for ClassFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.patterns.join("+"))
    }
}
