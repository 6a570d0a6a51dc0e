//! The two records of a striped file (docs/FORMAT.md §15): its `layout`,
//! fixed when the file is created, and one `stripes.<c>` record per
//! component, naming the backends of the component's stripes once its
//! first byte is written.

use super::codec::{
    Reader, begin_sealed, begin_sealed_version, open_sealed, open_sealed_up_to, put_u16, put_u32, put_u64,
    seal,
};
use crate::error::{Error, Result};
use crate::striping::{Component, Layout, StripeCount};

pub const LAYOUT_MAGIC: &[u8; 8] = b"PLFSLAYT";
pub const STRIPES_MAGIC: &[u8; 8] = b"PLFSSTRP";

/// Stored for an end running to EOF, and for stripe count -1.
const EOF_END: u64 = u64::MAX;
const ALL_STRIPES: u32 = u32::MAX;

/// Most components a layout may have (bounds the record and the lookups).
pub const COMPONENTS_MAX: usize = 256;

pub fn encode_layout(layout: &Layout) -> Vec<u8> {
    let mut out = begin_sealed(LAYOUT_MAGIC);
    let components = layout.components();
    put_u16(&mut out, components.len() as u16);
    for component in components {
        put_u64(&mut out, component.start);
        put_u64(&mut out, component.end.unwrap_or(EOF_END));
        put_u64(&mut out, component.stripe_size);
        put_u32(
            &mut out,
            match component.stripe_count {
                StripeCount::Count(count) => count,
                StripeCount::All => ALL_STRIPES,
            },
        );
        let pool = component.pool.as_deref().unwrap_or("").as_bytes();
        put_u16(&mut out, pool.len() as u16);
        out.extend_from_slice(pool);
    }
    seal(out)
}

/// Decodes a layout file; a layout that breaks the rules of
/// [`Layout::new`] is `Corrupt`, a newer version `Unsupported`.
pub fn decode_layout(bytes: &[u8]) -> Result<Layout> {
    let (_, body) = open_sealed(bytes, LAYOUT_MAGIC, "layout file")?;
    let mut reader = Reader::new(body, "layout file");
    let count = usize::from(reader.u16()?);
    if count == 0 || count > COMPONENTS_MAX {
        return Err(Error::corrupt(format!("layout file: {count} components (1..={COMPONENTS_MAX})")));
    }
    let mut components = Vec::with_capacity(count);
    for _ in 0..count {
        let start = reader.u64()?;
        let end = reader.u64()?;
        let stripe_size = reader.u64()?;
        let stripe_count = match reader.u32()? {
            ALL_STRIPES => StripeCount::All,
            count => StripeCount::Count(count),
        };
        let length = usize::from(reader.u16()?);
        let pool = std::str::from_utf8(reader.take(length)?)
            .map_err(|_| Error::corrupt("layout file: pool name is not UTF-8"))?;
        components.push(Component {
            start,
            end: (end != EOF_END).then_some(end),
            stripe_count,
            stripe_size,
            pool: (!pool.is_empty()).then(|| pool.to_owned()),
        });
    }
    if reader.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "layout file: {} bytes after the components",
            reader.remaining()
        )));
    }
    Layout::new(components).map_err(|error| Error::corrupt(format!("layout file: {error}")))
}

/// Where one component's stripes are: stripe `k` lives on backend
/// `backends[k]` (a position in the mount's backend list) whose location
/// was `locations[k]` when the record was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripesRecord {
    pub component: u32,
    pub backends: Vec<u32>,
    /// Each stripe's backend's location (its URL without access
    /// parameters), so a plfsrc whose backends were reordered is noticed
    /// and followed. Empty in records of version 2, which had none.
    pub locations: Vec<String>,
}

/// Version 3 added each backend's location; version 2 records (positions
/// only) still read.
pub const STRIPES_VERSION: u16 = 3;

/// The longest backend location a record keeps (bytes).
pub const LOCATION_MAX_BYTES: usize = 4096;

