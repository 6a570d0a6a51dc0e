//! Little-endian field writers and a bounds-checked reader, shared by every
//! format so no encoding reaches for raw struct layout.

use crate::error::{Error, Result};

pub fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// A u16 length, then the text's UTF-8 bytes: the names and paths of the
/// small intent records. They are at most PATH_MAX (4096) bytes, so the
/// length always fits.
pub fn put_text16(out: &mut Vec<u8>, text: &str) {
    let length = u16::try_from(text.len()).expect("a name or path is shorter than 64 KiB");
    put_u16(out, length);
    out.extend_from_slice(text.as_bytes());
}

/// Reads fields in order from a byte slice, failing with `Corrupt` (naming
/// `what`) instead of panicking when the bytes run out.
pub struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { bytes, position: 0, what }
    }

    pub fn position(&self) -> usize {
        self.position
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    pub fn take(&mut self, count: usize) -> Result<&'a [u8]> {
        if self.remaining() < count {
            return Err(Error::corrupt(format!(
                "{}: needs {count} bytes at offset {} but only {} remain",
                self.what,
                self.position,
                self.remaining()
            )));
        }
        let slice = &self.bytes[self.position..self.position + count];
        self.position += count;
        Ok(slice)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Text written by [`put_text16`]; `field` names it in the error when
    /// its bytes are not UTF-8.
    pub fn text16(&mut self, field: &str) -> Result<String> {
        let length = self.u16()?;
        let bytes = self.take(usize::from(length))?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Error::corrupt(format!("{}: {field} is not UTF-8", self.what)))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }
}

/// Checks a magic, version and trailing CRC32C common to the small
/// whole-file records (access, version). Returns the body between the
/// version field and the CRC.
pub fn open_sealed<'a>(bytes: &'a [u8], magic: &[u8; 8], what: &'static str) -> Result<(u16, &'a [u8])> {
    open_sealed_up_to(bytes, magic, what, super::FORMAT_VERSION)
}

/// [`open_sealed`] for a record with a version of its own, `newest` the
/// newest this plfs reads (a record that gained fields after the common
/// format version).
pub fn open_sealed_up_to<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    what: &'static str,
    newest: u16,
) -> Result<(u16, &'a [u8])> {
    if bytes.len() < magic.len() + 2 + 4 {
        return Err(Error::corrupt(format!("{what}: {} bytes is too short", bytes.len())));
    }
    if &bytes[..8] != magic {
        return Err(Error::corrupt(format!("{what}: bad magic {:02x?}", &bytes[..8])));
    }
    let (content, crc_bytes) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
    let computed = crc32c::crc32c(content);
    if stored != computed {
        return Err(Error::corrupt(format!(
            "{what}: checksum {stored:08x} does not match contents ({computed:08x})"
        )));
    }
    let version = u16::from_le_bytes([content[8], content[9]]);
    if version > newest {
        return Err(Error::new(
            crate::ErrorKind::Unsupported,
            format!("{what}: format version {version} is newer than this plfs reads ({newest})"),
        ));
    }
    Ok((version, &content[10..]))
}

/// Starts a sealed record: magic and version.
pub fn begin_sealed(magic: &[u8; 8]) -> Vec<u8> {
    begin_sealed_version(magic, super::FORMAT_VERSION)
}

/// Starts a sealed record of a record-specific `version`.
pub fn begin_sealed_version(magic: &[u8; 8], version: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(magic);
    put_u16(&mut out, version);
    out
}

/// Ends a sealed record with the CRC32C of everything before it.
pub fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&out);
    put_u32(&mut out, crc);
    out
}
