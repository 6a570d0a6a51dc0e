//! The inode table: which logical path each inode number the kernel holds
//! stands for.
//!
//! plfs names files by path, the kernel by inode number. Each node records
//! its parent and its name rather than a whole path, so renaming a
//! directory moves everything under it in one step, and a node's path is
//! rebuilt by walking up to the root when an operation needs it.
//!
//! A node lives while the kernel holds lookups on it (FUSE `forget` gives
//! them back), while a child node hangs under it, or while a file handle
//! is open on it. Inode numbers are never reused within one daemon, so the
//! generation only has to tell daemons apart (see [`InodeTable::new`]).

use std::collections::HashMap;

use fuser::{Generation, INodeNo};
use plfs::attr::FileKind;

/// The mount root: always present, never forgotten.
pub const ROOT: INodeNo = INodeNo::ROOT;

/// How deep a path may nest; a longer parent chain means the table is
/// corrupt (a cycle), which must not hang a request thread.
const DEPTH_MAX: usize = 4096;

#[derive(Debug)]
struct Node {
    /// Parent and name; None for the root and for a node whose name was
    /// unlinked or replaced (it lives on until the kernel forgets it).
    link: Option<(INodeNo, String)>,
    kind: FileKind,
    /// Lookups the kernel holds (each `lookup`/`create`/readdirplus entry
    /// adds one, `forget` gives them back).
    lookups: u64,
    /// Attached child nodes, which need this node to build their paths.
    children: usize,
    /// Open file handles on this node.
    opens: usize,
    /// Where an unlinked file still open now lives (a hidden name in the
    /// same directory), removed when its last handle closes.
    hidden: Option<String>,
    /// The name a rename took from this file for another one. The kernel
    /// moves its own dentry only when the rename's reply arrives, so until
    /// then an open(2) of that name still reaches this node; it must get
    /// the file now at the name (the new one), not the replaced one.
    replaced_at: Option<(INodeNo, String)>,
    /// The name an unlink took from this file. An open(2) in a path walk
    /// that began before the unlink's reply still reaches this node: while
    /// the file lives on hidden (open here) it opens that; after, it gets
    /// what is at the name now, and ENOENT when there is nothing (as after
    /// the unlink on a local file system), not ESTALE, which the kernel
    /// retries only once and churning programs then saw.
    unlinked_from: Option<(INodeNo, String)>,
    /// The size the kernel last got for this node (in an entry or
    /// attributes); None until then.
    /// An open that finds another size tells the kernel its copy is stale.
    reported_size: Option<u64>,
}

impl Node {
    fn new(link: Option<(INodeNo, String)>, kind: FileKind) -> Node {
        Node {
            link,
            kind,
            lookups: 0,
            children: 0,
            opens: 0,
            hidden: None,
            replaced_at: None,
            unlinked_from: None,
            reported_size: None,
        }
    }
}

/// Where a node's file is, for an open or a getattr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// The node has its name.
    Named(String),
    /// A rename gave the node's name to another file: the path of that
    /// name now, and where the replaced file lives on while open here.
    Replaced { name: String, hidden: Option<String> },
    /// An unlinked file kept alive by open handles, at its hidden path.
    Hidden(String),
}

/// Inode number ↔ path, with the kernel's lookup counts.
#[derive(Debug)]
pub struct InodeTable {
    nodes: HashMap<INodeNo, Node>,
    names: HashMap<(INodeNo, String), INodeNo>,
    next: u64,
    generation: Generation,
}

impl InodeTable {
    /// A table holding only the root. `generation` should differ between
    /// daemon runs: inode numbers restart at 2 in every run, and the
    /// generation is what tells an NFS re-export that an old number now
    /// names something else.
    pub fn new(generation: Generation) -> InodeTable {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::new(None, FileKind::Directory));
        InodeTable { nodes, names: HashMap::new(), next: ROOT.0 + 1, generation }
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Nodes in the table, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn kind(&self, ino: INodeNo) -> Option<FileKind> {
        self.nodes.get(&ino).map(|node| node.kind)
    }

