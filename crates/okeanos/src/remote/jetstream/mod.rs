//! The replicated back end of the remote placement: the journal kept in a NATS JetStream
//! stream (issue 13; docs/REMOTE.md, "JetStream"), reached with the official async-nats
//! client. It implements the same [`Link`] as the journal server, so fallback, return and
//! recovery are the remote placement's own.
//!
//! - One stream per file system, `OKJ_<fs uuid hex>`, subjects `<stream>.tx` (transactions)
//!   and `<stream>.fence` (takeovers). File storage, `discard: new` with `max_bytes` (a full
//!   journal is an error, never dropped records), `deny_delete`, R3 unless the user says
//!   otherwise. A mount creates the stream when missing and refuses one whose configuration
//!   is not durable, saying what to change.
//! - A message is one committed transaction, or one part of it above the server's payload
//!   limit; a transaction counts only when all its parts are there. Each carries a message id
//!   (fs, epoch, tid, part) for deduplication, the expected last sequence of the stream (so a
//!   writer whose view is stale — fenced — is refused by the stream itself), and a CRC32C of
//!   its payload. Byte map: docs/FORMAT.md, "JetStream journal messages".
//! - Several appends in flight: each publish's acknowledgement future is kept and awaited in
//!   order; the sync returns when the acknowledgements covering it are in (JetStream
//!   acknowledges after a quorum of replicas stored it; with `sync_interval: always` after
//!   their fsyncs).
//! - Takeover: FENCE with a new epoch and the expected last sequence (retried while other
//!   writers race), then read back. A stale writer's next append gets "wrong last sequence":
//!   [`RemoteError::Fenced`], it stops (read-only) and never falls back.
//! - Trim after a checkpoint: purge the `.tx` subject below the first sequence of the first
//!   transaction still needed; fences older than the last are purged too.
//!
//! The client is async; this link owns a one-worker tokio runtime and blocks on it, so the
//! rest of the engine stays synchronous and the client's connection keeps being served
//! (pings, reconnects) between calls.

use super::client::{RemoteError, ServerJournal};
use super::Link;
use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use async_nats::HeaderMap;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

mod floor;
mod message;

pub use floor::FloorPublisher;

pub use message::{assemble, decode_part, part_headers, Part, MESSAGE_VERSION};
use message::number;

const HEADER_ROOM: usize = 4096;

pub use super::client::JetStreamOptions;

/// Whether `addr` names NATS servers (`nats://`, `tls://`) rather than a journal server.
pub fn is_nats(addr: &str) -> bool {
    addr.starts_with("nats://") || addr.starts_with("tls://")
}

/// The stream of a file system.
pub fn stream_name(fs_uuid: &[u8; 16]) -> String {
    format!("OKJ_{}", fs_uuid.iter().map(|b| format!("{b:02x}")).collect::<String>())
}


/// A host's connection to its JetStream journal.
pub struct JetStreamLink {
    rt: tokio::runtime::Runtime,
    /// For publishing: each try of an acknowledgement has a share of the timeout ([`attempt`]).
    js: jetstream::Context,
    /// For the API (stream info, creation, purges, reads), used through [`Self::api_call`]:
    /// a request is tried again with a longer wait until [`Self::patience`] has passed.
    api: jetstream::Context,
    stream: String,
    addr: String,
    epoch: u64,
    /// The stream's last sequence as this writer knows it: what the next publish expects.
    sent_seq: u64,
    /// First sequence of each held transaction this link knows (for trims).
    first_seq: BTreeMap<u64, u64>,
    /// Appends in flight: (tid, its parts: acknowledgement future, the message kept for a
    /// retry, the sequence it must get).
    pending: VecDeque<(u64, Vec<InFlight>)>,
    /// The acknowledgement timeout (`remote_ack_timeout=`): how long one append may take in
    /// all, retries included.
    timeout: Duration,
    /// How long a request may wait for the cluster to settle ([`JetStreamOptions::settle`]),
    /// at least the acknowledgement timeout: each request until this link has taken the
    /// journal over (its fence), none after ([`Self::patience`]).
    settle: Duration,
    /// Whether this link's fence was acknowledged.
    taken_over: bool,
    journal: ServerJournal,
    max_part: usize,
}

/// One published message awaiting its acknowledgement.
struct InFlight {
    ack: jetstream::context::PublishAckFuture,
    subject: String,
    message: jetstream::message::PublishMessage,
    want: u64,
}

