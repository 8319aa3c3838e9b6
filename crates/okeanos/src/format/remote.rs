//! The remote-journal wire protocol (docs/FORMAT.md, "Remote journal protocol"): frames between
//! a host and `okeanos journal-server`. Pure: bytes in, messages out; every length is bounded
//! before anything is allocated, every frame is checksummed, and a malformed frame is an error
//! value, never a panic.
//!
//! A connection opens with the server's CHALLENGE (a nonce); the host answers HELLO with an
//! HMAC-SHA256 of the nonce and its identity under its secret; the server answers HELLO_OK with
//! the journal's state. Then the host sends APPEND (one committed transaction's journal blocks;
//! several may be in flight), TRIM (after a checkpoint), READ (recovery) and FENCE (take over
//! with a new epoch); each request carries an id that its reply echoes.

use super::{FormatError, Le};

pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"OKJR");
pub const PROTOCOL_VERSION: u16 = 1;
/// Frame header bytes.
pub const HEADER: usize = 24;
/// The largest payload a peer accepts (a transaction of up to 16 MiB of 4 KiB blocks and its
/// header fit easily; anything larger is refused before it is read).
pub const MAX_PAYLOAD: usize = 64 << 20;
/// Secrets and messages are short.
const MAX_TEXT: usize = 4096;

/// Frame types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Challenge = 1,
    Hello = 2,
    HelloOk = 3,
    Append = 4,
    Ack = 5,
    Trim = 6,
    TrimOk = 7,
    Read = 8,
    Tx = 9,
    ReadEnd = 10,
    Fence = 11,
    FenceOk = 12,
    Error = 13,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        Some(match b {
            1 => Challenge,
            2 => Hello,
            3 => HelloOk,
            4 => Append,
            5 => Ack,
            6 => Trim,
            7 => TrimOk,
            8 => Read,
            9 => Tx,
            10 => ReadEnd,
            11 => Fence,
            12 => FenceOk,
            13 => Error,
            _ => return None,
        })
    }
}

/// Error codes of an ERROR frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    /// The frame could not be decoded; the server closes the connection.
    BadFrame = 1,
    /// Authentication failed or the host is unknown.
    Auth = 2,
    /// A newer epoch took the journal over: the host must stop writing (read-only).
    Fenced = 3,
    /// The journal's quota is full: checkpoint, trim, and try again.
    Full = 4,
    /// An APPEND out of order (not the next tid, or a tid already held with other contents).
    Order = 5,
    /// The server failed to store the request (its disk): the host falls back.
    Server = 6,
    /// A request before HELLO, or a second HELLO.
    Protocol = 7,
}

impl ErrorCode {
    pub fn from_u16(v: u16) -> Option<ErrorCode> {
        use ErrorCode::*;
        Some(match v {
            1 => BadFrame,
            2 => Auth,
            3 => Fenced,
            4 => Full,
            5 => Order,
            6 => Server,
            7 => Protocol,
            _ => return None,
        })
    }
}

/// Identity of a journal on the server: the host and the file system whose journal it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JournalId {
    pub host: [u8; 16],
    pub fs_uuid: [u8; 16],
}

/// A decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    Challenge { nonce: [u8; 32] },
    Hello { id: JournalId, host_name: String, epoch: u64, proof: [u8; 32] },
    /// The journal's state: transactions `first_tid..=last_tid` are held (none when
    /// `last_tid < first_tid`); `epoch` is the current one.
    HelloOk { epoch: u64, first_tid: u64, last_tid: u64, quota_bytes: u64, used_bytes: u64 },
    /// One committed transaction: its journal blocks in log order, each `block_size` bytes.
    Append { tid: u64, epoch: u64, block_size: u32, blocks: Vec<u8> },
    Ack { tid: u64 },
    /// Every transaction up to and including `upto` may be dropped.
    Trim { upto: u64, epoch: u64 },
    TrimOk { first_tid: u64 },
    Read { from: u64 },
    Tx { tid: u64, block_size: u32, blocks: Vec<u8> },
    ReadEnd { last_tid: u64 },
    Fence { epoch: u64 },
    FenceOk { epoch: u64, last_tid: u64 },
    Error { code: u16, message: String },
}

