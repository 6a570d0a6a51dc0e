//! The oracle: what each logical file may contain, from every write and
//! truncate issued to it, and which of them were made durable.
//!
//! Writes are never stored: byte `i` of the write issued as step `seq` is
//! [`byte_of`]`(seq, i)`, never zero, so a zero read back can only be a hole,
//! a truncation, or a bug, and any other byte names the write it came from.

/// Byte `i` of the data written by step `seq`: never zero.
pub fn byte_of(seq: u64, i: u64) -> u8 {
    let mixed = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    1 + ((mixed >> 32) % 255) as u8
}

/// The data of a write issued as step `seq`.
pub fn data_of(seq: u64, length: usize) -> Vec<u8> {
    (0..length as u64).map(|i| byte_of(seq, i)).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Write {
        offset: u64,
        length: u64,
    },
    /// A truncate, or an open with O_TRUNC (size 0).
    Truncate {
        size: u64,
    },
}

#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// The step that issued it: also its order (stamps follow steps).
    pub seq: u64,
    pub kind: EventKind,
    /// Acknowledged, then covered by a completed sync: survives a crash.
    pub durable: bool,
    /// Acknowledged, then covered by a completed sync or the last close
    /// of its process's handles: every reader that opens after sees it.
    pub visible: bool,
    /// The process that issued it.
    pub process: usize,
    /// The step whose sync or close first made it visible, if one did.
    pub published: Option<u64>,
}

impl Event {
    /// The byte this write put at `at`, if it covers it.
    fn byte_at(&self, at: u64) -> Option<u8> {
        match self.kind {
            EventKind::Write { offset, length } if at >= offset && at < offset + length => {
                Some(byte_of(self.seq, at - offset))
            }
            _ => None,
        }
    }

    /// Whether this write and `later`, issued after it by another process
    /// while this one was not yet published, are concurrent: PLFS orders a
    /// pattern record (a run of strided writes) at its last write's stamp,
    /// so an earlier write of a run still pending may win over a later
    /// write from another process (docs/FORMAT.md §5.3). Either value may
    /// then be read.
    fn races_with(&self, later: &Event) -> bool {
        matches!(self.kind, EventKind::Write { .. })
            && self.process != later.process
            && self.seq < later.seq
            && self.published.is_none_or(|published| published > later.seq)
    }
}

/// One logical file (it keeps its history across renames).
#[derive(Debug, Clone, Default)]
pub struct FileModel {
    pub events: Vec<Event>,
}

/// What a byte may read as.
#[derive(Debug, Clone, Default)]
struct Allowed {
    values: Vec<u8>,
    /// Zero or past the end is allowed (a hole, or a truncate that may have
    /// survived).
    zero: bool,
}

