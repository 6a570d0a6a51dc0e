//! Owner and group names (what HDFS stores) mapped to local ids and back.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::Mutex;

use super::lock;

/// The id `metadata` reports for an owner or group name that has no local
/// account and is not a number: the kernel's overflow id (`nobody`,
/// `nogroup`), as NFSv4 id mapping does.
pub const UNKNOWN_ID: u32 = 65534;

/// Owner and group names ↔ local ids, through the user and group databases
/// (getpwnam_r and friends, so NSS sources such as LDAP count). A name with
/// no local entry maps to its number if it is one (HDFS accepts any string
/// as an owner, so ids without names round-trip as decimal text) and to
/// [`UNKNOWN_ID`] otherwise: HDFS's default group `supergroup` usually has
/// no local entry.
#[derive(Debug, Default)]
pub(super) struct IdMap {
    users: Mutex<HashMap<String, u32>>,
    groups: Mutex<HashMap<String, u32>>,
}

impl IdMap {
    pub(super) fn user_id(&self, name: &str) -> u32 {
        cached(&self.users, name, |name| lookup_id(name, Database::Users))
    }

    pub(super) fn group_id(&self, name: &str) -> u32 {
        cached(&self.groups, name, |name| lookup_id(name, Database::Groups))
    }

    pub(super) fn user_name(&self, uid: u32) -> String {
        lookup_name(uid, Database::Users).unwrap_or_else(|| uid.to_string())
    }

    pub(super) fn group_name(&self, gid: u32) -> String {
        lookup_name(gid, Database::Groups).unwrap_or_else(|| gid.to_string())
    }
}

/// Names seen so far stay mapped as first seen: the databases rarely change
/// while a mount runs, and a lookup per stat would be an NSS round trip.
fn cached(map: &Mutex<HashMap<String, u32>>, name: &str, lookup: impl Fn(&str) -> u32) -> u32 {
    if let Some(id) = lock(map).get(name) {
        return *id;
    }
    let id = lookup(name);
    lock(map).insert(name.to_owned(), id);
    id
}

#[derive(Clone, Copy)]
enum Database {
    Users,
    Groups,
}

/// Buffer for one passwd or group entry; a group with many members can
/// need more, so lookups retry with larger buffers up to the maximum.
const ENTRY_BUFFER_BYTES: usize = 1 << 12;
const ENTRY_BUFFER_BYTES_MAX: usize = 1 << 20;

fn lookup_id(name: &str, database: Database) -> u32 {
    let found = CString::new(name).ok().and_then(|c_name| {
        with_entry_buffer(|buffer| unsafe {
            // SAFETY: every pointer is to a live local or to `buffer`,
            // whose length is passed; the result is read before return.
            match database {
                Database::Users => {
                    let mut entry: libc::passwd = std::mem::zeroed();
                    let mut result = std::ptr::null_mut();
                    let code = libc::getpwnam_r(
                        c_name.as_ptr(),
                        &mut entry,
                        buffer.as_mut_ptr(),
                        buffer.len(),
                        &mut result,
                    );
                    (code, (!result.is_null()).then_some(entry.pw_uid))
                }
                Database::Groups => {
                    let mut entry: libc::group = std::mem::zeroed();
                    let mut result = std::ptr::null_mut();
                    let code = libc::getgrnam_r(
                        c_name.as_ptr(),
                        &mut entry,
                        buffer.as_mut_ptr(),
                        buffer.len(),
                        &mut result,
                    );
                    (code, (!result.is_null()).then_some(entry.gr_gid))
                }
            }
        })
    });
    found.or_else(|| name.parse::<u32>().ok()).unwrap_or(UNKNOWN_ID)
}

fn lookup_name(id: u32, database: Database) -> Option<String> {
    with_entry_buffer(|buffer| unsafe {
        // SAFETY: as in lookup_id; the name is copied out before return.
        match database {
            Database::Users => {
                let mut entry: libc::passwd = std::mem::zeroed();
                let mut result = std::ptr::null_mut();
                let code = libc::getpwuid_r(id, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result);
                let name =
                    (!result.is_null()).then(|| CStr::from_ptr(entry.pw_name).to_string_lossy().into_owned());
                (code, name)
            }
            Database::Groups => {
                let mut entry: libc::group = std::mem::zeroed();
                let mut result = std::ptr::null_mut();
                let code = libc::getgrgid_r(id, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result);
                let name =
                    (!result.is_null()).then(|| CStr::from_ptr(entry.gr_name).to_string_lossy().into_owned());
                (code, name)
            }
        }
    })
}

/// Calls `lookup` with growing buffers while it answers ERANGE.
fn with_entry_buffer<T>(mut lookup: impl FnMut(&mut [libc::c_char]) -> (i32, Option<T>)) -> Option<T> {
    let mut size = ENTRY_BUFFER_BYTES;
    loop {
        let mut buffer = vec![0 as libc::c_char; size];
        let (code, found) = lookup(&mut buffer);
        if code == libc::ERANGE && size < ENTRY_BUFFER_BYTES_MAX {
            size *= 2;
            continue;
        }
        return found;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_names() {
        let ids = IdMap::default();
        assert_eq!(ids.user_id("root"), 0);
        assert_eq!(ids.user_name(0), "root");
        assert_eq!(ids.group_id(&ids.group_name(0)), 0);
        // An id without a local name travels as its decimal text.
        assert_eq!(ids.user_name(4_000_000_000), "4000000000");
        assert_eq!(ids.user_id("4000000000"), 4_000_000_000);
        assert_eq!(ids.group_id("supergroup-that-does-not-exist"), UNKNOWN_ID);
    }
}
