//! Opening a remote journal at mount (docs/REMOTE.md): connect and authenticate, take the
//! journal over with a new epoch (recorded in the local journal superblock before the FENCE,
//! so a crashed mount never reuses it), and read the server's log back into memory, where
//! recovery's shared scan verifies every transaction's checksums and tid sequence.

use super::Devices;
use crate::device::{Device, MemDevice};
use crate::format::journal::{jfeature, JournalSuperblock, RemoteState};
use crate::format::Superblock;
use crate::ids::Tid;
use crate::error::{FsError, FsResult};
use crate::journal::placement::{LogRegion, RecoveryStart};
use crate::options::MountOptions;
use crate::remote::client::{ClientConfig, RemoteError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A remote journal, connected and taken over.
pub struct Opened {
    pub epoch: u64,
    /// Journal blocks the server's quota holds.
    pub capacity: u64,
    /// The server's log, for recovery (none when it holds nothing).
    pub fetched: Option<RecoveryStart>,
    /// How long reading it back took (recovery's scan pass includes it, as the ring's scan
    /// includes its device reads).
    pub fetch_ns: u64,
}

fn host_name() -> String {
    let mut b = [0u8; 256];
    // SAFETY: gethostname writes at most b.len() bytes into the buffer we own.
    if unsafe { libc::gethostname(b.as_mut_ptr().cast(), b.len()) } != 0 {
        return "localhost".into();
    }
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn refused(e: RemoteError) -> FsError {
    match e {
        RemoteError::Network { .. } | RemoteError::Server { .. } => FsError::Io(format!("{e}; the journal is on that server, so the file system cannot be mounted without it")),
        e => FsError::Invalid(e.to_string()),
    }
}

/// How this mount reaches its server: the address (a mount option or the one mkfs recorded),
/// this host's name and secret, the epoch recorded locally, the acknowledgement timeout.
fn client_config(sb: &Superblock, jsb: &JournalSuperblock, opts: &MountOptions) -> FsResult<ClientConfig> {
    let record = sb.remote.as_ref().expect("a file system with a remote journal");
    let addr = opts.journal_server.clone().unwrap_or_else(|| record.server.clone());
    let tls = match &opts.remote_tls_ca {
        None => None,
        Some(ca) => {
            let name = opts.remote_tls_name.clone().unwrap_or_else(|| crate::remote::transport::host_of(&addr).to_string());
            Some(crate::remote::transport::client_tls(ca, &name).map_err(|e| FsError::Invalid(format!("option remote_tls_ca: {e}")))?)
        }
    };
    Ok(ClientConfig {
        addr,
        host_name: opts.remote_host.clone().unwrap_or_else(host_name),
        secret: opts.remote_secret.clone().unwrap_or_default(),
        fs_uuid: sb.uuid,
        epoch: jsb.remote.epoch,
        timeout: opts.remote_ack_timeout,
        tls,
        jetstream: crate::remote::jetstream::JetStreamOptions {
            creds: opts.jetstream_creds.clone(),
            nkey: opts.jetstream_nkey.clone(),
            tls_ca: opts.jetstream_tls_ca.clone(),
            replicas: opts.jetstream_replicas,
            // The stream holds what the local journal (its fallback) holds.
            max_bytes: jsb.total_blocks * sb.block_size as u64,
            // A mount waits for the cluster to settle ([`reconnector`] does not).
            settle: crate::remote::client::MOUNT_SETTLE,
        },
    })
}

/// Connects to the journal server of `sb`. A read-write mount takes the journal over (FENCE
/// with a new epoch, after `record` made it durable locally) and keeps the connection in
/// `devs.link`; a read-only one only reads. The server's log is read back into
/// `devs.remote_log` (transactions up to `upto` when the host had fallen back).
/// `now_ns` is the mount's monotonic clock (virtual in the simulator): the fetch is timed on it.
pub fn open(sb: &Superblock, jsb: &JournalSuperblock, opts: &MountOptions, devs: &mut Devices, now_ns: &dyn Fn() -> u64, mut record: impl FnMut(RemoteState) -> FsResult<()>) -> FsResult<Opened> {
    let mut client = crate::remote::connect(client_config(sb, jsb, opts)?, opts.remote_connector.as_ref()).map_err(refused)?;
    let bs = sb.block_size as u64;
    let capacity = client.journal().quota_bytes / bs;
    let mut epoch = jsb.remote.epoch;
    if !opts.read_only {
        epoch = client.journal().epoch.max(jsb.remote.epoch) + 1;
        record(RemoteState { epoch, ..jsb.remote })?;
        client.fence(epoch).map_err(refused)?;
    }
    let t0 = now_ns();
    let mut txs = client.read_from(0).map_err(refused)?;
    let fetch_ns = now_ns().saturating_sub(t0);
    if jsb.remote.local {
        // Sent but never acknowledged before the fallback: the local journal has them.
        txs.retain(|t| Tid::new(t.0) <= jsb.remote.upto);
    }
    let fetched = if txs.is_empty() {
        None
    } else {
        if let Some(t) = txs.iter().find(|t| t.1 as u64 != bs) {
            return Err(FsError::Corrupt(format!("the journal server holds transaction {} in {}-byte blocks, the file system has {bs}", t.0, t.1)));
        }
        let blocks: u64 = txs.iter().map(|t| t.2.len() as u64 / bs).sum();
        let region = LogRegion::remote(blocks);
        let mut image = vec![0u8; (region.total * bs) as usize];
        let mut at = bs as usize;
        for (_, _, b) in &txs {
            image[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        devs.remote_log = Some(Arc::new(MemDevice::from_bytes(image).named("journal server log")) as Arc<dyn Device>);
        Some(RecoveryStart { region, pos: region.first, tid: Tid::new(txs[0].0), multiwrite: jsb.features & jfeature::MULTIWRITE != 0, tid_bound: Tid::new(txs[txs.len() - 1].0 + 1), interleaved: None, pipeline: 0 })
    };
    devs.link = Some(Arc::new(Mutex::new(client)));
    devs.remote_read_only = opts.read_only;
    Ok(Opened { epoch, capacity, fetched, fetch_ns })
}

/// Returns a host that had fallen back to the server, once its local journal is empty
/// (recovered and clean): connect, record a new epoch, FENCE, TRIM everything the server still
/// holds (it is all older than `next_tid` and checkpointed), then record that transactions go
/// to the server again. Each local record is durable before the step after it. An error leaves
/// the host in its local journal.
pub fn reopen(sb: &Superblock, jsb: &JournalSuperblock, opts: &MountOptions, devs: &mut Devices, next_tid: Tid, mut record: impl FnMut(RemoteState) -> FsResult<()>) -> FsResult<Opened> {
    assert!(jsb.remote.local && jsb.is_clean(), "only an empty local journal returns to the server");
    let mut client = crate::remote::connect(client_config(sb, jsb, opts)?, opts.remote_connector.as_ref()).map_err(refused)?;
    let epoch = client.journal().epoch.max(jsb.remote.epoch) + 1;
    record(RemoteState { epoch, ..jsb.remote })?;
    client.fence(epoch).map_err(refused)?;
    client.trim((next_tid - 1).get()).map_err(refused)?;
    record(RemoteState { local: false, epoch, upto: Tid::ZERO })?;
    let capacity = client.journal().quota_bytes / sb.block_size as u64;
    devs.link = Some(Arc::new(Mutex::new(client)));
    Ok(Opened { epoch, capacity, fetched: None, fetch_ns: 0 })
}

/// Connects anew with a given epoch: what a host that fell back uses to return while mounted.
pub fn reconnector(sb: &Superblock, jsb: &JournalSuperblock, opts: &MountOptions) -> FsResult<Arc<crate::remote::ReconnectFn>> {
    let mut cfg = client_config(sb, jsb, opts)?;
    // Syncs wait on a return: it takes no longer than an acknowledgement may.
    cfg.jetstream.settle = Duration::ZERO;
    let connector = opts.remote_connector.clone();
    Ok(Arc::new(move |epoch| crate::remote::connect(ClientConfig { epoch, ..cfg.clone() }, connector.as_ref())))
}
