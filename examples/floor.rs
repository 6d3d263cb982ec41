//! Load-bench floors (`make bench-load`), one hyper server with three answers:
//! - `floor echo ADDR` reads the whole body and answers a fixed JSON body: what HTTP and the
//!   kernel cost before any JSON work;
//! - `floor scan ADDR` also checks that the body is JSON (serde_json reading it into
//!   `IgnoredAny`, which keeps nothing) before the same fixed answer: the least any server that
//!   must reject malformed JSON does, with no hook, no typed decoding and a 28-byte response;
//! - `floor json ADDR` is the naive hook server: it parses the body into a `serde_json::Value`
//!   and serializes its `related` back (an AdmissionReview's `request.object`, which a naive
//!   mutating webhook would write its patch from).

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;

fn echo(_body: Bytes) -> Bytes {
    Bytes::from_static(b"{\"status\":{},\"children\":[]}")
}

fn scan(body: Bytes) -> Bytes {
    match serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
        Ok(_) => echo(body),
        Err(_) => Bytes::from_static(b"{\"error\":\"not JSON\"}"),
    }
}

fn naive(body: Bytes) -> Bytes {
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let written = match value.get("request") {
        Some(request) => &request["object"],
        None => &value["related"],
    };
    Bytes::from(serde_json::to_vec(written).unwrap_or_default())
}

async fn serve(
    req: Request<Incoming>,
    answer: fn(Bytes) -> Bytes,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(answer(body)))
        .unwrap())
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let answer: fn(Bytes) -> Bytes = match args.next().as_deref() {
        Some("echo") => echo,
        Some("scan") => scan,
        Some("json") => naive,
        _ => {
            eprintln!("usage: floor echo|scan|json [ADDR]");
            std::process::exit(2);
        }
    };
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8091".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        // As metahooks' listeners do: without it an HTTP/2 answer's DATA frame, written after its
        // HEADERS frame, waits for the peer's delayed ACK.
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| serve(req, answer));
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
