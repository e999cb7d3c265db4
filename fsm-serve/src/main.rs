//! `fsm-serve`, run as `fsm serve`: see the `fsm_serve` crate's documentation.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use fsm_serve::{Config, EtcdFlags, ServeTls, Service, StoreKind, Tokens};

/// Serve state machines over REST, with a live web page.
#[derive(Parser)]
#[command(name = "fsm serve", version)]
struct Args {
    /// The spec files: one machine each, named by its `[machine] name`.
    #[arg(required = true)]
    specs: Vec<PathBuf>,
    /// Where to listen. Loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Serve HTTPS only, with this certificate chain (PEM: the service's
    /// certificate, then its intermediates); with `--tls-key`. Off loopback,
    /// without it, bearer tokens cross the network in clear text.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The tokens file (TOML: `[[token]]` with `token`, `actor`, `roles`), readable
    /// by its owner only.
    #[arg(long)]
    tokens: PathBuf,
    /// Where objects live.
    #[arg(long, value_enum, default_value = "memory")]
    store: Store,
    /// etcd endpoints (`host:port`, comma-separated), with `--store etcd`.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:2379")]
    etcd: Vec<String>,
    /// The etcd key prefix, ending with `/` (or empty); each machine lives
    /// under `<prefix><machine>/`.
    #[arg(long, default_value = "/fsm/")]
    prefix: String,
    /// How to reach an etcd that checks who connects (`--etcd-cacert`,
    /// `--etcd-cert`, `--etcd-key`, `--etcd-user`, `--etcd-password-file`).
    #[command(flatten)]
    etcd_flags: EtcdFlags,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    body_limit: usize,
    /// How many watch streams may be open at once.
    #[arg(long, default_value_t = 64)]
    max_watchers: usize,
    /// Seconds between the healer's passes.
    #[arg(long, default_value_t = 5)]
    heal_every: u64,
    /// The hard deadline, in seconds, of actions whose spec gives none (none by
    /// default).
    #[arg(long)]
    deadline: Option<u64>,
    /// Keep only the last N entries of each object's history (every entry by
    /// default): older ones are deleted as new ones are written.
    #[arg(long, value_name = "N")]
    keep_history: Option<std::num::NonZeroUsize>,
    /// Forget a removed object's id and removal after this many seconds
    /// (within a quarter of that time more; its 404s then no longer say
    /// `removed`; the id's next object is still numbered past it; on etcd,
    /// every process on the prefix must be of this version or later). Kept
    /// for ever by default.
    #[arg(long, value_name = "SECONDS")]
    forget_removals_after: Option<u64>,
    /// The longest, in seconds, a start, a data change or a removal may wait
    /// for a busy object
    /// (`?wait=SECONDS` on the start; a longer wait is refused, 400).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    max_wait: u64,
    /// How many requests may wait for busy objects at once (one more asking
    /// to wait is refused, 503).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_waiting: usize,
    /// A web origin whose pages may call the API (CORS), e.g.
    /// `https://ops.example.com`; repeat for several. None by default.
    #[arg(long = "cors-origin")]
    cors_origins: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Store {
    /// In this process: lost when it stops.
    Memory,
    /// On etcd.
    Etcd,
}

/// Where the objects live, as the arguments say: for etcd, with the user and
/// the TLS files read.
fn store_kind(args: &Args) -> Result<StoreKind, String> {
    let etcd_only = [
        ("--etcd-cacert", args.etcd_flags.cacert.is_some()),
        ("--etcd-user", args.etcd_flags.user.is_some()),
        (
            "--etcd-password-file",
            args.etcd_flags.password_file.is_some(),
        ),
    ];
    if let Store::Memory = args.store {
        return match etcd_only.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(format!("{flag} is for `--store etcd`")),
            None => Ok(StoreKind::Memory),
        };
    }
    let access = (args.etcd_flags.access(&args.etcd)).map_err(|e| e.to_string())?;
    Ok(StoreKind::Etcd {
        access,
        prefix: args.prefix.clone(),
    })
}

/// HTTPS as the arguments give it: the certificate and key in use, and the
/// files they are read from (again on SIGHUP).
#[derive(Clone)]
struct Https {
    tls: ServeTls,
    chain: PathBuf,
    key: PathBuf,
}

impl Https {
    /// The pair in `chain` and `key`, or why it cannot serve.
    fn load(chain: &Path, key: &Path) -> Result<Https, String> {
        match ServeTls::load(chain, key) {
            Ok(tls) => Ok(Https {
                tls,
                chain: chain.to_owned(),
                key: key.to_owned(),
            }),
            Err(e) => Err(format!("{}: {e}", files(chain, key))),
        }
    }

    /// Reads the files again: what it says of them.
    fn reload(&self) -> String {
        let files = files(&self.chain, &self.key);
        match self.tls.reload(&self.chain, &self.key) {
            Ok(()) => format!("fsm serve: reloaded {files}"),
            Err(e) => format!("fsm serve: the certificate in use stays: {files}: {e}"),
        }
    }
}

/// The certificate's and the key's files, as the flags name them.
fn files(chain: &Path, key: &Path) -> String {
    format!(
        "--tls-cert {}, --tls-key {}",
        chain.display(),
        key.display()
    )
}

