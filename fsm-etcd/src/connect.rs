//! Connecting: where etcd is, the user and TLS it takes, the store's options,
//! and reconnecting a store to another etcd or with new credentials.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use fsm_runtime::{Publisher, StoreError};

use crate::error::{certificate_alert, closed_by_etcd, sourced, store_error, unavailable};
use crate::session::{keep_alive, live_key, put_live};
use crate::{EtcdStore, Inner, WATCH_CAPACITY, kv_client, wait_on};

/// Options of an [`EtcdStore`] before it connects.
#[derive(Debug, Clone)]
pub struct EtcdBuilder {
    /// Where etcd is, and the user and TLS it takes.
    access: EtcdAccess,
    prefix: String,
    timeout: Duration,
    lease_ttl: Duration,
    keep: Option<u64>,
}

/// Where an etcd is and how it lets a client in: its endpoints, and the user
/// and the TLS it asks for. One value for every connection of a process: a
/// store's ([`EtcdAccess::store`]), and a client of the process's own beside
/// its stores ([`EtcdAccess::connect_options`]: a control plane's documents).
///
/// ```no_run
/// use fsm_etcd::{EtcdAccess, EtcdUser};
///
/// let etcd = EtcdAccess::new(["etcd-0.example.com:2379"])
///     .user(EtcdUser::new("mizar", std::env::var("ETCD_PASSWORD")?));
/// let vpcs = etcd.store("/mizar/vpc/").lease_ttl(std::time::Duration::from_secs(2)).connect()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdAccess {
    endpoints: Vec<String>,
    user: Option<EtcdUser>,
    #[cfg(feature = "tls")]
    tls: Option<EtcdTls>,
}