    /// The node's parent while it is attached; the root is its own parent.
    pub fn parent(&self, ino: INodeNo) -> Option<INodeNo> {
        if ino == ROOT {
            return Some(ROOT);
        }
        self.nodes.get(&ino)?.link.as_ref().map(|(parent, _)| *parent)
    }

    /// The mount-relative path ("/a/b") of a node: its hidden name if it is
    /// an unlinked file still open, None if it is unknown or detached.
    pub fn path(&self, ino: INodeNo) -> Option<String> {
        let mut names: Vec<&str> = Vec::new();
        let mut current = ino;
        while current != ROOT {
            let node = self.nodes.get(&current)?;
            match &node.link {
                Some((parent, name)) => {
                    names.push(name);
                    current = *parent;
                }
                None => {
                    // Only the node asked about may be hidden; a detached
                    // ancestor means the whole subtree is gone.
                    return if current == ino { node.hidden.clone() } else { None };
                }
            }
            if names.len() > DEPTH_MAX {
                tracing::error!("inode {ino}: parent chain longer than {DEPTH_MAX}; the table is corrupt");
                return None;
            }
        }
        if names.is_empty() {
            return Some("/".to_owned());
        }
        let mut path = String::with_capacity(names.iter().map(|name| name.len() + 1).sum());
        for name in names.iter().rev() {
            path.push('/');
            path.push_str(name);
        }
        Some(path)
    }

    /// Where the file of `ino` is: see [`Located`]. None if the node is
    /// unknown, or detached with nothing to reach.
    pub fn locate(&self, ino: INodeNo) -> Option<Located> {
        let node = self.nodes.get(&ino)?;
        if node.link.is_some() || ino == ROOT {
            return self.path(ino).map(Located::Named);
        }
        let at_name = |(parent, name): &(INodeNo, String)| {
            let dir = self.path(*parent)?;
            Some(if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") })
        };
        if let Some(name) = node.replaced_at.as_ref().and_then(at_name) {
            return Some(Located::Replaced { name, hidden: node.hidden.clone() });
        }
        if let Some(hidden) = &node.hidden {
            return Some(Located::Hidden(hidden.clone()));
        }
        let name = node.unlinked_from.as_ref().and_then(at_name)?;
        Some(Located::Replaced { name, hidden: None })
    }

    /// The name whose file an open of `ino` reaches, when it is not its own.
    fn lost_name(&self, ino: INodeNo) -> Option<(INodeNo, String)> {
        let node = self.nodes.get(&ino)?;
        node.replaced_at.clone().or_else(|| node.unlinked_from.clone())
    }

    /// Counts an open of the file `ino` reaches (see [`locate`](Self::locate))
    /// on the node that names that file: `ino` itself, or for a replaced
    /// node the one now at its former name (made if the kernel has not
    /// looked it up), since an unlink or rename of that name must find the
    /// file open. Returns that node and where the file is.
    pub fn open(&mut self, ino: INodeNo) -> Option<(INodeNo, Located)> {
        let located = self.locate(ino)?;
        let counted = match (&located, self.lost_name(ino)) {
            (Located::Replaced { .. }, Some((parent, name))) => {
                // Something else now has the name (a directory): the
                // kernel must look it up again rather than open it.
                if self.peek(parent, &name).is_some_and(|other| self.kind(other) != Some(FileKind::File)) {
                    return None;
                }
                let holder = self.lookup(parent, &name, FileKind::File)?;
                // Held by the open, not by a kernel lookup.
                if let Some(node) = self.nodes.get_mut(&holder) {
                    node.lookups -= 1;
                }
                holder
            }
            _ => ino,
        };
        self.opened(counted);
        Some((counted, located))
    }

    /// The node named `name` in `parent`, if the table has one (no count).
    pub fn peek(&self, parent: INodeNo, name: &str) -> Option<INodeNo> {
        self.names.get(&(parent, name.to_owned())).copied()
    }

    /// Counts one kernel lookup of `name` in `parent`, creating the node if
    /// needed; `None` if the parent is unknown. A name that now holds a
    /// different kind of file (replaced behind the kernel's back) gets a
    /// new node, since the kernel refuses an inode whose type changed.
    pub fn lookup(&mut self, parent: INodeNo, name: &str, kind: FileKind) -> Option<INodeNo> {
        if !self.nodes.contains_key(&parent) {
            return None;
        }
        let key = (parent, name.to_owned());
        if let Some(&ino) = self.names.get(&key) {
            match self.nodes.get_mut(&ino) {
                Some(node) if node.kind == kind => {
                    node.lookups += 1;
                    return Some(ino);
                }
                _ => {
                    if let Some(old) = self.unlink_name(parent, name) {
                        self.collect(old);
                    }
                }
            }
        }
        let ino = INodeNo(self.next);
        self.next += 1;
        let mut node = Node::new(Some(key.clone()), kind);
        node.lookups = 1;
        self.nodes.insert(ino, node);
        self.names.insert(key, ino);
        if let Some(parent_node) = self.nodes.get_mut(&parent) {
            parent_node.children += 1;
        }
        Some(ino)
    }

    /// Gives back `count` lookups (FUSE `forget`); the node goes when
    /// nothing holds it any more.
    pub fn forget(&mut self, ino: INodeNo, count: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(count);
        }
        self.collect(ino);
    }

