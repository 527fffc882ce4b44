//! Reading a stored column the same way from either driver: [`StoredRow`] is implemented for
//! `rusqlite::Row` (in `crate::sqlite`) and `tokio_postgres::Row` (in `crate::postgres`), so
//! the decoders of `common` turn a row into a value once for both backends. Generic, not
//! dynamic: each decoder is compiled once per driver.

use herald_core::log::StoreError;

/// A Rust type both drivers read a column as (`String`, `i64`, `bool`, `Vec<u8>`, `Option`s
/// of them).
pub(crate) trait Column:
    rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>
{
}

impl<T> Column for T where T: rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a> {}

/// A row a query returned.
pub(crate) trait StoredRow {
    /// Column `index` (from 0) as a `T`; a failure is the driver's error as a [`StoreError`],
    /// as the backend reports its other errors.
    fn column<T: Column>(&self, index: usize) -> Result<T, StoreError>;
}
