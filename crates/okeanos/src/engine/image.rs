//! Image files formatted from an option string: `journal=manylogs,journal_size=16M`. What an
//! embedding program (the C ABI, the Python and Go packages) calls instead of building
//! [`MkfsOptions`] and devices by hand; every journal placement is reachable from it
//! (docs/EMBEDDING.md lists the options).

use super::Okeanos;
use crate::format::Superblock;
use crate::fs::mkfs::{MkfsError, MkfsOptions};
use crate::FileDevice;
use std::path::{Path, PathBuf};

/// A size with an optional binary unit: `4096`, `64K`, `16M`, `1G`, `2T`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("size {s:?}: unknown unit {c:?} (use K, M, G or T)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|e: std::num::ParseIntError| match e.kind() {
        std::num::IntErrorKind::PosOverflow => format!("size {s:?} is too large"),
        _ => format!("size {s:?} is not a number"),
    })?;
    n.checked_mul(mult).ok_or_else(|| format!("size {s:?} is too large"))
}

/// Where the journal of a new image lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalKind {
    Internal,
    /// A separate journal file or device of `journal_size` (`journal_path=`).
    External(PathBuf),
    /// A journal server (`journal_server=host:port`), or a JetStream stream (`nats://` URLs
    /// joined by `;`), with the internal journal as its fallback.
    Remote(String),
    /// Non-volatile memory (`nvm=PATH`, a DAX device or a file of `nvm_size`).
    Nvm(PathBuf, u64),
    /// Scattered logs, one per group (`journal=manylogs`, `group_size=`).
    Manylogs,
}

/// A parsed mkfs option string.
#[derive(Debug, Clone)]
pub struct ImageSpec {
    pub mkfs: MkfsOptions,
    pub journal: JournalKind,
}

impl ImageSpec {
    /// Parses `key=value` items joined by commas: `block_size`, `journal_size`,
    /// `bytes_per_inode`, `label`, `lazy_journal_init`, `journal=internal|external|remote|
    /// jetstream|nvm|manylogs`, `journal_path`, `journal_server`, `nvm`, `nvm_size`,
    /// `group_size`, `log_area`. An unknown or malformed item is named in the error.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut o = MkfsOptions { zero_journal: true, ..Default::default() };
        let (mut kind, mut journal_path, mut server, mut nvm, mut nvm_size, mut journal_size, mut group_size, mut log_area) = (None, None, None, None, 64u64 << 20, None, None, None);
        for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            let val = || v.filter(|v| !v.is_empty()).ok_or_else(|| format!("mkfs option {k} needs a value"));
            let size = || val().and_then(|v| parse_size(v).map_err(|e| format!("mkfs option {k}: {e}")));
            match k {
                "block_size" => {
                    let b = size()?;
                    if !(1024..=65536).contains(&b) || !b.is_power_of_two() {
                        return Err(format!("mkfs option block_size={b}: a power of two from 1024 to 65536"));
                    }
                    o.block_size = b as u32;
                }
                "journal_size" => journal_size = Some(size()?),
                "bytes_per_inode" => o.bytes_per_inode = size()?.max(1),
                "label" => o.label = v.unwrap_or("").to_string(),
                "lazy_journal_init" => o.zero_journal = false,
                "journal" => kind = Some(val()?.to_string()),
                "journal_path" => journal_path = Some(PathBuf::from(val()?)),
                "journal_server" => server = Some(val()?.replace(';', ",")),
                "nvm" => nvm = Some(PathBuf::from(val()?)),
                "nvm_size" => nvm_size = size()?,
                "group_size" => group_size = Some(size()?),
                "log_area" => log_area = Some(size()?),
                _ => return Err(format!("unknown mkfs option {item:?}")),
            }
        }
        let bs = o.block_size as u64;
        let blocks = |b: u64, what: &str| -> Result<u32, String> { u32::try_from(b / bs).map_err(|_| format!("mkfs option {what}: too large")) };
        if let Some(b) = log_area {
            o.log_area_blocks = blocks(b, "log_area")?;
        }
        let kind = kind.unwrap_or_else(|| {
            if journal_path.is_some() {
                "external".into()
            } else if nvm.is_some() {
                "nvm".into()
            } else if server.is_some() {
                "remote".into()
            } else {
                "internal".into()
            }
        });
        let stray = |what: &str, given: bool| if given { Err(format!("mkfs option {what} does not go with journal={kind}")) } else { Ok(()) };
        stray("journal_path", journal_path.is_some() && kind != "external")?;
        stray("journal_server", server.is_some() && kind != "remote" && kind != "jetstream")?;
        stray("nvm", nvm.is_some() && kind != "nvm")?;
        stray("group_size", group_size.is_some() && kind != "manylogs")?;
        let journal = match kind.as_str() {
            "internal" => JournalKind::Internal,
            "external" => JournalKind::External(journal_path.ok_or("journal=external needs journal_path=FILE")?),
            "remote" | "jetstream" => {
                let s = server.ok_or_else(|| format!("journal={kind} needs journal_server= (host:port, or nats:// URLs joined by ';')"))?;
                if kind == "jetstream" && s.split(',').any(|u| !crate::remote::jetstream::is_nats(u.trim())) {
                    return Err(format!("journal=jetstream: journal_server={s}: give nats://host:port URLs"));
                }
                JournalKind::Remote(s)
            }
            "nvm" => JournalKind::Nvm(nvm.ok_or("journal=nvm needs nvm=PATH")?, nvm_size),
            "manylogs" => {
                stray("journal_size", journal_size.is_some())?;
                o.manylogs = true;
                o.blocks_per_group = group_size.map(|g| blocks(g, "group_size")).transpose()?;
                JournalKind::Manylogs
            }
            k => return Err(format!("mkfs option journal={k}: use internal, external, remote, jetstream, nvm or manylogs")),
        };
        if let Some(j) = journal_size {
            o.journal_blocks = j / bs;
        } else if matches!(journal, JournalKind::Nvm(..)) {
            o.journal_blocks = crate::fs::mkfs::MIN_JOURNAL_BLOCKS;
        }
        Ok(ImageSpec { mkfs: o, journal })
    }
}

