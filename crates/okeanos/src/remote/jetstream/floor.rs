//! The stream's own rate (`okeanos bench`'s `device:jetstream`, the floor line of the
//! JetStream placement, as `device:loop` is the disk's): one message per sync, published to a
//! durable stream and awaited, nothing else. No journal, no epochs, no expected sequences: each
//! caller's message is in flight beside the others', so with many callers it shows what the
//! cluster does with many messages in flight (its own batching of the quorum's fsyncs), and
//! with one, what one acknowledged append costs.

use super::{check_durable, net, server};
use crate::remote::client::RemoteError;
use async_nats::jetstream::{self, stream};
use std::time::Duration;

/// A publisher to one stream of its own (`OKFLOOR`, subject `OKFLOOR.m`), shared by threads.
pub struct FloorPublisher {
    rt: tokio::runtime::Runtime,
    js: jetstream::Context,
    addr: String,
}

const STREAM: &str = "OKFLOOR";

impl FloorPublisher {
    /// Connects to `addr` (comma-separated URLs) and creates the stream with `replicas`
    /// replicas on file storage, refusing one that is not durable as the placement does.
    pub fn connect(addr: &str, replicas: usize, timeout: Duration) -> Result<FloorPublisher, RemoteError> {
        // Callers block on the runtime from their own threads; two workers serve the client.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("okeanos-floor").enable_all().build().map_err(|e| net(addr, e))?;
        let servers: Vec<async_nats::ServerAddr> = addr.split(',').map(|s| s.trim()).filter(|s| !s.is_empty()).map(|u| u.parse()).collect::<Result<_, _>>().map_err(|e| net(addr, format!("bad NATS URL: {e}")))?;
        let js = rt.block_on(async {
            let client = async_nats::ConnectOptions::new().name("okeanos-floor").connection_timeout(timeout).connect(servers).await.map_err(|e| net(addr, e))?;
            let mut js = jetstream::new(client);
            js.set_timeout(timeout);
            let cfg = stream::Config { name: STREAM.into(), subjects: vec![format!("{STREAM}.m")], storage: stream::StorageType::File, num_replicas: replicas, discard: stream::DiscardPolicy::New, max_bytes: 1 << 30, deny_delete: true, ..Default::default() };
            // A cluster started moments ago may still be electing its meta leader: creation
            // times out or finds no responders. Creating with the same configuration is
            // idempotent, so a try that timed out (and may have created it) is tried again,
            // for 30 s at most, as the placement's own `open_stream` does.
            let t0 = std::time::Instant::now();
            let mut tries = 0u32;
            let mut s = loop {
                tries += 1;
                match js.get_or_create_stream(cfg.clone()).await {
                    Ok(s) => break s,
                    Err(e) if t0.elapsed() > Duration::from_secs(30) => return Err(server(addr, format!("creating stream {STREAM}: {e} ({tries} tries in {:.1} s)", t0.elapsed().as_secs_f64()))),
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            };
            let info = s.info().await.map_err(|e| net(addr, e))?.clone();
            check_durable(&info, replicas).map_err(|m| server(addr, format!("stream {STREAM} is not durable: {m}")))?;
            Ok::<_, RemoteError>(js)
        })?;
        let p = FloorPublisher { rt, js, addr: addr.into() };
        // A stream created moments ago may not be known yet to the server this client reached
        // ("no stream found"): publish until one message is acknowledged, for 30 s at most.
        let t0 = std::time::Instant::now();
        loop {
            match p.append(Vec::new()) {
                Ok(()) => return Ok(p),
                Err(e) if t0.elapsed() > Duration::from_secs(30) => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Publishes `payload` and waits for its acknowledgement (a quorum stored it).
    pub fn append(&self, payload: Vec<u8>) -> Result<(), RemoteError> {
        self.rt.block_on(async {
            let ack = self.js.publish(format!("{STREAM}.m"), payload.into()).await.map_err(|e| net(&self.addr, e))?;
            ack.await.map_err(|e| net(&self.addr, e))?;
            Ok(())
        })
    }
}