impl FileModel {
    /// The largest size any event could have given the file.
    pub fn max_extent(&self) -> u64 {
        self.events
            .iter()
            .map(|event| match event.kind {
                EventKind::Write { offset, length } => offset + length,
                EventKind::Truncate { size } => size,
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether `value` read at `offset` could have come from any write
    /// (durable or not, failed or not), or is zero.
    pub fn ever_written(&self, offset: u64, value: u8) -> bool {
        value == 0
            || self.events.iter().any(|event| match event.kind {
                EventKind::Write { offset: start, length } => {
                    offset >= start && offset < start + length && byte_of(event.seq, offset - start) == value
                }
                EventKind::Truncate { .. } => false,
            })
    }

    /// Checks a whole file's contents after a crash and `recover --fix`
    /// (`crashed`), or after every handle closed: every byte of a durable
    /// (or, without a crash, visible) write that no later event may have
    /// replaced reads back; every byte read is the last such value there or
    /// something issued after it. Close does not fsync (docs/FORMAT.md).
    pub fn check(&self, contents: &[u8], crashed: bool) -> std::result::Result<(), String> {
        let extent = self.max_extent();
        if contents.len() as u64 > extent {
            return Err(format!("{} bytes, but nothing ever made it longer than {extent}", contents.len()));
        }
        let mut allowed: Vec<Allowed> = vec![Allowed { values: Vec::new(), zero: true }; extent as usize];
        let mut must_exist = vec![false; extent as usize];
        for (position, event) in self.events.iter().enumerate() {
            match event.kind {
                EventKind::Write { offset, length } => {
                    let racing: Vec<&Event> =
                        self.events[..position].iter().filter(|earlier| earlier.races_with(event)).collect();
                    for i in 0..length {
                        let at = (offset + i) as usize;
                        let value = byte_of(event.seq, i);
                        if (crashed && event.durable) || (!crashed && event.visible) {
                            allowed[at] = Allowed { values: vec![value], zero: false };
                            must_exist[at] = true;
                            for earlier in &racing {
                                if let Some(old) = earlier.byte_at(at as u64)
                                    && !allowed[at].values.contains(&old)
                                {
                                    allowed[at].values.push(old);
                                }
                            }
                        } else if !allowed[at].values.contains(&value) {
                            allowed[at].values.push(value);
                        }
                    }
                }
                EventKind::Truncate { size } => {
                    for at in size as usize..extent as usize {
                        allowed[at].zero = true;
                        must_exist[at] = false;
                    }
                }
            }
        }
        if let Some(first) = must_exist.iter().skip(contents.len()).position(|&must| must) {
            let at = contents.len() + first;
            return Err(format!(
                "{} byte at offset {at} is gone: the file reads {} bytes",
                if crashed { "synced" } else { "closed" },
                contents.len()
            ));
        }
        for (at, &value) in contents.iter().enumerate() {
            let ok = (value == 0 && allowed[at].zero) || allowed[at].values.contains(&value);
            if !ok {
                let what = if self.ever_written(at as u64, value) {
                    "a value older than a synced (or closed) write there: stale bytes"
                } else {
                    "a value never written there"
                };
                return Err(format!(
                    "offset {at} reads {value:#04x}: {what}; allowed {:?}{}",
                    allowed[at].values,
                    if allowed[at].zero { " or zero" } else { "" }
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(seq: u64, offset: u64, length: u64, durable: bool) -> Event {
        Event {
            seq,
            kind: EventKind::Write { offset, length },
            durable,
            visible: durable,
            process: 0,
            published: durable.then_some(seq),
        }
    }

    #[test]
    fn durable_bytes_must_read_back_and_later_writes_may_replace_them() {
        let mut file = FileModel::default();
        file.events.push(write(1, 0, 4, true));
        file.events.push(write(2, 2, 4, false));
        let mut contents = data_of(1, 4);
        assert!(file.check(&contents, true).is_ok());
        assert!(file.check(&contents[..3], true).unwrap_err().contains("synced byte at offset 3 is gone"));
        contents.extend([0, 0]);
        contents[2] = byte_of(2, 0);
        assert!(file.check(&contents, true).is_ok(), "a later write may survive in part");
        contents[0] ^= 0x55;
        assert!(file.check(&contents, true).is_err());
    }

    #[test]
    fn a_write_still_pending_when_another_process_overwrote_it_may_win() {
        let mut file = FileModel::default();
        let mut earlier = write(1, 0, 4, true);
        earlier.published = Some(5);
        let mut later = write(2, 0, 4, true);
        later.process = 1;
        later.published = Some(3);
        file.events.extend([earlier, later]);
        assert!(file.check(&data_of(2, 4), true).is_ok());
        assert!(file.check(&data_of(1, 4), true).is_ok(), "a pattern may order the earlier write last");
        file.events[0].published = Some(1);
        assert!(
            file.check(&data_of(1, 4), true).unwrap_err().contains("stale bytes"),
            "published before the later write was issued: ordered"
        );
        file.events[0].published = Some(5);
        file.events[1].process = 0;
        assert!(file.check(&data_of(1, 4), true).is_err(), "one process's writes are ordered");
    }

    #[test]
    fn a_truncate_may_or_may_not_survive() {
        let mut file = FileModel::default();
        file.events.push(write(1, 0, 8, true));
        file.events.push(Event {
            seq: 2,
            kind: EventKind::Truncate { size: 2 },
            durable: false,
            visible: false,
            process: 0,
            published: None,
        });
        assert!(file.check(&data_of(1, 8), true).is_ok());
        assert!(file.check(&data_of(1, 2), true).is_ok());
        assert!(file.check(&data_of(1, 1), true).is_err());
        file.events.push(write(3, 0, 8, true));
        assert!(file.check(&data_of(1, 8), true).is_err(), "a durable write replaced them");
    }
}
