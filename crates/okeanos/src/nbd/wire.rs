//! The NBD protocol's bytes (the "fixed newstyle" handshake and simple replies), as the
//! protocol document of the NBD project defines them: constants, and pure encoders and
//! decoders. docs/FORMAT.md, "NBD", maps what Okeanos sends and accepts.

/// "NBDMAGIC": the first 8 bytes a server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": after NBDMAGIC in the newstyle handshake, and before every option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Before every option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flags (server).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;

/// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR | 1;
pub const REP_ERR_INVALID: u32 = REP_ERR | 3;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR | 6;
pub const REP_ERR_TOO_BIG: u32 = REP_ERR | 9;

/// Information items of NBD_OPT_INFO and NBD_OPT_GO.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flags.
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
pub const TFLAG_ROTATIONAL: u16 = 1 << 4;
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

/// Errors in replies (errno values the protocol fixes).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// The server's greeting: NBDMAGIC, IHAVEOPT, handshake flags.
pub fn greeting() -> [u8; 18] {
    let mut b = [0u8; 18];
    b[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    b
}

/// An option's header: IHAVEOPT, option, length of the data after it.
pub fn parse_option_header(b: &[u8; 16]) -> Result<(u32, u32), String> {
    let magic = u64::from_be_bytes(b[..8].try_into().unwrap());
    if magic != IHAVEOPT {
        return Err(format!("an option begins with {magic:#018x}, not IHAVEOPT"));
    }
    Ok((u32::from_be_bytes(b[8..12].try_into().unwrap()), u32::from_be_bytes(b[12..16].try_into().unwrap())))
}

/// An option reply: magic, option, type, data.
pub fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// The data of NBD_OPT_INFO and NBD_OPT_GO: an export name and the information asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub items: Vec<u16>,
}

pub fn parse_info_request(d: &[u8]) -> Result<InfoRequest, String> {
    let take = |at: usize, n: usize| d.get(at..at + n).ok_or_else(|| format!("option data of {} bytes ends early", d.len()));
    let len = u32::from_be_bytes(take(0, 4)?.try_into().unwrap()) as usize;
    let name = std::str::from_utf8(take(4, len)?).map_err(|_| "the export name is not UTF-8".to_string())?.to_string();
    let count = u16::from_be_bytes(take(4 + len, 2)?.try_into().unwrap()) as usize;
    let mut items = Vec::with_capacity(count);
    for i in 0..count {
        items.push(u16::from_be_bytes(take(6 + len + 2 * i, 2)?.try_into().unwrap()));
    }
    if d.len() != 6 + len + 2 * count {
        return Err(format!("option data of {} bytes, its fields make {}", d.len(), 6 + len + 2 * count));
    }
    Ok(InfoRequest { name, items })
}

/// NBD_INFO_EXPORT: size and transmission flags.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

/// NBD_INFO_BLOCK_SIZE: minimum, preferred and maximum request sizes.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(14);
    b.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    for v in [min, preferred, max] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b
}

/// One transmission request's header (a WRITE's data follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub len: u32,
}

pub const REQUEST_LEN: usize = 28;

pub fn parse_request(b: &[u8; REQUEST_LEN]) -> Result<Request, String> {
    let magic = u32::from_be_bytes(b[..4].try_into().unwrap());
    if magic != REQUEST_MAGIC {
        return Err(format!("a request begins with {magic:#010x}, not the request magic"));
    }
    Ok(Request {
        flags: u16::from_be_bytes(b[4..6].try_into().unwrap()),
        kind: u16::from_be_bytes(b[6..8].try_into().unwrap()),
        cookie: u64::from_be_bytes(b[8..16].try_into().unwrap()),
        offset: u64::from_be_bytes(b[16..24].try_into().unwrap()),
        len: u32::from_be_bytes(b[24..28].try_into().unwrap()),
    })
}

/// A simple reply's header (a successful READ's data follows it).
pub fn simple_reply(error: u32, cookie: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..].copy_from_slice(&cookie.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_info_decode_and_reject_what_is_malformed() {
        let mut b = [0u8; REQUEST_LEN];
        b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[6..8].copy_from_slice(&CMD_WRITE.to_be_bytes());
        b[8..16].copy_from_slice(&7u64.to_be_bytes());
        b[16..24].copy_from_slice(&4096u64.to_be_bytes());
        b[24..28].copy_from_slice(&512u32.to_be_bytes());
        assert_eq!(parse_request(&b).unwrap(), Request { flags: 0, kind: CMD_WRITE, cookie: 7, offset: 4096, len: 512 });
        b[0] ^= 1;
        assert!(parse_request(&b).is_err());

        let mut d = Vec::new();
        d.extend_from_slice(&3u32.to_be_bytes());
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&1u16.to_be_bytes());
        d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        assert_eq!(parse_info_request(&d).unwrap(), InfoRequest { name: "abc".into(), items: vec![INFO_BLOCK_SIZE] });
        assert!(parse_info_request(&d[..d.len() - 1]).is_err(), "an item cut short");
        let mut long = d.clone();
        long.push(0);
        assert!(parse_info_request(&long).is_err(), "bytes past the items");
        let mut huge = d.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse_info_request(&huge).is_err(), "a name longer than the data");
        let mut opt = [0u8; 16];
        opt[..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
        opt[8..12].copy_from_slice(&OPT_GO.to_be_bytes());
        assert_eq!(parse_option_header(&opt).unwrap(), (OPT_GO, 0));
        opt[0] = 0;
        assert!(parse_option_header(&opt).is_err());
    }
}
