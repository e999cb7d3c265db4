//! HTTPS: the service's certificate and key, and a listener that hands axum
//! connections whose TLS handshake is done.
//!
//! Each handshake runs in a task of its own, bounded by [`HANDSHAKE`], so that
//! a client that opens a connection and says nothing (or says it slowly) holds
//! up no other client's.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{Error, ServerConfig};
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// How many connections may wait, handshake done, for the server to take them.
const READY: usize = 64;

/// The service's certificate chain and private key: `fsm serve` then answers
/// over HTTPS only (`--tls-cert`, `--tls-key`), so that bearer tokens never
/// cross the network in clear text. [`reload`](Self::reload) puts a renewed
/// pair in its place while the service runs (`fsm serve` does on SIGHUP):
/// connections made from then on are served with it.
///
/// ```no_run
/// use std::path::Path;
/// use fsm_serve::ServeTls;
///
/// let tls = ServeTls::load(Path::new("/etc/fsm/serve.pem"), Path::new("/etc/fsm/serve-key.pem"))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// What is not a certificate and a key is refused, saying which:
///
/// ```
/// let refused = fsm_serve::ServeTls::from_pem(b"not a certificate", b"nor a key").unwrap_err();
/// assert_eq!(refused.to_string(), "the certificate chain holds no PEM certificate");
/// ```
#[derive(Clone)]
pub struct ServeTls {
    config: Arc<ServerConfig>,
    current: Arc<Current>,
}

impl std::fmt::Debug for ServeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServeTls { .. }")
    }
}

/// The pair each new handshake is served with, replaced whole by a reload.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// Why a certificate chain and key cannot serve HTTPS.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate chain holds no certificate, or one that is not PEM.
    #[error("the certificate chain {0}")]
    Chain(String),
    /// The key is not a PEM private key.
    #[error("the private key {0}")]
    Key(String),
    /// rustls refused the pair (a key that is not the certificate's, an
    /// algorithm it does not take).
    #[error("{0}")]
    Refused(String),
}

impl ServeTls {
    /// HTTPS with the certificate chain `chain` (PEM: the service's
    /// certificate first, then the intermediates) and its private key `key`
    /// (PEM: PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<ServeTls, TlsError> {
        let current = Arc::new(Current(RwLock::new(certified(chain, key)?)));
        let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Refused(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        // HTTP/2 for a client that offers it (a browser: its streams share
        // one connection, rather than six per host), else HTTP/1.1.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(ServeTls {
            config: Arc::new(config),
            current,
        })
    }

    /// [`from_pem`](Self::from_pem) of the files `chain` and `key`.
    pub fn load(chain: &Path, key: &Path) -> Result<ServeTls, TlsError> {
        ServeTls::from_pem(&read(chain)?, &read(key)?)
    }

    /// Serves new connections with the pair in the files `chain` and `key`
    /// from now on (connections made before keep theirs). A pair that cannot
    /// serve is refused, and the one in place stays.
    pub fn reload(&self, chain: &Path, key: &Path) -> Result<(), TlsError> {
        let renewed = certified(&read(chain)?, &read(key)?)?;
        *self.current.0.write().unwrap_or_else(|e| e.into_inner()) = renewed;
        Ok(())
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// The chain and key (PEM) as rustls serves them, once it is known that the
/// key is the first certificate's.
fn certified(chain: &[u8], key: &[u8]) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(chain)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Chain(format!("is not PEM: {e}")))?;
    if chain.is_empty() {
        return Err(TlsError::Chain("holds no PEM certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| TlsError::Key(format!("is not a PEM private key: {e}")))?;
    let certified =
        CertifiedKey::from_der(chain, key, &ring::default_provider()).map_err(|e| match e {
            Error::InconsistentKeys(_) => TlsError::Refused(
                "the private key is not the key of the chain's first certificate".into(),
            ),
            e => TlsError::Refused(e.to_string()),
        })?;
    Ok(Arc::new(certified))
}

/// Connections of a TCP listener once their TLS handshake is done, for
/// `axum::serve`.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Accepts on `tcp` from now on, each handshake in a task of its own.
    pub(crate) fn new(tcp: TcpListener, tls: &ServeTls) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(tls.config.clone());
        let (done, ready) = mpsc::channel(READY);
        let accepting = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    // A connection gone before it was taken: the next.
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::ConnectionAborted
                                | std::io::ErrorKind::ConnectionReset
                                | std::io::ErrorKind::ConnectionRefused
                        ) =>
                    {
                        continue;
                    }
                    Err(e) => {
                        // Out of file descriptors, for example: wait, as
                        // axum's own listener does, rather than spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                let (acceptor, done) = (acceptor.clone(), done.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let _ = done.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            ready,
            local,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accepting task never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