/// How long one try of an acknowledgement may take before the message is published again
/// (same message id: the stream deduplicates): a connection that broke under it (its server
/// was killed) loses the acknowledgement, and the client has reconnected by then.
fn attempt(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(2))
}

/// The waits of successive tries of one API request within `timeout`: the timeout's share of
/// an acknowledgement ([`attempt`]) first, doubling up to [`API_TRY_MOST`], the last try taking
/// what is left. A request lost in a leader change (the old leader never answers it) is sent
/// again soon; an answer that is merely late on a loaded cluster is waited for longer each time,
/// but not so long that a request lost while the cluster recovers holds a mount for the rest of
/// its wait (as it did, 14 s, before the cap).
const API_TRY_MOST: Duration = Duration::from_secs(5);

fn api_tries(timeout: Duration) -> Vec<Duration> {
    let mut tries = Vec::new();
    let (mut left, mut wait) = (timeout, attempt(timeout));
    while !left.is_zero() && tries.len() < 64 {
        let t = if wait * 2 > left { left } else { wait };
        tries.push(t);
        left -= t;
        wait = (wait * 2).min(API_TRY_MOST);
    }
    tries
}

/// The pause before trying again a request refused at once for a reason that passes (the
/// `n`th refusal in a row): 50 ms, doubling to 800 ms, so a recovering cluster is asked a few
/// times a second, not thousands.
fn refusal_pause(n: u32) -> Duration {
    Duration::from_millis(50) * 2u32.pow(n.min(4))
}

/// At most this many tries of one API request, whatever the patience (a bound on the loop
/// beside its deadline).
const API_TRIES_MOST: usize = 1000;

/// Whether an API request's failure may pass by itself: no answer in time, or no server to
/// answer yet (a stream or meta leader being elected).
fn transient(e: &RemoteError) -> bool {
    match e {
        RemoteError::Network { message, .. } => {
            let m = message.to_ascii_lowercase();
            // "JetStream system temporarily unavailable" (503, error 10008): a cluster
            // recovering its meta group after servers came back. "No suitable peers for
            // placement" (10005): servers not yet known to the meta leader (open_stream).
            m.contains("timed out") || m.contains("no responders") || m.contains("broken pipe") || m.contains("disconnected") || m.contains("temporarily unavailable") || m.contains("no suitable peers")
        }
        _ => false,
    }
}

/// `e` with the request it came from and how long it was tried, keeping its kind (a network
/// error still makes the host fall back, a server error still stops it).
fn with_context(e: RemoteError, what: &str, tries: usize, took: Duration) -> RemoteError {
    let note = |m: String| format!("{what}: {m} ({tries} {} over {:.1} s)", if tries == 1 { "try" } else { "tries" }, took.as_secs_f64());
    match e {
        RemoteError::Network { addr, message } => RemoteError::Network { addr, message: note(message) },
        RemoteError::Fenced { addr, message } => RemoteError::Fenced { addr, message: note(message) },
        RemoteError::Full { addr, message } => RemoteError::Full { addr, message: note(message) },
        RemoteError::Auth { addr, message } => RemoteError::Auth { addr, message: note(message) },
        RemoteError::Server { addr, message } => RemoteError::Server { addr, message: note(message) },
    }
}

/// Whether a publish was refused because an earlier try of the same message id is still being
/// stored (JetStream's error 10158, "duplicate message id is in process"): it will be stored or
/// not, and a later try learns which from the stream's deduplication.
fn in_process(e: &jetstream::context::PublishError) -> bool {
    code(e).is_some_and(|c| c == jetstream::ErrorCode::STREAM_DUPLICATE_MESSAGE_CONFLICT)
}

/// Whether a publish was refused because the cluster is recovering (JetStream's error 10008,
/// "JetStream system temporarily unavailable", while servers that came back rejoin): nothing
/// was stored, and the same message may be published again.
fn unavailable(e: &jetstream::context::PublishError) -> bool {
    code(e).is_some_and(|c| c == jetstream::ErrorCode::CLUSTER_NOT_AVAILABLE)
}

fn code(e: &jetstream::context::PublishError) -> Option<jetstream::ErrorCode> {
    std::error::Error::source(e).and_then(|s| s.downcast_ref::<jetstream::Error>()).map(|j| j.error_code())
}

fn net(addr: &str, m: impl std::fmt::Display) -> RemoteError {
    RemoteError::Network { addr: addr.to_string(), message: m.to_string() }
}