impl EtcdAccess {
    /// The etcd at `endpoints` (`host:port`), in plain text, without a user.
    pub fn new<E: AsRef<str>>(endpoints: impl IntoIterator<Item = E>) -> Self {
        EtcdAccess {
            endpoints: endpoints
                .into_iter()
                .map(|e| e.as_ref().to_owned())
                .collect(),
            user: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// As `user` ([`EtcdBuilder::user`]).
    pub fn user(mut self, user: EtcdUser) -> Self {
        self.user = Some(user);
        self
    }

    /// Over TLS ([`EtcdBuilder::tls`]; feature `tls`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: EtcdTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// A store of the objects under `prefix` on this etcd, reached this way,
    /// to connect once its other options are set.
    pub fn store(&self, prefix: &str) -> EtcdBuilder {
        EtcdBuilder {
            access: self.clone(),
            prefix: prefix.to_owned(),
            timeout: Duration::from_secs(5),
            lease_ttl: Duration::from_secs(10),
            keep: None,
        }
    }

    /// etcd-client's options that reach this etcd as the stores do (the user,
    /// its token renewed when it expires; TLS), for a client of one's own:
    /// add timeouts as the client needs. TLS material that does not read is
    /// refused here ([`EtcdTls::check`]), as a store's connection refuses it.
    pub fn connect_options(&self) -> Result<ConnectOptions, StoreError> {
        let options = ConnectOptions::new();
        #[cfg(feature = "tls")]
        let options = with_tls(options, self.tls.as_ref())?;
        Ok(with_user(options, self.user.as_ref()))
    }
}

impl EtcdAccess {
    /// Who connects where and how, for the errors of connecting: "etcd at
    /// ENDPOINTS over TLS as user `NAME`".
    fn at(&self) -> String {
        let mut at = format!("etcd at {}", self.endpoints.join(","));
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            at.push_str(" over TLS");
        }
        if let Some(user) = &self.user {
            at.push_str(&format!(" as user `{}`", user.name));
        }
        at
    }

    /// What an error of `doing` ("connecting to") this etcd says: where and
    /// how it connected, and what etcd or the connection answered.
    fn refused(&self, doing: &'static str) -> impl Fn(etcd_client::Error) -> StoreError + use<> {
        let at = self.at();
        #[cfg(feature = "tls")]
        let without_certificate = self.tls.as_ref().is_some_and(|tls| tls.identity.is_none());
        #[cfg(not(feature = "tls"))]
        let without_certificate = false;
        move |e| {
            // etcd's `--client-cert-auth` closes a connection that shows no
            // certificate, and the client learns only that the connection
            // broke: say what may be missing.
            let sources = sourced(&e);
            let hint =
                if without_certificate && (closed_by_etcd(sources) || certificate_alert(sources)) {
                    "; an etcd run with --client-cert-auth closes a connection that gives no \
                 client certificate: give one (--etcd-cert and --etcd-key, or EtcdTls::identity)"
                } else {
                    ""
                };
            match store_error(e) {
                StoreError::Unavailable { message, retryable } => StoreError::Unavailable {
                    message: format!("{doing} {at}: {message}{hint}"),
                    retryable,
                },
                other => other,
            }
        }
    }

    /// A store's client of this etcd, each request bounded by `timeout`.
    /// TLS material that does not read is refused before connecting.
    async fn client(&self, timeout: Duration, doing: &'static str) -> Result<Client, StoreError> {
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(timeout);
        #[cfg(feature = "tls")]
        let options = with_tls(options, self.tls.as_ref())?;
        let options = with_user(options, self.user.as_ref());
        Client::connect(&self.endpoints, Some(options))
            .await
            .map_err(self.refused(doing))
    }
}

/// `options` with `user`, if any: authenticated when connecting, and again
/// whenever etcd says the token expired (`--auth-token-ttl`, 5 minutes by
/// default).
fn with_user(options: ConnectOptions, user: Option<&EtcdUser>) -> ConnectOptions {
    match user {
        Some(EtcdUser { name, password }) => options
            .with_user(name.clone(), password.clone())
            .with_auto_token_refresh(true),
        None => options,
    }
}

/// `options` over `tls`, if any, once its PEM reads.
#[cfg(feature = "tls")]
fn with_tls(options: ConnectOptions, tls: Option<&EtcdTls>) -> Result<ConnectOptions, StoreError> {
    match tls {
        Some(tls) => {
            tls.check()
                .map_err(|e| unavailable(format!("etcd over TLS: {e}"), false))?;
            Ok(options.with_tls(tls.options()))
        }
        None => Ok(options),
    }
}

/// An etcd user and its password, for an etcd with authentication on
/// (`etcdctl auth enable`): the store authenticates as it when it connects, and
/// again whenever etcd says its token expired.
///
/// Its `Debug` shows the name, never the password.
///
/// ```
/// let user = fsm_etcd::EtcdUser::new("fsm-serve", "s3cret");
/// assert_eq!(format!("{user:?}"), r#"EtcdUser { name: "fsm-serve", password: <hidden> }"#);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdUser {
    name: String,
    password: String,
}

impl EtcdUser {
    /// The user `name`, with `password`.
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> Self {
        EtcdUser {
            name: name.into(),
            password: password.into(),
        }
    }

    /// The user's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EtcdUser {{ name: {:?}, password: <hidden> }}",
            self.name
        )
    }
}

/// TLS to etcd (feature `tls`): the certificate authority that signed etcd's
/// certificate, and for an etcd run with `--client-cert-auth`, this client's
/// certificate and key, all PEM. With it the store connects over `https`
/// (an endpoint given as `host:port` is read as `https://host:port`), and
/// refuses an etcd whose certificate that authority did not sign, or that is
/// not issued to the endpoint's host (or to [`domain`](Self::domain)).
///
/// Its `Debug` shows what it holds, never the key.
///
/// ```no_run
/// use fsm_etcd::{EtcdStore, EtcdTls, EtcdUser};
///
/// let tls = EtcdTls::new(std::fs::read("/etc/etcd/ca.pem")?).identity(
///     std::fs::read("/etc/fsm/client.pem")?,
///     std::fs::read("/etc/fsm/client-key.pem")?,
/// );
/// let store = EtcdStore::builder(["etcd-0.example.com:2379"], "/sabakan/machines/")
///     .tls(tls)
///     .user(EtcdUser::new("sabakan", std::env::var("ETCD_PASSWORD")?))
///     .connect()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "tls")]
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdTls {
    ca: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain: Option<String>,
}

