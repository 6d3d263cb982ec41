//! The HTTP surface: one POST route per entry of the hook registry, the admin endpoints, and the
//! per-request policy (content type, body limit, load shedding by requests and by bytes, timeout,
//! metrics, log span, connections closed while stopping).

use crate::auth::BearerTokens;
use crate::error::{ApiError, Overload};
use crate::telemetry::{Bound, InFlight, Metrics};
use axum_core::body::Body;
use axum_core::extract::Request;
use axum_core::response::{IntoResponse, Response};
use http::{header, HeaderValue, Method, StatusCode, Version};
use http_body::Body as HttpBody;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use metahooks_hooks::memo::Memo;
use metahooks_hooks::{Hook, HookContext, Reading, Subject, SyncCondition, HOOKS};
use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Limits applied to every hook request.
#[derive(Debug, Clone)]
pub struct Limits {
    pub hook_body: usize,
    pub admission_body: usize,
    pub request_timeout: Duration,
    pub max_in_flight: std::num::NonZeroUsize,
    pub max_in_flight_admission: std::num::NonZeroUsize,
    pub max_in_flight_bytes: usize,
    pub retry_after_seconds: u32,
    /// Tokens of which Metacontroller routes require one (`Authorization: Bearer <token>`), if any.
    pub bearer_tokens: Option<Arc<BearerTokens>>,
    /// Tag Metacontroller answers and answer 304 to their own tag (see [`crate::etag`]).
    pub etag: bool,
}

impl From<&crate::config::ServeConfig> for Limits {
    fn from(c: &crate::config::ServeConfig) -> Self {
        Limits {
            hook_body: c.hook_body_limit,
            admission_body: c.admission_body_limit,
            request_timeout: c.request_timeout,
            max_in_flight: c.max_in_flight,
            max_in_flight_admission: c.max_in_flight_admission,
            max_in_flight_bytes: c.max_in_flight_bytes,
            retry_after_seconds: c.retry_after_seconds,
            bearer_tokens: None,
            etag: c.etag,
        }
    }
}

/// Where hooks get `now` from.
pub type Clock = Arc<dyn Fn() -> time::OffsetDateTime + Send + Sync>;

/// Shared by every request of a server.
pub struct AppState {
    pub limits: Limits,
    pub metrics: Metrics,
    /// False until the listeners are bound and again from the first shutdown signal.
    pub ready: AtomicBool,
    /// True from the first shutdown signal: every HTTP/1 answer closes its connection.
    pub stopping: AtomicBool,
    /// The `now` handed to hooks: the system clock, or a test's fixed or virtual clock.
    pub clock: Clock,
    /// What the hooks remember between requests: sync requests decoded, certificates checked and
    /// specs planned before (bounded, see `metahooks_hooks::memo`).
    memo: Memo,
    /// Places for Metacontroller hook requests (`--max-in-flight`).
    in_flight: Arc<Semaphore>,
    /// Places for admission requests (`--max-in-flight-admission`), apart: a burst of syncs
    /// must not refuse a user's write, nor a burst of admission calls stop reconciling.
    admission_in_flight: Arc<Semaphore>,
    /// What the bodies of Metacontroller hook requests in flight may hold, in KiB
    /// (`--max-in-flight-bytes`).
    body_budget: Arc<Semaphore>,
}

impl AppState {
    pub fn new(limits: Limits) -> Arc<Self> {
        Self::with_clock(limits, Arc::new(time::OffsetDateTime::now_utc))
    }

    pub fn with_clock(limits: Limits, clock: Clock) -> Arc<Self> {
        Arc::new(AppState {
            clock,
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight.get())),
            admission_in_flight: Arc::new(Semaphore::new(limits.max_in_flight_admission.get())),
            body_budget: Arc::new(Semaphore::new(kib(limits.max_in_flight_bytes) as usize)),
            limits,
            metrics: Metrics::default(),
            ready: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            memo: Memo::default(),
        })
    }

    /// What the requests in flight hold of each load-shedding bound now, for `/metrics`.
    fn in_flight(&self) -> InFlight {
        let bound = |places: &Semaphore, limit: usize| {
            let limit = limit as u64;
            Bound {
                held: limit.saturating_sub(places.available_permits() as u64),
                limit,
            }
        };
        let budget_kib = bound(
            &self.body_budget,
            kib(self.limits.max_in_flight_bytes) as usize,
        );
        InFlight {
            metacontroller: bound(&self.in_flight, self.limits.max_in_flight.get()),
            admission: bound(
                &self.admission_in_flight,
                self.limits.max_in_flight_admission.get(),
            ),
            body_bytes: Bound {
                held: budget_kib.held * 1024,
                limit: budget_kib.limit * 1024,
            },
        }
    }
}

