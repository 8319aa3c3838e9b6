//! The JetStream floor line (`device:jetstream`): no file system and no journal, each record
//! published as one message of whole 4 KiB blocks (as `device:loop` writes it) to a durable R3
//! stream on a 3-node nats-server cluster started on 127.0.0.1 (`sync_interval: always`, as
//! `engine:jetstream`), and each sync waits for its acknowledgement. Streams publish beside
//! each other, so at one stream it is the cost of one acknowledged append and at many what the
//! cluster does with that many messages in flight. A sync through the JetStream placement
//! costs at least one such append.

use super::target::{Env, Measure, Setup, Stream};
use crate::report::{Bytes, DeviceBytes};
use okeanos::remote::jetstream::FloorPublisher;
use okeanos::remote::nats_cluster::Cluster;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BLOCK: usize = 4096;

pub struct StreamEnv {
    publisher: Arc<FloorPublisher>,
    /// Bytes published so far (acknowledged or in flight).
    sent: Arc<AtomicU64>,
    appends: Arc<AtomicU64>,
    // Dropped after the publisher: the cluster, then its stores.
    _cluster: Cluster,
    _tmp: tempfile::TempDir,
}

impl StreamEnv {
    pub fn new(s: &Setup) -> Result<StreamEnv, String> {
        let tmp = tempfile::Builder::new().prefix("okeanos-bench-").tempdir_in(&s.dir).map_err(|e| format!("{}: {e}", s.dir.display()))?;
        let cluster = Cluster::start(3, &tmp.path().join("nats"))?;
        let publisher = FloorPublisher::connect(&cluster.urls(), 3, Duration::from_secs(10)).map_err(|e| e.to_string())?;
        Ok(StreamEnv { publisher: Arc::new(publisher), sent: Arc::default(), appends: Arc::default(), _cluster: cluster, _tmp: tmp })
    }
}

impl Env for StreamEnv {
    fn target(&self) -> String {
        "device:jetstream".into()
    }
    fn mode(&self) -> String {
        "r3-append+ack".into()
    }
    fn open(&self, _name: &str) -> Result<Box<dyn Stream>, String> {
        Ok(Box::new(RawStream { publisher: self.publisher.clone(), sent: self.sent.clone(), appends: self.appends.clone(), pending: Vec::new() }))
    }
    fn measure(&self) -> Result<Measure, String> {
        let sent = self.sent.load(Ordering::Relaxed);
        Ok(Measure {
            bytes: Bytes { payload_bytes: 0, journal_bytes: Some(sent), final_bytes: None, per_kind: Default::default() },
            commits: Some(self.appends.load(Ordering::Relaxed)),
            device: Some(DeviceBytes { source: "messages published".into(), fs_written: 0, journal_written: Some(sent), flushes: None }),
            counters: None,
        })
    }
    fn finish(self: Box<Self>) -> Result<Measure, String> {
        self.measure()
    }
}

struct RawStream {
    publisher: Arc<FloorPublisher>,
    sent: Arc<AtomicU64>,
    appends: Arc<AtomicU64>,
    /// The records appended since the last sync, each padded to whole blocks.
    pending: Vec<u8>,
}

impl Stream for RawStream {
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        let at = self.pending.len();
        self.pending.extend_from_slice(data);
        self.pending.resize(at + data.len().div_ceil(BLOCK).max(1) * BLOCK, 0);
        Ok(())
    }
    fn write_at(&mut self, _off: u64, _data: &[u8]) -> Result<(), String> {
        Err("device:jetstream takes appends only (it is the floor line of synced appends)".into())
    }
    fn read_at(&mut self, _off: u64, _len: usize) -> Result<usize, String> {
        Err("device:jetstream takes appends only (it is the floor line of synced appends)".into())
    }
    fn sync(&mut self, _full: bool) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let m = std::mem::take(&mut self.pending);
        let n = m.len() as u64;
        self.publisher.append(m).map_err(|e| format!("publishing to the stream: {e}"))?;
        self.sent.fetch_add(n, Ordering::Relaxed);
        self.appends.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