    /// `name` in `parent` is gone (unlink, rmdir, or replaced by a
    /// rename). Its node stays, detached, until the kernel forgets it.
    pub fn detach(&mut self, parent: INodeNo, name: &str) -> Option<INodeNo> {
        let ino = self.unlink_name(parent, name)?;
        self.collect(ino);
        self.collect(parent);
        Some(ino)
    }

    /// [`detach`](Self::detach) for the unlink of a file: the node keeps
    /// the name it lost (see `Node::unlinked_from`).
    pub fn unlinked(&mut self, parent: INodeNo, name: &str) -> Option<INodeNo> {
        let ino = self.peek(parent, name)?;
        if let Some(node) = self.nodes.get_mut(&ino)
            && node.kind == FileKind::File
        {
            node.unlinked_from = Some((parent, name.to_owned()));
        }
        self.detach(parent, name)
    }

    /// Takes `name` out of `parent` without collecting anything, so the
    /// caller can attach something else first.
    fn unlink_name(&mut self, parent: INodeNo, name: &str) -> Option<INodeNo> {
        let ino = self.names.remove(&(parent, name.to_owned()))?;
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.link = None;
        }
        if let Some(parent_node) = self.nodes.get_mut(&parent) {
            parent_node.children = parent_node.children.saturating_sub(1);
        }
        Some(ino)
    }

    /// Detaches an unlinked file that is still open and records where its
    /// container now lives, so its handles keep working.
    pub fn hide(&mut self, parent: INodeNo, name: &str, hidden_path: String) -> Option<INodeNo> {
        let ino = self.peek(parent, name)?;
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.hidden = Some(hidden_path);
        }
        self.unlinked(parent, name)
    }

    /// Marks the node that lost `name` in `parent` to a rename (see
    /// `Node::replaced_at`).
    fn mark_replaced(&mut self, ino: INodeNo, parent: INodeNo, name: &str) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.replaced_at = Some((parent, name.to_owned()));
        }
    }

    /// [`hide`](Self::hide) for a file a rename replaced while it was open.
    pub fn hide_replaced(&mut self, parent: INodeNo, name: &str, hidden_path: String) -> Option<INodeNo> {
        let ino = self.hide(parent, name, hidden_path)?;
        self.mark_replaced(ino, parent, name);
        Some(ino)
    }

    /// A rename happened: whatever was at the target is detached and the
    /// source node (with everything under it) moves there.
    pub fn rename(&mut self, from_parent: INodeNo, from_name: &str, to_parent: INodeNo, to_name: &str) {
        if from_parent == to_parent && from_name == to_name {
            return;
        }
        let moving = self.unlink_name(from_parent, from_name);
        let replaced = self.unlink_name(to_parent, to_name);
        if let Some(ino) = moving {
            let key = (to_parent, to_name.to_owned());
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.link = Some(key.clone());
            }
            self.names.insert(key, ino);
            if let Some(parent_node) = self.nodes.get_mut(&to_parent) {
                parent_node.children += 1;
            }
        }
        // Collect only now: the target's parent may have been held by
        // nothing but the node the rename replaced.
        if let Some(ino) = replaced {
            self.mark_replaced(ino, to_parent, to_name);
            self.collect(ino);
        }
        self.collect(to_parent);
        self.collect(from_parent);
    }

    /// A file handle was opened on `ino`.
    pub fn opened(&mut self, ino: INodeNo) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.opens += 1;
        }
    }

    /// The kernel was sent `size` for `ino`.
    pub fn report_size(&mut self, ino: INodeNo, size: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.reported_size = Some(size);
        }
    }

    /// The size the kernel last got for `ino`, if any.
    pub fn reported_size(&self, ino: INodeNo) -> Option<u64> {
        self.nodes.get(&ino)?.reported_size
    }

    /// Open handles on `ino`.
    pub fn opens(&self, ino: INodeNo) -> usize {
        self.nodes.get(&ino).map_or(0, |node| node.opens)
    }

    /// Whether `ino` is an unlinked file kept alive by open handles.
    pub fn is_hidden(&self, ino: INodeNo) -> bool {
        self.nodes.get(&ino).is_some_and(|node| node.hidden.is_some())
    }

    /// A handle on `ino` closed. Returns the hidden path to delete when it
    /// was the last handle of an unlinked file.
    pub fn released(&mut self, ino: INodeNo) -> Option<String> {
        let node = self.nodes.get_mut(&ino)?;
        node.opens = node.opens.saturating_sub(1);
        let doomed = if node.opens == 0 { node.hidden.take() } else { None };
        self.collect(ino);
        doomed
    }

    /// Removes `ino` if nothing holds it, then its parent, and so on up.
    fn collect(&mut self, ino: INodeNo) {
        let mut current = ino;
        for _ in 0..DEPTH_MAX {
            if current == ROOT {
                return;
            }
            let Some(node) = self.nodes.get(&current) else { return };
            if node.lookups > 0 || node.children > 0 || node.opens > 0 {
                return;
            }
            let Some(node) = self.nodes.remove(&current) else { return };
            let Some((parent, name)) = node.link else { return };
            let key = (parent, name);
            if self.names.get(&key) == Some(&current) {
                self.names.remove(&key);
            }
            let Some(parent_node) = self.nodes.get_mut(&parent) else { return };
            parent_node.children = parent_node.children.saturating_sub(1);
            current = parent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> InodeTable {
        InodeTable::new(Generation(7))
    }

    #[test]
    fn root_is_slash_and_never_goes() {
        let mut inodes = table();
        assert_eq!(inodes.path(ROOT).as_deref(), Some("/"));
        inodes.forget(ROOT, 100);
        assert_eq!(inodes.path(ROOT).as_deref(), Some("/"));
        assert_eq!(inodes.parent(ROOT), Some(ROOT));
        assert_eq!(inodes.generation(), Generation(7));
    }

    #[test]
    fn lookups_count_and_forget_removes() {
        let mut inodes = table();
        let dir = inodes.lookup(ROOT, "d", FileKind::Directory).unwrap();
        let file = inodes.lookup(dir, "f", FileKind::File).unwrap();
        assert_eq!(inodes.lookup(dir, "f", FileKind::File), Some(file));
        assert_eq!(inodes.path(file).as_deref(), Some("/d/f"));
        assert_eq!(inodes.len(), 3);
        inodes.forget(file, 1);
        assert_eq!(inodes.path(file).as_deref(), Some("/d/f"), "one lookup still held");
        // The directory's own lookup is gone, but its child keeps it.
        inodes.forget(dir, 1);
        assert_eq!(inodes.path(file).as_deref(), Some("/d/f"));
        inodes.forget(file, 1);
        assert_eq!(inodes.path(file), None);
        assert_eq!(inodes.path(dir), None, "the parent went with its last child");
        assert_eq!(inodes.len(), 1);
    }

    #[test]
    fn numbers_are_never_reused() {
        let mut inodes = table();
        let first = inodes.lookup(ROOT, "f", FileKind::File).unwrap();
        inodes.forget(first, 1);
        let second = inodes.lookup(ROOT, "f", FileKind::File).unwrap();
        assert_ne!(first, second);
        assert!(second.0 > first.0);
    }

    #[test]
    fn unknown_parent_is_refused() {
        let mut inodes = table();
        assert_eq!(inodes.lookup(INodeNo(99), "f", FileKind::File), None);
        assert_eq!(inodes.path(INodeNo(99)), None);
    }

    #[test]
    fn renaming_a_directory_moves_its_subtree() {
        let mut inodes = table();
        let a = inodes.lookup(ROOT, "a", FileKind::Directory).unwrap();
        let b = inodes.lookup(a, "b", FileKind::Directory).unwrap();
        let f = inodes.lookup(b, "f", FileKind::File).unwrap();
        let z = inodes.lookup(ROOT, "z", FileKind::Directory).unwrap();
        inodes.rename(a, "b", z, "c");
        assert_eq!(inodes.path(b).as_deref(), Some("/z/c"));
        assert_eq!(inodes.path(f).as_deref(), Some("/z/c/f"));
        assert_eq!(inodes.peek(a, "b"), None);
        assert_eq!(inodes.peek(z, "c"), Some(b));
        assert_eq!(inodes.parent(b), Some(z));
        // `a` lost its only child but still has its own lookup.
        assert_eq!(inodes.path(a).as_deref(), Some("/a"));
        inodes.forget(a, 1);
        assert_eq!(inodes.path(a), None);
        assert_eq!(inodes.path(f).as_deref(), Some("/z/c/f"));
    }

    #[test]
    fn rename_over_an_existing_name_detaches_the_target() {
        let mut inodes = table();
        let x = inodes.lookup(ROOT, "x", FileKind::File).unwrap();
        let y = inodes.lookup(ROOT, "y", FileKind::File).unwrap();
        inodes.rename(ROOT, "x", ROOT, "y");
        assert_eq!(inodes.path(x).as_deref(), Some("/y"));
        assert_eq!(inodes.path(y), None, "the replaced file has no name any more");
        assert_eq!(inodes.peek(ROOT, "y"), Some(x));
        inodes.forget(y, 1);
        assert_eq!(inodes.len(), 2);
        // Renaming onto itself changes nothing.
        inodes.rename(ROOT, "y", ROOT, "y");
        assert_eq!(inodes.path(x).as_deref(), Some("/y"));
    }

    #[test]
    fn a_replaced_node_is_located_at_its_former_name() {
        let mut inodes = table();
        let d = inodes.lookup(ROOT, "d", FileKind::Directory).unwrap();
        let old = inodes.lookup(d, "target", FileKind::File).unwrap();
        let new = inodes.lookup(d, "tmp", FileKind::File).unwrap();
        inodes.opened(old);
        inodes.hide_replaced(d, "target", "/d/.plfs-swap.1".to_owned());
        inodes.rename(d, "tmp", d, "target");
        assert_eq!(inodes.locate(new), Some(Located::Named("/d/target".to_owned())));
        assert_eq!(
            inodes.locate(old),
            Some(Located::Replaced {
                name: "/d/target".to_owned(),
                hidden: Some("/d/.plfs-swap.1".to_owned())
            })
        );
        // Replaced while nobody had it open: still reaches the name.
        let newer = inodes.lookup(d, "tmp", FileKind::File).unwrap();
        inodes.rename(d, "tmp", d, "target");
        assert_eq!(
            inodes.locate(new),
            Some(Located::Replaced { name: "/d/target".to_owned(), hidden: None })
        );
        assert_eq!(inodes.locate(newer), Some(Located::Named("/d/target".to_owned())));
        // Opening the replaced node counts on the node now at the name.
        assert_eq!(inodes.open(old).map(|(counted, _)| counted), Some(newer));
        assert_eq!(inodes.opens(newer), 1);
        // A directory now at the name is not opened in its stead.
        inodes.detach(d, "target");
        inodes.lookup(d, "target", FileKind::Directory).unwrap();
        assert_eq!(inodes.open(old), None);
        // An unlinked file reaches what is at its name now.
        let gone = inodes.lookup(d, "unlinked", FileKind::File).unwrap();
        assert_eq!(inodes.unlinked(d, "unlinked"), Some(gone));
        assert_eq!(inodes.path(gone), None);
        assert_eq!(
            inodes.locate(gone),
            Some(Located::Replaced { name: "/d/unlinked".to_owned(), hidden: None })
        );
        let successor = inodes.lookup(d, "unlinked", FileKind::File).unwrap();
        assert_eq!(inodes.open(gone).map(|(counted, _)| counted), Some(successor));
        // An unlinked open file is its hidden path while it lives on, then
        // what is at its name.
        let gone = inodes.lookup(d, "gone", FileKind::File).unwrap();
        inodes.opened(gone);
        inodes.hide(d, "gone", "/d/.plfs-gone.2".to_owned());
        assert_eq!(inodes.locate(gone), Some(Located::Hidden("/d/.plfs-gone.2".to_owned())));
        assert_eq!(inodes.released(gone).as_deref(), Some("/d/.plfs-gone.2"));
        assert_eq!(inodes.locate(gone), Some(Located::Replaced { name: "/d/gone".to_owned(), hidden: None }));
    }

    #[test]
    fn unlinked_nodes_live_until_forgotten() {
        let mut inodes = table();
        let d = inodes.lookup(ROOT, "d", FileKind::Directory).unwrap();
        let f = inodes.lookup(d, "f", FileKind::File).unwrap();
        assert_eq!(inodes.detach(d, "f"), Some(f));
        assert_eq!(inodes.path(f), None);
        assert_eq!(inodes.kind(f), Some(FileKind::File));
        assert_eq!(inodes.detach(d, "f"), None);
        // A new file of the same name is a new node.
        let again = inodes.lookup(d, "f", FileKind::File).unwrap();
        assert_ne!(again, f);
        inodes.forget(f, 1);
        assert_eq!(inodes.kind(f), None);
        assert_eq!(inodes.path(again).as_deref(), Some("/d/f"));
    }

    #[test]
    fn a_removed_directory_takes_its_stale_children_out_of_the_namespace() {
        let mut inodes = table();
        let d = inodes.lookup(ROOT, "d", FileKind::Directory).unwrap();
        let f = inodes.lookup(d, "f", FileKind::File).unwrap();
        inodes.detach(ROOT, "d");
        assert_eq!(inodes.path(d), None);
        assert_eq!(inodes.path(f), None);
    }

    #[test]
    fn a_changed_kind_gets_a_new_node() {
        let mut inodes = table();
        let file = inodes.lookup(ROOT, "n", FileKind::File).unwrap();
        let dir = inodes.lookup(ROOT, "n", FileKind::Directory).unwrap();
        assert_ne!(file, dir);
        assert_eq!(inodes.path(file), None);
        assert_eq!(inodes.path(dir).as_deref(), Some("/n"));
    }

    #[test]
    fn open_unlinked_files_keep_a_hidden_path_until_the_last_close() {
        let mut inodes = table();
        let f = inodes.lookup(ROOT, "f", FileKind::File).unwrap();
        inodes.opened(f);
        inodes.opened(f);
        assert_eq!(inodes.opens(f), 2);
        assert_eq!(inodes.hide(ROOT, "f", "/.plfs-gone.1".to_owned()), Some(f));
        assert!(inodes.is_hidden(f));
        assert_eq!(inodes.path(f).as_deref(), Some("/.plfs-gone.1"));
        assert_eq!(inodes.peek(ROOT, "f"), None);
        // The kernel may forget the name before the handles close.
        inodes.forget(f, 1);
        assert_eq!(inodes.released(f), None, "one handle still open");
        assert_eq!(inodes.path(f).as_deref(), Some("/.plfs-gone.1"));
        assert_eq!(inodes.released(f).as_deref(), Some("/.plfs-gone.1"));
        assert_eq!(inodes.kind(f), None, "nothing holds the node any more");
        assert_eq!(inodes.len(), 1);
    }

    #[test]
    fn open_handles_keep_a_forgotten_node() {
        let mut inodes = table();
        let f = inodes.lookup(ROOT, "f", FileKind::File).unwrap();
        inodes.opened(f);
        inodes.forget(f, 1);
        assert_eq!(inodes.path(f).as_deref(), Some("/f"));
        assert_eq!(inodes.released(f), None);
        assert_eq!(inodes.path(f), None);
    }
}
