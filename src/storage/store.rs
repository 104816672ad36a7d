//! What storage needs of the database: buckets and objects as rows, read and written as the
//! caller (so that row-level security, or the access rules, decide) or, for public buckets and
//! signed URLs, as the server. One trait, implemented by each backend; each operation is one
//! transaction.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::error::StorageError;

/// Who a storage request runs as: the role and claims the REST API would use.
#[derive(Debug, Clone)]
pub struct Who {
    /// The role.
    pub role: Arc<str>,
    /// The claims, as JSON.
    pub claims: Arc<str>,
    /// The `sub` claim, if a string.
    pub sub: Option<String>,
    /// Whether no credentials were presented (the anonymous role).
    pub anonymous: bool,
}

/// A bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// Its id (in object paths).
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its creator's `sub`, when a UUID.
    pub owner: Option<String>,
    /// Whether anyone may download its objects.
    pub public: bool,
    /// The largest object it takes, in bytes.
    pub file_size_limit: Option<i64>,
    /// The media types it takes (`image/*` for any image).
    pub allowed_mime_types: Option<Vec<String>>,
    /// When it was created (`2021-02-17T04:43:32.770Z`).
    pub created_at: String,
    /// When it was last changed.
    pub updated_at: String,
}

/// A bucket to create.
#[derive(Debug, Clone)]
pub struct NewBucket {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Whether it is public.
    pub public: bool,
    /// Its size limit.
    pub file_size_limit: Option<i64>,
    /// Its media types.
    pub allowed_mime_types: Option<Vec<String>>,
}

/// A change to a bucket: what is `Some` is set (an inner `None` clears it).
#[derive(Debug, Clone, Default)]
pub struct BucketChange {
    /// `public`.
    pub public: Option<bool>,
    /// `file_size_limit`.
    pub file_size_limit: Option<Option<i64>>,
    /// `allowed_mime_types`.
    pub allowed_mime_types: Option<Option<Vec<String>>>,
}

/// How bucket deletion went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketDeleted {
    /// Deleted.
    Deleted,
    /// No such bucket, or not one the caller may delete.
    NotFound,
    /// It still holds objects.
    NotEmpty,
}

/// How buckets are listed (`GET /bucket`).
#[derive(Debug, Clone, Default)]
pub struct BucketQuery {
    /// Names containing this (any case).
    pub search: Option<String>,
    /// `id`, `name`, `created_at` or `updated_at`.
    pub sort_column: Option<&'static str>,
    /// Descending.
    pub descending: bool,
    /// At most this many.
    pub limit: Option<i64>,
    /// Skipping this many.
    pub offset: Option<i64>,
}

/// An object's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRow {
    /// Its id (a UUID).
    pub id: String,
    /// Its bucket.
    pub bucket_id: String,
    /// Its name (its path in the bucket).
    pub name: String,
    /// Its uploader's `sub`, when a UUID.
    pub owner: Option<String>,
    /// Its uploader's `sub`.
    pub owner_id: Option<String>,
    /// The stored bytes' version: the file's name under `storage-dir`.
    pub version: Option<String>,
    /// The system metadata (`eTag`, `size`, `mimetype`, ...), as JSON.
    pub metadata: Option<String>,
    /// The uploader's own metadata, as JSON.
    pub user_metadata: Option<String>,
    /// When it was first written.
    pub created_at: String,
    /// When it was last written.
    pub updated_at: String,
    /// When it was last read.
    pub last_accessed_at: String,
}

/// An object to write.
#[derive(Debug, Clone)]
pub struct PutObject {
    /// A new id, used if the row is new.
    pub id: String,
    /// Its bucket.
    pub bucket_id: String,
    /// Its name.
    pub name: String,
    /// The uploader's `sub`.
    pub owner_id: Option<String>,
    /// The system metadata, as JSON.
    pub metadata: String,
    /// The uploader's metadata, as JSON.
    pub user_metadata: Option<String>,
    /// The new bytes' version.
    pub version: String,
    /// Replace an object of that name.
    pub upsert: bool,
    /// Only find out whether the write is allowed: it is made, then rolled back (Supabase's
    /// check of the caller's right before it signs an upload URL or takes an upload's bytes).
    pub trial: bool,
}

/// A written object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    /// Its id.
    pub id: String,
    /// The version it replaced, whose bytes can go.
    pub replaced: Option<String>,
}