fn server(addr: &str, m: impl std::fmt::Display) -> RemoteError {
    RemoteError::Server { addr: addr.to_string(), message: m.to_string() }
}

impl JetStreamLink {
    /// Connects to the servers of `addr` (comma-separated URLs), creates the stream when it is
    /// missing, refuses one that is not durable, and reads the journal's state.
    pub fn connect(addr: &str, fs_uuid: &[u8; 16], epoch: u64, timeout: Duration, o: &JetStreamOptions) -> Result<JetStreamLink, RemoteError> {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("okeanos-nats").enable_all().build().map_err(|e| net(addr, e))?;
        let urls: Vec<String> = addr.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        let name = stream_name(fs_uuid);
        let (js, api) = rt.block_on(async {
            let mut opts = async_nats::ConnectOptions::new().name("okeanos").connection_timeout(timeout).request_timeout(Some(timeout)).max_reconnects(None);
            if let Some(c) = &o.creds {
                opts = opts.credentials_file(c).await.map_err(|e| RemoteError::Auth { addr: addr.into(), message: format!("jetstream_creds={}: {e}", c.display()) })?;
            }
            if let Some(k) = &o.nkey {
                let seed = std::fs::read_to_string(k).map_err(|e| RemoteError::Auth { addr: addr.into(), message: format!("jetstream_nkey={}: {e}", k.display()) })?;
                opts = opts.nkey(seed.trim().to_string());
            }
            if let Some(ca) = &o.tls_ca {
                opts = opts.add_root_certificates(ca.clone()).require_tls(true);
            }
            let servers: Vec<async_nats::ServerAddr> = urls.iter().map(|u| u.parse()).collect::<Result<_, _>>().map_err(|e| net(addr, format!("bad NATS URL: {e}")))?;
            let client = tokio::time::timeout(timeout * 2, opts.connect(servers)).await.map_err(|_| net(addr, "connect timed out"))?.map_err(|e| {
                use async_nats::ConnectErrorKind as K;
                match e.kind() {
                    K::AuthorizationViolation | K::Authentication | K::Tls => RemoteError::Auth { addr: addr.into(), message: format!("{e} (check jetstream_creds=, jetstream_nkey=, jetstream_tls_ca=)") },
                    _ => net(addr, e),
                }
            })?;
            let mut js = jetstream::new(client.clone());
            js.set_timeout(attempt(timeout));
            let mut api = jetstream::new(client);
            api.set_timeout(timeout);
            Ok::<_, RemoteError>((js, api))
        })?;
        let max_payload = rt.block_on(async { js.client().server_info().max_payload });
        let mut link = JetStreamLink {
            rt,
            js,
            api,
            stream: name,
            addr: addr.to_string(),
            epoch,
            sent_seq: 0,
            first_seq: BTreeMap::new(),
            pending: VecDeque::new(),
            timeout,
            settle: timeout.max(o.settle),
            taken_over: false,
            journal: ServerJournal { epoch: 0, first_tid: 1, last_tid: 0, quota_bytes: 0, used_bytes: 0 },
            max_part: max_payload.saturating_sub(HEADER_ROOM).max(64 << 10),
        };
        link.open_stream(o)?;
        Ok(link)
    }