#[cfg(feature = "tls")]
impl EtcdTls {
    /// TLS that trusts the certificates `ca` (PEM, one or several) signed.
    pub fn new(ca: impl Into<Vec<u8>>) -> Self {
        EtcdTls {
            ca: ca.into(),
            identity: None,
            domain: None,
        }
    }

    /// This client's certificate and its private key (PEM), which an etcd run
    /// with `--client-cert-auth` asks for. (Without a user, such an etcd takes
    /// the certificate's common name as the user's.)
    pub fn identity(mut self, certificate: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.identity = Some((certificate.into(), key.into()));
        self
    }

    /// The name etcd's certificate must be issued to, when it is not the
    /// endpoints' host (endpoints given as addresses, a certificate issued to
    /// a name).
    pub fn domain(mut self, name: impl Into<String>) -> Self {
        self.domain = Some(name.into());
        self
    }

    /// Whether the PEM given reads: the authority holds at least one
    /// certificate, and the identity (if any) a certificate and a private
    /// key. [`EtcdBuilder::connect`] checks it before it connects, so that
    /// a file of something else is named as such, not found at the first
    /// handshake (or taken for an etcd that does not answer).
    pub fn check(&self) -> Result<(), EtcdTlsError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certificates =
            |pem: &[u8]| match CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>() {
                Ok(found) if found.is_empty() => Err("holds no PEM certificate".to_owned()),
                Ok(_) => Ok(()),
                Err(e) => Err(format!("is not PEM: {e}")),
            };
        certificates(&self.ca).map_err(EtcdTlsError::Authority)?;
        if let Some((certificate, key)) = &self.identity {
            certificates(certificate).map_err(EtcdTlsError::Certificate)?;
            PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| EtcdTlsError::Key(format!("is not a PEM private key: {e}")))?;
        }
        Ok(())
    }

    /// TLS from PEM files: the authority `ca`, and the client's certificate
    /// and key when `identity` is given, each read and [checked](Self::check).
    /// The error names the file at fault, and what is wrong with it.
    pub fn from_files(
        ca: &std::path::Path,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Result<EtcdTls, EtcdTlsFileError> {
        let read = |path: &std::path::Path, part: fn(String) -> EtcdTlsError| {
            std::fs::read(path).map_err(|e| EtcdTlsFileError {
                path: path.to_owned(),
                problem: part(format!("could not be read: {e}")),
            })
        };
        let mut tls = EtcdTls::new(read(ca, EtcdTlsError::Authority)?);
        if let Some((certificate, key)) = identity {
            tls = tls.identity(
                read(certificate, EtcdTlsError::Certificate)?,
                read(key, EtcdTlsError::Key)?,
            );
        }
        tls.check().map_err(|problem| {
            let path = match (&problem, identity) {
                (EtcdTlsError::Certificate(_), Some((certificate, _))) => certificate,
                (EtcdTlsError::Key(_), Some((_, key))) => key,
                _ => ca,
            };
            EtcdTlsFileError {
                path: path.to_owned(),
                problem,
            }
        })?;
        Ok(tls)
    }

    fn options(&self) -> etcd_client::TlsOptions {
        let mut options = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(&self.ca));
        if let Some((certificate, key)) = &self.identity {
            options = options.identity(etcd_client::Identity::from_pem(certificate, key));
        }
        if let Some(domain) = &self.domain {
            options = options.domain_name(domain.clone());
        }
        options
    }
}

