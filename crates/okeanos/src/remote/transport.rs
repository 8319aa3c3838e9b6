//! A connection between a host and its journal server: plain TCP, or TLS (rustls) over it.
//!
//! The server reads a connection's requests on one thread while another sends the replies
//! (each APPEND's ACK only once its sync round is done), so both directions of one connection
//! are used at once. A TLS session is one state machine, so [`Stream`] keeps it behind a lock
//! that is never held across a socket call: a reader takes bytes from the socket without the
//! lock and feeds them to the session under it; a writer encrypts under it and sends under a
//! second lock that keeps the TLS records of concurrent writers in the order they were made
//! (handshake answers and alerts the reader produces go through the same path). The handshake
//! completes before a [`Stream`] is handed out, within the socket's timeouts.
//!
//! Configuration: the server presents a certificate chain and key from PEM files
//! ([`server_tls`]); a host trusts the certificates of a PEM file (a CA, or the server's own
//! self-signed certificate) and checks the server's name against them ([`client_tls`]).
//! Authentication of hosts stays the HMAC challenge of HELLO; TLS adds confidentiality and
//! authenticates the server.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A server's TLS configuration.
pub type ServerTls = Arc<rustls::ServerConfig>;

/// What a host needs to speak TLS to its server.
#[derive(Clone, Debug)]
pub struct ClientTls {
    pub config: Arc<rustls::ClientConfig>,
    /// The name the server's certificate must carry.
    pub server_name: ServerName<'static>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server's TLS configuration from a PEM certificate chain file and a PEM private key file.
pub fn server_tls(cert: &Path, key: &Path) -> Result<ServerTls, String> {
    let c = std::fs::read(cert).map_err(|e| format!("{}: {e}", cert.display()))?;
    let k = std::fs::read(key).map_err(|e| format!("{}: {e}", key.display()))?;
    server_tls_pem(&c, &k).map_err(|e| format!("{} with {}: {e}", cert.display(), key.display()))
}

/// A server's TLS configuration from PEM text.
pub fn server_tls_pem(cert: &[u8], key: &[u8]) -> Result<ServerTls, String> {
    let certs = CertificateDer::pem_slice_iter(cert).collect::<Result<Vec<_>, _>>().map_err(|e| format!("certificate: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate in it".into());
    }
    let private = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("key: {e}"))?;
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, private)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(cfg))
}

/// A host's TLS configuration: trust the certificates in PEM file `ca`, expect `name` (a DNS
/// name or an IP address) in the server's certificate.
pub fn client_tls(ca: &Path, name: &str) -> Result<ClientTls, String> {
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca)
        .map_err(|e| format!("{}: {e}", ca.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", ca.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", ca.display()));
    }
    for c in certs {
        roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
    }
    let server_name = ServerName::try_from(name.to_string()).map_err(|e| format!("{name:?} is not a server name: {e}"))?;
    let cfg = rustls::ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?.with_root_certificates(roots).with_no_client_auth();
    Ok(ClientTls { config: Arc::new(cfg), server_name })
}

/// The host part of `host:port` (`[v6]:port` too), the default name to check.
pub fn host_of(addr: &str) -> &str {
    let h = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    h.trim_start_matches('[').trim_end_matches(']')
}

struct Session {
    conn: rustls::Connection,
    /// Bytes read from the socket not yet given to the session.
    raw: Vec<u8>,
}

struct Tls {
    session: Mutex<Session>,
    /// Held while sending, so TLS records reach the socket in the order they were made.
    send: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

/// One connection; clones share it (one for each direction).
pub struct Stream {
    tcp: TcpStream,
    tls: Option<Arc<Tls>>,
}

impl Stream {
    pub fn plain(tcp: TcpStream) -> Stream {
        Stream { tcp, tls: None }
    }

    /// TLS as a client; returns once the handshake is done (bounded by the socket's timeouts).
    pub fn client(tcp: TcpStream, tls: &ClientTls) -> io::Result<Stream> {
        let conn = rustls::ClientConnection::new(tls.config.clone(), tls.server_name.clone()).map_err(tls_error)?;
        Stream::handshake(tcp, conn.into())
    }

