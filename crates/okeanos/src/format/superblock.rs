//! The file-system superblock (block 0). Byte map: docs/FORMAT.md, "Superblock".

use super::{check_crc, invalid, need, put_crc, seed, FormatError, Le};

pub const SB_MAGIC: u64 = u64::from_le_bytes(*b"OKEANOS1");
pub const SB_VERSION: u32 = 1;
/// Bytes of the superblock that carry fields; the CRC sits right after, inside sector 0.
pub const SB_CRC_AT: usize = 508;

/// Compatible features: an implementation that does not know them may still mount read-write.
pub mod compat {
    /// Groups reserve an area for scattered logs (manylogs); size in `log_area_blocks`.
    pub const LOG_AREA: u32 = 1 << 0;
}
/// Incompatible features: an implementation that does not know one must refuse to mount.
pub mod incompat {
    /// The journal lives on a separate device (external journal).
    pub const EXTERNAL_JOURNAL: u32 = 1 << 0;
    /// The journal lives on a journal server; the internal journal is its local fallback
    /// (the remote record, bytes 264..456).
    pub const REMOTE_JOURNAL: u32 = 1 << 1;
    /// The journal lives in non-volatile memory (the nvm placement, UBJ): the NVM record
    /// (bytes 264..456) names it; the internal journal stays unused.
    pub const NVM_JOURNAL: u32 = 1 << 2;
    /// The journal is many small logs, one in each group's log area (manylogs); the internal
    /// journal region holds the log table's two copies after its journal superblock.
    pub const MANYLOGS: u32 = 1 << 3;
    pub const KNOWN: u32 = EXTERNAL_JOURNAL | REMOTE_JOURNAL | NVM_JOURNAL | MANYLOGS;
}
/// Read-only-compatible features.
pub mod ro_compat {
    pub const KNOWN: u32 = 0;
}

/// `state` is CLEAN or MOUNTED, with the ERRORS bit or-ed in once something found the file
/// system damaged; ERRORS stays until `okeanos fsck` has checked it (as ext4's
/// EXT4_ERROR_FS), and a read-write mount is refused while it is set.
pub mod state {
    pub const CLEAN: u32 = 1;
    pub const MOUNTED: u32 = 2;
    pub const ERRORS: u32 = 4;

    /// Whether `s` is a state this version writes.
    pub fn is_known(s: u32) -> bool {
        matches!(s & !ERRORS, CLEAN | MOUNTED)
    }

    pub fn describe(s: u32) -> String {
        let base = match s & !ERRORS {
            CLEAN => "clean".to_string(),
            MOUNTED => "mounted or not cleanly unmounted".to_string(),
            other => format!("unknown state {other:#x}"),
        };
        if s & ERRORS != 0 {
            format!("{base}, with errors (run okeanos fsck)")
        } else {
            base
        }
    }
}

/// The remote journal of a file system (docs/REMOTE.md): the server it was made with. Only
/// this static fact lives here: block 0 is journaled metadata (the orphan list), so state that
/// changes while mounted (the epoch, whether the host fell back to its local journal and from
/// which tid) lives in the local journal's superblock, which only the placement writes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RemoteRecord {
    /// host:port of the journal server (a mount option may name another).
    pub server: String,
}

/// The NVM journal of a file system: the path of its NVM (a DAX device, or a file) when mkfs
/// made it (the `nvm=` mount option may name another). Its header carries the file system's
/// uuid, so a wrong one is refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NvmRecord {
    pub path: String,
}

/// Bytes of the server address in the superblock.
/// Bytes 264..456: a journal server's host:port, or a list of NATS URLs (JetStream). Images
/// made when the field was 64 bytes long read the same (it is zero-padded).
pub const REMOTE_SERVER_LEN: usize = 192;

