//! Load-bench floor: the naive hook server. Parses the body into a `serde_json::Value` and
//! serializes its `related` back (`make bench-load`).

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;

async fn naive(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let out = serde_json::to_vec(&value["related"]).unwrap_or_default();
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(out)))
        .unwrap())
}

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8092".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        tokio::spawn(async move {
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(naive))
                .await;
        });
    }
}
