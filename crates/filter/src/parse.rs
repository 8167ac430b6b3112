//! The expression language's syntax: tokens, grammar and error messages.
//!
//! ```text
//! expr    = or
//! or      = and { ("||" | "or") and }
//! and     = unary { ("&&" | "and") unary }
//! unary   = ("!" | "not") unary | "(" expr ")" | "true" | "false" | test
//! test    = FIELD op literal | FIELD ["!" | "not"] "in" "[" literal { "," literal } "]"
//! op      = "==" | "!=" | "~" | "!~" | "<" | "<=" | ">" | ">="
//! literal = "string" | 'string' | NUMBER[unit] | WORD
//! ```
//!
//! Strings take `\\`, `\"`, `\'`, `\n`, `\t` escapes, so the regex
//! `^java\.util` is written `"^java\\.util"`. Units: `ns`, `us` (`µs`),
//! `ms`, `s`, `m`, `h`. A word is a bare name: an event type, `true`,
//! `false`, `null`, or any string without spaces.
//!
//! Every token keeps its character column, so an error can print the
//! expression with a caret under the culprit, as compilers do.
//!
//! The parser is recursive descent, and so are the passes over its tree
//! (compilation, evaluation, dropping), so nesting is limited to
//! [`MAX_NESTING`] levels of `(` and `!`: an expression is text from a
//! command line or a URL, and without the limit a few thousand `(` overflow
//! the stack and abort the process (`vmview serve` included).

use std::fmt;

/// How deeply `(` and `!` / `not` may nest. Hand-written filters stay far
/// below it; the recursive passes stay well inside a thread's stack (2 MiB
/// for `vmview serve`'s request threads, in a debug build) at it.
pub const MAX_NESTING: usize = 128;

/// A syntax or type error in an expression, at a character column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 0-based character offset of the start of the culprit.
    pub column: usize,
    /// Its length in characters (at least 1).
    pub width: usize,
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(column: usize, width: usize, message: impl Into<String>) -> Self {
        ParseError {
            column,
            width: width.max(1),
            message: message.into(),
        }
    }

    /// The expression, a caret line under the culprit, and the message:
    ///
    /// ```text
    /// type == THORW
    ///         ^^^^^ unknown event type THORW
    /// ```
    ///
    /// A long expression is shown as the part around the culprit, with `…`
    /// for what is left out, so an error in a 100 kB expression is a line
    /// on the terminal, not 100 kB.
    pub fn render(&self, source: &str) -> String {
        const CONTEXT: usize = 40;
        let chars: Vec<char> = source
            .chars()
            .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
            .collect();
        let from = self.column.saturating_sub(CONTEXT);
        let to = (self.column + self.width + CONTEXT).min(chars.len());
        let mut line = String::new();
        if from > 0 {
            line.push('…');
        }
        line.extend(&chars[from.min(to)..to]);
        if to < chars.len() {
            line.push('…');
        }
        let width = self.width.min(2 * CONTEXT);
        format!(
            "{line}\n{}{} {}",
            " ".repeat(self.column - from + usize::from(from > 0)),
            "^".repeat(width),
            self.message
        )
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column + 1, self.message)
    }
}

impl std::error::Error for ParseError {}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Word(String),
    Str(String),
    /// A number, as written (digits, maybe a fraction and a sign), and
    /// its unit suffix if any.
    Num(String, Option<String>),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Op(Op),
    And,
    Or,
    Not,
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Match,
    NotMatch,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub(crate) fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Match => "~",
            Op::NotMatch => "!~",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// A token and where it is (character column and width).
#[derive(Debug, Clone)]
pub(crate) struct Spanned {
    pub tok: Tok,
    pub col: usize,
    pub width: usize,
}

