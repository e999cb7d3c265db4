//! What etcd's and the transport's errors mean to the store: retryable or
//! not, refused certificates, answers too large.

use fsm_runtime::StoreError;

pub(crate) fn unavailable(e: impl std::fmt::Display, retryable: bool) -> StoreError {
    StoreError::Unavailable {
        message: e.to_string(),
        retryable,
    }
}

/// Whether an etcd error may go away by itself.
pub(crate) fn store_error(e: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    use tonic::Code;
    let retryable = match &e {
        E::GRpcStatus(status) => {
            matches!(
                status.code(),
                Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::Aborted
                    | Code::ResourceExhausted
                    | Code::Unknown
                    | Code::Cancelled
            ) && !certificate_refused(sourced(&e))
        }
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) | E::LeaseKeepAliveError(_) => {
            !certificate_refused(sourced(&e))
        }
        _ => false,
    };
    unavailable(format!("etcd: {}", described(&e)), retryable)
}

/// An etcd error as a person reads it. tonic's status prints the error under
/// it with `Debug` (`source: tonic::transport::Error(Transport,
/// ConnectError(...))`); this says the status's message, then what each error
/// under it says, each once: `tcp connect error: transport error: Connection
/// refused (os error 111)`.
pub(crate) fn described(e: &etcd_client::Error) -> String {
    let etcd_client::Error::GRpcStatus(status) = e else {
        return e.to_string();
    };
    let mut text = match status.message() {
        "" => status.code().description().to_owned(),
        message => message.to_owned(),
    };
    for below in std::iter::successors(std::error::Error::source(status), |e| e.source()) {
        let said = below.to_string();
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

/// `e` as the first of its chain of sources: a gRPC status's own (etcd-client
/// gives none past the status).
pub(crate) fn sourced(e: &etcd_client::Error) -> &(dyn std::error::Error + 'static) {
    match e {
        etcd_client::Error::GRpcStatus(status) => status,
        e => e,
    }
}

/// Whether `e` came of a connection that etcd closed (a broken pipe, a
/// reset): read from its sources, where the I/O error sits under gRPC's.
pub(crate) fn closed_by_etcd(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            )
        })
    })
}

/// Whether rustls refused etcd's certificate (an authority that did not sign
/// it, a name it is not issued to, an expired one), or etcd refused this
/// client's ([`certificate_alert`]): the same connection would be refused
/// again, so retrying cannot help. Read from `e`'s sources, where rustls's
/// error sits inside an I/O error.
#[cfg(feature = "tls")]
fn certificate_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    certificate_alert(e)
        || std::iter::successors(Some(e), |e| e.source()).any(|e| {
            [Some(e), io_inner(e)].into_iter().flatten().any(|e| {
                matches!(
                    e.downcast_ref::<rustls::Error>(),
                    Some(
                        rustls::Error::InvalidCertificate(_)
                            | rustls::Error::NoCertificatesPresented
                    )
                )
            })
        })
}

/// Whether etcd refused this client's certificate, or its want of one, by a
/// TLS alert. Read from `e`'s sources as [`certificate_refused`]; HTTP/2
/// passes an I/O error on as its kind and text only, so the alert may arrive
/// as "received fatal alert: BadCertificate" rather than as rustls's error.
#[cfg(feature = "tls")]
pub(crate) fn certificate_alert(e: &(dyn std::error::Error + 'static)) -> bool {
    use rustls::AlertDescription as Alert;
    // The alerts by which etcd refuses this client's certificate.
    const REFUSALS: [Alert; 6] = [
        Alert::BadCertificate,
        Alert::CertificateRequired,
        Alert::UnknownCA,
        Alert::CertificateExpired,
        Alert::CertificateRevoked,
        Alert::UnsupportedCertificate,
    ];
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        let typed = [Some(e), io_inner(e)].into_iter().flatten().any(|e| {
            matches!(
                e.downcast_ref::<rustls::Error>(),
                Some(rustls::Error::AlertReceived(alert)) if REFUSALS.contains(alert)
            )
        });
        let told = (e.downcast_ref::<std::io::Error>())
            .filter(|io| io.kind() == std::io::ErrorKind::InvalidData)
            .is_some_and(|io| {
                let text = io.to_string();
                let alert = text.strip_prefix("received fatal alert: ");
                alert.is_some_and(|name| REFUSALS.iter().any(|a| format!("{a:?}") == name))
            });
        typed || told
    })
}

/// The error an I/O error `e` carries, if it is one.
#[cfg(feature = "tls")]
fn io_inner<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e (dyn std::error::Error + 'static)> {
    (e.downcast_ref::<std::io::Error>())
        .and_then(|io| io.get_ref())
        .map(|inner| inner as &(dyn std::error::Error + 'static))
}

/// Without TLS no certificate is checked.
#[cfg(not(feature = "tls"))]
fn certificate_refused(_: &(dyn std::error::Error + 'static)) -> bool {
    false
}

/// Without TLS no certificate is asked for.
#[cfg(not(feature = "tls"))]
pub(crate) fn certificate_alert(_: &(dyn std::error::Error + 'static)) -> bool {
    false
}

/// Whether etcd refused a request for its size: past its request limit
/// (`--max-request-bytes`, 1.5 MiB by default: "request is too large"), or past
/// gRPC's limit on what it receives, which is that and 512 KiB ("larger than
/// max"). The same request will never be taken.
pub(crate) fn is_too_large(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    let etcd_client::Error::GRpcStatus(status) = e else {
        return false;
    };
    match status.code() {
        Code::InvalidArgument => status.message().contains("request is too large"),
        Code::ResourceExhausted => status.message().contains("larger than max"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::described;
    use tonic::{Code, Status};

    /// A status with no message says its code in words; one with a message
    /// says it, then each error under it that does not repeat what was said.
    #[test]
    fn an_error_is_described_once_in_words() {
        let bare = etcd_client::Error::GRpcStatus(Status::new(Code::Unavailable, ""));
        assert_eq!(described(&bare), "The service is currently unavailable");

        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let mut status = Status::new(Code::Unavailable, "tcp connect error");
        status.set_source(std::sync::Arc::new(refused));
        let with_source = etcd_client::Error::GRpcStatus(status);
        assert_eq!(described(&with_source), "tcp connect error: refused");

        let said_again = std::io::Error::other("tcp connect error");
        let mut status = Status::new(Code::Unavailable, "tcp connect error");
        status.set_source(std::sync::Arc::new(said_again));
        assert_eq!(
            described(&etcd_client::Error::GRpcStatus(status)),
            "tcp connect error"
        );

        // Not a status: etcd-client's own words.
        let other = etcd_client::Error::InvalidArgs("no key".into());
        assert_eq!(described(&other), other.to_string());
    }
}