/// `POST /object/list/:bucket`.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// The folder (ending in `/`, or empty for the top).
    pub prefix: String,
    /// Names in it starting with this (any case).
    pub search: String,
    /// At most this many entries.
    pub limit: i64,
    /// Skipping this many.
    pub offset: i64,
    /// `name`, `updated_at`, `created_at` or `last_accessed_at`.
    pub column: &'static str,
    /// Descending.
    pub descending: bool,
}

/// One entry of a listing: a folder (no id, no metadata) or an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// The name below the prefix.
    pub name: String,
    /// For an object, its row.
    pub object: Option<ObjectRow>,
}

/// `POST /object/list-v2/:bucket`: one page of objects, in the byte order of their names (or by
/// a timestamp, then name), after a cursor.
#[derive(Debug, Clone, Default)]
pub struct PageQuery {
    /// Names starting with this (as it is: not a folder, any text).
    pub prefix: String,
    /// Only names after this one (before it, descending), in the page's order.
    pub after: Option<String>,
    /// With `after` and a timestamp order: that row's timestamp (ISO 8601, milliseconds).
    pub after_value: Option<String>,
    /// Only names at or past this one (ascending): what follows a folder already listed.
    pub from: Option<String>,
    /// `created_at` or `updated_at`, else by name.
    pub column: Option<&'static str>,
    /// Descending.
    pub descending: bool,
    /// At most this many.
    pub limit: i64,
}

/// Escapes `%`, `_` and `\` for a LIKE pattern with `\` as its escape.
pub fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The storage's rows.
pub trait StorageStore: Send + Sync {
    /// The buckets `who` may see.
    fn list_buckets(&self, who: Who, query: BucketQuery) -> BoxFuture<'_, Result<Vec<Bucket>, StorageError>>;

    /// A bucket, as `who` sees it, or as the server does (`None`).
    fn bucket(
        &self,
        who: Option<Who>,
        id: String,
    ) -> BoxFuture<'_, Result<Option<Arc<Bucket>>, StorageError>>;

    /// Creates a bucket (409 if its id or name is taken).
    fn create_bucket(&self, who: Who, bucket: NewBucket) -> BoxFuture<'_, Result<(), StorageError>>;

    /// Changes a bucket; `false` if there is none `who` may change.
    fn update_bucket(
        &self,
        who: Who,
        id: String,
        change: BucketChange,
    ) -> BoxFuture<'_, Result<bool, StorageError>>;

    /// Deletes an empty bucket.
    fn delete_bucket(&self, who: Who, id: String) -> BoxFuture<'_, Result<BucketDeleted, StorageError>>;

    /// An object, as `who` sees it, or as the server does (`None`).
    fn object(
        &self,
        who: Option<Who>,
        bucket: String,
        name: String,
    ) -> BoxFuture<'_, Result<Option<Arc<ObjectRow>>, StorageError>>;

    /// Writes an object's row as `who` (or as the server, for a signed upload URL).
    fn put_object(&self, who: Option<Who>, put: PutObject) -> BoxFuture<'_, Result<Put, StorageError>>;

    /// Deletes the named objects `who` may delete; their rows.
    fn delete_objects(
        &self,
        who: Who,
        bucket: String,
        names: Vec<String>,
    ) -> BoxFuture<'_, Result<Vec<ObjectRow>, StorageError>>;

    /// Deletes every object of a bucket `who` may delete; their versions.
    fn empty_bucket(&self, who: Who, bucket: String) -> BoxFuture<'_, Result<Vec<String>, StorageError>>;

    /// Renames an object (to another bucket, perhaps); `false` if there is none `who` may move.
    fn move_object(
        &self,
        who: Who,
        from: (String, String),
        to: (String, String),
    ) -> BoxFuture<'_, Result<bool, StorageError>>;

    /// The folders and objects directly under a prefix that `who` may see.
    fn list(
        &self,
        who: Who,
        bucket: String,
        query: ListQuery,
    ) -> BoxFuture<'_, Result<Vec<ListEntry>, StorageError>>;

    /// A page of the objects `who` may see (list-v2).
    fn page(
        &self,
        who: Who,
        bucket: String,
        query: PageQuery,
    ) -> BoxFuture<'_, Result<Vec<ObjectRow>, StorageError>>;

    /// Which of `versions` rows still name (as the server).
    fn versions_in_use(&self, versions: Vec<String>) -> BoxFuture<'_, Result<Vec<String>, StorageError>>;

    /// Which of `names` `who` may see.
    fn visible(
        &self,
        who: Who,
        bucket: String,
        names: Vec<String>,
    ) -> BoxFuture<'_, Result<Vec<String>, StorageError>>;
}
