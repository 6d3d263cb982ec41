//! How long a connection may wait for a request.
//!
//! hyper counts its HTTP/1 header read timeout from the moment a connection starts waiting for a
//! request, so a kept-alive connection was closed after `--header-read-timeout` (5 s) without a
//! request, while the Go clients that call metahooks keep an idle connection for 90 s (the API
//! server; Metacontroller over plain HTTP) or for ever (Metacontroller with a `caBundle`). Every
//! such close raced the client's next request on that connection, and Go does not send a POST again
//! once it has written it: Metacontroller logged an `EOF` sync error, and the API server, where it
//! calls over HTTP/1.1, failed the admission call. Here a connection that has served a request
//! waits `--idle-timeout` for the first byte of the next; a request's head must then come within
//! `--header-read-timeout` of that byte; and a new connection must bring its first request within
//! `--header-read-timeout` whatever its protocol, since hyper's protocol detection and its HTTP/2
//! server wait for ever. An HTTP/2 connection with no request open for `--idle-timeout` is asked to
//! close (a `GOAWAY`, which Go clients honour without losing a request); once its requests are
//! answered, a peer sent a `GOAWAY` (idle, or at the drain) has `--header-read-timeout` to close,
//! since one that has gone away never answers the `PING` that ends hyper's graceful close.

use hyper::rt::{Sleep, Timer};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The two waits of a connection between requests.
#[derive(Clone, Copy, Debug)]
pub struct Waits {
    /// From a request's first byte to the end of its head; and from a new connection to its
    /// first request.
    pub head: Duration,
    /// From the end of an answer to the first byte of the next request.
    pub idle: Duration,
}

/// What a connection has done, as its stream, its HTTP/1 timer and its service tell one another.
pub struct Activity {
    /// A read brought bytes since hyper last started waiting for a request head.
    read: AtomicBool,
    /// A request has reached the service.
    requested: AtomicBool,
    /// The requests came over HTTP/2.
    http2: AtomicBool,
    /// HTTP/2 requests in the service, answer not yet given.
    open: AtomicUsize,
    /// When the last answer was given (or the connection began), in milliseconds from `began`.
    quiet_since: AtomicU64,
    began: tokio::time::Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            read: AtomicBool::new(false),
            requested: AtomicBool::new(false),
            http2: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(0),
            began: tokio::time::Instant::now(),
        }
    }
}

impl Activity {
    fn millis(&self) -> u64 {
        self.began.elapsed().as_millis() as u64
    }

    /// Ends when the connection has waited too long for work: `waits.head` without a first
    /// request ([`Quiet::NoFirstRequest`]), or, once its requests come over HTTP/2, `waits.idle`
    /// with none open ([`Quiet::IdleHttp2`]). Never ends for HTTP/1, whose wait between requests
    /// is its [`HeadTimer`]'s.
    pub async fn quiet(&self, waits: Waits) -> Quiet {
        tokio::time::sleep(waits.head).await;
        if !self.requested.load(Ordering::Acquire) {
            return Quiet::NoFirstRequest;
        }
        if !self.http2.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        self.none_open_for(waits.idle, 0).await;
        Quiet::IdleHttp2
    }

    /// Ends when, over HTTP/2, a peer sent a GOAWAY now has not closed the connection within
    /// `wait` of its last answer (or of now): hyper's graceful close waits for the peer to answer
    /// a PING, which a peer that has gone never does. Never ends for HTTP/1, which closes once
    /// its answer is written.
    pub async fn goaway_unheeded(&self, wait: Duration) {
        if !self.http2.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        self.none_open_for(wait, self.millis()).await;
    }

    /// Ends once no HTTP/2 request is open and the last answer, or `from_ms`, is `wait` ago.
    async fn none_open_for(&self, wait: Duration, from_ms: u64) {
        let wait_ms = wait.as_millis() as u64;
        loop {
            let mut wake = self.millis() + wait_ms;
            if self.open.load(Ordering::Relaxed) == 0 {
                let until = self.quiet_since.load(Ordering::Relaxed).max(from_ms) + wait_ms;
                if self.millis() >= until {
                    return;
                }
                wake = until;
            }
            tokio::time::sleep_until(self.began + Duration::from_millis(wake)).await;
        }
    }
}

/// Why a connection has waited too long for work.
#[derive(Debug)]
pub enum Quiet {
    NoFirstRequest,
    IdleHttp2,
}

/// A connection's stream, noting each read that brings bytes.
pub struct Marked<I> {
    io: I,
    activity: Arc<Activity>,
}

