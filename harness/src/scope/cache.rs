//! The observation cache (issue 46): the text a baseline kept, with what `lstat` said of each
//! file when it was read, stored beside the run journal so that the next baseline of the same
//! workspace takes the text of an unchanged file from it instead of opening the file again.
//!
//! It is trusted only as far as git trusts its index, and no further:
//!
//! - an entry is used only when the walk's `lstat` of the file is the entry's — size,
//!   modification and status-change times, inode, mode; any write moves the status-change
//!   time, which no user can set back;
//! - an entry is stored only when the file's times are at least [`RACY`] older than the read
//!   ("racy git"): a second write in the same clock tick as the first, of the same size, would
//!   leave `lstat` as it was, so a file that young is read again next time;
//! - the file is a companion of the journal (`runs.db-observe`), so it has the journal's
//!   protection: masked from every confined program, refused to the harness's own tools, never
//!   copied into a child's workspace. A cache that does not hash to its checksum, names another
//!   workspace or cannot be decoded is not used (said in a warning when it is damaged) and is
//!   written again from what the files say.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::{Entry, Stamp};

/// What the file begins with: the format and its version.
const MAGIC: &[u8; 8] = b"HRNSOBS1";
/// How much older than its read a file's times must be for its text to be stored: more than
/// the coarsest timestamp granularity of a file system harness runs on (FAT's two seconds).
pub(super) const RACY: Duration = Duration::from_secs(3);
/// A cache larger than this is not read (the kept text is at most 6 MiB).
const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Baselines that keep fewer files read them directly: a few milliseconds, and no file.
pub(super) const FROM_FILES: usize = 1_000;

/// The cache of the journal at `journal`: its companion file, named like SQLite's.
pub fn path_of(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(SUFFIX);
    PathBuf::from(name)
}

/// What [`path_of`] appends to the journal's name.
pub const SUFFIX: &str = "-observe";

/// One file's kept text and what `lstat` said of it.
#[derive(Serialize, Deserialize)]
struct Stored {
    path: String,
    stamp: Stamp,
    text: Bytes,
}

/// The cache's contents: the workspace it describes and its entries.
#[derive(Serialize, Deserialize)]
struct Contents {
    root: String,
    entries: Vec<Stored>,
}

/// Bytes written as one byte string (not a sequence of numbers).
struct Bytes(Box<[u8]>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.into()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v.into_boxed_slice()))
            }
        }
        deserializer.deserialize_bytes(Visitor)
    }
}

/// The cache as loaded: path → entry, taken from as the baseline finds each file unchanged.
#[derive(Default)]
pub(super) struct Loaded {
    entries: std::collections::HashMap<String, (Stamp, Box<[u8]>), foldhash::quality::RandomState>,
    /// True when a cache for this workspace was read.
    pub(super) found: bool,
}

impl Loaded {
    /// Reads the cache at `file` for the workspace at `root`. A missing file, or another
    /// workspace's, is an empty cache; a damaged one too, with a warning.
    pub(super) fn read(file: &Path, root: &Path, warnings: &mut Vec<String>) -> Self {
        match read(file, root) {
            Ok(Some(loaded)) => loaded,
            Ok(None) => Loaded::default(),
            Err(why) => {
                warnings.push(format!(
                    "scope: the observation cache {} is damaged ({why}): not used, written again from the files",
                    file.display()
                ));
                Loaded::default()
            }
        }
    }

    /// The kept text of `path` when the cache holds it for exactly this `lstat`.
    pub(super) fn take(&mut self, path: &str, now: &Entry) -> Option<Box<[u8]>> {
        let (stamp, text) = self.entries.remove(path)?;
        (stamp == now.stamp() && text.len() as u64 == now.size).then_some(text)
    }

    /// Entries left untaken: files gone, changed, or no longer kept.
    pub(super) fn left(&self) -> usize {
        self.entries.len()
    }
}

fn read(file: &Path, root: &Path) -> Result<Option<Loaded>, String> {
    let bytes = match std::fs::metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
        Ok(meta) if meta.len() > MAX_BYTES => {
            return Err(format!("{} bytes, more than a cache holds", meta.len()));
        }
        Ok(_) => std::fs::read(file).map_err(|e| e.to_string())?,
    };
    let payload = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("not an observation cache")?;
    let (sum, payload) = payload.split_at_checked(32).ok_or("cut short")?;
    if sha2::Sha256::digest(payload).as_slice() != sum {
        return Err("its checksum does not match".to_owned());
    }
    let contents: Contents = postcard::from_bytes(payload).map_err(|e| e.to_string())?;
    if Path::new(&contents.root) != root {
        return Ok(None);
    }
    Ok(Some(Loaded {
        entries: contents
            .entries
            .into_iter()
            .map(|e| (e.path, (e.stamp, e.text.0)))
            .collect(),
        found: true,
    }))
}

/// Whether the text of a file `lstat` described as `entry` may be stored, read at `read`.
pub(super) fn settled(entry: &Entry, read: SystemTime) -> bool {
    let Some(limit) = read.checked_sub(RACY) else {
        return false;
    };
    let Ok(limit) = limit.duration_since(SystemTime::UNIX_EPOCH) else {
        return false;
    };
    let limit = (
        i64::try_from(limit.as_secs()).unwrap_or(i64::MAX),
        i64::from(limit.subsec_nanos()),
    );
    entry.modified < limit && entry.changed < limit
}

/// Writes the cache at `file` for the workspace at `root`: the `kept` entries, replacing the
/// file whole (a reader sees the old cache or the new one, never half of one).
///
/// # Errors
/// Why it could not be written (the journal's directory is read-only, a full disk).
pub(super) fn write<'a>(
    file: &Path,
    root: &Path,
    kept: impl Iterator<Item = (&'a str, &'a Entry)>,
) -> std::io::Result<()> {
    let entries = kept
        .filter_map(|(path, entry)| {
            Some(Stored {
                path: path.to_owned(),
                stamp: entry.stamp(),
                text: Bytes(entry.content.clone()?),
            })
        })
        .collect();
    let contents = Contents {
        root: root.to_string_lossy().into_owned(),
        entries,
    };
    let payload = postcard::to_stdvec(&contents).map_err(std::io::Error::other)?;
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
    let mut temp = tempfile::NamedTempFile::new_in(dir.unwrap_or(Path::new(".")))?;
    {
        use std::io::Write as _;
        let out = temp.as_file_mut();
        out.write_all(MAGIC)?;
        out.write_all(&sha2::Sha256::digest(&payload))?;
        out.write_all(&payload)?;
    }
    temp.persist(file).map_err(|e| e.error)?;
    Ok(())
}
