//! HDFS failures as plfs errors: the kind a caller acts on, and a message
//! naming the store, the call and (for connection failures) the NameNode.

use hdfs_native::HdfsError;

use super::connection::Inner;
use crate::error::{Error, ErrorKind};

/// Longest HDFS error text kept in a plfs error message.
const ERROR_TEXT_CHARS_MAX: usize = 400;

impl Inner {
    /// An HDFS failure as a plfs error naming the store and what was done;
    /// connection failures name the NameNode too.
    pub(super) fn error(&self, error: &HdfsError, what: &str) -> Error {
        let kind = map_kind(error);
        // Java exceptions arrive with their stack trace (its first line is
        // the message), and a failed read lists every DataNode it tried in
        // full; keep messages to a readable size.
        let full_text = error.to_string();
        let first_line = full_text.lines().next().unwrap_or_default();
        let text = match first_line.char_indices().nth(ERROR_TEXT_CHARS_MAX) {
            Some((cut, _)) => format!("{}…", &first_line[..cut]),
            None => first_line.to_owned(),
        };
        if kind == ErrorKind::Unavailable {
            return Error::new(kind, format!("{}: {what}: NameNode {}: {text}", self.url, self.namenode));
        }
        Error::new(kind, format!("{}: {what}: {text}", self.url))
    }
}

/// The plfs kind of an HDFS failure. Java exceptions arrive as class names
/// (`RPCError(class, message)`); the ones plfs acts on are mapped, the
/// rest are `Io`.
pub(super) fn map_kind(error: &HdfsError) -> ErrorKind {
    match error {
        HdfsError::FileNotFound(_) => ErrorKind::NotFound,
        HdfsError::AlreadyExists(_) => ErrorKind::AlreadyExists,
        HdfsError::IsADirectoryError(_) => ErrorKind::IsADirectory,
        HdfsError::InvalidPath(_) | HdfsError::InvalidArgument(_) | HdfsError::UrlParseError(_) => {
            ErrorKind::InvalidInput
        }
        HdfsError::ChecksumError => ErrorKind::Corrupt,
        HdfsError::UnsupportedFeature(_) | HdfsError::UnsupportedErasureCodingPolicy(_) => {
            ErrorKind::Unsupported
        }
        HdfsError::BlocksNotFound(_) => ErrorKind::Unavailable,
        HdfsError::InternalError(_) => ErrorKind::Internal,
        HdfsError::IOError(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::NotConnected
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::HostUnreachable
            | std::io::ErrorKind::NetworkUnreachable
            | std::io::ErrorKind::BrokenPipe => ErrorKind::Unavailable,
            _ => ErrorKind::Io,
        },
        HdfsError::RPCError(class, message) | HdfsError::FatalRPCError(class, message) => {
            map_exception(class, message)
        }
        HdfsError::SASLError(_) | HdfsError::GSSAPIError(..) | HdfsError::NoSASLMechanism => {
            ErrorKind::PermissionDenied
        }
        _ => ErrorKind::Io,
    }
}

fn map_exception(class: &str, message: &str) -> ErrorKind {
    let simple = class.rsplit('.').next().unwrap_or(class);
    match simple {
        "FileNotFoundException" => ErrorKind::NotFound,
        "FileAlreadyExistsException" | "AlreadyBeingCreatedException" => ErrorKind::AlreadyExists,
        "ParentNotDirectoryException" | "PathIsNotDirectoryException" => ErrorKind::NotADirectory,
        "PathIsNotEmptyDirectoryException" => ErrorKind::DirectoryNotEmpty,
        "AccessControlException" | "AuthorizationException" => ErrorKind::PermissionDenied,
        "QuotaExceededException" | "DSQuotaExceededException" | "NSQuotaExceededException" => {
            ErrorKind::NoSpace
        }
        "SafeModeException"
        | "StandbyException"
        | "RetriableException"
        | "ObserverRetryOnActiveException" => ErrorKind::Unavailable,
        "InvalidPathException" | "HadoopIllegalArgumentException" | "PathComponentTooLongException" => {
            ErrorKind::InvalidInput
        }
        "UnresolvedLinkException" => ErrorKind::Unsupported,
        // A log removed while open: "No lease on /x: File does not exist."
        "LeaseExpiredException" if message.contains("does not exist") => ErrorKind::NotFound,
        _ => ErrorKind::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_exceptions_map_to_kinds() {
        let rpc = |class: &str, message: &str| HdfsError::RPCError(class.into(), message.into());
        let cases = [
            (rpc("java.io.FileNotFoundException", "x"), ErrorKind::NotFound),
            (rpc("org.apache.hadoop.fs.ParentNotDirectoryException", "x"), ErrorKind::NotADirectory),
            (rpc("org.apache.hadoop.fs.PathIsNotEmptyDirectoryException", "x"), ErrorKind::DirectoryNotEmpty),
            (rpc("org.apache.hadoop.security.AccessControlException", "x"), ErrorKind::PermissionDenied),
            (rpc("org.apache.hadoop.hdfs.protocol.DSQuotaExceededException", "x"), ErrorKind::NoSpace),
            (rpc("org.apache.hadoop.hdfs.server.namenode.SafeModeException", "x"), ErrorKind::Unavailable),
            (
                rpc("org.apache.hadoop.hdfs.server.namenode.LeaseExpiredException", "File does not exist."),
                ErrorKind::NotFound,
            ),
            (
                rpc("org.apache.hadoop.hdfs.server.namenode.LeaseExpiredException", "lease gone"),
                ErrorKind::Io,
            ),
            (rpc("java.io.IOException", "anything"), ErrorKind::Io),
            (HdfsError::AlreadyExists("x".into()), ErrorKind::AlreadyExists),
            (
                HdfsError::IOError(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
                ErrorKind::Unavailable,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(map_kind(&error), kind, "{error}");
        }
    }
}
