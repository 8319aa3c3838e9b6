//! A real 3-node nats-server cluster on 127.0.0.1, started and stopped by the tests
//! (JetStream, file storage, `sync_interval: always`). The binary comes from
//! scripts/install-nats.sh (run by the test command when missing), or OKEANOS_NATS_SERVER.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const NATS_VERSION: &str = "v2.14.9";

pub fn nats_server() -> PathBuf {
    if let Ok(p) = std::env::var("OKEANOS_NATS_SERVER") {
        return p.into();
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let p = Path::new(&home).join(format!(".cache/okeanos/tools/nats-server-{NATS_VERSION}/nats-server"));
    assert!(p.exists(), "nats-server {NATS_VERSION} is not installed at {}: run scripts/install-nats.sh (needs Go), or set OKEANOS_NATS_SERVER", p.display());
    p
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Node {
    name: String,
    client: u16,
    http: u16,
    route: u16,
    conf: PathBuf,
    child: Option<Child>,
}

pub struct Cluster {
    _dir: tempfile::TempDir,
    nodes: Vec<Node>,
}

impl Cluster {
    /// Starts `n` servers and waits until JetStream answers on every one (bounded).
    pub fn start(n: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16, u16)> = (0..n).map(|_| (free_port(), free_port(), free_port())).collect();
        let mut nodes = Vec::new();
        for (i, &(client, http, route)) in ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let routes: Vec<String> = ports.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, p)| format!("nats://127.0.0.1:{}", p.2)).collect();
            let store = dir.path().join(&name);
            let conf = dir.path().join(format!("{name}.conf"));
            let mut text = format!("server_name: {name}\nlisten: 127.0.0.1:{client}\nhttp: 127.0.0.1:{http}\njetstream {{\n  store_dir: \"{}\"\n  sync_interval: always\n}}\n", store.display());
            if n > 1 {
                text += &format!("cluster {{\n  name: okeanos-test\n  listen: 127.0.0.1:{route}\n  routes: [{}]\n}}\n", routes.join(", "));
            }
            std::fs::write(&conf, text).unwrap();
            nodes.push(Node { name, client, http, route, conf, child: None });
        }
        let mut c = Cluster { _dir: dir, nodes };
        for i in 0..n {
            c.spawn(i);
        }
        c.wait_ready();
        c
    }

    fn spawn(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let child = Command::new(nats_server()).arg("-c").arg(&node.conf).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        node.child = Some(child);
    }

    /// Every running server's /healthz says ok (JetStream current), within 30 s.
    pub fn wait_ready(&self) {
        let t0 = Instant::now();
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            loop {
                if healthz(n.http) {
                    break;
                }
                assert!(t0.elapsed() < Duration::from_secs(30), "nats-server {} not ready in 30 s", n.name);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
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

    pub fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "restart of a running server");
        self.spawn(i);
    }

    pub fn kill_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }

    pub fn restart_all(&mut self) {
        for i in 0..self.nodes.len() {
            if self.nodes[i].child.is_none() {
                self.spawn(i);
            }
        }
        self.wait_ready();
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
