//! S3 failures as plfs errors: the kind a caller acts on, and one line
//! naming the store, the call and the path, never the credentials.

use super::client::Shared;
use crate::error::{Error, ErrorKind};
use crate::store::StorePath;

impl Shared {
    pub(super) fn error(&self, op: &str, path: &StorePath, error: object_store::Error) -> Error {
        let kind = kind_of(&error);
        Error::new(kind, format!("{}: {op} {path}: {}", self.url, describe(&error)))
    }

    pub(super) fn plain_error(&self, kind: ErrorKind, op: &str, path: &StorePath, why: &str) -> Error {
        Error::new(kind, format!("{}: {op} {path}: {why}", self.url))
    }

    pub(super) fn unsupported(&self, op: &str, path: &StorePath) -> Error {
        self.plain_error(ErrorKind::Unsupported, op, path, "S3 stores no modes, owners, times or symlinks")
    }
}

/// The error kind a caller can act on. A connection that cannot be made
/// at all is `Unavailable`, so a dead endpoint reads as such.
pub(super) fn kind_of(error: &object_store::Error) -> ErrorKind {
    use object_store::Error as E;
    match error {
        E::NotFound { .. } => ErrorKind::NotFound,
        E::AlreadyExists { .. } | E::Precondition { .. } => ErrorKind::AlreadyExists,
        E::NotSupported { .. } | E::NotImplemented { .. } => ErrorKind::Unsupported,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        E::InvalidPath { .. } => ErrorKind::InvalidInput,
        _ if is_unreachable(error) => ErrorKind::Unavailable,
        _ => ErrorKind::Io,
    }
}

pub(super) fn is_unreachable(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as Io;
            if matches!(
                io.kind(),
                Io::ConnectionRefused
                    | Io::ConnectionReset
                    | Io::TimedOut
                    | Io::NotConnected
                    | Io::HostUnreachable
            ) {
                return true;
            }
        }
        let text = error.to_string();
        if text.contains("error sending request") || text.contains("operation timed out") {
            return true;
        }
        current = error.source();
    }
    false
}

/// One line: the error and its causes. `object_store` errors carry the
/// request URL (endpoint, bucket, key), never credentials.
pub(super) fn describe(error: &object_store::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
