//! The one error a hook can return: the request could not be decoded into the contract's shape.
//! Everything else a hook cannot honour is written into the parent's status with a 200.

use std::fmt;

/// A request that is not JSON or does not have the contract's shape. The server answers it with
/// 400 and `{"error": message, "path": path}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct RequestError {
    /// What was wrong, in serde's words (`invalid type: string "x", expected u64`).
    pub message: String,
    /// Where in the request, as a dotted path from the root (`parent.metadata.name`); `.` is the
    /// document itself.
    pub path: String,
}

impl RequestError {
    pub fn new(path: impl fmt::Display, message: impl fmt::Display) -> Self {
        RequestError {
            message: message.to_string(),
            path: path.to_string(),
        }
    }

    /// The same error for a document decoded on its own that sits at `prefix` in the request.
    pub fn within(self, prefix: &str) -> Self {
        let path = match self.path.as_str() {
            "." => prefix.to_owned(),
            p if p.starts_with('[') => format!("{prefix}{p}"),
            p => format!("{prefix}.{p}"),
        };
        RequestError { path, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::RequestError;

    #[test]
    fn within_puts_the_prefix_before_fields_and_indexes() {
        let at = |path: &str| RequestError::new(path, "m").within("parent.spec").path;
        assert_eq!(at("."), "parent.spec");
        assert_eq!(at("workloads.a"), "parent.spec.workloads.a");
        assert_eq!(at("[0].a"), "parent.spec[0].a");
    }
}
