//! `fsm-serve`, run as `fsm serve`: see the `fsm_serve` crate's documentation.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use fsm_serve::{Config, Service, StoreKind, Tokens};

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
    /// The etcd key prefix; each machine lives under `<prefix><machine>/`.
    #[arg(long, default_value = "/fsm/")]
    prefix: String,
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
    let mut config = Config::new(args.specs);
    config.listen = args.listen;
    config.store = match args.store {
        Store::Memory => StoreKind::Memory,
        Store::Etcd => StoreKind::Etcd {
            endpoints: args.etcd,
            prefix: args.prefix,
        },
    };
    config.body_limit = args.body_limit;
    config.max_watchers = args.max_watchers;
    config.heal_every = Duration::from_secs(args.heal_every.max(1));
    config.deadline = args.deadline.map(Duration::from_secs);
    config.cors_origins = args.cors_origins;
    config.keep_history = args.keep_history.map(std::num::NonZeroUsize::get);
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
        let machines: Vec<&str> = service.machines().collect();
        eprintln!(
            "fsm serve: {} on http://{}",
            machines.join(", "),
            listener.local_addr()?
        );
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("fsm serve: shutting down");
        };
        fsm_serve::serve(service, listener, shutdown).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
