//! Block-trace replay (the Manylogs paper §V-B, §V-C and §VI): block I/O traces, read from the
//! SNIA/MSR Cambridge CSV format or blkparse text, or generated ([`synth`]), replayed open-loop
//! in virtual time under a scheme: no logging, MLB (the real [`okeanos::device::MlbDevice`]
//! over a timed disk model), or a shingled disk model (SLSMR, MLSMR). See [`replay`].

pub mod replay;
pub mod synth;

/// One block I/O of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIo {
    /// Arrival, nanoseconds from the trace's start.
    pub at_ns: u64,
    pub write: bool,
    /// Bytes, sector-aligned.
    pub offset: u64,
    pub len: u64,
}

/// The trace formats `okeanos sim trace --trace FILE --format` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// SNIA IOTTA / MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
    /// the timestamp in Windows filetime (100 ns units), Type `Read` or `Write`, offset and
    /// size in bytes.
    Msr,
    /// blkparse's default text: `dev cpu seq time pid action rwbs sector + count [...]`; the
    /// queue events (action `Q`) are the requests.
    Blkparse,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "msr" | "csv" => Ok(Format::Msr),
            "blkparse" => Ok(Format::Blkparse),
            _ => Err(format!("unknown trace format {s:?}: msr (SNIA/MSR Cambridge CSV) or blkparse")),
        }
    }
}

const SECTOR: u64 = 512;

/// Parses a trace; the I/Os come back sorted by arrival, times relative to the first one, and
/// offsets and lengths widened to whole sectors. A line that cannot be parsed is an error with
/// its number (blkparse's summary lines, and a CSV header, are skipped).
pub fn parse(text: &str, format: Format) -> Result<Vec<TraceIo>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = match format {
            // Only a first line whose first field is not a number is a header.
            Format::Msr => parse_msr(line).map_err(|e| (n == 0 && line.split(',').next().is_some_and(|f| f.trim().parse::<u64>().is_err()), e)),
            Format::Blkparse => match parse_blkparse(line) {
                Ok(v) => Ok(v),
                // blkparse prints per-CPU and total summaries after the events.
                Err(_) if !line.as_bytes()[0].is_ascii_digit() => Ok(None),
                Err(e) => Err((false, e)),
            },
        };
        match parsed {
            Ok(Some(io)) => out.push(io),
            Ok(None) => {}
            // A CSV header line.
            Err((true, _)) if format == Format::Msr => {}
            Err((_, e)) => return Err(format!("line {}: {e}: {line:?}", n + 1)),
        }
    }
    out.sort_by_key(|io| io.at_ns);
    if let Some(first) = out.first().map(|io| io.at_ns) {
        for io in &mut out {
            io.at_ns -= first;
        }
    }
    Ok(out)
}

fn widen(offset: u64, len: u64) -> (u64, u64) {
    let lo = offset / SECTOR * SECTOR;
    let hi = (offset + len.max(1)).div_ceil(SECTOR) * SECTOR;
    (lo, hi - lo)
}

fn parse_msr(line: &str) -> Result<Option<TraceIo>, String> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() < 6 {
        return Err(format!("{} fields, expected at least 6", f.len()));
    }
    let num = |i: usize, what: &str| f[i].parse::<u64>().map_err(|_| format!("{what} {:?} is not a number", f[i]));
    let ticks = num(0, "timestamp")?;
    let write = match f[3].to_ascii_lowercase().as_str() {
        "write" => true,
        "read" => false,
        other => return Err(format!("type {other:?} is neither Read nor Write")),
    };
    let (offset, len) = widen(num(4, "offset")?, num(5, "size")?);
    Ok(Some(TraceIo { at_ns: ticks.saturating_mul(100), write, offset, len }))
}

fn parse_blkparse(line: &str) -> Result<Option<TraceIo>, String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 7 {
        return Err("too few fields for a blkparse event".into());
    }
    if f[5] != "Q" {
        return Ok(None);
    }
    let secs: f64 = f[3].parse().map_err(|_| format!("time {:?} is not a number", f[3]))?;
    let rwbs = f[6];
    let write = rwbs.contains('W');
    if !write && !rwbs.contains('R') {
        return Ok(None); // a flush or discard without data
    }
    if f.len() < 10 || f[8] != "+" {
        return Err("a queue event without `sector + count`".into());
    }
    let sector: u64 = f[7].parse().map_err(|_| format!("sector {:?} is not a number", f[7]))?;
    let count: u64 = f[9].parse().map_err(|_| format!("count {:?} is not a number", f[9]))?;
    if count == 0 {
        return Ok(None);
    }
    let (offset, len) = widen(sector.saturating_mul(SECTOR), count.saturating_mul(SECTOR));
    Ok(Some(TraceIo { at_ns: (secs.max(0.0) * 1e9) as u64, write, offset, len }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msr_and_blkparse_lines_parse_and_bad_lines_name_themselves() {
        let msr = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                   128166372003061629,wdev,0,Write,3216386048,4096,1137\n\
                   128166372002969071,wdev,0,Read,3216001024,16384,2031\n";
        let t = parse(msr, Format::Msr).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0], TraceIo { at_ns: 0, write: false, offset: 3216001024, len: 16384 });
        assert_eq!(t[1].at_ns, (128166372003061629 - 128166372002969071) * 100);
        assert!(parse("1,h,0,Write,x,4096,1\n", Format::Msr).unwrap_err().contains("line 1"));
        assert!(parse("1,h,0,Write,0,4096,1\n2,h,0,Erase,0,4096,1\n", Format::Msr).unwrap_err().contains("line 2"));

        let blk = "  8,0    3        1     0.000000000   697  Q  WS 223490 + 8 [kjournald]\n\
                     8,0    3        2     0.000001000   697  G  WS 223490 + 8 [kjournald]\n\
                     8,0    1        3     0.002000000   700  Q   R 1000 + 16 [cat]\n\
                     8,0    1        4     0.003000000   700  Q  FN [sync]\n\
                   CPU0 (8,0):\n Reads Queued: 1, 8KiB\n";
        let t = parse(blk, Format::Blkparse).unwrap();
        assert_eq!(t, vec![TraceIo { at_ns: 0, write: true, offset: 223490 * 512, len: 4096 }, TraceIo { at_ns: 2_000_000, write: false, offset: 512_000, len: 8192 }]);
        assert!(parse("8,0 1 1 0.1 5 Q W 12 - 8 [x]\n", Format::Blkparse).is_err());
    }
}
