//! Listeners and connection handling: plain HTTP, optional HTTPS (`[::]` taking both address
//! families), a TLS handshake timeout, the waits between requests of [`crate::keep_alive`], and,
//! when shutdown is asked for, a delay still answering requests and then a bounded graceful
//! drain.

use crate::auth::BearerTokens;
use crate::config::ServeConfig;
use crate::keep_alive::{Activity, HeadTimer, Marked, Noting, Quiet, Waits};
use crate::reload::Reloading;
use crate::routes::{router, AppState, Clock, Limits};
use crate::tls::{server_configs, CertSource, ReloadingResolver};
use anyhow::{Context, Result};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A server whose listeners are bound and accepting.
pub struct RunningServer {
    pub http_addr: SocketAddr,
    pub https_addr: Option<SocketAddr>,
    pub state: Arc<AppState>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// Marks the server not ready and, after the shutdown delay, stops accepting and starts
    /// draining in-flight requests.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Resolves once the server has drained (or the drain timeout has passed).
    pub async fn wait(self) -> Result<()> {
        self.task.await.context("server task")
    }
}

/// Binds the listeners and starts serving in the background.
pub async fn start(config: &ServeConfig) -> Result<RunningServer> {
    start_with_clock(config, Arc::new(time::OffsetDateTime::now_utc)).await
}

/// As [`start`], with hooks reading `now` from `clock` (tests drive a virtual clock this way).
pub async fn start_with_clock(config: &ServeConfig, clock: Clock) -> Result<RunningServer> {
    let mut limits = Limits::from(config);
    if let Some(path) = &config.bearer_token_file {
        limits.bearer_tokens = Some(Arc::new(BearerTokens::from_file(path)?));
    }
    let state = AppState::with_clock(limits, clock);
    let app = router(state.clone());

    // Every file is read before a port is bound: a server that cannot start binds nothing.
    let acceptor = if config.tls_enabled() {
        let source = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => CertSource::SelfSigned {
                dns_names: config.tls_dns_names.clone(),
            },
        };
        let expiry = state.metrics.certificate_expiry.clone();
        let resolver = Arc::new(ReloadingResolver::new(&source, expiry)?);
        Some(server_configs(resolver, config.tls_client_ca.as_deref())?)
    } else {
        None
    };

    let http = bind(config.listen, "--listen")?;
    let http_addr = http.local_addr()?;
    let https = match acceptor {
        Some(acceptor) => Some((bind(config.tls_listen, "--tls-listen")?, acceptor)),
        None => None,
    };
    let https_addr = match &https {
        Some((l, _)) => Some(l.local_addr()?),
        None => None,
    };

    let (stop, stopped) = watch::channel(false);
    let waits = Waits {
        head: config.header_read_timeout,
        idle: config.idle_timeout,
    };
    let max_connections = config.max_connections.get();
    let shutdown_delay = config.shutdown_delay;
    let drain_timeout = config.drain_timeout;
    let task_state = state.clone();
    let task = tokio::spawn(async move {
        // Asks every connection to finish; closed once all have.
        let (drain, draining) = watch::channel(());
        let mut stopped = stopped;
        let service = TowerToHyperService::new(app);
        // Armed by the stop signal: the end of the shutdown delay.
        let delay = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(delay);
        let stopping = || task_state.stopping.load(Ordering::Relaxed);
        loop {
            let accepted = tokio::select! {
                _ = stopped.changed(), if !stopping() => {
                    task_state.ready.store(false, Ordering::Relaxed);
                    task_state.stopping.store(true, Ordering::Relaxed);
                    if !shutdown_delay.is_zero() {
                        tracing::info!(
                            delay = ?shutdown_delay,
                            "not ready; answering requests until the shutdown delay ends"
                        );
                    }
                    delay.as_mut().reset(tokio::time::Instant::now() + shutdown_delay);
                    continue;
                }
                _ = &mut delay, if stopping() => break,
                r = http.accept() => r.map(|(s, _)| (s, None)),
                // A TLS connection takes the state along, to count its handshake.
                r = accept_tls(&https) => r.map(|(s, a)| (s, Some((a, task_state.clone())))),
            };
            let (stream, tls) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let metrics = &task_state.metrics;
            let Some(place) = Place::take(&metrics.connections_open, max_connections) else {
                // Dropped: closed before a byte is read.
                metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("connection refused: --max-connections are open");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let draining = draining.clone();
            let service = service.clone();
            tokio::spawn(async move {
                let _place = place;
                match tls {
                    None => {
                        serve_connection(stream, service, waits, draining).await;
                    }
                    Some((acceptor, state)) => {
                        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                            .await
                        {
                            Ok(Ok(tls)) => {
                                state.metrics.tls_handshake(tls.get_ref().1);
                                serve_connection(tls, service, waits, draining).await
                            }
                            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        }
                    }
                }
            });
        }
        drop(http);
        drop(https);
        drop(draining);
        tracing::info!("draining in-flight requests");
        drain.send_replace(());
        if tokio::time::timeout(drain_timeout, drain.closed())
            .await
            .is_err()
        {
            tracing::warn!("drain timeout passed with requests still in flight");
        }
        tracing::info!("stopped");
    });

    state.ready.store(true, Ordering::Relaxed);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        http = %http_addr,
        https = https_addr.map(tracing::field::display),
        "listening"
    );
    Ok(RunningServer {
        http_addr,
        https_addr,
        state,
        stop,
        task,
    })
}