fn lex(src: &str) -> Result<Vec<Spanned>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        let two = |a: char, b: char| c == a && chars.get(i + 1) == Some(&b);
        let tok = if c.is_whitespace() {
            i += 1;
            continue;
        } else if two('=', '=') {
            i += 2;
            Tok::Op(Op::Eq)
        } else if two('!', '=') {
            i += 2;
            Tok::Op(Op::Ne)
        } else if two('!', '~') {
            i += 2;
            Tok::Op(Op::NotMatch)
        } else if two('<', '=') {
            i += 2;
            Tok::Op(Op::Le)
        } else if two('>', '=') {
            i += 2;
            Tok::Op(Op::Ge)
        } else if two('&', '&') {
            i += 2;
            Tok::And
        } else if two('|', '|') {
            i += 2;
            Tok::Or
        } else if two('=', '~') {
            i += 2;
            Tok::Op(Op::Match)
        } else {
            match c {
                '(' | ')' | '[' | ']' | ',' | '~' | '<' | '>' | '!' => {
                    i += 1;
                    match c {
                        '(' => Tok::LParen,
                        ')' => Tok::RParen,
                        '[' => Tok::LBracket,
                        ']' => Tok::RBracket,
                        ',' => Tok::Comma,
                        '~' => Tok::Op(Op::Match),
                        '<' => Tok::Op(Op::Lt),
                        '>' => Tok::Op(Op::Gt),
                        _ => Tok::Not,
                    }
                }
                '=' => {
                    return Err(ParseError::new(
                        i,
                        1,
                        "use == to compare (a single = is not an operator)",
                    ))
                }
                '&' => return Err(ParseError::new(i, 1, "use && for \"and\"")),
                '|' => return Err(ParseError::new(i, 1, "use || for \"or\"")),
                '"' | '\'' => {
                    let quote = c;
                    i += 1;
                    let mut s = String::new();
                    loop {
                        match chars.get(i) {
                            None => {
                                return Err(ParseError::new(
                                    start,
                                    i - start,
                                    format!("string not closed: add a {quote}"),
                                ))
                            }
                            Some(&q) if q == quote => {
                                i += 1;
                                break;
                            }
                            Some('\\') => {
                                let e = chars.get(i + 1).copied();
                                match e {
                                    Some('n') => s.push('\n'),
                                    Some('t') => s.push('\t'),
                                    Some('r') => s.push('\r'),
                                    Some(c @ ('\\' | '"' | '\'')) => s.push(c),
                                    // Unknown escapes stay, so regex escapes
                                    // like \d or \. can be written with one
                                    // backslash too.
                                    Some(c) => {
                                        s.push('\\');
                                        s.push(c);
                                    }
                                    None => {
                                        return Err(ParseError::new(
                                            i,
                                            1,
                                            "string ends with a lone \\",
                                        ))
                                    }
                                }
                                i += 2;
                            }
                            Some(&c) => {
                                s.push(c);
                                i += 1;
                            }
                        }
                    }
                    Tok::Str(s)
                }
                c if c.is_ascii_digit()
                    || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
                {
                    i += 1;
                    while chars
                        .get(i)
                        .is_some_and(|d| d.is_ascii_digit() || *d == '.' || *d == '_')
                    {
                        i += 1;
                    }
                    let num: String = chars[start..i].iter().filter(|&&d| d != '_').collect();
                    let ustart = i;
                    while chars.get(i).is_some_and(|d| d.is_alphabetic()) {
                        i += 1;
                    }
                    let unit: String = chars[ustart..i].iter().collect();
                    if chars
                        .get(i)
                        .is_some_and(|d| d.is_alphanumeric() || *d == '_' || *d == '.')
                    {
                        // `12abc3`: not a number; read it as a word.
                        while chars.get(i).is_some_and(|d| is_word_char(*d)) {
                            i += 1;
                        }
                        Tok::Word(chars[start..i].iter().collect())
                    } else {
                        Tok::Num(num, (!unit.is_empty()).then_some(unit))
                    }
                }
                c if is_word_char(c) => {
                    while chars.get(i).is_some_and(|d| is_word_char(*d)) {
                        i += 1;
                    }
                    let w: String = chars[start..i].iter().collect();
                    match w.as_str() {
                        "and" => Tok::And,
                        "or" => Tok::Or,
                        "not" => Tok::Not,
                        _ => Tok::Word(w),
                    }
                }
                other => {
                    return Err(ParseError::new(
                        i,
                        1,
                        format!("unexpected character {other:?}"),
                    ))
                }
            }
        };
        out.push(Spanned {
            tok,
            col: start,
            width: i - start,
        });
    }
    out.push(Spanned {
        tok: Tok::End,
        col: chars.len(),
        width: 1,
    });
    Ok(out)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '$' | '/' | '-' | '*' | '@' | ':')
}

