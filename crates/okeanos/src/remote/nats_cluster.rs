//! A local nats-server cluster on 127.0.0.1 for the JetStream tests and the benchmark's
//! `engine:jetstream` target: n servers with JetStream (file storage, `sync_interval: always`:
//! a message is acknowledged only after a quorum fsynced it), each with its own store, client,
//! route and monitoring ports; started, killed, restarted and stopped by its owner. The binary:
//! OKEANOS_NATS_SERVER, or what scripts/install-nats.sh installed, or `nats-server` on PATH.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const NATS_VERSION: &str = "v2.14.9";

/// Where the nats-server binary is, or why there is none.
pub fn nats_server() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("OKEANOS_NATS_SERVER") {
        return Ok(p.into());
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let p = Path::new(&home).join(format!(".cache/okeanos/tools/nats-server-{NATS_VERSION}/nats-server"));
    if p.exists() {
        return Ok(p);
    }
    if let Some(p) = std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|d| d.join("nats-server")).find(|p| p.exists())) {
        return Ok(p);
    }
    Err(format!("nats-server {NATS_VERSION} is not installed (looked at {}, OKEANOS_NATS_SERVER and PATH): run scripts/install-nats.sh (needs Go)", p.display()))
}

/// A port for a server to listen on, below the kernel's ephemeral range (a port the kernel
/// hands out for bind(0) may be handed to an outgoing connection before the server binds it),
/// free now, and never handed out twice by this process (clusters start in parallel tests).
fn free_port() -> std::io::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Each process starts at its own place in 20000..32000, then walks on.
    let base = 20_000 + (std::process::id() % 600) * 20;
    for _ in 0..12_000 {
        let port = (20_000 + (base - 20_000 + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "no free port in 20000..32000"))
}

struct Node {
    name: String,
    client: u16,
    http: u16,
    conf: PathBuf,
    child: Option<Child>,
}

pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    nodes: Vec<Node>,
}

impl Cluster {
    /// Starts `n` servers with their stores under `dir` and waits until JetStream answers on
    /// every one (at most 30 s).
    pub fn start(n: usize, dir: &Path) -> Result<Cluster, String> {
        Cluster::start_with(n, dir, true)
    }

    /// With `sync_always` false the servers keep nats-server's default fsync (every two
    /// minutes): NOT durable, for the benchmark's labelled ablation only.
    pub fn start_with(n: usize, dir: &Path, sync_always: bool) -> Result<Cluster, String> {
        Cluster::start_configured(n, dir, sync_always, "")
    }

    /// With `extra` appended to every server's configuration (authorization, tls blocks).
    pub fn start_configured(n: usize, dir: &Path, sync_always: bool, extra: &str) -> Result<Cluster, String> {
        let bin = nats_server()?;
        let io = |e: std::io::Error| format!("nats cluster in {}: {e}", dir.display());
        let ports: Vec<(u16, u16, u16)> = (0..n).map(|_| Ok::<_, String>((free_port().map_err(io)?, free_port().map_err(io)?, free_port().map_err(io)?))).collect::<Result<_, _>>()?;
        let mut nodes = Vec::new();
        for (i, &(client, http, route)) in ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let routes: Vec<String> = ports.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, p)| format!("nats://127.0.0.1:{}", p.2)).collect();
            let store = dir.join(&name);
            let conf = dir.join(format!("{name}.conf"));
            let mut text = format!("server_name: {name}\nlisten: 127.0.0.1:{client}\nhttp: 127.0.0.1:{http}\njetstream {{\n  store_dir: \"{}\"\n{}}}\n", store.display(), if sync_always { "  sync_interval: always\n" } else { "" });
            text += extra;
            if n > 1 {
                text += &format!("cluster {{\n  name: okeanos-test\n  listen: 127.0.0.1:{route}\n  routes: [{}]\n}}\n", routes.join(", "));
            }
            std::fs::create_dir_all(dir).map_err(io)?;
            std::fs::write(&conf, text).map_err(io)?;
            nodes.push(Node { name, client, http, conf, child: None });
        }
        let mut c = Cluster { dir: dir.to_path_buf(), bin, nodes };
        for i in 0..n {
            c.spawn(i)?;
        }
        c.wait_ready()?;
        Ok(c)
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let node = &mut self.nodes[i];
        let log = std::fs::File::create(self.dir.join(format!("{}.log", node.name))).map_err(|e| e.to_string())?;
        let child = Command::new(&self.bin).arg("-c").arg(&node.conf).stdout(Stdio::null()).stderr(log).spawn().map_err(|e| format!("{}: {e}", self.bin.display()))?;
        node.child = Some(child);
        Ok(())
    }

    /// Every running server's /healthz says ok (JetStream current), within 30 s.
    pub fn wait_ready(&self) -> Result<(), String> {
        let t0 = Instant::now();
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            while !healthz(n.http) {
                if t0.elapsed() > Duration::from_secs(30) {
                    return Err(format!("nats-server {} not ready in 30 s (its log: {})", n.name, self.dir.join(format!("{}.log", n.name)).display()));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    /// The client URLs, comma-separated.
    pub fn urls(&self) -> String {
        self.nodes.iter().map(|n| format!("nats://127.0.0.1:{}", n.client)).collect::<Vec<_>>().join(",")
    }

    pub fn index_of(&self, server_name: &str) -> usize {
        self.nodes.iter().position(|n| n.name == server_name).unwrap_or_else(|| panic!("no server {server_name}"))
    }

    /// SIGKILL.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        assert!(self.nodes[i].child.is_none(), "restart of a running server");
        self.spawn(i)
    }

    pub fn kill_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }

    pub fn restart_all(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            if self.nodes[i].child.is_none() {
                self.spawn(i)?;
            }
        }
        self.wait_ready()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// GET /healthz on 127.0.0.1:`port`: true on 200.
fn healthz(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut r = String::new();
    let _ = s.read_to_string(&mut r);
    r.starts_with("HTTP/1.0 200") || r.starts_with("HTTP/1.1 200")
}
