//! What tests look at inside a SQLite store: the statements a write ran, the pages a
//! connection read.

use super::{Db, Result, Store, StoreError};

impl Store {
    /// Runs `f` in a write transaction and lists the SQL statements SQLite started for it
    /// (a trigger's program as `-- TRIGGER name`, `BEGIN` and `COMMIT` included): for
    /// tests that hold a path to its number of statements.
    pub(crate) fn count_statements<T, E: From<StoreError>>(
        &mut self,
        f: impl FnOnce(&Db) -> Result<T, E>,
    ) -> (Result<T, E>, Vec<String>) {
        use rusqlite::ffi;
        use std::os::raw::{c_char, c_int, c_uint, c_void};
        type Seen = std::cell::RefCell<Vec<String>>;
        unsafe extern "C" fn seen(
            _: c_uint,
            ctx: *mut c_void,
            _: *mut c_void,
            sql: *mut c_void,
        ) -> c_int {
            // SAFETY: `ctx` is the list below, alive while the callback is registered, and
            // `sql` the statement's text, a C string SQLite owns for the call.
            unsafe {
                let text = std::ffi::CStr::from_ptr(sql as *const c_char);
                (*(ctx as *const Seen))
                    .borrow_mut()
                    .push(text.to_string_lossy().into_owned());
            }
            0
        }
        let list: Seen = Default::default();
        let ctx = &list as *const Seen as *mut c_void;
        // SAFETY: the callback is removed before `list` goes out of scope, and runs only on
        // this thread (the connection is not shared).
        unsafe {
            ffi::sqlite3_trace_v2(
                self.lite().expect("a SQLite store").handle(),
                ffi::SQLITE_TRACE_STMT as c_uint,
                Some(seen),
                ctx,
            );
        }
        let out = self.write(f);
        unsafe {
            ffi::sqlite3_trace_v2(
                self.lite().expect("a SQLite store").handle(),
                0,
                None,
                std::ptr::null_mut(),
            );
        }
        (out, list.into_inner())
    }

    /// Pages this connection had to read from the file (cache misses) since it opened.
    pub(crate) fn pages_read(&self) -> i64 {
        use rusqlite::ffi;
        let (mut cur, mut high) = (0, 0);
        // SAFETY: a status query on this open connection.
        unsafe {
            ffi::sqlite3_db_status(
                self.lite().expect("a SQLite store").handle(),
                ffi::SQLITE_DBSTATUS_CACHE_MISS,
                &mut cur,
                &mut high,
                0,
            );
        }
        i64::from(cur)
    }
}
