//! Settings of `metahooks serve`: every flag has a `METAHOOKS_*` environment variable.

use clap::Args;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct ServeConfig {
    /// Plain HTTP listener, every route (the manifests call the delete-graph and app-discovery
    /// hooks, the probes and /metrics here). `[::]` listens on every address, IPv4 and IPv6 (IPv4
    /// only on a kernel without IPv6); `0.0.0.0` on IPv4 only.
    #[arg(long, env = "METAHOOKS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// HTTPS listener, every route (the manifests call the admission webhooks here, and the
    /// cert-rotation and mesh-root-certificate hooks, whose requests carry keys); started with
    /// --tls-cert/--tls-key or --tls-self-signed. `[::]` as for --listen.
    #[arg(long, env = "METAHOOKS_TLS_LISTEN", default_value = "127.0.0.1:8443")]
    pub tls_listen: SocketAddr,

    /// PEM certificate chain of the HTTPS listener; re-read when the file changes.
    #[arg(long, env = "METAHOOKS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of the HTTPS listener; re-read when the file changes.
    #[arg(long, env = "METAHOOKS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve HTTPS with a self-signed certificate made at start.
    #[arg(long, env = "METAHOOKS_TLS_SELF_SIGNED", conflicts_with = "tls_cert")]
    pub tls_self_signed: bool,

    /// DNS names (a leading `*.` for a wildcard) or IP addresses of the self-signed certificate,
    /// comma-separated.
    #[arg(
        long,
        env = "METAHOOKS_TLS_DNS_NAMES",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,::1",
        value_parser = parse_subject_name
    )]
    pub tls_dns_names: Vec<String>,

    /// Largest request body of a Metacontroller hook (sync, finalize, customize).
    #[arg(long, env = "METAHOOKS_HOOK_BODY_LIMIT", default_value = "32MiB", value_parser = parse_limit)]
    pub hook_body_limit: usize,

    /// Largest request body of an admission hook.
    #[arg(long, env = "METAHOOKS_ADMISSION_BODY_LIMIT", default_value = "8MiB", value_parser = parse_limit)]
    pub admission_body_limit: usize,

    /// Time to read a request and answer it; below Metacontroller's 10 s default so the caller
    /// sees our 503 rather than its own timeout.
    #[arg(long, env = "METAHOOKS_REQUEST_TIMEOUT", default_value = "8s", value_parser = parse_timeout)]
    pub request_timeout: Duration,

    /// Time a client has to send a request's headers, from their first byte; and a new
    /// connection to bring its first request.
    #[arg(long, env = "METAHOOKS_HEADER_READ_TIMEOUT", default_value = "5s", value_parser = parse_timeout)]
    pub header_read_timeout: Duration,

    /// Time a kept-alive connection may wait for its next request before it is closed (HTTP/2:
    /// with no request open, then a GOAWAY): longer than the callers keep theirs (Go's 90 s), so
    /// that they, not metahooks, close idle connections and no request meets a close.
    #[arg(long, env = "METAHOOKS_IDLE_TIMEOUT", default_value = "120s", value_parser = parse_timeout)]
    pub idle_timeout: Duration,

    /// Metacontroller hook requests (sync, finalize, customize) handled at once; more are
    /// answered 429 with Retry-After, which Metacontroller retries
    /// (metahooks_requests_in_flight{class="metacontroller"}).
    #[arg(long, env = "METAHOOKS_MAX_IN_FLIGHT", default_value = "256")]
    pub max_in_flight: NonZeroUsize,

    /// Admission requests handled at once, counted apart from the Metacontroller hooks' so that
    /// neither kind can take the other's places; more are answered 429, which the API server takes
    /// as a failed call, and with failurePolicy Fail as a refused write
    /// (metahooks_requests_in_flight{class="admission"}).
    #[arg(long, env = "METAHOOKS_MAX_IN_FLIGHT_ADMISSION", default_value = "256")]
    pub max_in_flight_admission: NonZeroUsize,

    /// Connections open at once, on both listeners, TLS handshakes included; one more is closed
    /// as soon as it is accepted (metahooks_connections_refused_total). An idle kept-alive
    /// connection holds about 22 KB.
    #[arg(long, env = "METAHOOKS_MAX_CONNECTIONS", default_value = "1024")]
    pub max_connections: NonZeroUsize,

    /// Bodies of Metacontroller hook requests (sync, finalize, customize) held at once, summed
    /// over the requests in flight (each counted at its Content-Length, or at the hook body limit
    /// when it comes in chunks, in KiB); a request that would go past it is answered 429 with
    /// Retry-After. A request larger than this still runs, alone. It keeps a burst of large
    /// requests inside the memory the server is given. Admission requests are not counted
    /// (metahooks_request_body_bytes_in_flight).
    #[arg(long, env = "METAHOOKS_MAX_IN_FLIGHT_BYTES", default_value = "128MiB", value_parser = parse_limit)]
    pub max_in_flight_bytes: usize,

    /// Seconds sent in Retry-After with a 429, at least 1 (Metacontroller retries after them).
    #[arg(
        long = "retry-after",
        env = "METAHOOKS_RETRY_AFTER",
        default_value_t = 1,
        value_parser = parse_retry_after
    )]
    pub retry_after_seconds: u32,

    /// File of tokens, one a line, of which Metacontroller must send one as `Authorization: Bearer
    /// <token>` (its webhook `authorization` setting); re-read when the file changes. When set,
    /// sync, finalize and customize routes answer 401 without one; admission and admin routes are
    /// not affected.
    #[arg(long, env = "METAHOOKS_BEARER_TOKEN_FILE")]
    pub bearer_token_file: Option<PathBuf>,

    /// Send an ETag (the SHA-256 of the answer) with every sync, finalize and customize answer, and
    /// answer 304 without a body when If-None-Match names the answer's own tag. For controllers
    /// whose hooks set Metacontroller's `webhook.etag.enabled`; the hook still runs every time.
    #[arg(long, env = "METAHOOKS_ETAG")]
    pub etag: bool,

    /// PEM CA bundle: when set, the HTTPS listener requires a client certificate signed by it
    /// (the API server's webhook client certificate, or Metacontroller's clientTLS); re-read when
    /// the file changes.
    #[arg(long, env = "METAHOOKS_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,

    /// After the first SIGTERM/SIGINT, time to go on accepting and answering requests before
    /// the listeners close: /readyz answers 503 and every HTTP/1 answer closes its connection,
    /// so that clients move to other replicas while the Service's endpoints drop this one.
    #[arg(long, env = "METAHOOKS_SHUTDOWN_DELAY", default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay: Duration,

    /// After the shutdown delay, time given to in-flight requests before exiting.
    #[arg(long, env = "METAHOOKS_DRAIN_TIMEOUT", default_value = "25s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
}

