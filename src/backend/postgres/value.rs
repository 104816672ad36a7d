//! Parameter and result adapters: request values go to PostgreSQL as text (its input functions
//! parse them, as with PostgREST's untyped parameters) and results come back as raw bytes.

use bytes::BytesMut;
use tokio_postgres::types::{to_sql_checked, Format, FromSql, IsNull, ToSql, Type};

/// A parameter sent in text format, whatever type PostgreSQL inferred for it.
#[derive(Debug)]
pub struct TextParam<'a>(pub &'a str);

impl ToSql for TextParam<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn encode_format(&self, _ty: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

/// A result value's bytes in PostgreSQL's binary format, whatever its type.
#[derive(Debug, Clone, Copy)]
pub struct RawValue<'a>(pub &'a [u8]);

impl<'a> FromSql<'a> for RawValue<'a> {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawValue(raw))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}