impl<I> Marked<I> {
    pub fn new(io: I, activity: Arc<Activity>) -> Self {
        Marked { io, activity }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Marked<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read.store(true, Ordering::Relaxed);
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Marked<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A connection's service, noting each request from its arrival to its answer.
#[derive(Clone)]
pub struct Noting<S> {
    service: S,
    activity: Arc<Activity>,
}

impl<S> Noting<S> {
    pub fn new(service: S, activity: Arc<Activity>) -> Self {
        Noting { service, activity }
    }
}

impl<S, B> hyper::service::Service<hyper::Request<B>> for Noting<S>
where
    S: hyper::service::Service<hyper::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Answering<S::Future>;

    fn call(&self, request: hyper::Request<B>) -> Self::Future {
        let activity = &self.activity;
        // Only HTTP/2's waits (for idleness, and after a GOAWAY) count open requests.
        let open = (request.version() == hyper::Version::HTTP_2).then(|| {
            activity.http2.store(true, Ordering::Relaxed);
            activity.open.fetch_add(1, Ordering::Relaxed);
            Open(activity.clone())
        });
        // After `http2`: `quiet` reads this first.
        activity.requested.store(true, Ordering::Release);
        Answering {
            answer: self.service.call(request),
            open,
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer; an HTTP/2 request is counted open until it is given (or dropped).
    pub struct Answering<F> {
        #[pin]
        answer: F,
        open: Option<Open>,
    }
}

impl<F: Future> Future for Answering<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().answer.poll(cx)
    }
}

/// A request counted open in its connection's [`Activity`].
struct Open(Arc<Activity>);

impl Drop for Open {
    fn drop(&mut self) {
        let activity = &self.0;
        activity
            .quiet_since
            .store(activity.millis(), Ordering::Relaxed);
        activity.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The timer of a connection's HTTP/1 side, which hyper uses for its header read timeout only:
/// each `sleep_until` is hyper starting to wait for a request head (at now plus the timeout).
/// Before its first byte the wait is the idle timeout; a new connection's first request is
/// bounded by [`Activity::quiet`] instead.
pub struct HeadTimer {
    waits: Waits,
    activity: Arc<Activity>,
}

impl HeadTimer {
    pub fn new(waits: Waits, activity: Arc<Activity>) -> Self {
        HeadTimer { waits, activity }
    }
}

impl Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        hyper_util::rt::TokioTimer::new().sleep(duration)
    }

    fn sleep_until(&self, _deadline: Instant) -> Pin<Box<dyn Sleep>> {
        self.activity.read.store(false, Ordering::Relaxed);
        Box::pin(HeadWait {
            head: self.waits.head,
            activity: self.activity.clone(),
            byte_seen: false,
            sleep: Box::pin(tokio::time::sleep(self.waits.idle)),
        })
    }
}

/// A wait for a request head: until the idle timeout, or, once a byte has come, until the head
/// timeout after it.
struct HeadWait {
    head: Duration,
    activity: Arc<Activity>,
    byte_seen: bool,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Future for HeadWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // hyper polls this after each read that leaves the head incomplete.
        if !self.byte_seen && self.activity.read.load(Ordering::Relaxed) {
            self.byte_seen = true;
            let deadline = tokio::time::Instant::now() + self.head;
            self.sleep.as_mut().reset(deadline);
        }
        self.sleep.as_mut().poll(cx)
    }
}

impl Sleep for HeadWait {}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};

    /// A stream that does not write vectored.
    struct Unvectored;

    impl AsyncWrite for Unvectored {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(b.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// The stream notes reads that bring bytes and passes everything through: reads, writes,
    /// vectored writes where the stream under it writes vectored (hyper then writes an answer's
    /// head and body in one call), flushes and the shutdown.
    #[tokio::test]
    async fn the_stream_notes_reads_and_passes_everything_through() {
        let activity = Arc::new(Activity::default());
        assert!(!Marked::new(Unvectored, activity.clone()).is_write_vectored());

        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut marked = Marked::new(BufWriter::new(ours), activity.clone());
        assert!(marked.is_write_vectored());
        assert!(!activity.read.load(Ordering::Relaxed));

        theirs.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        marked.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        assert!(activity.read.load(Ordering::Relaxed));

        marked.write_all(b"po").await.unwrap();
        let parts = [io::IoSlice::new(b"n"), io::IoSlice::new(b"g")];
        assert_eq!(marked.write_vectored(&parts).await.unwrap(), 2);
        // Buffered until the flush.
        marked.flush().await.unwrap();
        let mut answer = [0u8; 4];
        let read = tokio::time::timeout(Duration::from_secs(5), theirs.read_exact(&mut answer));
        read.await.expect("the written bytes, flushed").unwrap();
        assert_eq!(&answer, b"pong");
        marked.shutdown().await.unwrap();
        let end = tokio::time::timeout(Duration::from_secs(5), theirs.read(&mut buf));
        assert_eq!(end.await.expect("the end, after the shutdown").unwrap(), 0);
    }
}