/// What [`EtcdTls::check`] found wrong, and in which part.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdTlsError {
    /// The authority ([`EtcdTls::new`]'s PEM).
    #[error("the authority (CA) {0}")]
    Authority(String),
    /// The client's certificate ([`EtcdTls::identity`]'s first PEM).
    #[error("the client certificate {0}")]
    Certificate(String),
    /// The client's private key ([`EtcdTls::identity`]'s second PEM).
    #[error("the client key {0}")]
    Key(String),
}

/// What [`EtcdTls::from_files`] found wrong: the file, and what is wrong
/// with it (it could not be read, or it is not what its part needs).
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {problem}", .path.display())]
pub struct EtcdTlsFileError {
    /// The file.
    pub path: std::path::PathBuf,
    /// What is wrong, in which part.
    pub problem: EtcdTlsError,
}

/// How the fsm tools' command lines say to reach an etcd that checks who
/// connects, in the flags `fsm serve` and the operators' examples share (after
/// etcdctl's): `--etcd-cacert` (etcd's authority: over TLS), `--etcd-cert`
/// and `--etcd-key` (a client certificate, for etcd's `--client-cert-auth`),
/// `--etcd-user` (its password from the environment variable
/// [`PASSWORD_VARIABLE`](Self::PASSWORD_VARIABLE), or from the file
/// `--etcd-password-file` names, read at each [`access`](Self::access); never
/// from the command line, where other users could read it). Feature `tls`;
/// with the feature `clap`, a command line takes them as they are
/// (`#[command(flatten)]`), a certificate refused without its key or the
/// authority:
///
/// ```
/// # #[cfg(feature = "clap")] {
/// use clap::Parser;
/// use fsm_etcd::EtcdFlags;
///
/// #[derive(Parser)]
/// struct Args {
///     #[arg(long, default_value = "127.0.0.1:2379")]
///     etcd: String,
///     #[command(flatten)]
///     access: EtcdFlags,
/// }
///
/// let args = Args::parse_from(["serve", "--etcd-cacert", "ca.pem", "--etcd-user", "ops"]);
/// assert_eq!(args.access.args(), ["--etcd-cacert", "ca.pem", "--etcd-user", "ops"]);
/// assert!(Args::try_parse_from(["serve", "--etcd-cert", "client.pem"]).is_err());
/// assert!(Args::try_parse_from(["serve", "--etcd-password-file", "secret"]).is_err());
/// # }
/// ```
///
/// ```
/// use fsm_etcd::{EtcdAccess, EtcdFlags, EtcdFlagError};
///
/// let none = EtcdFlags::default();
/// assert_eq!(none.access(["127.0.0.1:2379"])?, EtcdAccess::new(["127.0.0.1:2379"]));
///
/// let half = EtcdFlags { cert: Some("client.pem".into()), ..EtcdFlags::default() };
/// assert_eq!(half.access(["127.0.0.1:2379"]), Err(EtcdFlagError::Identity));
/// # Ok::<(), EtcdFlagError>(())
/// ```
#[cfg(feature = "tls")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct EtcdFlags {
    /// The certificate authority (PEM) that signed etcd's certificate: connect
    /// to etcd over TLS, and only to an etcd whose certificate it signed.
    #[cfg_attr(
        feature = "clap",
        arg(long = "etcd-cacert", id = "etcd_cacert", value_name = "FILE")
    )]
    pub cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM), for an etcd run with `--client-cert-auth`;
    /// with `--etcd-key` and `--etcd-cacert`.
    #[cfg_attr(
        feature = "clap",
        arg(long = "etcd-cert", id = "etcd_cert", value_name = "FILE",
            requires_all = ["etcd_key", "etcd_cacert"])
    )]
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM); with `--etcd-cert`.
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "etcd-key",
            id = "etcd_key",
            value_name = "FILE",
            requires = "etcd_cert"
        )
    )]
    pub key: Option<std::path::PathBuf>,
    /// The etcd user to authenticate as, its password read from the
    /// environment variable `FSM_ETCD_PASSWORD` (or `--etcd-password-file`),
    /// never from the command line, where other users could read it.
    #[cfg_attr(
        feature = "clap",
        arg(long = "etcd-user", id = "etcd_user", value_name = "NAME")
    )]
    pub user: Option<String>,
    /// A file holding `--etcd-user`'s password (a trailing line break is not
    /// part of it), in place of `FSM_ETCD_PASSWORD`: a mounted secret, read
    /// again each time the access is (`fsm serve` on SIGHUP), so that a
    /// changed password is taken up without a restart.
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "etcd-password-file",
            id = "etcd_password_file",
            value_name = "FILE",
            requires = "etcd_user"
        )
    )]
    pub password_file: Option<std::path::PathBuf>,
}

