//! The error of a talk with an authorization server, and how it becomes the crate-wide [`Error`] naming the server.

use ad_core::error::Error;

/// What went wrong talking to an authorization server; turned into an [`Error`] naming the server.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    Http(String),
    #[error("{0}")]
    Metadata(String),
    /// The authorization server answered with an OAuth error.
    #[error("{0}")]
    Refused(String),
    /// The callback or a setting is wrong.
    #[error("{0}")]
    Invalid(String),
}

impl OAuthError {
    pub(crate) fn into_error(self, server: &str) -> Error {
        match self {
            OAuthError::Invalid(reason) => Error::Invalid {
                what: "authorization",
                reason,
            },
            other => Error::Upstream {
                server: server.to_owned(),
                message: format!("OAuth: {other}"),
            },
        }
    }
}