/// A listener on `addr`, the address of `flag`. The unspecified IPv6 address (`[::]`) takes IPv4
/// connections too, whatever the host's `net.ipv6.bindv6only` says, so that one address serves a
/// Pod in an IPv4, IPv6 or dual-stack cluster; on a kernel without IPv6 (booted with
/// `ipv6.disable=1`) it falls back to `0.0.0.0` on the same port, with a warning.
fn bind(addr: SocketAddr, flag: &str) -> Result<TcpListener> {
    let socket = bind_or_fall_back(addr, listening_socket)
        .with_context(|| format!("binding {flag} {addr}"))?;
    Ok(TcpListener::from_std(socket.into())?)
}

/// `open(addr)`, or, when `addr` is `[::]` and the kernel has no IPv6, `open` of `0.0.0.0`.
fn bind_or_fall_back(
    addr: SocketAddr,
    open: impl Fn(SocketAddr) -> std::io::Result<Socket>,
) -> std::io::Result<Socket> {
    match open(addr) {
        Err(e)
            if addr == SocketAddr::from((Ipv6Addr::UNSPECIFIED, addr.port()))
                && e.raw_os_error() == Some(libc::EAFNOSUPPORT) =>
        {
            let ipv4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, addr.port()));
            tracing::warn!(%addr, listening = %ipv4, "this kernel has no IPv6: listening on IPv4 only");
            open(ipv4)
        }
        opened => opened,
    }
}

/// A non-blocking socket listening on `addr`, as tokio's `TcpListener::bind` makes it (address
/// reuse, a backlog of 1,024), and taking both families when `addr` is `[::]`.
fn listening_socket(addr: SocketAddr) -> std::io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    prepare(&socket, addr)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket)
}

/// The options of a socket about to be bound to `addr`.
fn prepare(socket: &Socket, addr: SocketAddr) -> std::io::Result<()> {
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        socket.set_only_v6(false)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)
}

/// A connection's place among `--max-connections`, given back when the connection ends.
struct Place(Arc<AtomicUsize>);

