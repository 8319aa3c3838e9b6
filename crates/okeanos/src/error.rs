//! The error every layer above the devices returns: what went wrong for the caller of a
//! file-system operation, a mount or a tool, each kind with its errno. It sits below the
//! layers that return it (runtime, the placements' readers, fs, engine), so none of them has
//! to import another to name it; `fs` re-exports it.

use crate::device::DeviceError;
use crate::format::FormatError;

/// Errors of file-system operations, each with its errno.
/// Debug prints the sentence (as Display): a `main` returning this error through `?` ends with a
/// message, not a structure dump.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("no space left on device")]
    NoSpace,
    #[error("file name too long")]
    NameTooLong,
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("read-only file system: {0}")]
    ReadOnly(String),
    #[error("too many links")]
    TooManyLinks,
    #[error("file too large")]
    TooBig,
    /// No extended attribute of that name (ENODATA).
    #[error("no such attribute")]
    NoAttribute,
    /// An extended attribute value larger than any one can be (E2BIG).
    #[error("attribute value too large")]
    ValueTooBig,
    #[error("I/O error: {0}")]
    Io(String),
    #[error("file system is corrupt: {0}")]
    Corrupt(String),
    /// The superblock carries the ERRORS state: a read-write mount is refused until `okeanos
    /// fsck` has checked the file system (or mount read-only, or with errors=remount-ro).
    #[error("file system has errors: {0}")]
    HasErrors(String),
    /// Another opener holds the image or journal.
    #[error("{0}")]
    InUse(String),
    /// Only in a mount driven step by step (the simulator): the operation must wait for the
    /// journal (a commit or log space); nothing was changed, retry after the next step.
    #[error("operation must wait for the journal")]
    WouldBlock,
    /// A device or file could not be opened (missing, not permitted); the message says which.
    #[error("{0}")]
    Unavailable(String),
    /// The operation (a fallocate mode, say) is not supported (EOPNOTSUPP).
    #[error("operation not supported")]
    Unsupported,
    /// A broken invariant (a bug) inside the operation: the journal was stopped, the file
    /// system is read-only, and what was synced before is kept for the next mount (EIO).
    #[error("internal error, journal stopped: {0}")]
    Broken(String),
}

impl std::fmt::Debug for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl FsError {
    /// The errno a POSIX caller (FUSE) should see.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => 2,
            FsError::Exists => 17,
            FsError::NotDir => 20,
            FsError::IsDir => 21,
            FsError::NotEmpty => 39,
            FsError::NoSpace => 28,
            FsError::NameTooLong => 36,
            FsError::Invalid(_) => 22,
            FsError::ReadOnly(_) => 30,
            FsError::TooManyLinks => 31,
            FsError::TooBig => 27,
            FsError::NoAttribute => 61,
            FsError::ValueTooBig => 7,
            FsError::Io(_) | FsError::Broken(_) => 5,
            FsError::Corrupt(_) | FsError::HasErrors(_) => 117,
            FsError::InUse(_) => 16,
            FsError::WouldBlock => 11,
            FsError::Unsupported => 95,
            FsError::Unavailable(_) => 2,
        }
    }
}

impl From<DeviceError> for FsError {
    fn from(e: DeviceError) -> Self {
        match e {
            DeviceError::InUse { .. } => FsError::InUse(e.to_string()),
            DeviceError::Open { .. } => FsError::Unavailable(e.to_string()),
            e => FsError::Io(e.to_string()),
        }
    }
}

impl From<FormatError> for FsError {
    fn from(e: FormatError) -> Self {
        FsError::Corrupt(e.to_string())
    }
}

pub type FsResult<T> = Result<T, FsError>;
