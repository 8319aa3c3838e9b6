//! The journal's messages on the stream (docs/FORMAT.md, "JetStream journal messages"): the
//! headers of one part of a transaction, a part checked as it is read back, and the parts
//! assembled into whole transactions (a gap or a missing part is damage, a torn last
//! transaction was never acknowledged).

use async_nats::HeaderMap;

/// Message format version (header `Okeanos-Version`).
pub const MESSAGE_VERSION: u32 = 1;

/// A transaction part as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub sequence: u64,
    pub tid: u64,
    pub index: u32,
    pub count: u32,
    pub block_size: u32,
    pub payload: Vec<u8>,
}

/// The headers of a transaction part (FORMAT.md): version, tid, part index/count, block
/// size, epoch, CRC32C of the payload.
pub fn part_headers(tid: u64, index: u32, count: u32, block_size: u32, epoch: u64, payload: &[u8]) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("Okeanos-Version", MESSAGE_VERSION.to_string().as_str());
    h.insert("Okeanos-Tid", tid.to_string().as_str());
    h.insert("Okeanos-Part", format!("{index}/{count}").as_str());
    h.insert("Okeanos-Block-Size", block_size.to_string().as_str());
    h.insert("Okeanos-Epoch", epoch.to_string().as_str());
    h.insert("Okeanos-Crc", format!("{:08x}", crc32c::crc32c(payload)).as_str());
    h
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Result<&'a str, String> {
    h.get(name).map(|v| v.as_str()).ok_or_else(|| format!("no {name} header"))
}

pub(super) fn number<T: std::str::FromStr>(h: &HeaderMap, name: &str) -> Result<T, String> {
    header(h, name)?.parse().map_err(|_| format!("{name} is not a number"))
}

/// Decodes and checks a transaction part (bounded: every field parsed, the CRC verified).
pub fn decode_part(sequence: u64, h: &HeaderMap, payload: &[u8]) -> Result<Part, String> {
    let at = |e: String| format!("message {sequence}: {e}");
    let version: u32 = number(h, "Okeanos-Version").map_err(at)?;
    if version != MESSAGE_VERSION {
        return Err(at(format!("message version {version}, this Okeanos reads {MESSAGE_VERSION}")));
    }
    let tid = number(h, "Okeanos-Tid").map_err(at)?;
    let (index, count) = header(h, "Okeanos-Part").map_err(at)?.split_once('/').ok_or_else(|| at("Okeanos-Part is not i/n".into()))?;
    let (index, count): (u32, u32) = (index.parse().map_err(|_| at("bad part index".into()))?, count.parse().map_err(|_| at("bad part count".into()))?);
    if count == 0 || index >= count {
        return Err(at(format!("part {index} of {count}")));
    }
    let block_size = number(h, "Okeanos-Block-Size").map_err(at)?;
    let crc = u32::from_str_radix(header(h, "Okeanos-Crc").map_err(at)?, 16).map_err(|_| at("bad Okeanos-Crc".into()))?;
    if crc32c::crc32c(payload) != crc {
        return Err(at(format!("transaction {tid} part {index} fails its checksum")));
    }
    Ok(Part { sequence, tid, index, count, block_size, payload: payload.to_vec() })
}

/// Assembles parts in stream order into whole transactions: (tid, block size, blocks, first
/// sequence). A transaction whose parts stop before its last at the end of the stream was
/// never acknowledged and is dropped; a part out of place anywhere else, or a tid that does
/// not follow its predecessor, is damage.
pub fn assemble(parts: &[Part]) -> Result<Vec<(u64, u32, Vec<u8>, u64)>, String> {
    let mut out: Vec<(u64, u32, Vec<u8>, u64)> = Vec::new();
    let mut open: Option<(Part, Vec<u8>, u32)> = None; // first part, blocks so far, next index
    for p in parts {
        match open.take() {
            None => {
                if p.index != 0 {
                    return Err(format!("message {}: part {} of transaction {} without its first", p.sequence, p.index, p.tid));
                }
                if let Some(last) = out.last() {
                    if p.tid != last.0 + 1 {
                        return Err(format!("message {}: transaction {} follows {} (a gap)", p.sequence, p.tid, last.0));
                    }
                }
                if p.count == 1 {
                    out.push((p.tid, p.block_size, p.payload.clone(), p.sequence));
                } else {
                    open = Some((p.clone(), p.payload.clone(), 1));
                }
            }
            Some((first, mut blocks, next)) => {
                if p.tid != first.tid || p.index != next || p.count != first.count || p.block_size != first.block_size {
                    return Err(format!("message {}: transaction {} is missing part {next} of {}", p.sequence, first.tid, first.count));
                }
                blocks.extend_from_slice(&p.payload);
                if next + 1 == first.count {
                    out.push((first.tid, first.block_size, blocks, first.sequence));
                } else {
                    open = Some((first, blocks, next + 1));
                }
            }
        }
    }
    // An unfinished transaction at the end: its last part was never stored, so it was never
    // acknowledged.
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(sequence: u64, tid: u64, index: u32, count: u32) -> Part {
        Part { sequence, tid, index, count, block_size: 4096, payload: vec![tid as u8; 8] }
    }

    #[test]
    fn parts_assemble_and_a_torn_last_transaction_is_dropped() {
        let parts = [part(1, 5, 0, 1), part(2, 6, 0, 2), part(3, 6, 1, 2), part(4, 7, 0, 3), part(5, 7, 1, 3)];
        let txs = assemble(&parts).unwrap();
        assert_eq!(txs.iter().map(|t| (t.0, t.2.len(), t.3)).collect::<Vec<_>>(), vec![(5, 8, 1), (6, 16, 2)]);
    }

    #[test]
    fn a_gap_or_a_missing_part_is_damage() {
        assert!(assemble(&[part(1, 5, 0, 1), part(2, 7, 0, 1)]).unwrap_err().contains("gap"));
        assert!(assemble(&[part(1, 5, 0, 2), part(2, 6, 0, 1)]).unwrap_err().contains("missing part"));
        assert!(assemble(&[part(1, 5, 1, 2)]).unwrap_err().contains("without its first"));
    }

    #[test]
    fn a_part_is_checked_before_it_is_used() {
        let payload = vec![7u8; 100];
        let h = part_headers(9, 0, 1, 4096, 3, &payload);
        assert_eq!(decode_part(4, &h, &payload).unwrap().tid, 9);
        let mut bad = payload.clone();
        bad[50] ^= 1;
        assert!(decode_part(4, &h, &bad).unwrap_err().contains("checksum"));
        let mut h2 = h.clone();
        h2.insert("Okeanos-Part", "2/1");
        assert!(decode_part(4, &h2, &payload).is_err());
        let mut h3 = h.clone();
        h3.insert("Okeanos-Version", "9");
        assert!(decode_part(4, &h3, &payload).unwrap_err().contains("version"));
        assert!(decode_part(4, &HeaderMap::new(), &payload).is_err());
    }
}