/// What the last error found (ext4 keeps `s_first_error_*`): set with [`state::ERRORS`] when
/// recovery finds a damaged transaction with committed transactions after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ErrorRecord {
    /// The damaged transaction (zero: no record).
    pub tid: crate::ids::Tid,
    /// Committed transactions after it that recovery did not replay.
    pub following: u64,
    /// When it was found (ns since the epoch).
    pub time_ns: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalLocation {
    /// Blocks `[start, start + blocks)` of the file-system device.
    Internal { start: u64, blocks: u64 },
    /// A separate device or file whose journal superblock carries `uuid`.
    External { uuid: [u8; 16], blocks: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub version: u32,
    pub feature_compat: u32,
    pub feature_incompat: u32,
    pub feature_ro_compat: u32,
    pub block_size: u32,
    pub block_count: u64,
    pub inode_count: u32,
    pub blocks_per_group: u32,
    pub inodes_per_group: u32,
    pub group_count: u32,
    pub first_group_block: u64,
    pub gdt_start: u64,
    pub gdt_blocks: u32,
    pub inode_size: u32,
    pub log_area_blocks: u32,
    pub journal: JournalLocation,
    pub uuid: [u8; 16],
    pub root_ino: u32,
    pub orphan_head: u32,
    pub state: u32,
    pub mount_count: u32,
    pub mkfs_time_ns: i64,
    pub last_mount_ns: i64,
    pub label: [u8; 32],
    /// Lifetime counters, updated at every clean unmount (ext4 keeps `s_kbytes_written`).
    pub lifetime: Lifetime,
    /// The damage that set [`state::ERRORS`], if recovery found it.
    pub error: ErrorRecord,
    /// The remote journal (with [`incompat::REMOTE_JOURNAL`]).
    pub remote: Option<RemoteRecord>,
    /// The NVM journal (with [`incompat::NVM_JOURNAL`]); shares bytes 264..456 with `remote`.
    pub nvm: Option<NvmRecord>,
}

/// Counters over the life of the file system, summed over every mount that unmounted cleanly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Lifetime {
    pub journal_bytes: u64,
    pub final_bytes: u64,
    pub payload_bytes: u64,
    pub commits: u64,
    pub syncs: u64,
}

/// Bytes 264..456: where the journal is (a server's address or an NVM path), UTF-8,
/// zero-padded, not empty.
fn location(b: &[u8], what: &str) -> Result<String, FormatError> {
    const W: &str = "superblock";
    let raw = &b[264..264 + REMOTE_SERVER_LEN];
    let end = raw.iter().position(|&c| c == 0).unwrap_or(REMOTE_SERVER_LEN);
    let s = std::str::from_utf8(&raw[..end]).map_err(|_| invalid(W, format!("{what} is not UTF-8")))?;
    if s.is_empty() {
        return Err(invalid(W, format!("{what} is missing")));
    }
    Ok(s.to_string())
}