#[cfg(feature = "tls")]
impl EtcdFlags {
    /// The environment variable `--etcd-user`'s password is read from.
    pub const PASSWORD_VARIABLE: &'static str = "FSM_ETCD_PASSWORD";

    /// The access to the etcd at `endpoints` these flags give: the TLS files
    /// read and [checked](EtcdTls::check), the password read from its file or
    /// the environment. The error names the flag, and the file at fault.
    pub fn access<E: AsRef<str>>(
        &self,
        endpoints: impl IntoIterator<Item = E>,
    ) -> Result<EtcdAccess, EtcdFlagError> {
        let mut access = EtcdAccess::new(endpoints);
        let identity = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            (None, None) => None,
            _ => return Err(EtcdFlagError::Identity),
        };
        match (&self.cacert, identity) {
            (Some(ca), identity) => {
                let tls = EtcdTls::from_files(ca, identity).map_err(|file| {
                    let flag = match file.problem {
                        EtcdTlsError::Certificate(_) => "--etcd-cert",
                        EtcdTlsError::Key(_) => "--etcd-key",
                        _ => "--etcd-cacert",
                    };
                    EtcdFlagError::File { flag, file }
                })?;
                access = access.tls(tls);
            }
            (None, Some(_)) => return Err(EtcdFlagError::Identity),
            (None, None) => {}
        }
        match (&self.user, &self.password_file) {
            (Some(name), Some(file)) => {
                let read =
                    std::fs::read_to_string(file).map_err(|e| EtcdFlagError::PasswordFile {
                        path: file.clone(),
                        problem: e.to_string(),
                    })?;
                let password = read.strip_suffix('\n').unwrap_or(&read);
                let password = password.strip_suffix('\r').unwrap_or(password);
                if password.is_empty() {
                    return Err(EtcdFlagError::PasswordFile {
                        path: file.clone(),
                        problem: "it is empty".into(),
                    });
                }
                access = access.user(EtcdUser::new(name, password));
            }
            (Some(name), None) => {
                let password = std::env::var(Self::PASSWORD_VARIABLE).map_err(|_| {
                    EtcdFlagError::Password {
                        user: name.clone(),
                        variable: Self::PASSWORD_VARIABLE,
                    }
                })?;
                access = access.user(EtcdUser::new(name, password));
            }
            (None, Some(_)) => return Err(EtcdFlagError::PasswordFileWithoutUser),
            (None, None) => {}
        }
        Ok(access)
    }

    /// The flags again, for a process one starts to reach the same etcd the
    /// same way (its password goes by the environment it inherits).
    pub fn args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        for (flag, file) in [
            ("--etcd-cacert", &self.cacert),
            ("--etcd-cert", &self.cert),
            ("--etcd-key", &self.key),
        ] {
            if let Some(file) = file {
                args.extend([flag.into(), file.into()]);
            }
        }
        if let Some(user) = &self.user {
            args.extend(["--etcd-user".into(), user.into()]);
        }
        if let Some(file) = &self.password_file {
            args.extend(["--etcd-password-file".into(), file.into()]);
        }
        args
    }
}

