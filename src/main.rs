//! `metahooks`: serve the hooks, run one hook on a file, list the hooks, make webhook certificates.
#![forbid(unsafe_code)]

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine;
use clap::{Parser, Subcommand};
use metahooks::config::ServeConfig;
use metahooks::telemetry::{init_logging, LogFormat};
use metahooks_hooks::{registry, HookContext, HOOKS};
use std::io::Read;
use std::path::PathBuf;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Metacontroller hooks for Keptn app discovery, OSM root certificate rotation and Ankaios-style
/// workload dependencies.
#[derive(Parser, Debug)]
#[command(name = "metahooks", version, about)]
struct Cli {
    /// Log format.
    #[arg(
        long,
        env = "METAHOOKS_LOG_FORMAT",
        value_enum,
        default_value = "json",
        global = true
    )]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve every hook over HTTP and HTTPS (each route on both listeners).
    Serve(Box<ServeConfig>),
    /// Run one hook on a request read from FILE (or stdin) and print the response.
    Run {
        /// Hook id, `<controller>/<hook>` as `metahooks list` prints it.
        hook: String,
        /// Request JSON; `-` or absent reads stdin.
        file: Option<PathBuf>,
        /// The hook's `now` (RFC 3339) instead of the clock, to reproduce a fixture.
        #[arg(long)]
        now: Option<String>,
    },
    /// Print the hook table: id, route, kind.
    List,
    /// Write a CA and a serving certificate for the webhook Service; print the caBundle.
    Certs {
        /// Name of the webhook Service (a DNS-1035 label, as Kubernetes requires of one).
        #[arg(long, default_value = "metahooks", value_parser = service_name)]
        service: String,
        /// Namespace of the webhook Service (a DNS-1123 label).
        #[arg(long, default_value = "metahooks-system", value_parser = namespace_name)]
        namespace: String,
        /// Directory for ca.crt, tls.crt and tls.key.
        #[arg(long)]
        out: PathBuf,
        /// Validity in days from now, at least one (both certificates also begin an hour ago,
        /// for an API server whose clock is behind this machine's).
        #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..))]
        days: u32,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = dispatch(cli) {
        eprintln!("metahooks: {e:#}");
        std::process::exit(1);
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(config) => {
            init_logging(cli.log_format);
            serve(*config)
        }
        Command::Run { hook, file, now } => run_hook(&hook, file, now.as_deref()),
        Command::List => {
            println!("{:<34} {:<36} KIND", "ID", "ROUTE");
            for hook in HOOKS {
                println!(
                    "{:<34} {:<36} {}",
                    hook.id,
                    hook.route(),
                    hook.kind.as_str()
                );
            }
            Ok(())
        }
        Command::Certs {
            service,
            namespace,
            out,
            days,
        } => certs(&service, &namespace, &out, days),
    }
}

fn serve(config: ServeConfig) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        // Before the server says it listens: a SIGTERM that came between the two would find the
        // default action and kill the process, with no drain.
        let mut signals = Signals::install().context("installing the signal handlers")?;
        let server = metahooks::start(&config).await?;
        signals.next().await;
        tracing::info!("shutdown requested; a second signal exits at once");
        server.shutdown();
        tokio::spawn(async move {
            signals.next().await;
            tracing::warn!("second signal: exiting without draining");
            std::process::exit(1);
        });
        server.wait().await
    })
}

/// SIGTERM (the kubelet's) and SIGINT (Ctrl-C), each caught from the moment it is installed.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// The next of either signal, including one that came since the last call.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

fn run_hook(id: &str, file: Option<PathBuf>, now: Option<&str>) -> Result<()> {
    let now = match now {
        Some(text) => metahooks_hooks::meta::parse_rfc3339(text)
            .ok_or_else(|| anyhow!("--now '{text}' is not an RFC 3339 timestamp"))?,
        None => time::OffsetDateTime::now_utc(),
    };
    let hook = registry::find(id)
        .ok_or_else(|| anyhow!("unknown hook '{id}'; `metahooks list` shows the hooks"))?;
    let body = match file {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?
        }
        _ => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .context("reading stdin")?;
            buf
        }
    };
    let rng = ring::rand::SystemRandom::new();
    let ctx = HookContext {
        now,
        rng: &rng,
        memo: &Default::default(),
    };
    match (hook.run)(&body, &ctx) {
        Ok(output) => {
            println!("{}", String::from_utf8_lossy(&output.body));
            Ok(())
        }
        Err(e) => bail!("bad request at {}: {}", e.path, e.message),
    }
}

/// A Service's name is a DNS-1035 label: a DNS-1123 label that starts with a letter. The
/// certificate names `<service>.<namespace>.svc`, which the API server checks.
fn service_name(s: &str) -> Result<String, String> {
    let label = metahooks_hooks::meta::is_dns1123_label(s);
    if label && s.starts_with(|c: char| c.is_ascii_lowercase()) {
        Ok(s.to_owned())
    } else {
        Err(
            "a Service name is 1 to 63 lowercase letters, digits and '-', starting with a \
             letter and ending with a letter or digit"
                .into(),
        )
    }
}

/// A namespace's name is a DNS-1123 label.
fn namespace_name(s: &str) -> Result<String, String> {
    if metahooks_hooks::meta::is_dns1123_label(s) {
        Ok(s.to_owned())
    } else {
        Err(
            "a namespace name is 1 to 63 lowercase letters, digits and '-', starting and \
             ending with a letter or digit"
                .into(),
        )
    }
}

fn certs(service: &str, namespace: &str, out: &std::path::Path, days: u32) -> Result<()> {
    let certs = metahooks::tls::webhook_certs(service, namespace, days)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    // The key is readable by its owner only from the moment it exists; a key file left by an
    // earlier run is narrowed to that too before it is overwritten.
    let write = |name: &str, content: &str, mode: u32| {
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let path = out.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .and_then(|()| file.write_all(content.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))
    };
    write("ca.crt", &certs.ca_pem, 0o644)?;
    write("tls.crt", &certs.cert_pem, 0o644)?;
    write("tls.key", &certs.key_pem, 0o600)?;
    eprintln!(
        "wrote ca.crt, tls.crt, tls.key to {} for {service}.{namespace}.svc; caBundle:",
        out.display()
    );
    println!(
        "{}",
        base64::engine::general_purpose::STANDARD.encode(certs.ca_pem.as_bytes())
    );
    Ok(())
}