impl Superblock {
    pub fn encode(&self, out: &mut [u8]) {
        assert!(out.len() >= 512);
        out[..512].fill(0);
        Le::put_u64(out, 0, SB_MAGIC);
        Le::put_u32(out, 8, self.version);
        Le::put_u32(out, 12, self.feature_compat);
        Le::put_u32(out, 16, self.feature_incompat);
        Le::put_u32(out, 20, self.feature_ro_compat);
        Le::put_u32(out, 24, self.block_size);
        Le::put_u64(out, 32, self.block_count);
        Le::put_u32(out, 40, self.inode_count);
        Le::put_u32(out, 44, self.blocks_per_group);
        Le::put_u32(out, 48, self.inodes_per_group);
        Le::put_u32(out, 52, self.group_count);
        Le::put_u64(out, 56, self.first_group_block);
        Le::put_u64(out, 64, self.gdt_start);
        Le::put_u32(out, 72, self.gdt_blocks);
        Le::put_u32(out, 76, self.inode_size);
        Le::put_u32(out, 80, self.log_area_blocks);
        match self.journal {
            JournalLocation::Internal { start, blocks } => {
                Le::put_u32(out, 84, 0);
                Le::put_u64(out, 88, start);
                Le::put_u64(out, 96, blocks);
            }
            JournalLocation::External { uuid, blocks } => {
                Le::put_u32(out, 84, 1);
                Le::put_u64(out, 96, blocks);
                out[120..136].copy_from_slice(&uuid);
            }
        }
        out[104..120].copy_from_slice(&self.uuid);
        Le::put_u32(out, 136, self.root_ino);
        Le::put_u32(out, 140, self.orphan_head);
        Le::put_u32(out, 144, self.state);
        Le::put_u32(out, 148, self.mount_count);
        Le::put_i64(out, 152, self.mkfs_time_ns);
        Le::put_i64(out, 160, self.last_mount_ns);
        out[168..200].copy_from_slice(&self.label);
        Le::put_u64(out, 200, self.lifetime.journal_bytes);
        Le::put_u64(out, 208, self.lifetime.final_bytes);
        Le::put_u64(out, 216, self.lifetime.payload_bytes);
        Le::put_u64(out, 224, self.lifetime.commits);
        Le::put_u64(out, 232, self.lifetime.syncs);
        Le::put_u64(out, 240, self.error.tid.get());
        Le::put_u64(out, 248, self.error.following);
        Le::put_i64(out, 256, self.error.time_ns);
        if let Some(r) = &self.remote {
            let s = r.server.as_bytes();
            assert!(s.len() <= REMOTE_SERVER_LEN, "server address checked by mkfs");
            out[264..264 + s.len()].copy_from_slice(s);
        }
        if let Some(r) = &self.nvm {
            assert!(self.remote.is_none(), "one journal location");
            let s = r.path.as_bytes();
            assert!(s.len() <= REMOTE_SERVER_LEN, "NVM path checked by mkfs");
            out[264..264 + s.len()].copy_from_slice(s);
        }
        put_crc(out, SB_CRC_AT, seed::SUPERBLOCK);
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "superblock";
        need(W, b, 512)?;
        let magic = Le::u64(b, 0);
        if magic != SB_MAGIC {
            return Err(FormatError::BadMagic { what: W, found: magic, expected: SB_MAGIC });
        }
        check_crc(W, b, SB_CRC_AT, seed::SUPERBLOCK)?;
        let version = Le::u32(b, 8);
        let incompat = Le::u32(b, 16);
        if version != SB_VERSION || incompat & !incompat::KNOWN != 0 {
            return Err(FormatError::Unsupported { what: W, version, features: incompat & !incompat::KNOWN });
        }
        let journal = match Le::u32(b, 84) {
            0 => JournalLocation::Internal { start: Le::u64(b, 88), blocks: Le::u64(b, 96) },
            1 => JournalLocation::External { uuid: b[120..136].try_into().unwrap(), blocks: Le::u64(b, 96) },
            k => return Err(invalid(W, format!("unknown journal kind {k}"))),
        };
        let sb = Superblock {
            version,
            feature_compat: Le::u32(b, 12),
            feature_incompat: incompat,
            feature_ro_compat: Le::u32(b, 20),
            block_size: Le::u32(b, 24),
            block_count: Le::u64(b, 32),
            inode_count: Le::u32(b, 40),
            blocks_per_group: Le::u32(b, 44),
            inodes_per_group: Le::u32(b, 48),
            group_count: Le::u32(b, 52),
            first_group_block: Le::u64(b, 56),
            gdt_start: Le::u64(b, 64),
            gdt_blocks: Le::u32(b, 72),
            inode_size: Le::u32(b, 76),
            log_area_blocks: Le::u32(b, 80),
            journal,
            uuid: b[104..120].try_into().unwrap(),
            root_ino: Le::u32(b, 136),
            orphan_head: Le::u32(b, 140),
            state: Le::u32(b, 144),
            mount_count: Le::u32(b, 148),
            mkfs_time_ns: Le::i64(b, 152),
            last_mount_ns: Le::i64(b, 160),
            label: b[168..200].try_into().unwrap(),
            lifetime: Lifetime {
                journal_bytes: Le::u64(b, 200),
                final_bytes: Le::u64(b, 208),
                payload_bytes: Le::u64(b, 216),
                commits: Le::u64(b, 224),
                syncs: Le::u64(b, 232),
            },
            error: ErrorRecord { tid: crate::ids::Tid::new(Le::u64(b, 240)), following: Le::u64(b, 248), time_ns: Le::i64(b, 256) },
            remote: if incompat & incompat::REMOTE_JOURNAL != 0 {
                if incompat & incompat::NVM_JOURNAL != 0 {
                    return Err(invalid(W, "both a remote and an NVM journal"));
                }
                Some(RemoteRecord { server: location(b, "the journal server's address")? })
            } else {
                None
            },
            nvm: if incompat & incompat::NVM_JOURNAL != 0 { Some(NvmRecord { path: location(b, "the NVM journal's path")? }) } else { None },
        };
        sb.validate()?;
        Ok(sb)
    }