impl Msg {
    pub fn kind(&self) -> Kind {
        match self {
            Msg::Challenge { .. } => Kind::Challenge,
            Msg::Hello { .. } => Kind::Hello,
            Msg::HelloOk { .. } => Kind::HelloOk,
            Msg::Append { .. } => Kind::Append,
            Msg::Ack { .. } => Kind::Ack,
            Msg::Trim { .. } => Kind::Trim,
            Msg::TrimOk { .. } => Kind::TrimOk,
            Msg::Read { .. } => Kind::Read,
            Msg::Tx { .. } => Kind::Tx,
            Msg::ReadEnd { .. } => Kind::ReadEnd,
            Msg::Fence { .. } => Kind::Fence,
            Msg::FenceOk { .. } => Kind::FenceOk,
            Msg::Error { .. } => Kind::Error,
        }
    }

    pub fn error(code: ErrorCode, message: impl Into<String>) -> Msg {
        let mut message: String = message.into();
        message.truncate(MAX_TEXT);
        Msg::Error { code: code as u16, message }
    }

    fn payload(&self) -> Vec<u8> {
        let mut p = Vec::new();
        let u64s = |p: &mut Vec<u8>, v: &[u64]| v.iter().for_each(|x| p.extend_from_slice(&x.to_le_bytes()));
        match self {
            Msg::Challenge { nonce } => p.extend_from_slice(nonce),
            Msg::Hello { id, host_name, epoch, proof } => {
                p.extend_from_slice(&id.host);
                p.extend_from_slice(&id.fs_uuid);
                u64s(&mut p, &[*epoch]);
                p.extend_from_slice(proof);
                text(&mut p, host_name);
            }
            Msg::HelloOk { epoch, first_tid, last_tid, quota_bytes, used_bytes } => u64s(&mut p, &[*epoch, *first_tid, *last_tid, *quota_bytes, *used_bytes]),
            Msg::Append { tid, epoch, block_size, blocks } => {
                u64s(&mut p, &[*tid, *epoch]);
                p.extend_from_slice(&block_size.to_le_bytes());
                p.extend_from_slice(blocks);
            }
            Msg::Ack { tid } => u64s(&mut p, &[*tid]),
            Msg::Trim { upto, epoch } => u64s(&mut p, &[*upto, *epoch]),
            Msg::TrimOk { first_tid } => u64s(&mut p, &[*first_tid]),
            Msg::Read { from } => u64s(&mut p, &[*from]),
            Msg::Tx { tid, block_size, blocks } => {
                u64s(&mut p, &[*tid]);
                p.extend_from_slice(&block_size.to_le_bytes());
                p.extend_from_slice(blocks);
            }
            Msg::ReadEnd { last_tid } => u64s(&mut p, &[*last_tid]),
            Msg::Fence { epoch } => u64s(&mut p, &[*epoch]),
            Msg::FenceOk { epoch, last_tid } => u64s(&mut p, &[*epoch, *last_tid]),
            Msg::Error { code, message } => {
                p.extend_from_slice(&code.to_le_bytes());
                text(&mut p, message);
            }
        }
        p
    }

    /// The whole frame: header and payload.
    pub fn encode(&self, request_id: u64) -> Vec<u8> {
        let payload = self.payload();
        assert!(payload.len() <= MAX_PAYLOAD, "a frame within the protocol's limit");
        let mut f = vec![0u8; HEADER];
        Le::put_u32(&mut f, 0, FRAME_MAGIC);
        f[4..6].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        f[6] = self.kind() as u8;
        Le::put_u64(&mut f, 8, request_id);
        Le::put_u32(&mut f, 16, payload.len() as u32);
        f.extend_from_slice(&payload);
        let crc = frame_crc(&f);
        Le::put_u32(&mut f, 20, crc);
        f
    }
}

fn text(p: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(MAX_TEXT)];
    p.extend_from_slice(&(b.len() as u16).to_le_bytes());
    p.extend_from_slice(b);
}

/// CRC32C over the header (its CRC field as zero) and the payload.
fn frame_crc(frame: &[u8]) -> u32 {
    let mut h = frame[..20].to_vec();
    h.extend_from_slice(&[0; 4]);
    let c = crc32c::crc32c(&h);
    crc32c::crc32c_append(c, &frame[HEADER..])
}

/// A decoded header: what the payload will be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub request_id: u64,
    pub len: usize,
}

fn bad(msg: impl Into<String>) -> FormatError {
    super::invalid("remote frame", msg)
}