impl Place {
    /// A place, if fewer than `max` are taken.
    fn take(open: &Arc<AtomicUsize>, max: usize) -> Option<Place> {
        open.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| Place(open.clone()))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn accept_tls(
    https: &Option<(TcpListener, Reloading<rustls::ServerConfig>)>,
) -> std::io::Result<(tokio::net::TcpStream, TlsAcceptor)> {
    match https {
        Some((listener, configs)) => {
            let (stream, _) = listener.accept().await?;
            Ok((stream, TlsAcceptor::from(configs.get())))
        }
        None => std::future::pending().await,
    }
}

/// Serves one connection, with the waits between requests of [`crate::keep_alive`], until it
/// ends or is drained.
async fn serve_connection<I>(
    io: I,
    service: TowerToHyperService<crate::routes::App>,
    waits: Waits,
    mut draining: watch::Receiver<()>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::default());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(HeadTimer::new(waits, activity.clone()))
        .header_read_timeout(waits.head);
    let io = TokioIo::new(Marked::new(io, activity.clone()));
    let conn = builder.serve_connection(io, Noting::new(service, activity.clone()));
    tokio::pin!(conn);
    tokio::select! {
        served = conn.as_mut() => return ended(served),
        _ = draining.changed() => {}
        quiet = activity.quiet(waits) => match quiet {
            Quiet::NoFirstRequest => {
                tracing::debug!("no request within the header read timeout: connection closed");
                return;
            }
            Quiet::IdleHttp2 => {
                tracing::debug!("HTTP/2 connection idle for the idle timeout: asked to close");
            }
        },
    }
    // HTTP/1 closes at once if idle, else after the answer in progress; HTTP/2 sends GOAWAY and
    // ends once its open streams are answered and the peer has answered a PING.
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        served = conn => ended(served),
        () = activity.goaway_unheeded(waits.head) => {
            tracing::debug!("HTTP/2 connection not closed by its peer after a GOAWAY: dropped");
        }
    }
}

fn ended<E: std::fmt::Display>(served: Result<(), E>) {
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, TcpStream};

    /// `[::]` takes connections of both families, even on a host that makes IPv6 sockets IPv6-only
    /// (`net.ipv6.bindv6only=1`, played by setting the option before `prepare`).
    #[test]
    fn the_unspecified_ipv6_address_takes_ipv4_too() {
        let addr: SocketAddr = "[::]:0".parse().unwrap();
        let socket = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP)).unwrap();
        socket.set_only_v6(true).unwrap();
        prepare(&socket, addr).unwrap();
        assert!(!socket.only_v6().unwrap());
        socket.bind(&addr.into()).unwrap();
        socket.listen(8).unwrap();
        let port = socket.local_addr().unwrap().as_socket().unwrap().port();
        for ip in [
            IpAddr::from(Ipv4Addr::LOCALHOST),
            IpAddr::from(Ipv6Addr::LOCALHOST),
        ] {
            TcpStream::connect((ip, port)).unwrap_or_else(|e| panic!("{ip}: {e}"));
        }
        // A given address is bound as it is.
        let socket = listening_socket("127.0.0.1:0".parse().unwrap()).unwrap();
        let bound = socket.local_addr().unwrap().as_socket().unwrap();
        assert_eq!(bound.ip(), IpAddr::from(Ipv4Addr::LOCALHOST));
    }

    /// A kernel without IPv6 turns `[::]` into `0.0.0.0` on the same port; any other address, or
    /// any other error, is not changed.
    #[test]
    fn without_ipv6_the_unspecified_address_falls_back_to_ipv4() {
        let no_ipv6 = |addr: SocketAddr| match addr {
            SocketAddr::V6(_) => Err(std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
            SocketAddr::V4(_) => listening_socket(addr),
        };
        let socket = bind_or_fall_back("[::]:0".parse().unwrap(), no_ipv6).unwrap();
        let bound = socket.local_addr().unwrap().as_socket().unwrap();
        assert_eq!(bound.ip(), IpAddr::from(Ipv4Addr::UNSPECIFIED));

        let error = bind_or_fall_back("[::1]:0".parse().unwrap(), no_ipv6).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EAFNOSUPPORT));
        let in_use = |_| Err(std::io::Error::from_raw_os_error(libc::EADDRINUSE));
        let error = bind_or_fall_back("[::]:0".parse().unwrap(), in_use).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EADDRINUSE));
    }
}