/// The etcd files as the flags name them (TLS, the password), and the
/// endpoints, to connect again with on SIGHUP: only with `--store etcd` and
/// a file to read again.
#[cfg(unix)]
struct EtcdReload {
    flags: EtcdFlags,
    endpoints: Vec<String>,
}

#[cfg(unix)]
impl EtcdReload {
    /// What the arguments give to read again, if anything.
    fn of(args: &Args) -> Option<EtcdReload> {
        let flags = &args.etcd_flags;
        let files = flags.cacert.is_some() || flags.password_file.is_some();
        (matches!(args.store, Store::Etcd) && files).then(|| EtcdReload {
            flags: args.etcd_flags.clone(),
            endpoints: args.etcd.clone(),
        })
    }

    /// Reads the files again and reconnects every store with them: what it
    /// says of it. (A password from the environment stays as it was.)
    async fn reload(&self, service: &std::sync::Arc<Service>) -> String {
        let files: Vec<String> = (self.flags.args().iter())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let files = files.join(" ");
        let access = match self.flags.access(&self.endpoints) {
            Ok(access) => access,
            Err(e) => return format!("fsm serve: the etcd access in use stays: {e}"),
        };
        let service = service.clone();
        let reconnected = tokio::task::spawn_blocking(move || service.reconnect(&access)).await;
        match reconnected.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(_) => format!("fsm serve: reconnected to etcd with {files}"),
            Err(e) => format!("fsm serve: the etcd access in use stays: {e}"),
        }
    }
}

/// On each SIGHUP, reads the tokens file again, with HTTPS the certificate
/// and its key, and the etcd files (TLS, password), reconnecting: what reads is
/// served from then on, and what does not is refused, saying why, the last
/// good one kept.
#[cfg(unix)]
async fn reload_on_hangup(
    mut hangups: tokio::signal::unix::Signal,
    service: std::sync::Arc<Service>,
    tokens: PathBuf,
    https: Option<Https>,
    etcd: Option<EtcdReload>,
) {
    while hangups.recv().await.is_some() {
        match Tokens::load(&tokens) {
            Ok(read) => {
                let count = read.len();
                service.replace_tokens(read);
                let plural = if count == 1 { "" } else { "s" };
                eprintln!(
                    "fsm serve: reloaded {} ({count} token{plural})",
                    tokens.display()
                );
            }
            Err(e) => eprintln!("fsm serve: the tokens in use stay: {e}"),
        }
        if let Some(https) = &https {
            eprintln!("{}", https.reload());
        }
        if let Some(etcd) = &etcd {
            eprintln!("{}", etcd.reload(&service).await);
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .init();
    let tokens = match Tokens::load(&args.tokens) {
        Ok(tokens) => tokens,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let https = match (&args.tls_cert, &args.tls_key) {
        (Some(chain), Some(key)) => match Https::load(chain, key) {
            Ok(https) => Some(https),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        // clap requires them together.
        _ => None,
    };
    let store = match store_kind(&args) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    #[cfg(unix)]
    let etcd_reload = EtcdReload::of(&args);
    let mut config = Config::new(args.specs);
    config.listen = args.listen;
    config.store = store;
    config.body_limit = args.body_limit;
    config.max_watchers = args.max_watchers;
    config.heal_every = Duration::from_secs(args.heal_every.max(1));
    config.deadline = args.deadline.map(Duration::from_secs);
    config.cors_origins = args.cors_origins;
    config.keep_history = args.keep_history.map(std::num::NonZeroUsize::get);
    config.forget_removals_after = args.forget_removals_after.map(Duration::from_secs);
    config.max_wait = Duration::from_secs(args.max_wait);
    config.max_waiting = args.max_waiting;
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let service = match Service::open(&config, tokens, runtime.handle()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        // Caught before it says it listens: from then on, a SIGHUP reloads
        // (uncaught, it would stop the process), and a SIGINT or a SIGTERM
        // stops it cleanly (one sent as soon as it listens included: caught
        // later, it would be lost where the process was started with SIGINT
        // ignored, as a shell's background job is).
        #[cfg(unix)]
        let (hangups, mut interrupts, mut terminations) = {
            use tokio::signal::unix::{SignalKind, signal};
            (
                signal(SignalKind::hangup())?,
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
            )
        };
        let machines: Vec<&str> = service.machines().collect();
        eprintln!(
            "fsm serve: {} on {}://{}",
            machines.join(", "),
            if https.is_some() { "https" } else { "http" },
            listener.local_addr()?
        );
        let shutdown = async move {
            #[cfg(unix)]
            tokio::select! {
                _ = interrupts.recv() => {}
                _ = terminations.recv() => {}
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("fsm serve: shutting down");
        };
        #[cfg(unix)]
        tokio::spawn(reload_on_hangup(
            hangups,
            service.clone(),
            args.tokens.clone(),
            https.clone(),
            etcd_reload,
        ));
        match &https {
            Some(https) => fsm_serve::serve_tls(service, listener, &https.tls, shutdown).await,
            None => fsm_serve::serve(service, listener, shutdown).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
