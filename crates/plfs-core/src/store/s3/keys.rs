//! Store paths as object keys: plain files and log heads at their path,
//! directory markers and segments beside them.

use object_store::path::Path as Key;

use super::client::Shared;
use crate::store::StorePath;

/// Marks a directory made by `create_dir` / `create_dir_all`. Names starting
/// with `.plfs-` are reserved, so no user file can collide with it.
pub(super) const DIRECTORY_MARKER: &str = ".plfs-dir";

/// Suffix of the prefix under which a log's segments live: `p.seg/…`.
pub(super) const SEGMENT_DIRECTORY_SUFFIX: &str = ".seg";

/// Segment numbers are zero-padded so listings return them in order.
const SEGMENT_NUMBER_DIGITS: usize = 10;

impl Shared {
    /// The object key of `path` (each component percent-encoded by
    /// `object_store`, so any file name round-trips).
    pub(super) fn key(&self, path: &StorePath) -> Key {
        Key::from_iter(self.root.iter().map(String::as_str).chain(path.components()))
    }

    pub(super) fn marker_key(&self, path: &StorePath) -> Key {
        self.key(path).join(DIRECTORY_MARKER)
    }

    /// The prefix (as a key) under which the segments of log `path` live.
    pub(super) fn segment_directory(&self, path: &StorePath) -> Key {
        let name = path.file_name().unwrap_or_default();
        let parent = path.parent().unwrap_or_default();
        self.key(&parent).join(format!("{name}{SEGMENT_DIRECTORY_SUFFIX}"))
    }

    pub(super) fn segment_key(&self, path: &StorePath, number: u64) -> Key {
        self.segment_directory(path).join(format!("{number:0width$}", width = SEGMENT_NUMBER_DIGITS))
    }

    /// `Some(key)` to list under, or None for the bucket root.
    pub(super) fn list_prefix(&self, path: &StorePath) -> Option<Key> {
        let key = self.key(path);
        (!key.as_ref().is_empty()).then_some(key)
    }
}

pub(super) fn parse_segment_number(name: &str) -> Option<u64> {
    (name.len() == SEGMENT_NUMBER_DIGITS && name.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

/// Undoes `object_store`'s percent-encoding of one key component.
pub(super) fn decode_component(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|byte| (*byte as char).to_digit(16));
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                index += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_components_round_trip_through_percent_encoding() {
        for name in ["plain", "with space", "100%", "a#b?c*d", "caf\u{e9}", ".", "..", "x%2Fy"] {
            let key = Key::from_iter([name]);
            assert_eq!(decode_component(key.filename().unwrap()), name, "{name:?} became {key}");
        }
    }

    #[test]
    fn only_fixed_width_decimal_names_are_segments() {
        assert_eq!(parse_segment_number("0000000000"), Some(0));
        assert_eq!(parse_segment_number("0000000042"), Some(42));
        for name in ["42", "000000000x", "00000000000", ".plfs-dir", ""] {
            assert_eq!(parse_segment_number(name), None, "{name:?}");
        }
    }
}