impl StripesRecord {
    /// Version 3, or version 2 byte for byte when there are no locations
    /// (what `recover` and the tests of old records write).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = if self.locations.is_empty() {
            begin_sealed(STRIPES_MAGIC)
        } else {
            assert_eq!(self.locations.len(), self.backends.len(), "one location per stripe");
            begin_sealed_version(STRIPES_MAGIC, STRIPES_VERSION)
        };
        put_u32(&mut out, self.component);
        put_u32(&mut out, self.backends.len() as u32);
        for backend in &self.backends {
            put_u32(&mut out, *backend);
        }
        for location in &self.locations {
            // A longer location is kept cut (at a character boundary): it
            // then matches no backend, and positions are used (§15).
            let mut length = location.len().min(LOCATION_MAX_BYTES);
            while !location.is_char_boundary(length) {
                length -= 1;
            }
            put_u16(&mut out, length as u16);
            out.extend_from_slice(&location.as_bytes()[..length]);
        }
        seal(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<StripesRecord> {
        let (version, body) = open_sealed_up_to(bytes, STRIPES_MAGIC, "stripes record", STRIPES_VERSION)?;
        let mut reader = Reader::new(body, "stripes record");
        let component = reader.u32()?;
        let count = reader.u32()? as usize;
        let too_short = count.checked_mul(4).is_none_or(|needed| reader.remaining() < needed);
        if count == 0 || too_short || (version < 3 && reader.remaining() != count * 4) {
            return Err(Error::corrupt(format!(
                "stripes record: {count} stripes but {} bytes of backends",
                reader.remaining()
            )));
        }
        let backends = (0..count).map(|_| reader.u32()).collect::<Result<Vec<u32>>>()?;
        let mut seen = backends.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != backends.len() {
            return Err(Error::corrupt(format!("stripes record: a backend is named twice in {backends:?}")));
        }
        let mut locations = Vec::new();
        if version >= 3 {
            for _ in 0..count {
                let length = usize::from(reader.u16()?);
                let location = std::str::from_utf8(reader.take(length)?)
                    .map_err(|_| Error::corrupt("stripes record: a backend location is not UTF-8"))?;
                locations.push(location.to_owned());
            }
            if reader.remaining() != 0 {
                return Err(Error::corrupt(format!(
                    "stripes record: {} bytes after the locations",
                    reader.remaining()
                )));
            }
        }
        Ok(StripesRecord { component, backends, locations })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    const MIB: u64 = 1 << 20;

    fn progressive() -> Layout {
        Layout::new(vec![
            Component {
                start: 0,
                end: Some(MIB),
                stripe_count: StripeCount::Count(1),
                stripe_size: MIB,
                pool: None,
            },
            Component {
                start: MIB,
                end: None,
                stripe_count: StripeCount::All,
                stripe_size: MIB,
                pool: Some("fast".into()),
            },
        ])
        .unwrap()
    }

    fn reseal(bytes: &mut [u8]) {
        let length = bytes.len();
        let crc = crc32c::crc32c(&bytes[..length - 4]);
        bytes[length - 4..].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn layouts_round_trip() {
        let layout = progressive();
        assert_eq!(decode_layout(&encode_layout(&layout)).unwrap(), layout);
    }

    #[test]
    fn layout_golden_bytes() {
        let bytes = encode_layout(&progressive());
        assert_eq!(&bytes[..12], b"PLFSLAYT\x02\x00\x02\x00");
        // Component 1: start, end, stripe size, count, empty pool.
        assert_eq!(&bytes[12..20], &0u64.to_le_bytes());
        assert_eq!(&bytes[20..28], &MIB.to_le_bytes());
        assert_eq!(&bytes[28..36], &MIB.to_le_bytes());
        assert_eq!(&bytes[36..40], &1u32.to_le_bytes());
        assert_eq!(&bytes[40..42], &0u16.to_le_bytes());
        // Component 2 runs to EOF over every backend of pool "fast".
        assert_eq!(&bytes[50..58], &u64::MAX.to_le_bytes());
        assert_eq!(&bytes[66..70], &u32::MAX.to_le_bytes());
        assert_eq!(&bytes[70..76], b"\x04\x00fast");
        assert_eq!(bytes.len(), 76 + 4);
    }

    #[test]
    fn stripes_round_trip_and_golden_bytes() {
        let record = StripesRecord { component: 2, backends: vec![3, 0, 1], locations: Vec::new() };
        let bytes = record.encode();
        assert_eq!(&bytes[..10], b"PLFSSTRP\x02\x00");
        assert_eq!(&bytes[10..18], &[2, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(bytes.len(), 18 + 12 + 4);
        assert_eq!(StripesRecord::decode(&bytes).unwrap(), record);
    }

    #[test]
    fn version_3_records_keep_each_backends_location() {
        let record = StripesRecord {
            component: 1,
            backends: vec![2, 0],
            locations: vec!["posix:///b2".into(), "s3://bucket/b0".into()],
        };
        let bytes = record.encode();
        assert_eq!(&bytes[..10], b"PLFSSTRP\x03\x00");
        assert_eq!(&bytes[10..26], &[1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&bytes[26..39], b"\x0b\x00posix:///b2");
        assert_eq!(bytes.len(), 26 + 13 + 16 + 4);
        assert_eq!(StripesRecord::decode(&bytes).unwrap(), record);
        // Version 4 is refused by name; a location cut short is damage.
        let mut newer = bytes.clone();
        newer[8] = 4;
        reseal(&mut newer);
        let error = StripesRecord::decode(&newer).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported);
        assert!(error.to_string().contains("stripes record: format version 4"), "{error}");
        let mut short = bytes[..bytes.len() - 5].to_vec();
        short.extend_from_slice(&[0; 4]);
        reseal(&mut short);
        assert_eq!(StripesRecord::decode(&short).unwrap_err().kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn newer_versions_are_refused_by_name_and_damage_is_corrupt() {
        let mut bytes = encode_layout(&progressive());
        bytes[8] = 9;
        reseal(&mut bytes);
        let error = decode_layout(&bytes).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported);
        assert!(error.to_string().contains("layout file: format version 9"), "{error}");

        let mut bytes = StripesRecord { component: 0, backends: vec![1], locations: Vec::new() }.encode();
        bytes[8] = 7;
        reseal(&mut bytes);
        assert_eq!(StripesRecord::decode(&bytes).unwrap_err().kind(), ErrorKind::Unsupported);

        let good = encode_layout(&progressive());
        for position in 0..good.len() {
            let mut bytes = good.clone();
            bytes[position] ^= 0x10;
            assert!(decode_layout(&bytes).is_err(), "flip at {position} went unnoticed");
        }
        // A checksum-valid layout breaking the tiling rules is damage too.
        let mut bytes = encode_layout(&progressive());
        bytes[20..28].copy_from_slice(&(2 * MIB).to_le_bytes());
        reseal(&mut bytes);
        let error = decode_layout(&bytes).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Corrupt, "{error}");
        let mut bytes = StripesRecord { component: 0, backends: vec![1, 1], locations: Vec::new() }.encode();
        reseal(&mut bytes);
        assert!(StripesRecord::decode(&bytes).unwrap_err().to_string().contains("named twice"));
    }
}