/// Why [`EtcdFlags::access`] refused the flags.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdFlagError {
    /// A TLS file does not read, or is not what its flag says.
    #[error("{flag} {file}")]
    File {
        /// The flag that named the file.
        flag: &'static str,
        /// The file, and what is wrong with it.
        file: EtcdTlsFileError,
    },
    /// A client certificate without its key (or the other way round), or
    /// without the authority.
    #[error("--etcd-cert and --etcd-key go together, and with --etcd-cacert")]
    Identity,
    /// `--etcd-user` without its password in the environment.
    #[error(
        "--etcd-user {user}: set its password in the environment variable {variable}, or give --etcd-password-file"
    )]
    Password {
        /// The user named.
        user: String,
        /// The variable that was not set.
        variable: &'static str,
    },
    /// `--etcd-password-file` names a file that does not read, or is empty.
    #[error("--etcd-password-file {}: {problem}", .path.display())]
    PasswordFile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// `--etcd-password-file` without `--etcd-user`.
    #[error("--etcd-password-file is the password of --etcd-user, which is not given")]
    PasswordFileWithoutUser,
}

#[cfg(feature = "tls")]
impl std::fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_bytes", &self.ca.len())
            .field(
                "identity",
                &self.identity.as_ref().map(|_| "<certificate and key>"),
            )
            .field("domain", &self.domain)
            .finish()
    }
}

impl EtcdBuilder {
    /// How long one request may take before it is [`StoreError::Unavailable`]
    /// (default 5 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long after this process is gone (or cut off from etcd) its actions in
    /// flight show as abandoned, for a healer anywhere to roll back (default 10 s,
    /// at least 1 s).
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// Keeps only the last `entries` entries of each history (at least one):
    /// each write deletes, in its own transaction, the entries older than
    /// that, so that a long-lived object's history does not grow without end
    /// in etcd. Histories are kept whole by default. A history cut this way no
    /// longer starts with the creation, so
    /// [`check_history`](fsm_runtime::check_history) no longer applies to it.
    /// (etcd keeps each key's old revisions until it compacts them: run it with
    /// `--auto-compaction-retention`, or compact it, so that what is deleted
    /// frees its space.)
    pub fn keep_history(mut self, entries: usize) -> Self {
        self.keep = Some(u64::try_from(entries.max(1)).unwrap_or(u64::MAX));
        self
    }

    /// Authenticates as `user`, for an etcd with authentication on.
    pub fn user(mut self, user: EtcdUser) -> Self {
        self.access = self.access.user(user);
        self
    }

    /// Connects over TLS (feature `tls`): see [`EtcdTls`]. An etcd whose
    /// certificate the store refuses (signed by another authority, issued to
    /// another name, expired) is [`StoreError::Unavailable`] with `retryable:
    /// false`: the same connection would be refused again; so is an etcd that
    /// refuses the store's certificate, or its want of one, by a TLS alert.
    /// Without a certificate the refusal says that etcd may want one
    /// (`--client-cert-auth`); at times etcd closes the connection before its
    /// alert reaches the client, which then learns only that the connection
    /// broke: that stays retryable. PEM that does not read
    /// ([`EtcdTls::check`]) is refused before connecting, not retryable.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: EtcdTls) -> Self {
        self.access = self.access.tls(tls);
        self
    }

    /// Connects: fails with [`StoreError::Unavailable`] when no endpoint
    /// answers, when TLS fails (etcd's certificate not signed by the
    /// authority, or etcd asking for a client certificate this store has
    /// not), and when etcd refuses the user.
    pub fn connect(self) -> Result<EtcdStore, StoreError> {
        EtcdStore::open(self)
    }
}

impl EtcdStore {
    /// Connects to etcd at `endpoints` (`host:port`) and keeps the objects under
    /// `prefix` (one prefix per machine: `"/sabakan/machines/"`), with the default
    /// options.
    pub fn connect<E: AsRef<str>>(
        endpoints: impl IntoIterator<Item = E>,
        prefix: &str,
    ) -> Result<Self, StoreError> {
        Self::builder(endpoints, prefix).connect()
    }

