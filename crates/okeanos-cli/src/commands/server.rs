//! `okeanos journal-server`: the remote journal's server process, its secrets and TLS.

use crate::*;

/// Reads "host-name secret" lines; refuses a file others can read.
fn read_secrets(path: &Path) -> Result<std::collections::HashMap<String, Vec<u8>>, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!("{}: secrets must not be readable by others (chmod 600)", path.display()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once(char::is_whitespace) {
            Some((host, secret)) if !secret.trim().is_empty() => {
                out.insert(host.to_string(), secret.trim().as_bytes().to_vec());
            }
            _ => return Err(format!("{}:{}: expected \"host-name secret\"", path.display(), n + 1)),
        }
    }
    if out.is_empty() {
        return Err(format!("{}: no hosts", path.display()));
    }
    Ok(out)
}

/// A self-signed certificate for the host of `listen` (and 127.0.0.1, localhost), its PEM
/// written to `out`, the key in memory only.
pub(crate) fn self_signed(listen: &str, out: &Path) -> Result<okeanos::remote::transport::ServerTls, String> {
    let host = okeanos::remote::transport::host_of(listen);
    let mut names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    if !names.iter().any(|n| n == host) && host != "0.0.0.0" && host != "::" {
        names.push(host.to_string());
    }
    let c = rcgen::generate_simple_self_signed(names).map_err(|e| format!("--tls-self-signed: {e}"))?;
    std::fs::write(out, c.cert.pem()).map_err(|e| format!("--tls-self-signed {}: {e}", out.display()))?;
    okeanos::remote::transport::server_tls_pem(c.cert.pem().as_bytes(), c.key_pair.serialize_pem().as_bytes()).map_err(|e| format!("--tls-self-signed: {e}"))
}

pub(crate) fn journal_server(listen: &str, dir: PathBuf, secrets: Option<&Path>, no_auth: bool, quota: &str, max_connections: usize, tls: Option<okeanos::remote::transport::ServerTls>) -> Result<ExitCode, String> {
    use std::io::Write;
    let secrets = match (secrets, no_auth) {
        (Some(p), _) => Some(read_secrets(p)?),
        (None, true) => None,
        (None, false) => return Err("give --secrets FILE (or --no-auth to accept every host, for tests on 127.0.0.1)".into()),
    };
    let quota_bytes = parse_size(quota)?;
    if max_connections == 0 {
        return Err("--max-connections must be at least 1".into());
    }
    let tls_note = if tls.is_some() { ", TLS" } else { "" };
    let cfg = okeanos::remote::server::ServerConfig { dir: dir.clone(), secrets, quota_bytes, max_connections, tls };
    let server = okeanos::remote::server::Server::bind(listen, cfg).map_err(|e| format!("listen on {listen} (journals in {}): {e}", dir.display()))?;
    let addr = server.local_addr().map_err(|e| e.to_string())?;
    println!("okeanos journal-server listening on {addr}{tls_note}, journals in {}", dir.display());
    let _ = std::io::stdout().flush();
    stop_on_signal(server.stop_flag(), addr)?;
    server.run();
    eprintln!("okeanos journal-server stopped: {}", server.stats().summary());
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM or SIGINT sets a server's stop flag and wakes its accept loop (a connection to its
/// own address), so that `run` returns and the server ends cleanly.
pub(crate) fn stop_on_signal(stop: std::sync::Arc<std::sync::atomic::AtomicBool>, addr: std::net::SocketAddr) -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT]).map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = std::net::TcpStream::connect(addr);
        }
    });
    Ok(())
}
