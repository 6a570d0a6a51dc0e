//! The deterministic record contents every phase writes and every reader
//! checks. A byte is a function of (record index, byte position) only, so a
//! reader in another process can check any record without being told what
//! was written, and a misplaced record, a hole or a torn write all show.

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A well-mixed per-record seed, so neighbouring records share no words
/// and a record landing at its neighbour's offset is caught.
fn seed(record: u64) -> u64 {
    let mut z = record.wrapping_add(0x504C_4653_4245_4E43).wrapping_mul(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Word `j` of a record. Consecutive words differ by distinct multiples of
/// GOLDEN, so no record of 16 bytes or more can be all zero (a hole).
#[inline]
fn word(seed: u64, j: u64) -> u64 {
    seed ^ (j + 1).wrapping_mul(GOLDEN)
}

/// Fills `buf` with record `record`'s bytes: one multiply and one 8-byte
/// store per word, cheap next to the write it feeds.
pub fn fill_record(record: u64, buf: &mut [u8]) {
    let seed = seed(record);
    let mut chunks = buf.chunks_exact_mut(8);
    let mut j = 0u64;
    for chunk in &mut chunks {
        chunk.copy_from_slice(&word(seed, j).to_le_bytes());
        j += 1;
    }
    let tail = chunks.into_remainder();
    let last = word(seed, j).to_le_bytes();
    tail.copy_from_slice(&last[..tail.len()]);
}

/// The expected byte at `position` of `record` (for error messages and
/// tests; the fast paths work a word at a time).
pub fn pattern_byte(record: u64, position: usize) -> u8 {
    word(seed(record), (position / 8) as u64).to_le_bytes()[position % 8]
}

/// Words checked per step of [`verify_record`]: the differences of a block
/// are OR-ed together with no branch between them, so the loop compiles to
/// straight vector code whose speed does not hang on where the linker puts
/// it; only a block that differs is searched word by word.
const BLOCK_WORDS: usize = 8;

/// Checks that `buf` holds exactly record `record`'s bytes; on a mismatch
/// returns the first byte position that differs.
pub fn verify_record(record: u64, buf: &[u8]) -> Result<(), usize> {
    let seed = seed(record);
    let mut blocks = buf.chunks_exact(8 * BLOCK_WORDS);
    let mut j = 0u64;
    for block in &mut blocks {
        let mut differs = 0u64;
        for (k, chunk) in block.chunks_exact(8).enumerate() {
            let got = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
            differs |= got ^ word(seed, j + k as u64);
        }
        if differs != 0 {
            return Err(j as usize * 8 + first_difference(seed, j, block));
        }
        j += BLOCK_WORDS as u64;
    }
    let rest = blocks.remainder();
    match first_difference(seed, j, rest) {
        at if at < rest.len() => Err(j as usize * 8 + at),
        _ => Ok(()),
    }
}

/// The first byte of `bytes` (which start at word `j`) that differs from
/// the pattern, or `bytes.len()` when none does.
fn first_difference(seed: u64, j: u64, bytes: &[u8]) -> usize {
    bytes
        .chunks(8)
        .enumerate()
        .find_map(|(k, chunk)| {
            let expected = word(seed, j + k as u64).to_le_bytes();
            chunk.iter().zip(expected).position(|(a, b)| *a != b).map(|within| k * 8 + within)
        })
        .unwrap_or(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_record_verifies_and_matches_pattern_byte() {
        for len in [0usize, 1, 7, 8, 9, 47001] {
            let mut buf = vec![0u8; len];
            fill_record(42, &mut buf);
            assert_eq!(verify_record(42, &buf), Ok(()));
            for (position, byte) in buf.iter().enumerate() {
                assert_eq!(*byte, pattern_byte(42, position));
            }
        }
    }

    #[test]
    fn any_flipped_byte_is_found_at_its_position() {
        let mut buf = vec![0u8; 47001];
        fill_record(7, &mut buf);
        for position in [0, 5, 8, 4711, 46999, 47000] {
            buf[position] ^= 0x40;
            assert_eq!(verify_record(7, &buf), Err(position));
            buf[position] ^= 0x40;
        }
    }

    #[test]
    fn a_flip_anywhere_around_block_edges_is_found_first() {
        for len in [1usize, 63, 64, 65, 127, 128, 129, 200] {
            let mut buf = vec![0u8; len];
            fill_record(3, &mut buf);
            for position in 0..len {
                buf[position] ^= 1;
                assert_eq!(verify_record(3, &buf), Err(position), "len {len}");
                // A second, later difference must not hide the first.
                if position + 9 < len {
                    buf[position + 9] ^= 2;
                    assert_eq!(verify_record(3, &buf), Err(position), "len {len}");
                    buf[position + 9] ^= 2;
                }
                buf[position] ^= 1;
            }
            assert_eq!(verify_record(3, &buf), Ok(()));
        }
    }

    #[test]
    fn records_differ_and_are_never_zero() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        fill_record(0, &mut a);
        fill_record(1, &mut b);
        assert_ne!(a, b);
        assert!(verify_record(1, &a).is_err());
        assert!(verify_record(0, &vec![0u8; 4096]).is_err());
        for record in 0..10_000 {
            let mut small = [0u8; 16];
            fill_record(record, &mut small);
            assert!(small.iter().any(|&byte| byte != 0), "record {record}");
        }
    }
}