/// `bytes` in whole KiB, rounded up (at most `u32::MAX`, what a semaphore hands out at once).
fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// What a mounted path serves.
#[derive(Clone, Copy)]
enum Endpoint {
    Hook(&'static Hook),
    Healthz,
    Readyz,
    Metrics,
}

/// The admin endpoints, each a GET (or a HEAD).
const ADMIN: [(&str, Endpoint); 3] = [
    ("/healthz", Endpoint::Healthz),
    ("/readyz", Endpoint::Readyz),
    ("/metrics", Endpoint::Metrics),
];

/// Every path the server mounts, each its own label in `/metrics`, with what it serves: the
/// hooks' routes, then the admin endpoints.
static ROUTES: LazyLock<Vec<(String, Endpoint)>> = LazyLock::new(|| {
    let hooks = HOOKS
        .iter()
        .map(|hook| (hook.route(), Endpoint::Hook(hook)));
    let admin = ADMIN.map(|(path, endpoint)| (path.to_owned(), endpoint));
    hooks.chain(admin).collect()
});

/// The endpoint mounted at `path` and its label in `/metrics`, if any: a request for any other
/// path is counted under `unmatched` (never under the path itself, which a scanner would make
/// a series of each).
fn endpoint(path: &str) -> Option<(Endpoint, &'static str)> {
    let (route, endpoint) = ROUTES.iter().find(|(route, _)| route == path)?;
    Some((*endpoint, route))
}

/// The whole application: usable in tests with `tower::ServiceExt::oneshot`, no socket needed.
pub fn router(state: Arc<AppState>) -> App {
    App { state }
}

/// The server's routes, and what every request gets around them. A hook's route takes a POST,
/// an admin endpoint a GET or a HEAD (answered as the GET, without its body); another method
/// gets a JSON 405 naming the ones the route takes (also in `Allow`), a path no route mounts a
/// JSON 404. Every request is counted and timed under its route, and once the server is
/// stopping an HTTP/1 answer says `Connection: close` (hyper then closes the connection after
/// it), so that a client's next request opens a new connection, which the Service sends to
/// another replica. HTTP/2 has no such header; its connections get a GOAWAY when the drain
/// starts, and the client moves the requests the server did not take.
///
/// Our own dispatch over the mounted paths rather than axum's `Router`, whose path tree,
/// URL parameters and boxed per-route services cost more a request than the table (see
/// docs/BENCHMARKS.md, "After the fifty-fourth round").
#[derive(Clone)]
pub struct App {
    state: Arc<AppState>,
}

impl<B> tower::Service<http::Request<B>> for App
where
    B: HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum_core::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Observed;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Observed {
        let start = Instant::now();
        let state = &self.state;
        let found = endpoint(req.uri().path());
        let http1 = req.version() < Version::HTTP_2;
        let head = req.method() == Method::HEAD;
        let get = head || req.method() == Method::GET;
        let answer = match found.map(|(endpoint, _)| endpoint) {
            None => Answering::Ready(ApiError::NotFound.into_response()),
            Some(Endpoint::Hook(hook)) if req.method() == Method::POST => {
                let hook = handle_hook(hook, Arc::clone(state), req.map(Body::new));
                Answering::Hook(Box::pin(hook))
            }
            Some(Endpoint::Hook(_)) => Answering::Ready(
                ApiError::MethodNotAllowed {
                    takes: "POST with a JSON body",
                    allow: "POST",
                }
                .into_response(),
            ),
            Some(_) if !get => Answering::Ready(
                ApiError::MethodNotAllowed {
                    takes: "GET",
                    allow: "GET,HEAD",
                }
                .into_response(),
            ),
            Some(Endpoint::Healthz) => Answering::Ready("ok\n".into_response()),
            Some(Endpoint::Readyz) => Answering::Ready(readyz(state)),
            Some(Endpoint::Metrics) => Answering::Ready(metrics(state)),
        };
        Observed {
            route: found.map_or("unmatched", |(_, label)| label),
            http1,
            head,
            start,
            state: Arc::clone(state),
            answer,
        }
    }
}