    /// Geometry checks: every derived quantity must be consistent, so later arithmetic on these
    /// fields cannot overflow or index out of range.
    pub fn validate(&self) -> Result<(), FormatError> {
        const W: &str = "superblock";
        let bs = self.block_size;
        if !(1024..=65536).contains(&bs) || !bs.is_power_of_two() {
            return Err(invalid(W, format!("block size {bs} is not a power of two in 1024..=65536")));
        }
        if self.inode_size != super::inode::INODE_SIZE as u32 {
            return Err(invalid(W, format!("inode size {} unsupported", self.inode_size)));
        }
        if self.blocks_per_group == 0 || self.blocks_per_group > bs * 8 {
            return Err(invalid(W, format!("{} blocks per group do not fit one bitmap", self.blocks_per_group)));
        }
        let ipb = bs / self.inode_size;
        if self.inodes_per_group == 0 || self.inodes_per_group > bs * 8 || self.inodes_per_group % ipb != 0 {
            return Err(invalid(W, format!("{} inodes per group is invalid", self.inodes_per_group)));
        }
        if self.group_count == 0 || self.group_count > 1 << 20 {
            return Err(invalid(W, format!("group count {} is invalid", self.group_count)));
        }
        if self.inode_count as u64 != self.group_count as u64 * self.inodes_per_group as u64 {
            return Err(invalid(W, "inode count disagrees with groups"));
        }
        let gdt_needed = (self.group_count as u64 * super::group::GD_SIZE as u64).div_ceil(bs as u64);
        if self.gdt_start != 1 || (self.gdt_blocks as u64) < gdt_needed {
            return Err(invalid(W, "group descriptor table is misplaced or too small"));
        }
        let groups_end = self
            .first_group_block
            .checked_add(self.group_count as u64 * self.blocks_per_group as u64)
            .ok_or_else(|| invalid(W, "group area overflows"))?;
        let last_start = groups_end - self.blocks_per_group as u64;
        if last_start >= self.block_count {
            return Err(invalid(W, "groups extend past the device"));
        }
        let meta = 2 + self.inode_table_blocks() as u64 + self.log_area_blocks as u64;
        if meta >= self.blocks_in_group(self.group_count - 1) {
            return Err(invalid(W, "group metadata fills a whole group"));
        }
        if let JournalLocation::Internal { start, blocks } = self.journal {
            let end = start.checked_add(blocks).ok_or_else(|| invalid(W, "journal overflows"))?;
            if start < self.gdt_start + self.gdt_blocks as u64 || end > self.first_group_block || blocks < 256 {
                return Err(invalid(W, "internal journal region is invalid"));
            }
        }
        if self.feature_incompat & incompat::MANYLOGS != 0 {
            let JournalLocation::Internal { blocks, .. } = self.journal else {
                return Err(invalid(W, "manylogs keeps its log table in the internal journal region"));
            };
            if self.feature_incompat & (incompat::EXTERNAL_JOURNAL | incompat::REMOTE_JOURNAL | incompat::NVM_JOURNAL) != 0 {
                return Err(invalid(W, "manylogs excludes an external, remote or NVM journal"));
            }
            if self.log_area_blocks < 256 {
                return Err(invalid(W, format!("manylogs needs logs of at least 256 blocks, not {}", self.log_area_blocks)));
            }
            if 1 + 2 * super::logtable::LogTable::blocks_per_copy(self.group_count as u64, bs as usize) > blocks {
                return Err(invalid(W, "the journal region cannot hold two copies of the log table"));
            }
        }
        if let JournalLocation::External { blocks, .. } = self.journal {
            if blocks < 256 {
                return Err(invalid(W, "external journal is smaller than 256 blocks"));
            }
        }
        if self.root_ino == 0 || self.root_ino > self.inode_count || self.orphan_head > self.inode_count {
            return Err(invalid(W, "root or orphan inode number out of range"));
        }
        Ok(())
    }

    /// Whether the journal is manylogs.
    pub fn manylogs(&self) -> bool {
        self.feature_incompat & incompat::MANYLOGS != 0
    }

    /// First block of group `g`'s log area (manylogs): after its bitmaps and inode table.
    pub fn log_area_start(&self, g: u32) -> u64 {
        self.first_group_block + g as u64 * self.blocks_per_group as u64 + 2 + self.inode_table_blocks() as u64
    }

    pub fn inode_table_blocks(&self) -> u32 {
        self.inodes_per_group * self.inode_size / self.block_size
    }

    /// Blocks actually present in group `g` (the last group may be short).
    pub fn blocks_in_group(&self, g: u32) -> u64 {
        let start = self.first_group_block + g as u64 * self.blocks_per_group as u64;
        (self.block_count - start).min(self.blocks_per_group as u64)
    }
}