    /// TLS as a server; returns once the handshake is done (bounded by the socket's timeouts).
    pub fn server(tcp: TcpStream, cfg: Arc<rustls::ServerConfig>) -> io::Result<Stream> {
        let conn = rustls::ServerConnection::new(cfg).map_err(tls_error)?;
        Stream::handshake(tcp, conn.into())
    }

    fn handshake(mut tcp: TcpStream, mut conn: rustls::Connection) -> io::Result<Stream> {
        conn.set_buffer_limit(None);
        while conn.is_handshaking() {
            match conn.complete_io(&mut tcp) {
                Ok((0, 0)) if conn.is_handshaking() => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "TLS: the peer closed the connection during the handshake")),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "TLS: the handshake timed out (does the peer speak TLS?)"));
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("TLS handshake: {e}"))),
                Err(e) => return Err(e),
            }
        }
        let tls = Tls { session: Mutex::new(Session { conn, raw: Vec::new() }), send: Mutex::new(()) };
        Ok(Stream { tcp, tls: Some(Arc::new(tls)) })
    }

    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(Stream { tcp: self.tcp.try_clone()?, tls: self.tls.clone() })
    }

    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        self.tcp.read_timeout()
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(t)
    }

    pub fn shutdown(&self) {
        let _ = self.tcp.shutdown(std::net::Shutdown::Both);
    }

    /// Sends whatever the session has to send (under the send lock).
    fn flush_tls(&self, t: &Tls) -> io::Result<()> {
        let _order = lock(&t.send);
        let mut out = Vec::new();
        {
            let mut s = lock(&t.session);
            while s.conn.wants_write() {
                s.conn.write_tls(&mut out)?;
            }
        }
        (&self.tcp).write_all(&out)
    }

    fn read_tls(&self, t: &Tls, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut s = lock(&t.session);
                match s.conn.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                // No plaintext: give the session more of what the socket delivered (only
                // while its plaintext buffer is empty, so it never fills).
                if !s.raw.is_empty() {
                    let raw = std::mem::take(&mut s.raw);
                    let took = s.conn.read_tls(&mut &raw[..])?;
                    s.raw = raw;
                    s.raw.drain(..took);
                    s.conn.process_new_packets().map_err(tls_error)?;
                    let answer = s.conn.wants_write();
                    drop(s);
                    if answer {
                        self.flush_tls(t)?;
                    }
                    continue;
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = (&self.tcp).read(&mut chunk)?;
            let mut s = lock(&t.session);
            if n == 0 {
                // The peer closed: let the session tell a clean close from a truncation.
                s.conn.read_tls(&mut &[][..])?;
                s.conn.process_new_packets().map_err(tls_error)?;
                return match s.conn.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    Err(e) => Err(e),
                };
            }
            s.raw.extend_from_slice(&chunk[..n]);
        }
    }

    fn write_tls(&self, t: &Tls, data: &[u8]) -> io::Result<()> {
        let _order = lock(&t.send);
        let mut out = Vec::with_capacity(data.len() + 256);
        {
            let mut s = lock(&t.session);
            let mut rest = data;
            while !rest.is_empty() {
                let n = s.conn.writer().write(rest)?;
                if n == 0 {
                    return Err(io::Error::new(io::ErrorKind::WriteZero, "TLS: the session takes no more data"));
                }
                rest = &rest[n..];
                while s.conn.wants_write() {
                    s.conn.write_tls(&mut out)?;
                }
            }
        }
        (&self.tcp).write_all(&out)
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.tls {
            None => (&self.tcp).read(buf),
            Some(t) => self.read_tls(t, buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match &self.tls {
            None => (&self.tcp).write_all(data),
            Some(t) => self.write_tls(t, data),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_host_part_of_an_address() {
        assert_eq!(host_of("127.0.0.1:7070"), "127.0.0.1");
        assert_eq!(host_of("journal.example:7070"), "journal.example");
        assert_eq!(host_of("[::1]:7070"), "::1");
        assert_eq!(host_of("noport"), "noport");
    }
}
