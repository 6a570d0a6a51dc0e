//! Static credentials from an AWS credentials file, never shown in errors
//! or `Debug` output.

use std::fmt;
use std::path::Path as FsPath;

use crate::error::{Error, Result};

/// Key id and secret from a credentials file. `Debug` shows neither.
pub(super) struct Credentials {
    pub(super) key_id: String,
    pub(super) secret: String,
    pub(super) token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(<redacted>)")
    }
}

/// Reads `aws_access_key_id`, `aws_secret_access_key` and optionally
/// `aws_session_token` as `key = value` lines (the AWS credentials file
/// format; blank lines, `#` comments and a `[default]` header allowed).
pub(super) fn read_credentials(file: &FsPath) -> Result<Credentials> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| Error::io(error, format!("credentials_file {}", file.display())))?;
    parse_credentials(&text)
        .map_err(|problem| Error::invalid(format!("credentials_file {}: {problem}", file.display())))
}

pub(super) fn parse_credentials(text: &str) -> std::result::Result<Credentials, String> {
    let (mut key_id, mut secret, mut token) = (None, None, None);
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line == "[default]" {
            continue;
        }
        let number = index + 1;
        // The value is never echoed: it may be the secret.
        let (name, value) =
            line.split_once('=').ok_or_else(|| format!("line {number}: expected name = value"))?;
        let slot = match name.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => &mut key_id,
            "aws_secret_access_key" => &mut secret,
            "aws_session_token" => &mut token,
            other => return Err(format!("line {number}: unknown name {other:?}")),
        };
        let value = value.trim();
        if value.is_empty() {
            return Err(format!("line {number}: empty value"));
        }
        if slot.replace(value.to_owned()).is_some() {
            return Err(format!("line {number}: {} given twice", name.trim()));
        }
    }
    match (key_id, secret) {
        (Some(key_id), Some(secret)) => Ok(Credentials { key_id, secret, token }),
        _ => Err("needs both aws_access_key_id and aws_secret_access_key".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_files_parse_and_never_show_the_secret() {
        let text = "# plfs test server\n[default]\naws_access_key_id = plfsuser\n\
                    AWS_SECRET_ACCESS_KEY=s3cr3t/with+symbols\n\n";
        let credentials = parse_credentials(text).unwrap();
        assert_eq!(
            (credentials.key_id.as_str(), credentials.secret.as_str()),
            ("plfsuser", "s3cr3t/with+symbols")
        );
        assert_eq!(credentials.token, None);
        assert!(!format!("{credentials:?}").contains("s3cr3t"));
        let problem = |text: &str| parse_credentials(text).expect_err(text);
        assert_eq!(
            problem("aws_access_key_id = a\n"),
            "needs both aws_access_key_id and aws_secret_access_key"
        );
        assert_eq!(problem("aws_secret_access_key s3cr3t\n"), "line 1: expected name = value");
        assert_eq!(problem("a = 1\n"), "line 1: unknown name \"a\"");
        assert_eq!(problem("aws_session_token =\n"), "line 1: empty value");
        let twice = problem("aws_access_key_id = a\naws_access_key_id = b\n");
        assert_eq!(twice, "line 2: aws_access_key_id given twice");
        for text in
            ["aws_secret_access_key s3cr3t", "aws_secret_access_key = s3cr3t\naws_secret_access_key = s3cr3t"]
        {
            assert!(!problem(text).contains("s3cr3t"), "an error shows the secret");
        }
    }
}