    /// A store to connect once its options are set.
    pub fn builder<E: AsRef<str>>(
        endpoints: impl IntoIterator<Item = E>,
        prefix: &str,
    ) -> EtcdBuilder {
        EtcdAccess::new(endpoints).store(prefix)
    }

    fn open(options: EtcdBuilder) -> Result<Self, StoreError> {
        let EtcdBuilder {
            access,
            prefix,
            timeout,
            lease_ttl,
            keep,
        } = options;
        // One worker: it only hands requests to the connection and answers back,
        // and with two, each call's hand-offs crossed between them, a thread
        // woken through the kernel more per call (BENCHMARKS.md). Async callers'
        // calls wait on the runtime's blocking threads, not on its worker.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fsm-etcd")
            .enable_all()
            .build()
            .map_err(|e| unavailable(e, false))?;
        let ttl = lease_ttl.as_secs().max(1) as i64;
        let (client, lease) = runtime.block_on(async {
            let client = access.client(timeout, "connecting to").await?;
            // The first requests: where a refused certificate or user shows.
            let first = async {
                let lease = client.lease_client().grant(ttl, None).await?.id();
                put_live(&client, &prefix, lease).await?;
                Ok(lease)
            };
            let lease = first.await.map_err(access.refused("connecting to"))?;
            Ok::<_, StoreError>((client, lease))
        })?;
        let publisher = Arc::new(Publisher::new(WATCH_CAPACITY));
        let lease = Arc::new(AtomicI64::new(lease));
        let client = tokio::sync::watch::Sender::new(client);
        runtime.spawn(keep_alive(
            client.subscribe(),
            prefix.clone(),
            ttl,
            lease.clone(),
        ));
        let codec = Arc::new(OnceLock::new());
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                client,
                prefix,
                timeout,
                publisher,
                fed: std::sync::Mutex::new(false),
                kept: Default::default(),
                floor: Default::default(),
                lease,
                ttl,
                codec,
                keep,
            }),
        })
    }

    /// Connects to etcd again, as `access` says, and makes every later request
    /// on that connection: renewed TLS files (a client certificate about to
    /// expire, a new authority) or another user, while the store runs. The new
    /// connection is tried first (a read of this process's session key), and
    /// only once it answers does it replace the one in use, so a refused
    /// access leaves the store as it was. This process's session (its lease)
    /// goes on, kept alive from then on on the new connection; the watch that
    /// feeds the store's watchers is opened again on it from the revision
    /// after the last write it saw under the prefix, so no event is lost or
    /// repeated. (Should etcd have compacted past that revision meanwhile,
    /// as after quiet hours on the prefix with `--auto-compaction-retention`,
    /// the watch goes on from the oldest revision etcd kept, as after any
    /// watch that breaks: with no gap when nothing under the prefix was
    /// written in between, else the watchers are told of it,
    /// [`Lagged::Gap`](fsm_runtime::Lagged).) Requests already under way end
    /// on the connection they began on.
    ///
    /// Fails with [`StoreError::Unavailable`], as [`EtcdBuilder::connect`]
    /// does, saying where it reconnected and how.
    pub fn reconnect(&self, access: &EtcdAccess) -> Result<(), StoreError> {
        let (access, timeout) = (access.clone(), self.inner.timeout);
        let live = live_key(&self.inner.prefix, self.inner.lease.load(Ordering::Acquire));
        let runtime = self.inner.runtime.as_ref().expect("running until dropped");
        let connected = wait_on(runtime, async move {
            let client = access.client(timeout, "reconnecting to").await?;
            (kv_client(&client).get(live, None).await)
                .map_err(access.refused("reconnecting to"))?;
            Ok::<_, StoreError>(client)
        })
        .unwrap_or_else(|| Err(unavailable("etcd: the store's runtime stopped", false)))?;
        self.inner.client.send_replace(connected);
        tracing::info!(prefix = %self.inner.prefix, "reconnected to etcd");
        Ok(())
    }
}