/// An answer being made: at once (a 404, a 405, an admin endpoint's) or by a hook.
enum Answering {
    Ready(Response),
    Hook(Pin<Box<dyn Future<Output = Response> + Send>>),
}

/// A request being answered, counted once answered.
pub struct Observed {
    answer: Answering,
    route: &'static str,
    http1: bool,
    head: bool,
    start: Instant,
    state: Arc<AppState>,
}

impl Future for Observed {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut response = match &mut self.answer {
            Answering::Ready(response) => std::mem::take(response),
            Answering::Hook(hook) => ready!(hook.as_mut().poll(cx)),
        };
        let state = &self.state;
        state
            .metrics
            .observe(self.route, response.status().as_u16(), self.start.elapsed());
        if self.http1 && state.stopping.load(Ordering::Relaxed) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.head {
            // The GET's length, then no body (which hyper would not send either).
            if let Some(length) = HttpBody::size_hint(response.body()).exact() {
                let length = HeaderValue::from(length);
                response
                    .headers_mut()
                    .entry(header::CONTENT_LENGTH)
                    .or_insert(length);
            }
            *response.body_mut() = Body::empty();
        }
        Poll::Ready(Ok(response))
    }
}

fn readyz(state: &AppState) -> Response {
    if state.ready.load(Ordering::Relaxed) {
        "ready\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

fn metrics(state: &AppState) -> Response {
    let mut response = state.metrics.render(&state.in_flight()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

async fn handle_hook(hook: &'static Hook, state: Arc<AppState>, req: Request) -> Response {
    // Shed load at once instead of queueing past the caller's timeout.
    let (places, by) = if hook.kind.is_admission() {
        (&state.admission_in_flight, Overload::AdmissionRequests)
    } else {
        (&state.in_flight, Overload::Requests)
    };
    let Ok(_permit) = places.clone().try_acquire_owned() else {
        return ApiError::Overloaded {
            retry_after_seconds: state.limits.retry_after_seconds,
            by,
        }
        .into_response();
    };
    let work = run_hook(hook, &state, req);
    let result = match tokio::time::timeout(state.limits.request_timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(ApiError::Timeout),
    };
    // The request's span is made once its fields are known, at the level of the one event it
    // holds: the JSON log format would parse and rewrite a span's fields on every later
    // `record`, and a span at `info` costs that formatting on every answer although answers
    // are only logged at `debug` (an admission request's denial at `info`). The object's name
    // is `object`: in a JSON line, `name` in a span is the span's own name.
    match result {
        Ok(Answer {
            response,
            subject,
            allowed,
            condition,
            reading,
        }) => {
            state.metrics.observe_sync(hook.id, condition, reading);
            let status = response.status().as_u16();
            let uid = (!subject.uid.is_empty()).then_some(subject.uid.as_str());
            let operation = (!subject.operation.is_empty()).then_some(subject.operation.as_str());
            macro_rules! span {
                ($span:ident) => {
                    tracing::$span!(
                        "hook",
                        route = hook.id,
                        kind = subject.kind.as_str(),
                        namespace = subject.namespace.as_str(),
                        object = subject.name.as_str(),
                        uid,
                        operation,
                        allowed
                    )
                };
            }
            if allowed == Some(false) {
                span!(info_span).in_scope(|| tracing::info!(status, "denied"));
            } else {
                span!(debug_span).in_scope(|| tracing::debug!(status, "answered"));
            }
            response
        }
        Err(ApiError::HookPanicked) => {
            tracing::error_span!("hook", route = hook.id)
                .in_scope(|| tracing::error!(status = 500, "the hook panicked"));
            ApiError::HookPanicked.into_response()
        }
        Err(e) => {
            tracing::info_span!("hook", route = hook.id).in_scope(|| {
                let status = e.status().as_u16();
                tracing::info!(status, error = %e.message(), path = e.path(), "rejected");
            });
            e.into_response()
        }
    }
}

/// A hook's answer, with what the log line says of it.
struct Answer {
    response: Response,
    /// The object the request was about.
    subject: Subject,
    /// Whether an admission request's object was allowed.
    allowed: Option<bool>,
    /// The condition a sync answer gives its object, for `/metrics`.
    condition: Option<SyncCondition>,
    /// How a sync request was read, for `/metrics`.
    reading: Option<Reading>,
}

/// The hook's answer to one request.
async fn run_hook(hook: &'static Hook, state: &AppState, req: Request) -> Result<Answer, ApiError> {
    let limits = &state.limits;
    if let (Some(tokens), false) = (&limits.bearer_tokens, hook.kind.is_admission()) {
        tokens.check(req.headers())?;
    }
    check_json_content_type(&req)?;
    check_identity_encoding(&req)?;
    let tagged = limits.etag && !hook.kind.is_admission();
    let if_none_match = tagged
        .then(|| req.headers().get(header::IF_NONE_MATCH).cloned())
        .flatten();
    let limit = if hook.kind.is_admission() {
        limits.admission_body
    } else {
        limits.hook_body
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let size = match declared {
        Some(n) if n > limit as u64 => return Err(ApiError::TooLarge { limit }),
        Some(n) => n as usize,
        None => limit,
    };
    // A Metacontroller hook's body takes its share of the budget until the answer is made (one
    // larger than the whole budget takes all of it, and so runs alone). Admission bodies are not
    // counted: the API server takes a 429 as a failed call, which `failurePolicy: Fail` turns into
    // a refused write, where Metacontroller retries after Retry-After.
    let _held = if hook.kind.is_admission() {
        None
    } else {
        let share = kib(size).min(kib(limits.max_in_flight_bytes));
        let held = state.body_budget.clone().try_acquire_many_owned(share);
        Some(held.map_err(|_| ApiError::Overloaded {
            retry_after_seconds: limits.retry_after_seconds,
            by: Overload::Bytes,
        })?)
    };
    let body = read_body(req.into_body(), limit, declared).await?;

    let rng = ring::rand::SystemRandom::new();
    let ctx = HookContext {
        now: (state.clock)(),
        rng: &rng,
        memo: &state.memo,
    };
    // A panic in a hook is a bug (ours or a dependency's). Caught here, it is answered with a
    // 500 and logged, instead of closing the connection without an answer.
    let output = std::panic::catch_unwind(AssertUnwindSafe(|| (hook.run)(&body, &ctx)))
        .map_err(|_| ApiError::HookPanicked)?
        .map_err(ApiError::BadRequest)?;
    let tag = tagged.then(|| crate::etag::of(&output.body));
    let kept_by_caller = tag
        .as_ref()
        .zip(if_none_match.as_ref())
        .is_some_and(|(tag, listed)| crate::etag::named_by(listed, tag));
    let mut response = if kept_by_caller {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = Response::new(Body::from(output.body));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    };
    if let Some(tag) = tag {
        response.headers_mut().insert(header::ETAG, tag);
    }
    Ok(Answer {
        response,
        subject: output.subject,
        allowed: output.allowed,
        condition: output.condition,
        reading: output.reading,
    })
}

/// `application/json`, with parameters, or any `application/*+json`.
fn check_json_content_type(req: &Request) -> Result<(), ApiError> {
    let value = req
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let ok = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if ok {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType(value))
    }
}

/// No Content-Encoding, or only `identity`: a compressed body is refused by name rather than
/// read as JSON that does not parse.
fn check_identity_encoding(req: &Request) -> Result<(), ApiError> {
    for value in req.headers().get_all(header::CONTENT_ENCODING) {
        let value = String::from_utf8_lossy(value.as_bytes());
        let encoded = value
            .split(',')
            .map(str::trim)
            .any(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case("identity"));
        if encoded {
            return Err(ApiError::UnsupportedEncoding(value.into_owned()));
        }
    }
    Ok(())
}

/// The body, whole. One that ends before its declared length ended because its caller went
/// away: hyper ends an HTTP/2 body without an error when the caller resets the stream with
/// `NO_ERROR` (RFC 9113 §8.1; an HTTP/1.1 body that stops short is an error).
async fn read_body(
    body: Body,
    limit: usize,
    declared: Option<u64>,
) -> Result<bytes::Bytes, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => {
            let body = collected.to_bytes();
            match declared {
                Some(length) if (body.len() as u64) < length => Err(ApiError::CallerGone(format!(
                    "{} of its {length} bytes came",
                    body.len()
                ))),
                _ => Ok(body),
            }
        }
        Err(e) if e.is::<LengthLimitError>() => Err(ApiError::TooLarge { limit }),
        Err(e) if caller_went_away(&*e) => Err(ApiError::CallerGone(causes(&*e))),
        Err(e) => Err(ApiError::BodyRead(causes(&*e))),
    }
}

/// An error and the errors under it.
fn chain<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| e.source())
}

