//! The metahooks server: HTTP/HTTPS listeners, the router over the hook registry, TLS, metrics.
//! The hooks themselves live in the `metahooks-hooks` crate.
#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod error;
pub mod etag;
pub mod keep_alive;
pub mod reload;
pub mod routes;
pub mod server;
pub mod telemetry;
pub mod tls;

pub use routes::{router, App, AppState, Clock, Limits};
pub use server::{start, start_with_clock, RunningServer};
