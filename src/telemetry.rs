//! Logs (tracing, JSON or pretty) and the Prometheus metrics of `/metrics`: the version running, a
//! request counter and a latency histogram per route and status, the sync answers by the
//! condition they give their object and by how their request was read, what the load-shedding
//! bounds hold and their limits, the connections open and those refused, the TLS handshakes by
//! version and key exchange group, and when the HTTPS listener's certificate expires.
//! Kept dependency-free and cheap: a short lock per request (two for a sync answer) and per TLS
//! handshake, rendering only when scraped.

use metahooks_hooks::{Reading, SyncCondition, HOOKS};
use std::collections::BTreeMap;
use std::fmt::{Display, Write};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds. The last finite one is above the request
/// timeout (8 s by default) and at Metacontroller's webhook timeout (10 s), so that a slow answer
/// or a 503 is told apart from one past every bound.
const BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 10.0,
];

#[derive(Default)]
struct Series {
    count: u64,
    sum_seconds: f64,
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    buckets: [u64; BUCKETS.len() + 1],
}

/// A hook id, a condition type, its status and its reason.
type ConditionKey = (&'static str, &'static str, bool, &'static str);

/// One load-shedding bound at a scrape: what the requests in flight hold of it, and its limit.
#[derive(Clone, Copy)]
pub struct Bound {
    pub held: u64,
    pub limit: u64,
}

/// What the load-shedding bounds hold at a scrape (see `crate::routes`).
pub struct InFlight {
    /// Metacontroller's requests, of `--max-in-flight`.
    pub metacontroller: Bound,
    /// Admission requests, of `--max-in-flight-admission`.
    pub admission: Bound,
    /// The bytes Metacontroller's request bodies hold, of `--max-in-flight-bytes` (both in whole
    /// KiB, as the budget is kept).
    pub body_bytes: Bound,
}

/// What the sync answers are counted by.
#[derive(Default)]
struct Syncs {
    /// The condition each gave its object.
    conditions: BTreeMap<ConditionKey, u64>,
    /// How its request was read, by hook id.
    readings: BTreeMap<(&'static str, Reading), u64>,
}

#[derive(Default)]
pub struct Metrics {
    series: Mutex<BTreeMap<(&'static str, u16), Series>>,
    syncs: Mutex<Syncs>,
    /// Connections open (`--max-connections` at most), counted by the server's accept loop.
    pub connections_open: Arc<AtomicUsize>,
    /// Connections closed as soon as they were accepted, because `--max-connections` were open.
    pub connections_refused: AtomicU64,
    /// The NotAfter of the HTTPS listener's certificate in service, in Unix seconds, set by the
    /// TLS resolver on every load; 0 without HTTPS.
    pub certificate_expiry: Arc<AtomicI64>,
    /// TLS handshakes completed, by protocol version and key exchange group.
    tls_handshakes: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

impl Metrics {
    /// Records a completed TLS handshake under its protocol version and key exchange group, by
    /// rustls' names (`TLSv1_3`, `X25519MLKEM768`); `none` where there is none to name.
    pub fn tls_handshake(&self, session: &rustls::CommonState) {
        let version = session.protocol_version().and_then(|v| v.as_str());
        let group = session
            .negotiated_key_exchange_group()
            .and_then(|g| g.name().as_str());
        let key = (version.unwrap_or("none"), group.unwrap_or("none"));
        let mut handshakes = self
            .tls_handshakes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *handshakes.entry(key).or_default() += 1;
    }

    /// Records one answered request. `route` is a mounted route or `unmatched`.
    pub fn observe(&self, route: &'static str, status: u16, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let s = series.entry((route, status)).or_default();
        s.count += 1;
        s.sum_seconds += secs;
        s.buckets[slot] += 1;
    }

    /// Counts the condition a sync answer of hook `id` gave its object and how its request was
    /// read; nothing for an answer of another hook, which has neither.
    pub fn observe_sync(
        &self,
        id: &'static str,
        condition: Option<SyncCondition>,
        reading: Option<Reading>,
    ) {
        if condition.is_none() && reading.is_none() {
            return;
        }
        let mut syncs = self.syncs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = condition {
            let key = (id, c.type_, c.status, c.reason);
            *syncs.conditions.entry(key).or_default() += 1;
        }
        if let Some(reading) = reading {
            *syncs.readings.entry((id, reading)).or_default() += 1;
        }
    }

    /// The Prometheus text exposition (version 0.0.4), with `in_flight` read at the scrape.
    pub fn render(&self, in_flight: &InFlight) -> String {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::with_capacity(512 + series.len() * 1200);
        // The version of each replica, so that a rollout can be followed (and joined on `job`,
        // `instance` to the other series).
        let version = format!("{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
        family(
            &mut out,
            "metahooks_build_info",
            "gauge",
            "The version of metahooks running; always 1.",
            [(version, 1)],
        );
        let requests = series.iter().map(|((route, status), s)| {
            let labels = format!("{{route=\"{route}\",status=\"{status}\"}}");
            (labels, s.count)
        });
        family(
            &mut out,
            "metahooks_requests_total",
            "counter",
            "Requests answered, by route and status.",
            requests,
        );
        out.push_str(
            "# HELP metahooks_request_duration_seconds Time from request to response, by route and status.\n",
        );
        out.push_str("# TYPE metahooks_request_duration_seconds histogram\n");
        for ((route, status), s) in series.iter() {
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                cumulative += s.buckets[i];
                let _ = writeln!(
                    out,
                    "metahooks_request_duration_seconds_bucket{{route=\"{route}\",status=\"{status}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "metahooks_request_duration_seconds_bucket{{route=\"{route}\",status=\"{status}\",le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "metahooks_request_duration_seconds_sum{{route=\"{route}\",status=\"{status}\"}} {}",
                s.sum_seconds
            );
            let _ = writeln!(
                out,
                "metahooks_request_duration_seconds_count{{route=\"{route}\",status=\"{status}\"}} {}",
                s.count
            );
        }
        let syncs = self.syncs.lock().unwrap_or_else(|e| e.into_inner());
        let Syncs {
            conditions,
            readings,
        } = &*syncs;
        if !conditions.is_empty() {
            let counted = conditions.iter().map(|((id, type_, status, reason), n)| {
                let status = if *status { "True" } else { "False" };
                let labels = format!("{{route=\"/{id}\",condition=\"{type_}\",status=\"{status}\",reason=\"{reason}\"}}");
                (labels, n)
            });
            family(
                &mut out,
                "metahooks_sync_conditions_total",
                "counter",
                "Sync answers by the condition they give their object (Ready, Valid, Accepted), its status and reason; False is an object its controller does not move on.",
                counted,
            );
        }
        // Every route and reading from the start, at 0: a series that first shows at 1 would
        // read as no increase to `rate`, and a route decoding every request whole as no data.
        let keeping = HOOKS.iter().filter(|hook| hook.kind.keeps_requests());
        let read = keeping.flat_map(|hook| {
            Reading::ALL.map(|reading| {
                let n = readings.get(&(hook.id, reading)).copied().unwrap_or(0);
                let labels = format!("{{route=\"/{}\",read=\"{}\"}}", hook.id, reading.as_str());
                (labels, n)
            })
        });
        family(
            &mut out,
            "metahooks_sync_requests_read_total",
            "counter",
            "Sync and finalize requests answered, by how the request was read: kept (the bytes of one kept before), kept_equal (a kept one's but for objects that decode the same), spliced (a kept one with the objects that differ decoded), whole (decoded whole, then kept) or whole_unkept (decoded whole, too large to keep).",
            read,
        );
        drop(syncs);
        render_in_flight(&mut out, in_flight);
        let open = self.connections_open.load(Ordering::Relaxed);
        family(
            &mut out,
            "metahooks_connections",
            "gauge",
            "Connections open.",
            [("", open)],
        );
        let refused = self.connections_refused.load(Ordering::Relaxed);
        family(
            &mut out,
            "metahooks_connections_refused_total",
            "counter",
            "Connections closed as soon as accepted, because --max-connections were open.",
            [("", refused)],
        );
        let handshakes = self
            .tls_handshakes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !handshakes.is_empty() {
            let completed = handshakes.iter().map(|((version, group), n)| {
                (format!("{{version=\"{version}\",group=\"{group}\"}}"), n)
            });
            family(
                &mut out,
                "metahooks_tls_handshakes_total",
                "counter",
                "TLS handshakes completed, by protocol version and key exchange group (X25519MLKEM768 is post-quantum).",
                completed,
            );
        }
        drop(handshakes);
        let expiry = self.certificate_expiry.load(Ordering::Relaxed);
        if expiry != 0 {
            family(
                &mut out,
                "metahooks_certificate_expiry_timestamp_seconds",
                "gauge",
                "When the HTTPS listener's certificate in service expires (Unix time).",
                [("", expiry)],
            );
        }
        out
    }
}

/// The gauges of the load-shedding bounds: a dashboard sets each beside its limit, to see how near
/// the server is to answering 429 before it does.
fn render_in_flight(out: &mut String, in_flight: &InFlight) {
    let by_class = |of: fn(Bound) -> u64| {
        [
            ("{class=\"metacontroller\"}", of(in_flight.metacontroller)),
            ("{class=\"admission\"}", of(in_flight.admission)),
        ]
    };
    let bytes = in_flight.body_bytes;
    family(
        out,
        "metahooks_requests_in_flight",
        "gauge",
        "Requests being answered, by the bound that holds them: metacontroller (--max-in-flight) or admission (--max-in-flight-admission).",
        by_class(|bound| bound.held),
    );
    family(
        out,
        "metahooks_requests_in_flight_limit",
        "gauge",
        "The bound on requests in flight, by class; one more is answered 429.",
        by_class(|bound| bound.limit),
    );
    family(
        out,
        "metahooks_request_body_bytes_in_flight",
        "gauge",
        "Bytes of --max-in-flight-bytes that Metacontroller's requests in flight hold: each its Content-Length in whole KiB, or the body limit without one, and at most all of it.",
        [("", bytes.held)],
    );
    family(
        out,
        "metahooks_request_body_bytes_in_flight_limit",
        "gauge",
        "The bound on request body bytes in flight (--max-in-flight-bytes, in whole KiB).",
        [("", bytes.limit)],
    );
}

/// One metric family of `kind` (`gauge`, `counter`): its HELP and TYPE lines, then a sample for
/// each set of labels, written as the exposition spells them (`""` for none).
fn family<L: Display, T: Display>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, T)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// How logs are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable.
    Pretty,
}

/// Installs the global subscriber, writing to stderr. The filter comes from `RUST_LOG` (default
/// `info`).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    init_logging_to(format, filter, std::io::stderr);
}

/// Installs the global subscriber with `filter`, writing to `writer` (tests read the logs
/// this way). Does nothing if one is installed already.
pub fn init_logging_to<W>(format: LogFormat, filter: tracing_subscriber::EnvFilter, writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds' defaults, nothing in flight.
    const IDLE: InFlight = InFlight {
        metacontroller: Bound {
            held: 0,
            limit: 256,
        },
        admission: Bound {
            held: 0,
            limit: 256,
        },
        body_bytes: Bound {
            held: 0,
            limit: 128 << 20,
        },
    };

    /// The whole exposition of one series, with durations whose sum is exact in binary, after the
    /// version line.
    #[test]
    fn exposition_of_one_series() {
        let m = Metrics::default();
        m.observe("/a", 200, Duration::from_millis(250));
        m.observe("/a", 200, Duration::from_millis(500));
        m.observe("/a", 200, Duration::from_secs(8));
        let bucket = |le: &str, n: u64| {
            format!(
                "metahooks_request_duration_seconds_bucket{{route=\"/a\",status=\"200\",le=\"{le}\"}} {n}\n"
            )
        };
        let mut want = format!(
            "# HELP metahooks_build_info The version of metahooks running; always 1.\n\
             # TYPE metahooks_build_info gauge\n\
             metahooks_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        );
        want.push_str(
            "# HELP metahooks_requests_total Requests answered, by route and status.\n\
             # TYPE metahooks_requests_total counter\n\
             metahooks_requests_total{route=\"/a\",status=\"200\"} 3\n\
             # HELP metahooks_request_duration_seconds Time from request to response, by route and status.\n\
             # TYPE metahooks_request_duration_seconds histogram\n",
        );
        for le in [
            "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
        ] {
            want += &bucket(le, 0);
        }
        want += &bucket("0.25", 1);
        for le in ["0.5", "1", "5"] {
            want += &bucket(le, 2);
        }
        want += &bucket("10", 3);
        want += &bucket("+Inf", 3);
        want += "metahooks_request_duration_seconds_sum{route=\"/a\",status=\"200\"} 8.75\n\
                 metahooks_request_duration_seconds_count{route=\"/a\",status=\"200\"} 3\n";
        want += &reads(|_, _| 0);
        want += "# HELP metahooks_requests_in_flight Requests being answered, by the bound that holds them: metacontroller (--max-in-flight) or admission (--max-in-flight-admission).\n\
                 # TYPE metahooks_requests_in_flight gauge\n\
                 metahooks_requests_in_flight{class=\"metacontroller\"} 0\n\
                 metahooks_requests_in_flight{class=\"admission\"} 0\n\
                 # HELP metahooks_requests_in_flight_limit The bound on requests in flight, by class; one more is answered 429.\n\
                 # TYPE metahooks_requests_in_flight_limit gauge\n\
                 metahooks_requests_in_flight_limit{class=\"metacontroller\"} 256\n\
                 metahooks_requests_in_flight_limit{class=\"admission\"} 256\n\
                 # HELP metahooks_request_body_bytes_in_flight Bytes of --max-in-flight-bytes that Metacontroller's requests in flight hold: each its Content-Length in whole KiB, or the body limit without one, and at most all of it.\n\
                 # TYPE metahooks_request_body_bytes_in_flight gauge\n\
                 metahooks_request_body_bytes_in_flight 0\n\
                 # HELP metahooks_request_body_bytes_in_flight_limit The bound on request body bytes in flight (--max-in-flight-bytes, in whole KiB).\n\
                 # TYPE metahooks_request_body_bytes_in_flight_limit gauge\n\
                 metahooks_request_body_bytes_in_flight_limit 134217728\n\
                 # HELP metahooks_connections Connections open.\n\
                 # TYPE metahooks_connections gauge\n\
                 metahooks_connections 0\n\
                 # HELP metahooks_connections_refused_total Connections closed as soon as accepted, because --max-connections were open.\n\
                 # TYPE metahooks_connections_refused_total counter\n\
                 metahooks_connections_refused_total 0\n";
        assert_eq!(m.render(&IDLE), want);
    }

    #[test]
    fn histogram_is_cumulative_and_counts_match() {
        let m = Metrics::default();
        m.observe("/a", 200, Duration::from_micros(100));
        m.observe("/a", 200, Duration::from_millis(30));
        m.observe("/a", 400, Duration::from_secs(9));
        let text = m.render(&IDLE);
        assert!(text.contains("metahooks_requests_total{route=\"/a\",status=\"200\"} 2"));
        assert!(text.contains(
            "metahooks_request_duration_seconds_bucket{route=\"/a\",status=\"200\",le=\"0.0005\"} 1"
        ));
        assert!(text.contains(
            "metahooks_request_duration_seconds_bucket{route=\"/a\",status=\"200\",le=\"0.05\"} 2"
        ));
        assert!(text.contains(
            "metahooks_request_duration_seconds_bucket{route=\"/a\",status=\"400\",le=\"5\"} 0"
        ));
        assert!(text.contains(
            "metahooks_request_duration_seconds_bucket{route=\"/a\",status=\"400\",le=\"10\"} 1"
        ));
        assert!(text.contains(
            "metahooks_request_duration_seconds_bucket{route=\"/a\",status=\"400\",le=\"+Inf\"} 1"
        ));
        // Past every finite bound: only in +Inf.
        m.observe("/a", 503, Duration::from_secs(11));
        let text = m.render(&IDLE);
        assert!(text.contains(
            "metahooks_request_duration_seconds_bucket{route=\"/a\",status=\"503\",le=\"10\"} 0"
        ));
        assert!(text.contains(
            "metahooks_request_duration_seconds_bucket{route=\"/a\",status=\"503\",le=\"+Inf\"} 1"
        ));
    }

    /// How sync requests were read, as `/metrics` writes it: a line for every route that keeps
    /// requests and every reading, each counting `count(route, read)`.
    fn reads(count: impl Fn(&str, &str) -> u64) -> String {
        let mut out = String::from(
            "# HELP metahooks_sync_requests_read_total Sync and finalize requests answered, by how the request was read: kept (the bytes of one kept before), kept_equal (a kept one's but for objects that decode the same), spliced (a kept one with the objects that differ decoded), whole (decoded whole, then kept) or whole_unkept (decoded whole, too large to keep).\n\
             # TYPE metahooks_sync_requests_read_total counter\n",
        );
        for route in [
            "app-discovery/sync",
            "delete-graph/sync",
            "delete-graph/finalize",
            "cert-rotation/sync",
            "mesh-root-certificate/sync",
        ] {
            for read in ["kept", "kept_equal", "spliced", "whole", "whole_unkept"] {
                let n = count(route, read);
                out += &format!(
                    "metahooks_sync_requests_read_total{{route=\"/{route}\",read=\"{read}\"}} {n}\n"
                );
            }
        }
        out
    }

    /// Sync answers are counted per route by their condition's type, status and reason, with
    /// their HELP and TYPE once there is one, and by how their request was read (every route and
    /// reading from the start: `exposition_of_one_series`), after the request series and before
    /// the bounds' gauges; each apart from the other. Another hook's answer counts in neither.
    #[test]
    fn sync_answers_are_counted_by_condition_and_by_how_their_request_was_read() {
        let m = Metrics::default();
        m.observe_sync("delete-graph/validate", None, None);
        let frozen = SyncCondition {
            type_: "Ready",
            status: false,
            reason: "CAUnavailable",
        };
        m.observe_sync("cert-rotation/sync", Some(frozen), Some(Reading::Kept));
        m.observe_sync("cert-rotation/sync", Some(frozen), Some(Reading::Kept));
        let valid = SyncCondition {
            type_: "Valid",
            status: true,
            reason: "Valid",
        };
        m.observe_sync("delete-graph/sync", Some(valid), Some(Reading::WholeUnkept));
        // A decorator answer that leaves the status alone writes no condition.
        m.observe_sync("mesh-root-certificate/sync", None, Some(Reading::Whole));
        let mut want = String::from(
            "# HELP metahooks_sync_conditions_total Sync answers by the condition they give their object (Ready, Valid, Accepted), its status and reason; False is an object its controller does not move on.\n\
             # TYPE metahooks_sync_conditions_total counter\n\
             metahooks_sync_conditions_total{route=\"/cert-rotation/sync\",condition=\"Ready\",status=\"False\",reason=\"CAUnavailable\"} 2\n\
             metahooks_sync_conditions_total{route=\"/delete-graph/sync\",condition=\"Valid\",status=\"True\",reason=\"Valid\"} 1\n",
        );
        want += &reads(|route, read| match (route, read) {
            ("cert-rotation/sync", "kept") => 2,
            ("delete-graph/sync", "whole_unkept") | ("mesh-root-certificate/sync", "whole") => 1,
            _ => 0,
        });
        want += "# HELP metahooks_requests_in_flight Requests being answered";
        let text = m.render(&IDLE);
        assert!(text.contains(&want), "{text}");
        assert!(!text.contains("delete-graph/validate"), "{text}");
    }

    #[test]
    fn certificate_expiry_is_a_gauge_once_set() {
        let m = Metrics::default();
        assert!(!m.render(&IDLE).contains("expiry"));
        m.certificate_expiry.store(1_797_154_715, Ordering::Relaxed);
        let want = "# HELP metahooks_certificate_expiry_timestamp_seconds When the HTTPS listener's certificate in service expires (Unix time).\n\
                    # TYPE metahooks_certificate_expiry_timestamp_seconds gauge\n\
                    metahooks_certificate_expiry_timestamp_seconds 1797154715\n";
        assert!(m.render(&IDLE).ends_with(want), "{}", m.render(&IDLE));
    }
}