/// A literal on the right of a comparison, with its place.
#[derive(Debug, Clone)]
pub(crate) struct Lit {
    pub kind: LitKind,
    pub col: usize,
    pub width: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LitKind {
    Word(String),
    Str(String),
    Num(String, Option<String>),
}

/// The syntax tree.
#[derive(Debug, Clone)]
pub(crate) enum Ast {
    Or(Vec<Ast>),
    And(Vec<Ast>),
    Not(Box<Ast>),
    Const(bool),
    Test {
        field: String,
        field_col: usize,
        op: Op,
        op_col: usize,
        lit: Lit,
    },
    In {
        field: String,
        field_col: usize,
        negated: bool,
        lits: Vec<Lit>,
    },
}

struct Parser {
    toks: Vec<Spanned>,
    pos: usize,
    /// `(` and `!` open around the current token.
    depth: usize,
}

/// Parses an expression into its syntax tree.
pub(crate) fn parse(src: &str) -> Result<Ast, ParseError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
    };
    if p.peek().tok == Tok::End {
        return Err(ParseError::new(
            0,
            1,
            "empty expression (try: type == THROW, or true for every event)",
        ));
    }
    let ast = p.or()?;
    let t = p.peek();
    if t.tok != Tok::End {
        let msg = match t.tok {
            Tok::RParen => "unmatched )".to_string(),
            _ => "expected && or || here".to_string(),
        };
        return Err(ParseError::new(t.col, t.width, msg));
    }
    Ok(ast)
}

