//! `--bearer-token-file`: the tokens the Metacontroller routes accept, one a line, read again
//! within a second of a change to the file (see [`crate::reload`]). More than one line lets a
//! token be rotated without a refused sync: accept the old and the new, move Metacontroller's
//! Secret to the new, then drop the old.

use crate::error::ApiError;
use crate::reload::Reloading;
use anyhow::{anyhow, Context, Result};
use http::{header, HeaderMap};
use std::path::Path;
use std::time::Duration;
use subtle::{Choice, ConstantTimeEq};
use zeroize::Zeroizing;

/// How often the token file is looked at, at most: every Metacontroller request is checked, and a
/// `stat` cost 1.2-1.5 µs here, some 5 % of a 25 KB sync's server time; the kubelet takes far
/// longer than a second to bring a Secret's change into the Pod.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The accepted tokens. Its `Debug` names the file, never a token.
#[derive(Debug)]
pub struct BearerTokens(Reloading<Vec<Zeroizing<String>>>);

impl BearerTokens {
    /// Reads the file now (an error names it: unreadable, or without a token) and again after it
    /// changes; a change that leaves no token keeps the previous ones.
    pub fn from_file(path: &Path) -> Result<Self> {
        let file = path.to_owned();
        let load = move || read_tokens(&file);
        let files = vec![path.to_owned()];
        let tokens = Reloading::from_files("bearer token file", files, LOOK_EVERY, load)
            .context("--bearer-token-file")?;
        Ok(BearerTokens(tokens))
    }

    /// `Authorization: Bearer <token>` with one of the tokens (the scheme in any case, RFC 9110
    /// §11.1), each compared in constant time.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .and_then(|(scheme, value)| {
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| value.trim_start_matches(' '))
            })
            .unwrap_or("");
        let tokens = self.0.get();
        // Every token is compared, so that the time taken does not say which one matched.
        let matched = tokens.iter().fold(Choice::from(0), |matched, token| {
            matched | presented.as_bytes().ct_eq(token.as_bytes())
        });
        if matched.into() {
            Ok(())
        } else {
            Err(ApiError::Unauthorized)
        }
    }
}

/// The file's lines without their surrounding whitespace, blank lines left out.
fn read_tokens(path: &Path) -> Result<Vec<Zeroizing<String>>> {
    let text = Zeroizing::new(std::fs::read_to_string(path)?);
    let tokens: Vec<_> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| Zeroizing::new(line.to_owned()))
        .collect();
    if tokens.is_empty() {
        return Err(anyhow!("{} holds no token", path.display()));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Limits`, which holds the tokens, is `Debug`: what it prints names the file, never a token.
    #[test]
    fn debug_names_the_file_and_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "s3cret-token\n").unwrap();
        let printed = format!("{:?}", BearerTokens::from_file(&path).unwrap());
        assert!(printed.contains(path.to_str().unwrap()), "{printed}");
        assert!(!printed.contains("s3cret"), "{printed}");
    }
}
