//! Errors across the boundary: an errno for the program, a sentence for the person.
//!
//! Every call that fails returns a negative errno (or NULL) and leaves a sentence in this
//! thread's slot, which `okeanos_errmsg` returns. A panic inside a call is caught here and
//! becomes EIO with its message: nothing unwinds into C.

use std::cell::RefCell;
use std::ffi::CString;

pub struct Error {
    pub errno: i32,
    pub msg: String,
}

pub type Res<T> = Result<T, Error>;

impl Error {
    pub fn new(errno: i32, msg: impl Into<String>) -> Self {
        Error { errno, msg: msg.into() }
    }
    pub fn inval(msg: impl Into<String>) -> Self {
        Error::new(libc::EINVAL, msg)
    }
    pub fn badf(msg: impl Into<String>) -> Self {
        Error::new(libc::EBADF, msg)
    }
}

impl From<engine::FsError> for Error {
    fn from(e: engine::FsError) -> Self {
        Error { errno: e.errno(), msg: e.to_string() }
    }
}

impl From<engine::MkfsError> for Error {
    fn from(e: engine::MkfsError) -> Self {
        let msg = e.to_string();
        let errno = match e {
            engine::MkfsError::Device(d) => engine::FsError::from(d).errno(),
            engine::MkfsError::Invalid(_) => libc::EINVAL,
        };
        Error { errno, msg }
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
    static LAST_ERRNO: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

pub fn set_last(errno: i32, msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
    LAST_ERRNO.with(|e| e.set(errno));
}

/// This thread's last errno (positive), or 0.
pub fn last_errno() -> i32 {
    LAST_ERRNO.with(|e| e.get())
}

/// This thread's last message; valid until this thread's next failing call.
pub fn last_ptr() -> *const std::ffi::c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// Runs a call's body: its error, or a panic, becomes `on_err(errno)` with the message kept.
pub fn call<T>(what: &str, on_err: impl FnOnce(i32) -> T, body: impl FnOnce() -> Res<T>) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_last(e.errno.abs(), &format!("{what}: {}", e.msg));
            on_err(-e.errno.abs())
        }
        Err(p) => {
            let m = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into());
            set_last(libc::EIO, &format!("{what}: internal error (EIO): {m}"));
            on_err(-libc::EIO)
        }
    }
}