impl Parser {
    fn peek(&self) -> &Spanned {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Spanned {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn or(&mut self) -> Result<Ast, ParseError> {
        let mut items = vec![self.and()?];
        while self.peek().tok == Tok::Or {
            self.next();
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.pop().expect("one item")
        } else {
            Ast::Or(items)
        })
    }

    fn and(&mut self) -> Result<Ast, ParseError> {
        let mut items = vec![self.unary()?];
        while self.peek().tok == Tok::And {
            self.next();
            items.push(self.unary()?);
        }
        Ok(if items.len() == 1 {
            items.pop().expect("one item")
        } else {
            Ast::And(items)
        })
    }

    /// Enters one level of `(` or `!` at token `t`, or refuses.
    fn nest(&mut self, t: &Spanned) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(ParseError::new(
                t.col,
                t.width,
                format!("nested too deep (limit {MAX_NESTING} levels of ( and !)"),
            ));
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Ast, ParseError> {
        let t = self.next();
        match t.tok {
            Tok::Not => {
                self.nest(&t)?;
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(Ast::Not(Box::new(inner)))
            }
            Tok::LParen => {
                self.nest(&t)?;
                let inner = self.or()?;
                self.depth -= 1;
                let close = self.next();
                if close.tok != Tok::RParen {
                    return Err(ParseError::new(
                        close.col,
                        close.width,
                        format!("expected ) to close the ( at column {}", t.col + 1),
                    ));
                }
                Ok(inner)
            }
            Tok::Word(w) if (w == "true" || w == "false") && !self.starts_test() => {
                Ok(Ast::Const(w == "true"))
            }
            Tok::Word(field) => self.test(field, t.col),
            Tok::End => Err(ParseError::new(
                t.col,
                1,
                "the expression ends here: expected a test such as class ~ \"Foo\"",
            )),
            _ => Err(ParseError::new(
                t.col,
                t.width,
                "expected a field name (type, class, method, thread, …), ! or (",
            )),
        }
    }

    /// Does an operator or `in` follow (so the word before is a field)?
    fn starts_test(&self) -> bool {
        matches!(self.peek().tok, Tok::Op(_) | Tok::Not)
            || matches!(&self.peek().tok, Tok::Word(w) if w == "in")
    }

    fn test(&mut self, field: String, field_col: usize) -> Result<Ast, ParseError> {
        let t = self.next();
        match t.tok {
            Tok::Op(op) => {
                let lit = self.literal()?;
                Ok(Ast::Test {
                    field,
                    field_col,
                    op,
                    op_col: t.col,
                    lit,
                })
            }
            Tok::Word(w) if w == "in" => self.in_list(field, field_col, false),
            Tok::Not if matches!(&self.peek().tok, Tok::Word(w) if w == "in") => {
                self.next();
                self.in_list(field, field_col, true)
            }
            _ => Err(ParseError::new(
                t.col,
                t.width,
                format!("expected an operator after {field}: == != ~ !~ < <= > >= or in"),
            )),
        }
    }

    fn in_list(
        &mut self,
        field: String,
        field_col: usize,
        negated: bool,
    ) -> Result<Ast, ParseError> {
        let open = self.next();
        if open.tok != Tok::LBracket {
            return Err(ParseError::new(
                open.col,
                open.width,
                "expected [ after in: type in [CALL, RETURN]",
            ));
        }
        let mut lits = vec![self.literal()?];
        loop {
            let t = self.next();
            match t.tok {
                Tok::Comma => lits.push(self.literal()?),
                Tok::RBracket => break,
                _ => {
                    return Err(ParseError::new(
                        t.col,
                        t.width,
                        "expected , or ] in the list",
                    ))
                }
            }
        }
        Ok(Ast::In {
            field,
            field_col,
            negated,
            lits,
        })
    }

    fn literal(&mut self) -> Result<Lit, ParseError> {
        let t = self.next();
        let kind = match t.tok {
            Tok::Word(w) => LitKind::Word(w),
            Tok::Str(s) => LitKind::Str(s),
            Tok::Num(n, u) => LitKind::Num(n, u),
            _ => {
                return Err(ParseError::new(
                    t.col,
                    t.width,
                    "expected a value: a \"string\", a number such as 10 or 1ms, or a name such as THROW",
                ))
            }
        };
        Ok(Lit {
            kind,
            col: t.col,
            width: t.width,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_and_binds_tighter_than_or() {
        let ast = parse("a == 1 || b == 2 && !c == 3").unwrap();
        let Ast::Or(items) = ast else {
            panic!("{ast:?}")
        };
        assert_eq!(items.len(), 2);
        assert!(matches!(&items[1], Ast::And(v) if v.len() == 2));
    }

    #[test]
    fn errors_point_at_the_column() {
        let e = parse("class ~ \"a\" && (type == CALL").unwrap_err();
        assert_eq!(e.column, 28);
        let e = parse("class = \"x\"").unwrap_err();
        assert_eq!(e.column, 6);
        assert_eq!(
            e.render("class = \"x\""),
            "class = \"x\"\n      ^ use == to compare (a single = is not an operator)"
        );
        let e = parse("class ~ \"unclosed").unwrap_err();
        assert_eq!((e.column, e.width), (8, 9));
    }

    /// 7,000 nested `(` aborted `vmview filter` (and 2,000 `vmview serve`)
    /// with a stack overflow; now the parser stops at the limit, whatever
    /// the thread's stack.
    #[test]
    fn nesting_deeper_than_the_limit_is_an_error_not_a_stack_overflow() {
        let ok = format!(
            "{}type == CALL{}",
            "(".repeat(MAX_NESTING),
            ")".repeat(MAX_NESTING)
        );
        parse(&ok).unwrap();
        for deep in [
            format!("{}type == CALL{}", "(".repeat(100_000), ")".repeat(100_000)),
            format!("{}type == CALL", "!".repeat(100_000)),
            format!("{}type == CALL", "not (".repeat(50_000)),
        ] {
            // On a thread with half the stack of serve's request threads.
            let e = std::thread::Builder::new()
                .stack_size(1024 * 1024)
                .spawn(move || parse(&deep).unwrap_err())
                .unwrap()
                .join()
                .unwrap();
            assert!(e.message.contains("nested too deep (limit 128"), "{e:?}");
        }
        let src = format!("{}a == 1", "(".repeat(MAX_NESTING + 1));
        let e = parse(&src).unwrap_err();
        assert_eq!(
            e.column, MAX_NESTING,
            "the caret is under the first ( too many"
        );
        let shown = e.render(&src);
        let (line, caret) = shown.split_once('\n').unwrap();
        assert!(
            line.starts_with('…') && line.chars().count() < 100,
            "{shown}"
        );
        assert_eq!(caret.find('^'), Some(41), "{shown}");
        assert_eq!(line.chars().nth(41), Some('('));
    }

    #[test]
    fn numbers_take_units_and_strings_escapes() {
        let Ast::Test { lit, .. } = parse("elapsed_ns > 1.5ms").unwrap() else {
            panic!()
        };
        assert_eq!(lit.kind, LitKind::Num("1.5".into(), Some("ms".into())));
        let Ast::Test { lit, .. } = parse(r#"class ~ "^java\\.util\"""#).unwrap() else {
            panic!()
        };
        assert_eq!(lit.kind, LitKind::Str("^java\\.util\"".into()));
    }
}