impl Okeanos {
    /// Creates an image file of `size_bytes` at `path` and formats it as `options` say
    /// ([`ImageSpec::parse`]; "" for an internal journal of the default size), creating the
    /// external journal or the NVM file it names. Refuses to overwrite a file; leaves nothing
    /// behind on failure. Mount it with [`Okeanos::open`] (an external journal needs
    /// `journal_path=` there too; the NVM is found through the superblock).
    pub fn mkfs_image(path: &Path, size_bytes: u64, options: &str) -> Result<Superblock, MkfsError> {
        let spec = ImageSpec::parse(options).map_err(MkfsError::Invalid)?;
        let mut created = Vec::new();
        let r = Self::mkfs_spec(path, size_bytes, &spec, &mut created);
        if r.is_err() {
            for p in created {
                let _ = std::fs::remove_file(p);
            }
        }
        r
    }

    fn mkfs_spec(path: &Path, size_bytes: u64, spec: &ImageSpec, created: &mut Vec<PathBuf>) -> Result<Superblock, MkfsError> {
        let mut o = spec.mkfs.clone();
        if path.exists() {
            return Err(MkfsError::Invalid(format!("{} exists: mkfs does not overwrite a file", path.display())));
        }
        let dev = FileDevice::create(path, size_bytes, false)?;
        created.push(path.to_path_buf());
        match &spec.journal {
            JournalKind::External(j) => {
                if j.exists() {
                    return Err(MkfsError::Invalid(format!("{} exists: mkfs does not overwrite a file", j.display())));
                }
                let blocks = if o.journal_blocks > 0 { o.journal_blocks } else { crate::fs::mkfs::default_journal_blocks(size_bytes / o.block_size as u64) };
                let jdev = FileDevice::create(j, blocks * o.block_size as u64, false)?;
                created.push(j.clone());
                o.external_journal = true;
                o.journal_blocks = blocks;
                crate::fs::mkfs::mkfs(&dev, Some(&jdev), &o)
            }
            JournalKind::Nvm(p, bytes) => {
                if p.exists() {
                    return Err(MkfsError::Invalid(format!("{} exists: mkfs does not overwrite a file", p.display())));
                }
                let region = crate::nvm::MappedNvm::create(p, *bytes, true).map_err(|e| MkfsError::Invalid(format!("{}: {e}", p.display())))?;
                created.push(p.clone());
                let abs = std::fs::canonicalize(p).map_err(|e| MkfsError::Invalid(format!("{}: {e}", p.display())))?;
                o.nvm_path = Some(abs.display().to_string());
                Okeanos::mkfs_nvm(&dev, &region, &o)
            }
            JournalKind::Remote(s) => {
                o.remote_server = Some(s.clone());
                crate::fs::mkfs::mkfs(&dev, None, &o)
            }
            JournalKind::Internal | JournalKind::Manylogs => crate::fs::mkfs::mkfs(&dev, None, &o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_journal_kind_parses_and_mistakes_are_named() {
        assert_eq!(ImageSpec::parse("").unwrap().journal, JournalKind::Internal);
        let s = ImageSpec::parse("journal=manylogs,group_size=16M").unwrap();
        assert!(s.mkfs.manylogs && s.mkfs.blocks_per_group == Some(4096));
        assert_eq!(ImageSpec::parse("journal_path=/tmp/j").unwrap().journal, JournalKind::External("/tmp/j".into()));
        assert_eq!(ImageSpec::parse("journal=remote,journal_server=127.0.0.1:7000").unwrap().journal, JournalKind::Remote("127.0.0.1:7000".into()));
        assert_eq!(ImageSpec::parse("journal=jetstream,journal_server=nats://127.0.0.1:1;nats://127.0.0.1:2").unwrap().journal, JournalKind::Remote("nats://127.0.0.1:1,nats://127.0.0.1:2".into()));
        assert_eq!(ImageSpec::parse("nvm=/tmp/n,nvm_size=8M").unwrap().journal, JournalKind::Nvm("/tmp/n".into(), 8 << 20));
        assert_eq!(ImageSpec::parse("journal_size=16M").unwrap().mkfs.journal_blocks, 4096);
        for (bad, says) in [
            ("journal=floppy", "journal=floppy"),
            ("block_size=1000", "block_size"),
            ("journal_size=lots", "journal_size"),
            ("colour=blue", "unknown mkfs option"),
            ("journal=manylogs,journal_path=/j", "journal_path does not go"),
            ("journal=external", "needs journal_path"),
            ("journal=jetstream,journal_server=127.0.0.1:1", "nats://"),
        ] {
            let e = ImageSpec::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
