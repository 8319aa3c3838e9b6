//! The error of a journal server, which the runtime reaches as a device (`DevId::RemoteLog`
//! and the remote operations of a plan): kept here, beside the devices' own errors, so that a
//! [`super::DeviceError`] can carry it and the journal can decide by its kind whether a failed
//! commit falls back to the local journal (`RemoteError::lets_host_fall_back`). The link
//! itself is `crate::remote::client`, which re-exports it.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    /// Connection refused, reset, closed or timed out: fall back to the local journal.
    #[error("journal server {addr}: {message}")]
    Network { addr: String, message: String },
    /// A newer host took the journal over: stop writing.
    #[error("journal server {addr}: fenced: {message}")]
    Fenced { addr: String, message: String },
    /// The journal's quota is full: checkpoint and trim.
    #[error("journal server {addr}: journal full: {message}")]
    Full { addr: String, message: String },
    /// Authentication failed.
    #[error("journal server {addr}: refused: {message}")]
    Auth { addr: String, message: String },
    /// Any other error the server reported, or a reply that makes no sense.
    #[error("journal server {addr}: {message}")]
    Server { addr: String, message: String },
}

impl RemoteError {
    /// Whether a host whose commit failed with this error may make it durable in its local
    /// journal and go on there (journal/fallback.rs): the server could not be reached, timed
    /// out or failed. A fenced host stops instead (read-only: another host owns the journal),
    /// and so does one whose journal is full (checkpoint and trim first) or whose
    /// authentication failed (a configuration error, not an outage).
    pub fn lets_host_fall_back(&self) -> bool {
        matches!(self, RemoteError::Network { .. } | RemoteError::Server { .. })
    }
}