/// Whether a body's error says its caller went away (the connection closed or reset, the stream
/// reset or the connection ended by the caller) rather than that it sent something broken.
fn caller_went_away(error: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::*;
    let lost = |e: &std::io::Error| {
        matches!(
            e.kind(),
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
        )
    };
    for e in chain(error) {
        if let Some(e) = e.downcast_ref::<std::io::Error>() {
            return lost(e);
        }
        if let Some(e) = e.downcast_ref::<h2::Error>() {
            return e.get_io().map_or(e.is_remote(), lost);
        }
    }
    false
}

/// An error's text and its causes', each said once ("error reading a body from connection: end
/// of file before message length reached"): hyper's own text names no cause.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    for e in chain(error) {
        let said = e.to_string();
        if !text.ends_with(&said) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&said);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use metahooks_hooks::HookKind;

    static PANICKING: Hook = Hook {
        id: "test/panics",
        kind: HookKind::CompositeSync,
        summary: "panics on every request",
        run: |_, _| panic!("a bug"),
    };

    /// GET on a route of `state`'s router: the status and the body.
    async fn get(state: &Arc<AppState>, uri: &str) -> (StatusCode, String) {
        use tower::ServiceExt;
        let req = Request::get(uri).body(Body::empty()).unwrap();
        let response = router(Arc::clone(state)).oneshot(req).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// Not ready (503) until the listeners are bound, ready (200) while serving, and not ready
    /// again from the first shutdown signal: the flag that `start` sets and `shutdown` clears.
    #[tokio::test]
    async fn readyz_follows_the_ready_flag() {
        let config = crate::config::ServeConfig::from_args(&[]).unwrap();
        let state = AppState::new(Limits::from(&config));
        let not_ready = (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".to_owned());
        assert_eq!(get(&state, "/readyz").await, not_ready);
        state.ready.store(true, Ordering::Relaxed);
        assert_eq!(
            get(&state, "/readyz").await,
            (StatusCode::OK, "ready\n".to_owned())
        );
        state.ready.store(false, Ordering::Relaxed);
        assert_eq!(get(&state, "/readyz").await, not_ready);
    }

    /// A HEAD on an admin endpoint is answered as its GET, with the GET's length and no body;
    /// a hook's route takes no HEAD, and a path no route mounts is a 404 to every method.
    #[tokio::test]
    async fn head_is_answered_as_get_without_its_body() {
        use tower::ServiceExt;
        let config = crate::config::ServeConfig::from_args(&[]).unwrap();
        let state = AppState::new(Limits::from(&config));
        let call = |method: &str, uri: &str| {
            let req = Request::builder().method(method).uri(uri);
            let answer = router(Arc::clone(&state)).oneshot(req.body(Body::empty()).unwrap());
            async move {
                let (parts, body) = answer.await.unwrap().into_parts();
                let body = body.collect().await.unwrap().to_bytes();
                (parts.status, parts.headers, body)
            }
        };
        for (path, _) in ADMIN {
            let (get_status, get_headers, get_body) = call("GET", path).await;
            let (status, headers, body) = call("HEAD", path).await;
            assert_eq!(status, get_status, "{path}");
            assert_eq!(
                headers[header::CONTENT_TYPE],
                get_headers[header::CONTENT_TYPE]
            );
            let length: usize = headers[header::CONTENT_LENGTH]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            // `/metrics` grows by the GET's own series between the two.
            if path != "/metrics" {
                assert_eq!(length, get_body.len(), "{path}");
            }
            assert!(length > 0 && body.is_empty(), "{path}: {length} {body:?}");
            assert!(!get_body.is_empty(), "{path}");
        }
        let (status, headers, _) = call("HEAD", "/app-discovery/sync").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(headers[header::ALLOW], "POST");
        for method in ["HEAD", "GET", "POST", "OPTIONS"] {
            let (status, headers, body) = call(method, "/app-discovery").await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method}");
            assert_eq!(headers[header::CONTENT_TYPE], "application/json");
            assert_eq!(body.is_empty(), method == "HEAD", "{method}: {body:?}");
        }
    }

    /// Once stopping, an HTTP/1 answer closes its connection and an HTTP/2 one carries no
    /// `Connection` header (HTTP/2 forbids it; its connections get a GOAWAY at the drain).
    #[tokio::test]
    async fn answers_close_http1_connections_once_stopping() {
        use tower::ServiceExt;
        let config = crate::config::ServeConfig::from_args(&[]).unwrap();
        let state = AppState::new(Limits::from(&config));
        let connection = |version| {
            let app = router(Arc::clone(&state));
            async move {
                let req = Request::get("/healthz")
                    .version(version)
                    .body(Body::empty())
                    .unwrap();
                let response = app.oneshot(req).await.unwrap();
                response.headers().get(header::CONNECTION).cloned()
            }
        };
        use http::Version;
        assert_eq!(connection(Version::HTTP_11).await, None);
        state.stopping.store(true, Ordering::Relaxed);
        for version in [Version::HTTP_10, Version::HTTP_11] {
            assert_eq!(connection(version).await.unwrap(), "close");
        }
        assert_eq!(connection(Version::HTTP_2).await, None);
    }

    /// Each request is counted under the route it reaches, whatever its method or answer, and
    /// a request for any other path under `unmatched`.
    #[tokio::test]
    async fn requests_are_counted_under_their_route() {
        use tower::ServiceExt;
        let config = crate::config::ServeConfig::from_args(&[]).unwrap();
        let state = AppState::new(Limits::from(&config));
        let hooks = HOOKS.iter().map(|hook| ("POST", hook.route(), 400));
        let others = [
            ("GET", "/app-discovery/sync", 405),
            ("GET", "/healthz", 200),
            ("POST", "/healthz", 405),
            ("GET", "/readyz", 503),
            ("GET", "/app-discovery/sync/", 404),
            ("GET", "/app-discovery", 404),
            ("GET", "/.env", 404),
        ];
        let others = others.map(|(method, uri, status)| (method, uri.to_owned(), status));
        for (method, uri, status) in hooks.chain(others) {
            let req = Request::builder()
                .method(method)
                .uri(&uri)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{}"))
                .unwrap();
            let response = router(Arc::clone(&state)).oneshot(req).await.unwrap();
            assert_eq!(response.status(), status, "{method} {uri}");
        }
        let (_, text) = get(&state, "/metrics").await;
        let count = |route: &str, status: u16| {
            let line =
                format!("metahooks_requests_total{{route=\"{route}\",status=\"{status}\"}} ");
            let line = text.lines().find(|l| l.starts_with(&line));
            line.and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        };
        for hook in HOOKS {
            assert_eq!(count(&hook.route(), 400), Some(1), "{}", hook.id);
        }
        assert_eq!(count("/app-discovery/sync", 405), Some(1));
        assert_eq!(count("/healthz", 200), Some(1));
        assert_eq!(count("/healthz", 405), Some(1));
        assert_eq!(count("/readyz", 503), Some(1));
        assert_eq!(count("unmatched", 404), Some(3));
        assert!(!text.contains(".env"), "{text}");
    }

    /// A hook that panics gets a 500 with a JSON error, not a connection closed without an
    /// answer, and its in-flight slot is given back.
    #[tokio::test]
    async fn a_panicking_hook_is_answered_500_and_frees_its_slot() {
        let config = crate::config::ServeConfig::from_args(&["--max-in-flight", "4"]).unwrap();
        let state = AppState::new(Limits::from(&config));
        let req = Request::builder()
            .method("POST")
            .uri("/test/panics")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap();
        let response = handle_hook(&PANICKING, Arc::clone(&state), req).await;
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": ApiError::HookPanicked.message()})
        );
        assert_eq!(state.in_flight.available_permits(), 4);
    }

    /// An error wrapping another, with a text of its own.
    #[derive(Debug)]
    struct Wrapping(&'static str, std::io::Error);

    impl std::fmt::Display for Wrapping {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapping {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }

    /// A body error's text is its chain joined by `: `, a text its cause repeats said once (as
    /// axum's error says what hyper's under it says).
    #[test]
    fn a_body_error_says_each_cause_once() {
        let eof = || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "end of file");
        let hyper = Wrapping("error reading a body", eof());
        let axum = Wrapping("error reading a body", std::io::Error::other(hyper));
        // io::Error's source is the source of what it wraps: the chain is axum, hyper, eof.
        assert_eq!(causes(&axum), "error reading a body: end of file");
        assert_eq!(causes(&eof()), "end of file");
    }
}