/// `metahooks serve`'s flags alone, to build a [`ServeConfig`] from arguments (tests, embedding).
#[derive(clap::Parser, Debug)]
#[command(name = "metahooks serve")]
struct ServeArgs {
    #[command(flatten)]
    config: ServeConfig,
}

impl ServeConfig {
    /// Parses `serve` flags; `&[]` gives the defaults (environment variables still apply).
    pub fn from_args(args: &[&str]) -> Result<Self, clap::Error> {
        use clap::Parser;
        let argv = std::iter::once("metahooks-serve").chain(args.iter().copied());
        Ok(ServeArgs::try_parse_from(argv)?.config)
    }

    pub fn tls_enabled(&self) -> bool {
        self.tls_self_signed || self.tls_cert.is_some()
    }
}

/// `8MiB`, `512KiB`, `1000` (bytes), `10MB`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a size such as 32MiB"))?;
    let mult = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit '{other}' (B, KiB, MiB, GiB, KB, MB, GB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// A body limit: a size above zero (a limit of zero would refuse every request).
pub fn parse_limit(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        0 => Err("a limit of zero would refuse every request; give a size above zero".into()),
        limit => Ok(limit),
    }
}

/// A request timeout: a duration above zero (zero would time out every request).
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        Duration::ZERO => {
            Err("zero would time out every request; give a duration above zero".into())
        }
        timeout => Ok(timeout),
    }
}

/// Seconds of Retry-After: at least one. Metacontroller takes a 429 as "sync again after
/// Retry-After", so with zero it would send the request again at once, again and again, to a
/// server that said it was overloaded.
pub fn parse_retry_after(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err("zero would have Metacontroller retry at once, keeping an overloaded server overloaded; give 1 or more seconds".into()),
        Ok(seconds) => Ok(seconds),
        Err(_) => Err(format!("'{s}' is not a number of seconds")),
    }
}

/// A name a certificate can hold for a server: an IP address, or a DNS name (letters of either
/// case), whose first label may be `*` for a wildcard. A client checks the name it dialled
/// against these, so a name that is neither could never match: it is a flag error, not a
/// certificate no client accepts.
pub fn parse_subject_name(s: &str) -> Result<String, String> {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Ok(s.to_owned());
    }
    if metahooks_hooks::meta::is_certificate_dns_name(&s.to_ascii_lowercase()) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "'{s}' is neither an IP address nor a DNS name (dot-separated labels of letters, \
             digits and '-', each at most 63 characters, 253 in all; '*.' may start it)"
        ))
    }
}

