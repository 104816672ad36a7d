//! SQLSTATEs rowgate raises itself, where it answers as PostgreSQL would (the planner, and the
//! SQLite backend standing in for PostgreSQL's checks), and PostgreSQL's own that rowgate treats
//! apart.

/// `invalid_regular_expression`: a `match` pattern that does not compile.
pub const INVALID_REGULAR_EXPRESSION: &str = "2201B";
/// `numeric_value_out_of_range`: a row count beyond a 64-bit integer.
pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
/// `invalid_text_representation`: a value not of its column's type.
pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
/// `not_null_violation`.
pub const NOT_NULL_VIOLATION: &str = "23502";
/// `foreign_key_violation`.
pub const FOREIGN_KEY_VIOLATION: &str = "23503";
/// `unique_violation`.
pub const UNIQUE_VIOLATION: &str = "23505";
/// `check_violation`.
pub const CHECK_VIOLATION: &str = "23514";
/// `insufficient_privilege`: a table the caller may not use, a row it may not write.
pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// `undefined_column`.
pub const UNDEFINED_COLUMN: &str = "42703";
/// `undefined_object`: an unknown type in a cast.
pub const UNDEFINED_OBJECT: &str = "42704";
/// `invalid_column_reference`: an `on_conflict` target that is no unique key.
pub const INVALID_COLUMN_REFERENCE: &str = "42P10";
/// `query_canceled`: a statement stopped at `db-statement-timeout`.
pub const QUERY_CANCELED: &str = "57014";
/// `disk_full`: PostgreSQL could not extend a file (rowgate's own refusal is RG008).
pub const DISK_FULL: &str = "53100";