/// Checks a frame header; the payload length is bounded before the caller reads it.
pub fn decode_header(h: &[u8]) -> Result<Header, FormatError> {
    super::need("remote frame header", h, HEADER)?;
    let magic = Le::u32(h, 0);
    if magic != FRAME_MAGIC {
        return Err(FormatError::BadMagic { what: "remote frame", found: magic as u64, expected: FRAME_MAGIC as u64 });
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != PROTOCOL_VERSION {
        return Err(FormatError::Unsupported { what: "remote frame", version: version as u32, features: 0 });
    }
    let len = Le::u32(h, 16) as usize;
    if len > MAX_PAYLOAD {
        return Err(bad(format!("payload of {len} bytes is over the limit of {MAX_PAYLOAD}")));
    }
    Ok(Header { kind: h[6], request_id: Le::u64(h, 8), len })
}

/// Decodes a whole frame (header and exactly its payload).
pub fn decode(frame: &[u8]) -> Result<(u64, Msg), FormatError> {
    let h = decode_header(frame)?;
    if frame.len() != HEADER + h.len {
        return Err(bad(format!("frame of {} bytes, header says {}", frame.len(), HEADER + h.len)));
    }
    let (stored, computed) = (Le::u32(frame, 20), frame_crc(frame));
    if stored != computed {
        return Err(FormatError::BadChecksum { what: "remote frame", stored, computed });
    }
    let kind = Kind::from_u8(h.kind).ok_or_else(|| bad(format!("unknown frame type {}", h.kind)))?;
    let mut r = Reader { b: &frame[HEADER..], at: 0 };
    let m = match kind {
        Kind::Challenge => Msg::Challenge { nonce: r.array()? },
        Kind::Hello => {
            let id = JournalId { host: r.array()?, fs_uuid: r.array()? };
            let epoch = r.u64()?;
            let proof = r.array()?;
            Msg::Hello { id, epoch, proof, host_name: r.text()? }
        }
        Kind::HelloOk => Msg::HelloOk { epoch: r.u64()?, first_tid: r.u64()?, last_tid: r.u64()?, quota_bytes: r.u64()?, used_bytes: r.u64()? },
        Kind::Append => {
            let (tid, epoch) = (r.u64()?, r.u64()?);
            let (block_size, blocks) = r.blocks()?;
            Msg::Append { tid, epoch, block_size, blocks }
        }
        Kind::Ack => Msg::Ack { tid: r.u64()? },
        Kind::Trim => Msg::Trim { upto: r.u64()?, epoch: r.u64()? },
        Kind::TrimOk => Msg::TrimOk { first_tid: r.u64()? },
        Kind::Read => Msg::Read { from: r.u64()? },
        Kind::Tx => {
            let tid = r.u64()?;
            let (block_size, blocks) = r.blocks()?;
            Msg::Tx { tid, block_size, blocks }
        }
        Kind::ReadEnd => Msg::ReadEnd { last_tid: r.u64()? },
        Kind::Fence => Msg::Fence { epoch: r.u64()? },
        Kind::FenceOk => Msg::FenceOk { epoch: r.u64()?, last_tid: r.u64()? },
        Kind::Error => Msg::Error { code: r.u16()?, message: r.text()? },
    };
    if r.at != r.b.len() {
        return Err(bad(format!("{} bytes after the message", r.b.len() - r.at)));
    }
    Ok((h.request_id, m))
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], FormatError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| bad("payload is short"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("two bytes")))
    }
    fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("eight bytes")))
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    fn text(&mut self) -> Result<String, FormatError> {
        let n = self.u16()? as usize;
        if n > MAX_TEXT {
            return Err(bad("text over 4096 bytes"));
        }
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| bad("text is not UTF-8"))
    }
    /// A block size and whole blocks of it (the rest of the payload).
    fn blocks(&mut self) -> Result<(u32, Vec<u8>), FormatError> {
        let bs = u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes"));
        if !(1024..=65536).contains(&bs) || !bs.is_power_of_two() {
            return Err(bad(format!("block size {bs}")));
        }
        let rest = self.b.len() - self.at;
        if rest == 0 || rest % bs as usize != 0 {
            return Err(bad(format!("{rest} bytes of blocks is not a positive multiple of {bs}")));
        }
        Ok((bs, self.take(rest)?.to_vec()))
    }
}
