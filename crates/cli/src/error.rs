//! Errors a user can act on: a message plus an optional hint line.
//!
//! Library errors carry their own context; this type adds the "what to do
//! about it" that only the command line knows (which flag, which command to
//! run). `main` prints the message, the causes, then `hint: …`.

use std::fmt;

/// An error message with an optional hint.
#[derive(Debug)]
pub struct Hinted {
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Hinted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Hinted {}

/// An error with a hint for the user.
pub fn hinted(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Hinted {
        message: message.into(),
        hint: Some(hint.into()),
    })
}

/// An error without a hint (the message says it all).
pub fn plain(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Hinted {
        message: message.into(),
        hint: None,
    })
}