/// `250ms`, `8s`, `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a duration such as 8s"))?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => n
            .checked_mul(60)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("'{s}' is too long")),
        other => Err(format!("unknown duration unit '{other}' (ms, s, m)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        for (text, bytes) in [
            ("100", 100),
            ("100B", 100),
            ("3KiB", 3 << 10),
            ("32MiB", 32 << 20),
            ("2GiB", 2 << 30),
            ("3KB", 3_000),
            ("3kB", 3_000),
            (" 3 MB ", 3_000_000),
            ("2GB", 2_000_000_000),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        assert_eq!(
            parse_size("3 parsecs"),
            Err("unknown size unit 'parsecs' (B, KiB, MiB, GiB, KB, MB, GB)".to_owned())
        );
        assert_eq!(
            parse_size("MiB"),
            Err("'MiB' is not a size such as 32MiB".to_owned())
        );
        let too_large = format!("{}GiB", usize::MAX >> 29);
        assert_eq!(
            parse_size(&too_large),
            Err(format!("'{too_large}' is too large"))
        );
    }

    #[test]
    fn durations() {
        for (text, duration) in [
            ("250ms", Duration::from_millis(250)),
            ("8s", Duration::from_secs(8)),
            ("8", Duration::from_secs(8)),
            (" 8 s ", Duration::from_secs(8)),
            ("2m", Duration::from_secs(120)),
        ] {
            assert_eq!(parse_duration(text), Ok(duration), "{text}");
        }
        assert_eq!(
            parse_duration("soon"),
            Err("'soon' is not a duration such as 8s".to_owned())
        );
        assert_eq!(
            parse_duration("2h"),
            Err("unknown duration unit 'h' (ms, s, m)".to_owned())
        );
    }

    /// Limits and timeouts of zero would refuse every request: they are flag errors.
    #[test]
    fn limits_and_timeouts_are_above_zero() {
        for zero in ["0", "0B", "0 MiB"] {
            assert_eq!(
                parse_limit(zero),
                Err("a limit of zero would refuse every request; give a size above zero".into())
            );
        }
        assert_eq!(parse_limit("1B"), Ok(1));
        for zero in ["0", "0ms", "0s", "0m"] {
            assert_eq!(
                parse_timeout(zero),
                Err("zero would time out every request; give a duration above zero".into())
            );
        }
        assert_eq!(parse_timeout("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(
            parse_retry_after("0"),
            Err("zero would have Metacontroller retry at once, keeping an overloaded server overloaded; give 1 or more seconds".into())
        );
        assert_eq!(parse_retry_after("1"), Ok(1));
        assert_eq!(parse_retry_after("30"), Ok(30));
        assert_eq!(
            parse_retry_after("-1"),
            Err("'-1' is not a number of seconds".into())
        );
        assert_eq!(
            parse_timeout("soon"),
            Err("'soon' is not a duration such as 8s".into())
        );
    }

    /// The self-signed certificate's names: a name no client could dial is refused.
    #[test]
    fn subject_names_are_dns_names_or_ip_addresses() {
        for name in [
            "localhost",
            "127.0.0.1",
            "::1",
            "metahooks.metahooks-system.svc",
            "*.example.com",
            "My-Laptop.local",
        ] {
            assert_eq!(parse_subject_name(name), Ok(name.to_owned()), "{name}");
        }
        for name in [
            "",
            "foo bar",
            "a..b",
            "-a.b",
            "*",
            "a.*.b",
            "x.",
            &"a".repeat(64),
        ] {
            let err = parse_subject_name(name).unwrap_err();
            assert!(
                err.starts_with(&format!("'{name}' is neither an IP address nor a DNS name")),
                "{name}: {err}"
            );
        }
        let flag = ServeConfig::from_args(&["--tls-self-signed", "--tls-dns-names", "a,b c"]);
        let err = flag.unwrap_err().to_string();
        assert!(
            err.contains("--tls-dns-names") && err.contains("'b c' is neither"),
            "{err}"
        );
        let names = ServeConfig::from_args(&["--tls-dns-names", "a.svc,10.0.0.1"]).unwrap();
        assert_eq!(names.tls_dns_names, ["a.svc", "10.0.0.1"]);
    }

    /// A number of minutes whose seconds do not fit in a u64 is refused, not wrapped (release)
    /// or a panic (debug).
    #[test]
    fn too_many_minutes_is_an_error() {
        let minutes = u64::MAX / 60 + 1;
        assert_eq!(
            parse_duration(&format!("{minutes}m")),
            Err(format!("'{minutes}m' is too long"))
        );
        let most = u64::MAX / 60;
        assert_eq!(
            parse_duration(&format!("{most}m")),
            Ok(Duration::from_secs(most * 60))
        );
    }
}
