//! The one error type of the server and how each becomes an HTTP response. Every error body is
//! JSON `{"error": ..., "path": ...}` (path only for undecodable requests). Only a hook that
//! panics (a bug, ours or a dependency's) is a 500.

use axum_core::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use metahooks_hooks::RequestError;
use serde::Serialize;

#[derive(Debug)]
pub enum ApiError {
    /// 400: not JSON, or not the contract's shape.
    BadRequest(RequestError),
    /// 413: the body is over the route's limit.
    TooLarge { limit: usize },
    /// 415: Content-Type is not JSON.
    UnsupportedMediaType(String),
    /// 415: the body has a content coding (gzip, ...) other than identity.
    UnsupportedEncoding(String),
    /// 429: too many requests, or request bytes, in flight.
    Overloaded {
        retry_after_seconds: u32,
        by: Overload,
    },
    /// 503: the request took longer than the request timeout.
    Timeout,
    /// 400: the body could not be read for what the caller sent (bad chunking, an HTTP/2 stream
    /// that breaks the protocol).
    BodyRead(String),
    /// 499 (nginx's "client closed request"): the caller closed the connection or reset the
    /// stream before its body ended. Nobody is left to read the answer; the status keeps it
    /// apart from a 400 in `/metrics` and the alerts.
    CallerGone(String),
    /// 401: the bearer token is missing or wrong.
    Unauthorized,
    /// 404.
    NotFound,
    /// 405: `takes` says what the route takes, `allow` its methods (the `Allow` header).
    MethodNotAllowed {
        takes: &'static str,
        allow: &'static str,
    },
    /// 500: the hook panicked. The answer is an error, so Metacontroller and the API server
    /// change nothing, as when a call fails.
    HookPanicked,
}

/// Which limit a 429 is for.
#[derive(Debug, Clone, Copy)]
pub enum Overload {
    /// `--max-in-flight`.
    Requests,
    /// `--max-in-flight-admission`.
    AdmissionRequests,
    /// `--max-in-flight-bytes`.
    Bytes,
}

/// 499 is in no RFC; nginx gave it this meaning and log readers know it.
const CLIENT_CLOSED_REQUEST: StatusCode = match StatusCode::from_u16(499) {
    Ok(status) => status,
    Err(_) => unreachable!(),
};

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::BodyRead(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) | ApiError::UnsupportedEncoding(_) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            ApiError::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Timeout => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::HookPanicked => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::CallerGone(_) => CLIENT_CLOSED_REQUEST,
        }
    }

    /// Where in the request the problem is, for a request that did not decode.
    pub fn path(&self) -> Option<&str> {
        match self {
            ApiError::BadRequest(e) => Some(e.path.as_str()),
            _ => None,
        }
    }

    pub fn message(&self) -> String {
        match self {
            ApiError::BadRequest(e) => e.message.clone(),
            ApiError::BodyRead(e) => format!("request body could not be read: {e}"),
            ApiError::CallerGone(e) => format!("the caller went away before its body ended: {e}"),
            ApiError::TooLarge { limit } => {
                format!("request body is larger than the limit of {limit} bytes")
            }
            ApiError::UnsupportedMediaType(ct) => {
                format!("Content-Type must be application/json, got '{ct}'")
            }
            ApiError::UnsupportedEncoding(coding) => {
                format!("Content-Encoding must be identity (an uncompressed body), got '{coding}'")
            }
            ApiError::Overloaded { by, .. } => {
                let (what, flag) = match by {
                    Overload::Requests => ("requests", "--max-in-flight"),
                    Overload::AdmissionRequests => {
                        ("admission requests", "--max-in-flight-admission")
                    }
                    Overload::Bytes => ("request bytes", "--max-in-flight-bytes"),
                };
                format!("too many {what} in flight ({flag}); retry later")
            }
            ApiError::Timeout => "the request took longer than the request timeout".into(),
            ApiError::Unauthorized => "a valid Authorization: Bearer token is required".into(),
            ApiError::NotFound => "no such route; `metahooks list` shows the hooks".into(),
            ApiError::MethodNotAllowed { takes, .. } => format!("this route takes {takes}"),
            ApiError::HookPanicked => {
                "the hook failed on this request (a bug in metahooks; the server log has it)".into()
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = self.message();
        let body = serde_json::to_vec(&ErrorBody {
            error: &message,
            path: self.path(),
        })
        .unwrap_or_else(|_| b"{\"error\":\"error\"}".to_vec());
        let mut response = (self.status(), body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let ApiError::Overloaded {
            retry_after_seconds,
            ..
        } = self
        {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_seconds));
        }
        if let ApiError::UnsupportedEncoding(_) = self {
            // RFC 7694 §3: the codings the server does accept.
            headers.insert(
                header::ACCEPT_ENCODING,
                HeaderValue::from_static("identity"),
            );
        }
        if let ApiError::MethodNotAllowed { allow, .. } = self {
            headers.insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        if let ApiError::Timeout = self {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