    fn open_stream(&mut self, o: &JetStreamOptions) -> Result<(), RemoteError> {
        let (addr, name) = (self.addr.clone(), self.stream.clone());
        // A busy cluster may take longer than one try to place a new replicated stream: a
        // creation that timed out is looked for again on the next try (it may exist by then)
        // and retried; creating with the same configuration is idempotent.
        let info = self.api_call("stream info", async |api| match api.get_stream(&name).await {
            Ok(mut s) => Ok(s.info().await.map_err(|e| net(&addr, e))?.clone()),
            Err(e) if e.to_string().contains("stream not found") => {
                let cfg = stream::Config {
                    name: name.clone(),
                    subjects: vec![format!("{name}.tx"), format!("{name}.fence")],
                    storage: stream::StorageType::File,
                    discard: stream::DiscardPolicy::New,
                    max_bytes: o.max_bytes as i64,
                    num_replicas: o.replicas,
                    deny_delete: true,
                    allow_direct: true,
                    duplicate_window: Duration::from_secs(120),
                    ..Default::default()
                };
                match api.create_stream(cfg).await {
                    Ok(mut s) => Ok(s.info().await.map_err(|e| net(&addr, e))?.clone()),
                    Err(e) if matches!(e.kind(), jetstream::context::CreateStreamErrorKind::TimedOut) => Err(net(&addr, format!("creating stream {name}: {e}"))),
                    // "No suitable peers for placement" (JetStream error 10005): fewer servers
                    // than replicas are known to the meta leader now, as right after a
                    // cluster starts or a server restarts (seen in CI: "peer offline" at the
                    // first mount after the test's cluster started). Tried again until the
                    // timeout like a network failure; a cluster too small for the replicas
                    // still fails then, with this message.
                    Err(e) if e.to_string().contains("no suitable peers") => Err(net(&addr, format!("creating stream {name}: {e}"))),
                    Err(e) => Err(server(&addr, format!("creating stream {name}: {e}"))),
                }
            }
            Err(e) => Err(net(&addr, e)),
        })?;
        check_durable(&info, o.replicas).map_err(|m| RemoteError::Server { addr: addr.clone(), message: format!("stream {name} is not durable: {m}") })?;
        self.sent_seq = info.state.last_sequence;
        let (epoch, last_tid) = self.marks()?;
        let quota = (info.config.max_bytes.max(0) as u64) / 8 * 7;
        self.journal = ServerJournal { epoch, first_tid: 0, last_tid, quota_bytes: quota, used_bytes: info.state.bytes };
        Ok(())
    }

    /// The last message on `<stream>.<kind>` from the stream's leader.
    fn last_on(&self, kind: &str) -> Result<Option<(u64, HeaderMap, Vec<u8>)>, RemoteError> {
        let subject = format!("{}.{kind}", self.stream);
        self.api_call(&format!("last message on {subject}"), async |api| {
            let s = api.get_stream_no_info(&self.stream).await.map_err(|e| net(&self.addr, e))?;
            match s.get_last_raw_message_by_subject(&subject).await {
                Ok(m) => Ok(Some((m.sequence, m.headers, m.payload.to_vec()))),
                Err(e) if matches!(e.kind(), stream::LastRawMessageErrorKind::NoMessageFound) => Ok(None),
                Err(e) => Err(net(&self.addr, e)),
            }
        })
    }

    fn publish_error(&self, e: jetstream::context::PublishError) -> RemoteError {
        let message = e.to_string();
        match e.kind() {
            PublishErrorKind::WrongLastSequence => RemoteError::Fenced { addr: self.addr.clone(), message: format!("{message}: another host took the journal over") },
            PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe => net(&self.addr, message),
            // No server took the message ("no responders"): the stream has no leader (one is
            // being elected) or the server this host reached does not know it yet. A network
            // failure, not the stream's refusal: a mounted host falls back to its local journal.
            PublishErrorKind::StreamNotFound => net(&self.addr, format!("no server answers for stream {} ({message}): its leader is being elected, or the stream is gone", self.stream)),
            // The cluster recovering (10008) is not the stream's refusal either.
            _ if unavailable(&e) => net(&self.addr, message),
            _ if message.contains("maximum bytes") => RemoteError::Full { addr: self.addr.clone(), message },
            _ => server(&self.addr, message),
        }
    }

    /// Publishes one message expecting the stream's last sequence to be `sent_seq`.
    fn publish(&mut self, kind: &str, headers: HeaderMap, payload: Vec<u8>, id: String) -> Result<InFlight, RemoteError> {
        let expect = self.sent_seq;
        let message = jetstream::message::PublishMessage::build().headers(headers).payload(payload.into()).message_id(id).expected_last_sequence(expect);
        let subject = format!("{}.{kind}", self.stream);
        let ack = self.rt.block_on(self.js.send_publish(subject.clone(), message.clone())).map_err(|e| self.publish_error(e))?;
        self.sent_seq += 1;
        Ok(InFlight { ack, subject, message, want: expect + 1 })
    }

