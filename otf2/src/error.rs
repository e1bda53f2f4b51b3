//! Typed errors of the OTF2 export and import, and libotf2's error codes turned into them.

use crate::ffi;
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Once;
use thiserror::Error;

/// Why an archive cannot be written or read.
#[derive(Debug, Error)]
pub enum Otf2Error {
    /// libotf2 refused or failed; `detail` is what it said about it, if anything.
    #[error("{path}: {call} failed: {description} ({name}){detail}")]
    Library {
        path: String,
        call: &'static str,
        name: String,
        description: String,
        detail: String,
    },
    /// The archive's contents are not what OTF2 or the analysis allows.
    #[error("{path}: {what}")]
    Malformed { path: String, what: String },
    /// Something of the archive is bigger than mpistat reads.
    #[error("{path}: {what} ({size}) is more than the {limit} mpistat reads")]
    TooBig {
        path: String,
        what: &'static str,
        size: u64,
        limit: u64,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The mpistat trace being exported cannot be read.
    #[error(transparent)]
    Trace(#[from] mpistat_trace::error::TraceFileError),
    /// The trace being exported is not a valid execution (an exit without an enter, say).
    #[error("{path}: rank {rank}: {what}")]
    BadTrace {
        path: String,
        rank: u32,
        what: &'static str,
    },
    /// A distributed export stops everywhere when one of its processes failed.
    #[error("export process {process} failed (its own message says why)")]
    ElsewhereFailed { process: usize },
}

impl From<Otf2Error> for mpistat_analysis::error::AnalyzeDirError {
    fn from(error: Otf2Error) -> Self {
        match error {
            Otf2Error::Trace(e) => mpistat_analysis::error::AnalyzeDirError::File(e),
            other => mpistat_analysis::error::AnalyzeDirError::Source(Box::new(other)),
        }
    }
}

thread_local! {
    /// What libotf2 last said on this thread (its error callback), for the next error made here.
    static LAST_MESSAGE: RefCell<String> = const { RefCell::new(String::new()) };
}

extern "C" {
    fn vsnprintf(
        buffer: *mut c_char,
        size: usize,
        format: *const c_char,
        arguments: *mut ffi::__va_list_tag,
    ) -> i32;
}

/// libotf2 prints its errors to stderr unless a callback takes them: this one keeps the message
/// for the error it returns and prints nothing (a report's stderr is the analysis's).
unsafe extern "C" fn keep_message(
    _user: *mut c_void,
    _file: *const c_char,
    _line: u64,
    _function: *const c_char,
    code: ffi::OTF2_ErrorCode,
    format: *const c_char,
    arguments: *mut ffi::__va_list_tag,
) -> ffi::OTF2_ErrorCode {
    let mut buffer = [0 as c_char; 512];
    if !format.is_null() {
        // SAFETY: libotf2 passes its format and the matching arguments; vsnprintf writes at
        // most `buffer.len()` bytes, terminated.
        unsafe { vsnprintf(buffer.as_mut_ptr(), buffer.len(), format, arguments) };
    }
    // SAFETY: terminated by vsnprintf (or still all zeros).
    let message = unsafe { CStr::from_ptr(buffer.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let _ = LAST_MESSAGE.try_with(|last| *last.borrow_mut() = message);
    code
}

/// Installs [`keep_message`] once per process, before any other call into libotf2.
pub(crate) fn quiet_library() {
    static ONCE: Once = Once::new();
    // SAFETY: registering a callback with the signature libotf2 declares.
    ONCE.call_once(|| unsafe {
        ffi::OTF2_Error_RegisterCallback(Some(keep_message), std::ptr::null_mut());
    });
}

fn static_text(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: libotf2's error names and descriptions are static, terminated strings.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// `Ok` for `OTF2_SUCCESS`, else the error of `call` on the archive at `path`.
pub(crate) fn check(
    code: ffi::OTF2_ErrorCode,
    call: &'static str,
    path: &str,
) -> Result<(), Otf2Error> {
    if code == ffi::OTF2_SUCCESS {
        return Ok(());
    }
    let said = LAST_MESSAGE
        .try_with(|last| std::mem::take(&mut *last.borrow_mut()))
        .unwrap_or_default();
    // SAFETY: plain lookups of static strings by code.
    let (name, description) = unsafe {
        (
            static_text(ffi::OTF2_Error_GetName(code)),
            static_text(ffi::OTF2_Error_GetDescription(code)),
        )
    };
    Err(Otf2Error::Library {
        path: path.to_string(),
        call,
        name,
        description,
        detail: if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        },
    })
}

/// Forgets what libotf2 said so far on this thread (before a call whose failure is expected).
pub(crate) fn forget_message() {
    let _ = LAST_MESSAGE.try_with(|last| last.borrow_mut().clear());
}
