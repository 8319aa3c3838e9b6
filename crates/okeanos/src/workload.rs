//! Workload descriptions shared by the benchmark (`okeanos bench`, real threads and devices)
//! and the simulator (`okeanos sim`, virtual time): the papers' multistream microbenchmark
//! (N streams, each appending requests of size R to its own file at a rate or in a closed
//! loop, syncing after every write or every k writes) and its parameters.

use std::fmt;
use std::time::Duration;

/// How fast each stream writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// The next write as soon as the previous one (and its sync) returned.
    Closed,
    /// Payload bits per second per stream (the papers' 1 Kbit/s, 10 Kbit/s, 1 Mbit/s).
    Bits(f64),
    /// Writes per second per stream.
    Ops(f64),
}

impl Rate {
    /// Parses `closed`, `1kbit`, `10Kbit/s`, `1mbit`, `500bit`, `2gbit`, `10/s`.
    pub fn parse(s: &str) -> Result<Rate, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "closed" {
            return Ok(Rate::Closed);
        }
        let bad = || format!("rate {s:?}: use closed, a bit rate such as 1kbit, 10kbit or 1mbit, or writes per second such as 10/s");
        let num = |x: &str| -> Result<f64, String> {
            let v: f64 = x.trim().parse().map_err(|_| bad())?;
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(bad())
            }
        };
        let t = if let Some(x) = t.strip_suffix("bit/s") {
            format!("{x}bit")
        } else if let Some(x) = t.strip_suffix("bps") {
            format!("{x}bit")
        } else if let Some(x) = t.strip_suffix("/s") {
            let ops = num(x)?;
            if ops < 0.001 {
                return Err(format!("rate {s:?}: at least one write per 1000 seconds"));
            }
            return Ok(Rate::Ops(ops));
        } else {
            t
        };
        let Some(x) = t.strip_suffix("bit") else { return Err(bad()) };
        let (x, mult) = match x.chars().last() {
            Some('k') => (&x[..x.len() - 1], 1e3),
            Some('m') => (&x[..x.len() - 1], 1e6),
            Some('g') => (&x[..x.len() - 1], 1e9),
            _ => (x, 1.0),
        };
        let bits = num(x)? * mult;
        if !(1.0..=1e12).contains(&bits) {
            return Err(format!("rate {s:?}: from 1 bit/s to 1 Tbit/s"));
        }
        Ok(Rate::Bits(bits))
    }

    /// Time between the starts of consecutive writes of `size` bytes (None: closed loop).
    pub fn interval(&self, size: usize) -> Option<Duration> {
        match *self {
            Rate::Closed => None,
            Rate::Bits(b) => Some(Duration::from_secs_f64(size as f64 * 8.0 / b)),
            Rate::Ops(o) => Some(Duration::from_secs_f64(1.0 / o)),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::Closed => write!(f, "closed"),
            Rate::Bits(b) if b >= 1e9 && (b / 1e9).fract() == 0.0 => write!(f, "{}gbit", b / 1e9),
            Rate::Bits(b) if b >= 1e6 && (b / 1e6).fract() == 0.0 => write!(f, "{}mbit", b / 1e6),
            Rate::Bits(b) if b >= 1e3 && (b / 1e3).fract() == 0.0 => write!(f, "{}kbit", b / 1e3),
            Rate::Bits(b) => write!(f, "{b}bit"),
            Rate::Ops(o) => write!(f, "{o}/s"),
        }
    }
}

/// Which sync follows a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    Fsync,
    Fdatasync,
}

impl SyncKind {
    pub fn parse(s: &str) -> Result<SyncKind, String> {
        match s {
            "fsync" => Ok(SyncKind::Fsync),
            "fdatasync" => Ok(SyncKind::Fdatasync),
            _ => Err(format!("--sync {s}: use fsync or fdatasync")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SyncKind::Fsync => "fsync",
            SyncKind::Fdatasync => "fdatasync",
        }
    }
}

/// The multistream workload.
#[derive(Debug, Clone)]
pub struct Multistream {
    pub streams: usize,
    pub size: usize,
    pub rate: Rate,
    pub sync: SyncKind,
    /// Sync after every `sync_every` writes (1: after each).
    pub sync_every: usize,
    pub duration: Duration,
}

impl Multistream {
    pub fn check(&self) -> Result<(), String> {
        if self.streams == 0 || self.size == 0 || self.sync_every == 0 {
            return Err("streams, size and sync-every must be positive".into());
        }
        if self.size > 64 << 20 {
            return Err(format!("request size {} is larger than 64 MiB", self.size));
        }
        if self.duration.is_zero() {
            return Err("duration must be positive".into());
        }
        Ok(())
    }
}

/// Parses a duration such as `10s`, `500ms`, `2m`, `1.5s` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(x) = t.strip_suffix("ms") {
        (x, 1e-3)
    } else if let Some(x) = t.strip_suffix('s') {
        (x, 1.0)
    } else if let Some(x) = t.strip_suffix('m') {
        (x, 60.0)
    } else if let Some(x) = t.strip_suffix('h') {
        (x, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("duration {s:?}: use a number with s, ms, m or h (10s)"))?;
    if !v.is_finite() || v < 0.0 || v * mult > 365.0 * 86400.0 {
        return Err(format!("duration {s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print() {
        assert_eq!(Rate::parse("closed").unwrap(), Rate::Closed);
        assert_eq!(Rate::parse("1kbit").unwrap(), Rate::Bits(1e3));
        assert_eq!(Rate::parse("10Kbit/s").unwrap(), Rate::Bits(1e4));
        assert_eq!(Rate::parse("1mbit").unwrap(), Rate::Bits(1e6));
        assert_eq!(Rate::parse("1Mbps").unwrap(), Rate::Bits(1e6));
        assert_eq!(Rate::parse("10/s").unwrap(), Rate::Ops(10.0));
        for bad in ["", "fast", "0kbit", "-1/s", "kbit", "1kb", "nan/s", "0.5bit", "0.0001/s", "2000gbit"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Rate::Bits(1e3).to_string(), "1kbit");
        assert_eq!(Rate::Bits(1e6).to_string(), "1mbit");
        assert_eq!(Rate::Ops(10.0).to_string(), "10/s");
        assert_eq!(Rate::Bits(1e3).interval(128).unwrap(), Duration::from_millis(1024));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("x").is_err() && parse_duration("-1s").is_err() && parse_duration("1e30s").is_err());
    }
}
