//! Values into and out of PostgreSQL's types, for the store's queries: a column read as
//! the store's [`Value`], and a [`Value`] bound to whatever type the server gave a
//! parameter.

use crate::store::sql::{Error, SqlResult, Value};
use postgres::types::{IsNull, ToSql, Type, private::BytesMut};

/// Column `i` of a row as a [`Value`], borrowed from the row.
pub fn value(row: &postgres::Row, i: usize) -> SqlResult<Value<'_>> {
    let ty = match row.columns().get(i) {
        Some(c) => c.type_(),
        None => {
            return Err(Error::Column {
                index: i,
                detail: format!("the row has {} columns", row.len()),
            });
        }
    };
    let v = if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map(Value::Int)
    } else if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::INT2 {
        row.try_get::<_, Option<i16>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?.map(Value::Real)
    } else if *ty == Type::FLOAT4 {
        row.try_get::<_, Option<f32>>(i)?
            .map(|v| Value::Real(v.into()))
    } else if is_text(ty) {
        row.try_get::<_, Option<&str>>(i)?.map(Value::Text)
    } else if *ty == Type::BYTEA {
        row.try_get::<_, Option<&[u8]>>(i)?.map(Value::Blob)
    } else {
        return Err(Error::Column {
            index: i,
            detail: format!(
                "PostgreSQL's type {ty} is not one the store reads — cast it in the query (BIGINT, DOUBLE PRECISION or TEXT)"
            ),
        });
    };
    Ok(v.unwrap_or(Value::Null))
}

fn is_text(ty: &Type) -> bool {
    [
        Type::TEXT,
        Type::VARCHAR,
        Type::BPCHAR,
        Type::NAME,
        Type::UNKNOWN,
    ]
    .contains(ty)
}

/// A value goes into whatever type PostgreSQL gave its parameter when it prepared the
/// statement, where that type holds it (an integer into INT4 or TEXT too).
impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) if *ty == Type::INT8 => i.to_sql(ty, out),
            Value::Int(i) if *ty == Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
            Value::Int(i) if *ty == Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
            Value::Int(i) if *ty == Type::BOOL => (i != 0).to_sql(ty, out),
            Value::Int(i) if *ty == Type::FLOAT8 => (i as f64).to_sql(ty, out),
            Value::Int(i) if is_text(ty) => i.to_string().as_str().to_sql(ty, out),
            Value::Real(f) if *ty == Type::FLOAT8 => f.to_sql(ty, out),
            Value::Real(f) if *ty == Type::FLOAT4 => (f as f32).to_sql(ty, out),
            Value::Text(s) if is_text(ty) => s.to_sql(ty, out),
            Value::Blob(b) if *ty == Type::BYTEA => b.to_sql(ty, out),
            v => Err(format!(
                "{} cannot go into a parameter of PostgreSQL's type {ty} — cast the parameter in the query",
                v.kind()
            )
            .into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}