    /// Waits for a message's acknowledgement; a try that times out or loses its connection
    /// publishes the same message again (deduplicated by its id, still bound to its expected
    /// last sequence) until `bound` has passed since `since`: the acknowledgement timeout for an
    /// append, the settling time for a takeover's fence.
    fn await_ack(&self, f: InFlight, since: std::time::Instant, bound: Duration) -> Result<(), RemoteError> {
        let InFlight { mut ack, subject, message, want } = f;
        loop {
            match self.rt.block_on(async { ack.await }) {
                Ok(a) if a.sequence == want => return Ok(()),
                Ok(a) => return Err(server(&self.addr, format!("stored at sequence {} where {want} was expected", a.sequence))),
                // Lost with its connection, no stream leader to answer (an election after the
                // leader died: "no responders"), or an earlier try of the same message still in
                // process (it waits for its replicas), or the cluster still recovering (10008):
                // the same message again, until `bound`.
                Err(e) if (matches!(e.kind(), PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe | PublishErrorKind::StreamNotFound) || in_process(&e) || unavailable(&e)) && since.elapsed() < bound => {
                    if !matches!(e.kind(), PublishErrorKind::TimedOut) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    ack = self.rt.block_on(self.js.send_publish(subject.clone(), message.clone())).map_err(|e| self.publish_error(e))?;
                }
                Err(e) => return Err(self.publish_error(e)),
            }
        }
    }

    /// Every part in the stream, in order: streamed through one ordered consumer when it
    /// delivers every part up to the last one the leader has, else read one request each from
    /// the leader (read-after-write consistent, unlike a direct get from a replica).
    pub fn read_parts(&self) -> Result<Vec<Part>, RemoteError> {
        let addr = self.addr.clone();
        let state = self.api_call("stream info", async |api| {
            let mut s = api.get_stream(&self.stream).await.map_err(|e| net(&addr, e))?;
            Ok(s.info().await.map_err(|e| net(&addr, e))?.state.clone())
        })?;
        if state.messages == 0 {
            return Ok(Vec::new());
        }
        let Some((last_tx, _, _)) = self.last_on("tx")? else { return Ok(Vec::new()) };
        if let Some(parts) = self.stream_parts(state.first_sequence, last_tx)? {
            return Ok(parts);
        }
        self.read_parts_one_by_one(state.first_sequence, state.last_sequence)
    }

    /// The `.tx` parts from sequence `first` to `last` through an ordered consumer: the server
    /// sends them in batches, where a get costs a round trip per message (about 0.2 ms here).
    /// None when it does not deliver them all, in order, each within the acknowledgement
    /// timeout: the consumer lives on one server, which may lag behind the leader, and the
    /// caller then reads them one by one. A part that does not decode is damage either way.
    /// (Public for the tests, which compare both ways of reading.)
    pub fn stream_parts(&self, first: u64, last: u64) -> Result<Option<Vec<Part>>, RemoteError> {
        use async_nats::jetstream::consumer::{pull, DeliverPolicy};
        use futures_util::StreamExt;
        let (addr, name) = (self.addr.clone(), self.stream.clone());
        let wait = self.timeout.max(Duration::from_secs(1));
        self.rt.block_on(async {
            let Ok(s) = self.api.get_stream_no_info(&name).await else { return Ok(None) };
            let config = pull::OrderedConfig { filter_subject: format!("{name}.tx"), deliver_policy: DeliverPolicy::ByStartSequence { start_sequence: first }, ..Default::default() };
            let Ok(consumer) = s.create_consumer(config).await else { return Ok(None) };
            let Ok(mut messages) = consumer.messages().await else { return Ok(None) };
            let mut parts = Vec::new();
            let mut prev = first.saturating_sub(1);
            while prev < last {
                let m = match tokio::time::timeout(wait, messages.next()).await {
                    Ok(Some(Ok(m))) => m,
                    _ => return Ok(None),
                };
                let Ok(info) = m.info() else { return Ok(None) };
                let seq = info.stream_sequence;
                if seq <= prev || seq > last {
                    return Ok(None);
                }
                prev = seq;
                let headers = m.message.headers.clone().unwrap_or_default();
                parts.push(decode_part(seq, &headers, &m.message.payload).map_err(|e| server(&addr, format!("the journal is damaged: {e}")))?);
            }
            Ok(Some(parts))
        })
    }

    /// The `.tx` parts from `first` to `last`, one request to the leader each.
    pub fn read_parts_one_by_one(&self, first: u64, last: u64) -> Result<Vec<Part>, RemoteError> {
        let addr = self.addr.clone();
        let mut parts = Vec::new();
        for seq in first..=last {
            let m = self.api_call(&format!("message {seq}"), async |api| {
                let s = api.get_stream_no_info(&self.stream).await.map_err(|e| net(&addr, e))?;
                match s.get_raw_message(seq).await {
                    Ok(m) => Ok(Some(m)),
                    Err(e) if matches!(e.kind(), stream::LastRawMessageErrorKind::NoMessageFound) => Ok(None),
                    Err(e) => Err(net(&addr, e)),
                }
            })?;
            if let Some(m) = m.filter(|m| m.subject.as_str().ends_with(".tx")) {
                parts.push(decode_part(seq, &m.headers, &m.payload).map_err(|e| server(&addr, format!("the journal is damaged: {e}")))?);
            }
        }
        Ok(parts)
    }
}

/// What makes a stream unfit to hold a journal; what to change.
fn check_durable(info: &stream::Info, replicas: usize) -> Result<(), String> {
    let c = &info.config;
    let mut wrong = Vec::new();
    if c.storage != stream::StorageType::File {
        wrong.push("storage must be file".to_string());
    }
    if c.discard != stream::DiscardPolicy::New {
        wrong.push("discard must be new (old would drop journal records when full)".to_string());
    }
    if c.max_bytes <= 0 {
        wrong.push("max_bytes must be set (the journal's size)".to_string());
    }
    if c.num_replicas < replicas {
        wrong.push(format!("{} replicas, at least {replicas} wanted (or mount with jetstream_replicas={})", c.num_replicas, c.num_replicas));
    }
    if !c.deny_delete {
        wrong.push("deny_delete must be set".to_string());
    }
    if c.deny_purge {
        wrong.push("deny_purge must be off (checkpoints purge)".to_string());
    }
    if c.max_age > Duration::ZERO || c.max_messages > 0 {
        wrong.push("no max_age or max_msgs limit (they would expire journal records)".to_string());
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

impl Link for JetStreamLink {
    fn journal(&self) -> ServerJournal {
        self.journal
    }

    fn send_append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), RemoteError> {
        let chunk = (self.max_part / block_size as usize).max(1) * block_size as usize;
        let count = blocks.len().div_ceil(chunk).max(1) as u32;
        let mut futs = Vec::with_capacity(count as usize);
        let first = self.sent_seq + 1;
        for (i, part) in blocks.chunks(chunk).enumerate() {
            let h = part_headers(tid, i as u32, count, block_size, self.epoch, part);
            let id = format!("{}-{}-{tid}-{i}", self.stream, self.epoch);
            futs.push(self.publish("tx", h, part.to_vec(), id)?);
        }
        self.first_seq.insert(tid, first);
        self.pending.push_back((tid, futs));
        Ok(())
    }

    fn wait_ack(&mut self) -> Result<u64, RemoteError> {
        let (tid, futs) = self.pending.pop_front().ok_or_else(|| server(&self.addr, "no append in flight"))?;
        let since = std::time::Instant::now();
        for f in futs {
            self.await_ack(f, since, self.timeout)?;
        }
        self.journal.last_tid = self.journal.last_tid.max(tid);
        Ok(tid)
    }

    fn trim(&mut self, upto: u64) -> Result<u64, RemoteError> {
        // Below the first sequence of the first transaction still needed (or everything this
        // writer has stored when none is).
        let keep_from = self.first_seq.range(upto + 1..).next().map(|(_, s)| *s).unwrap_or(self.sent_seq + 1);
        let (addr, name) = (self.addr.clone(), self.stream.clone());
        // A purge right after an election may find no leader yet; a purge is idempotent.
        self.api_call("purge", async |api| {
            let s = api.get_stream_no_info(&name).await.map_err(|e| net(&addr, e))?;
            s.purge().filter(format!("{name}.tx")).sequence(keep_from).await.map_err(|e| net(&addr, e))?;
            s.purge().filter(format!("{name}.fence")).keep(1).await.map_err(|e| net(&addr, e))?;
            Ok(())
        })?;
        self.first_seq = self.first_seq.split_off(&(upto + 1));
        self.journal.first_tid = upto + 1;
        Ok(upto + 1)
    }

    fn read_from(&mut self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, RemoteError> {
        let parts = self.read_parts()?;
        let txs = assemble(&parts).map_err(|e| server(&self.addr, format!("the journal is damaged: {e}")))?;
        for t in &txs {
            self.first_seq.insert(t.0, t.3);
        }
        Ok(txs.into_iter().filter(|t| t.0 >= from).map(|(tid, bs, b, _)| (tid, bs, b)).collect())
    }

    fn fence(&mut self, epoch: u64) -> Result<u64, RemoteError> {
        // Retried while other writers race (each try re-reads the stream's last sequence).
        for _ in 0..5 {
            self.open_stream_state()?;
            if epoch <= self.journal.epoch {
                return Err(RemoteError::Fenced { addr: self.addr.clone(), message: format!("epoch {epoch} is not above the journal's {}", self.journal.epoch) });
            }
            let mut h = HeaderMap::new();
            h.insert("Okeanos-Version", MESSAGE_VERSION.to_string().as_str());
            h.insert("Okeanos-Epoch", epoch.to_string().as_str());
            let id = format!("{}-fence-{epoch}", self.stream);
            let f = self.publish("fence", h, Vec::new(), id)?;
            // A mount's takeover: the stream may have been created moments ago, or be electing
            // a leader; it is waited for longer than a sync waits.
            match self.await_ack(f, std::time::Instant::now(), self.patience()) {
                Ok(()) => {
                    self.taken_over = true;
                    self.epoch = epoch;
                    self.journal.epoch = epoch;
                    return Ok(self.journal.last_tid);
                }
                Err(RemoteError::Fenced { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(server(&self.addr, "could not fence: other writers kept appending"))
    }
}

/// What the tests and `okeanos stat` see of a stream.
#[derive(Debug, Clone)]
pub struct StreamReport {
    pub messages: u64,
    pub bytes: u64,
    pub max_bytes: i64,
    pub replicas: usize,
    pub first_sequence: u64,
    pub last_sequence: u64,
    /// The server leading the stream's replicas.
    pub leader: Option<String>,
}

impl JetStreamLink {
    /// How long a request may wait in all: until the journal is taken over (connecting, reading
    /// the stream's state, the fence; a read-only mount's reads), the settling time, as a mount
    /// may find a stream created moments ago or electing its leader; after it, the
    /// acknowledgement timeout, as syncs wait on the request.
    fn patience(&self) -> Duration {
        if self.taken_over { self.timeout } else { self.settle }
    }

    /// One API request (`what` names it in the error), tried again while it fails for a
    /// reason that passes ([`transient`]) until [`Self::patience`] has passed. A try that got
    /// no answer in its wait (a request lost in a leader change) is followed by one that waits
    /// longer ([`api_tries`]); a try refused at once (no responders, "JetStream system
    /// temporarily unavailable" while the meta group recovers) is tried again after a short
    /// pause ([`refusal_pause`]) with the same wait. Bounded by the deadline, not by a count of
    /// tries: refusals come back in microseconds, and a count of them once spent a mount's
    /// whole patience in no time (4 tries in 0.0 s). Only idempotent requests come here: reads,
    /// and creations and purges whose repetition changes nothing.
    fn api_call<T>(&self, what: &str, f: impl AsyncFn(jetstream::Context) -> Result<T, RemoteError>) -> Result<T, RemoteError> {
        let waits = api_tries(self.patience());
        let since = std::time::Instant::now();
        let deadline = since + self.patience();
        let (mut lost, mut refused, mut tries) = (0usize, 0u32, 0usize);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let wait = waits.get(lost).copied().unwrap_or(left).min(left).max(Duration::from_millis(1));
            let mut ctx = self.api.clone();
            ctx.set_timeout(wait);
            let started = std::time::Instant::now();
            tries += 1;
            let e = match self.rt.block_on(f(ctx)) {
                Ok(t) => return Ok(t),
                Err(e) => e,
            };
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !transient(&e) || left.is_zero() || tries >= API_TRIES_MOST {
                return Err(with_context(e, what, tries, since.elapsed()));
            }
            if started.elapsed() >= wait {
                (lost, refused) = (lost + 1, 0);
            } else {
                std::thread::sleep(refusal_pause(refused).min(left));
                refused += 1;
            }
        }
    }

    /// The stream's state and leader, from the servers.
    pub fn report(&self) -> Result<StreamReport, RemoteError> {
        let (addr, name) = (self.addr.clone(), self.stream.clone());
        self.api_call("stream info", async |api| {
            let mut s = api.get_stream(&name).await.map_err(|e| net(&addr, e))?;
            let i = s.info().await.map_err(|e| net(&addr, e))?;
            Ok(StreamReport {
                messages: i.state.messages,
                bytes: i.state.bytes,
                max_bytes: i.config.max_bytes,
                replicas: i.config.num_replicas,
                first_sequence: i.state.first_sequence,
                last_sequence: i.state.last_sequence,
                leader: i.cluster.as_ref().and_then(|c| c.leader.clone()),
            })
        })
    }

    /// Publishes a message as it is given, with no expectation (the tests' way to put damage
    /// into a stream). Returns its sequence.
    #[doc(hidden)]
    pub fn publish_raw(&mut self, kind: &str, headers: HeaderMap, payload: Vec<u8>) -> Result<u64, RemoteError> {
        let subject = format!("{}.{kind}", self.stream);
        let since = std::time::Instant::now();
        loop {
            let message = jetstream::message::PublishMessage::build().headers(headers.clone()).payload(payload.clone().into());
            let r = self.rt.block_on(async {
                let fut = self.js.send_publish(subject.clone(), message).await.map_err(|e| (e.kind(), self.publish_error(e)))?;
                fut.await.map(|a| a.sequence).map_err(|e| (e.kind(), self.publish_error(e)))
            });
            match r {
                Ok(seq) => return Ok(seq),
                // The server this link reached does not know the stream yet (a stream or meta
                // leader being elected after a crash): nothing was stored, so the same message
                // again, until the acknowledgement timeout, as `await_ack` does.
                Err((PublishErrorKind::StreamNotFound, _)) if since.elapsed() < self.timeout => std::thread::sleep(Duration::from_millis(50)),
                Err((_, e)) => return Err(e),
            }
        }
    }

    /// Re-reads the stream's last sequence, epoch and last tid.
    fn open_stream_state(&mut self) -> Result<(), RemoteError> {
        let (addr, name) = (self.addr.clone(), self.stream.clone());
        let state = self.api_call("stream info", async |api| {
            let mut s = api.get_stream(&name).await.map_err(|e| net(&addr, e))?;
            Ok::<_, RemoteError>(s.info().await.map_err(|e| net(&addr, e))?.state.clone())
        })?;
        self.sent_seq = state.last_sequence;
        (self.journal.epoch, self.journal.last_tid) = self.marks()?;
        Ok(())
    }

    /// The journal's epoch (its last fence's; 0 before any) and last tid (its last
    /// transaction part's; 0 before any), from the stream's leader.
    fn marks(&self) -> Result<(u64, u64), RemoteError> {
        let epoch = match self.last_on("fence")? {
            Some((_, h, _)) => number(&h, "Okeanos-Epoch").map_err(|e| server(&self.addr, e))?,
            None => 0,
        };
        let last_tid = match self.last_on("tx")? {
            Some((seq, h, p)) => decode_part(seq, &h, &p).map_err(|e| server(&self.addr, e))?.tid,
            None => 0,
        };
        Ok((epoch, last_tid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_tries_grow_and_fill_the_timeout() {
        for secs in [1u64, 5, 10, 20, 30, 120] {
            let t = Duration::from_secs(secs);
            let tries = api_tries(t);
            assert_eq!(tries.iter().sum::<Duration>(), t, "{secs} s: {tries:?}");
            assert!(tries.len() >= 2, "{secs} s: a lost request is sent again: {tries:?}");
            assert!(tries.windows(2).all(|w| w[1] >= w[0] || w[1] == *tries.last().unwrap()), "{secs} s: {tries:?}");
            assert!(tries[0] <= Duration::from_secs(2), "{secs} s: {tries:?}");
            assert!(tries.iter().all(|t| *t < API_TRY_MOST * 2), "{secs} s: no try waits long for a lost request: {tries:?}");
        }
        assert!(transient(&net("a", "request timed out: deadline has elapsed")));
        assert!(transient(&net("a", "no responders")));
        assert!(transient(&net("a", "JetStream error: JetStream system temporarily unavailable (code 503, error code 10008)")));
        assert!(transient(&net("a", "creating stream OKJ_1: jetstream error: no suitable peers for placement, peer offline (code 400, error code 10005)")));
        assert!(!transient(&server("a", "timed out")), "a server's refusal is not retried");
        // Refusals in a row: a few a second at most once the cluster is slow to recover, and
        // enough of them to outlast a mount's settling time within the bound on tries.
        assert_eq!(refusal_pause(0), Duration::from_millis(50));
        assert_eq!(refusal_pause(10), Duration::from_millis(800));
        let most: Duration = (0..API_TRIES_MOST as u32).map(refusal_pause).sum();
        assert!(most > Duration::from_secs(600), "{most:?}");
        assert!(!transient(&net("a", "stream not found")));
        let e = with_context(net("a", "timed out"), "stream info", 4, Duration::from_secs(30));
        assert!(matches!(&e, RemoteError::Network { message, .. } if message == "stream info: timed out (4 tries over 30.0 s)"), "{e}");
    }
}
