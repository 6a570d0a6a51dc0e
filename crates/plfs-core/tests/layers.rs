//! The core's modules form layers (docs/ARCHITECTURE.md, "Layers"): a module
//! may use its own layer and the layers below it, never one above, and the
//! modules have no import cycle. This test reads `src/**/*.rs`, finds every
//! `crate::…` and `super::…` path outside test code, and checks them against
//! the table below, so a lower module that reaches up (say, a workload that
//! imports the `fs` façade) fails the build's tests with the file and path.
//!
//! The parser is deliberately small: it blanks comments, string and char
//! literals, drops items marked `#[cfg(test)]` (unit tests may drive a lower
//! module through the façade), and reads paths token by token.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom layer first. A module belongs to the unit that is the longest
/// prefix of its path (`smallfile::mount` is a workload, the rest of
/// `smallfile` is the engine below it).
const LAYERS: &[(&str, &[&str])] = &[
    // Plain values and the error type: nothing of plfs but errors.
    ("values", &["error", "clock", "config", "attr", "open", "host", "striping"]),
    // The store seam, where things go on it, and the container's names.
    ("stores", &["placement", "store", "layout", "store::counting"]),
    // The versioned on-disk encodings.
    ("formats", &["format", "checksums"]),
    // Merged indexes, the read caches, and the small-file engine (its own
    // logs and index), plus the decoders' fuzz entry points.
    ("index", &["index", "reader", "read_ahead", "smallfile", "fuzz"]),
    // The state every workload of a mount shares (and the index records it
    // keeps for a collective flatten on close).
    ("mount", &["mount_state", "retained", "reclaim"]),
    // The three workloads: containers (n-1), flat files (n-n), small files (1-N).
    (
        "workloads",
        &[
            "container",
            "file",
            "load",
            "protection",
            "rename",
            "flat",
            "smallfile::mount",
            "plfs25",
            "stripes",
        ],
    ),
    // The workload seam: one trait, one implementation per workload, each
    // delegating to the workloads layer. Nothing below it knows it exists.
    ("seam", &["workload"]),
    // The `Plfs` façade (with its registry of open files, the same for
    // every workload) and what is built on it.
    ("facade", &["fs", "fs::open_files", "tools", "migrate", "xattr", "collective", "mounts"]),
];

/// Imports inside one layer that close a cycle, each with the reason it is
/// still there. None today: add one only with its reason, and the test
/// fails if a listed one disappears (delete it here then) or if any other
/// cycle appears.
const KNOWN_CYCLE_EDGES: &[(&str, &str, &str)] = &[];

/// Root items that `lib.rs` re-exports, and the module that defines them.
const ROOT_REEXPORTS: &[(&str, &str)] = &[("Error", "error"), ("ErrorKind", "error"), ("Result", "error")];

#[test]
fn no_module_imports_a_layer_above_it_and_there_is_no_cycle() {
    let sources = read_sources();
    let edges = module_edges(&sources);
    let mut problems = upward_imports(&edges);
    problems.extend(cycles(&edges));
    assert!(problems.is_empty(), "module layering broken:\n  {}", problems.join("\n  "));
    // The parser must see the imports it is there to check: container.rs
    // uses the store seam, and the façade uses every workload.
    assert!(
        edges.contains_key(&("container".into(), "store".into())),
        "parser found no container → store import"
    );
    assert!(edges.contains_key(&("fs".into(), "workload".into())), "parser found no fs → workload import");
    for workload in ["container", "flat", "smallfile::mount"] {
        assert!(
            edges.contains_key(&("workload".into(), workload.into())),
            "parser found no workload → {workload} import"
        );
    }
}

/// The workloads are chosen through the seam alone: container code never
/// reaches the other workloads (the two cycles `container::lookup` once
/// closed by dispatching to them), and the façade never names one.
#[test]
fn workloads_are_reached_only_through_the_seam() {
    let edges = module_edges(&read_sources());
    let forbidden = [
        ("container", "flat"),
        ("container", "smallfile::mount"),
        ("fs", "flat"),
        ("fs", "smallfile::mount"),
        ("fs", "file"),
    ];
    let found: Vec<String> = forbidden
        .iter()
        .filter_map(|(from, to)| edges.get(&((*from).to_owned(), (*to).to_owned())))
        .cloned()
        .collect();
    assert!(found.is_empty(), "imports that bypass the workload seam:\n  {}", found.join("\n  "));
}

#[test]
fn parser_finds_paths_and_skips_test_code_comments_and_strings() {
    let code = r#"
        use crate::store::{Store, StorePath};
        use super::{FileStat, SmallFileStore};
        // use crate::fs::Plfs;
        /* crate::tools::x */
        fn f() { let _ = "crate::mounts::y"; let _ = '{'; g::<'static>(crate::layout::LogId::new); }
        #[cfg(test)]
        mod tests { use crate::fs::Options; fn h() { crate::tools::z() } }
        #[cfg(test)]
        mod more;
        fn after() -> crate::Result<()> { Ok(()) }
    "#;
    let module = vec!["smallfile".to_owned(), "mount".to_owned()];
    let found: BTreeSet<String> = paths_in(code, &module).into_iter().map(|path| path.join("::")).collect();
    let expected: BTreeSet<String> = [
        "store::Store",
        "store::StorePath",
        "smallfile::FileStat",
        "smallfile::SmallFileStore",
        "layout::LogId::new",
        "Result",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(found, expected);
    assert_eq!(unit_of(&["smallfile", "mount", "Thing"]), Some("smallfile::mount"));
    assert_eq!(unit_of(&["smallfile", "view", "Thing"]), Some("smallfile"));
    assert_eq!(unit_of(&["Result"]), Some("error"));
    assert_eq!(unit_of(&["ErrorKind", "NotFound"]), Some("error"));
}

struct Source {
    file: PathBuf,
    module: Vec<String>,
    text: String,
}

fn read_sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect_rs(&root, &mut files);
    files.sort();
    let mut sources: Vec<Source> = files
        .into_iter()
        .map(|file| {
            let text =
                std::fs::read_to_string(&file).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            let module = module_of(&root, &file);
            let file = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).map_or(file.clone(), Path::to_path_buf);
            Source { file, module, text }
        })
        .collect();
    // Files declared `#[cfg(test)] mod name;` are test code as a whole.
    let mut test_modules = BTreeSet::new();
    for source in &sources {
        let code = blank_comments_and_literals(&source.text);
        let tokens = tokenize(&code);
        for index in 0..tokens.len() {
            if let Some(name) = test_module_declared_at(&tokens, index) {
                let mut module = source.module.clone();
                module.push(name.to_owned());
                test_modules.insert(module);
            }
        }
    }
    sources.retain(|source| !test_modules.iter().any(|test| source.module.starts_with(test)));
    assert!(sources.len() > 40, "found only {} source files under {}", sources.len(), root.display());
    sources
}

fn collect_rs(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_rs(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are module `a::b`; `src/lib.rs` is the root.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(root).expect("under src").with_extension("");
    let mut module: Vec<String> =
        relative.components().map(|component| component.as_os_str().to_string_lossy().into_owned()).collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    module
}

/// (from unit, to unit) → where it happens, first occurrence.
fn module_edges(sources: &[Source]) -> BTreeMap<(String, String), String> {
    let mut edges = BTreeMap::new();
    for source in sources {
        if source.module.is_empty() {
            continue; // lib.rs only declares modules and re-exports the error type
        }
        let segments: Vec<&str> = source.module.iter().map(String::as_str).collect();
        let from = unit_of(&segments).unwrap_or_else(|| {
            panic!("{}: module {} is in no layer", source.file.display(), source.module.join("::"))
        });
        for path in paths_in(&source.text, &source.module) {
            let segments: Vec<&str> = path.iter().map(String::as_str).collect();
            let Some(to) = unit_of(&segments) else {
                panic!(
                    "{}: crate::{} names no module in the layer table",
                    source.file.display(),
                    path.join("::")
                );
            };
            if to != from {
                edges
                    .entry((from.to_owned(), to.to_owned()))
                    .or_insert_with(|| format!("{}: crate::{}", source.file.display(), path.join("::")));
            }
        }
    }
    edges
}

fn upward_imports(edges: &BTreeMap<(String, String), String>) -> Vec<String> {
    edges
        .iter()
        .filter(|((from, to), _)| layer_of(to) > layer_of(from))
        .map(|((from, to), place)| {
            format!(
                "{from} (layer {}) imports {to} (layer {}), above it: {place}",
                LAYERS[layer_of(from)].0,
                LAYERS[layer_of(to)].0
            )
        })
        .collect()
}

/// Every cycle left once the known edges are taken out, and every known
/// edge that no longer exists.
fn cycles(edges: &BTreeMap<(String, String), String>) -> Vec<String> {
    let mut problems = Vec::new();
    for (from, to, _) in KNOWN_CYCLE_EDGES {
        if !edges.contains_key(&((*from).to_owned(), (*to).to_owned())) {
            problems.push(format!("{from} no longer imports {to}: delete it from KNOWN_CYCLE_EDGES"));
        }
    }
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        if !KNOWN_CYCLE_EDGES.iter().any(|(known_from, known_to, _)| known_from == from && known_to == to) {
            graph.entry(from.as_str()).or_default().push(to.as_str());
        }
    }
    // Depth-first search; a grey node met again closes a cycle.
    let mut state: BTreeMap<&str, u8> = BTreeMap::new(); // 1 grey, 2 black
    let mut stack: Vec<&str> = Vec::new();
    let nodes: Vec<&str> = graph.keys().copied().collect();
    for node in nodes {
        visit(node, &graph, &mut state, &mut stack, edges, &mut problems);
    }
    problems
}

fn visit<'a>(
    node: &'a str,
    graph: &BTreeMap<&'a str, Vec<&'a str>>,
    state: &mut BTreeMap<&'a str, u8>,
    stack: &mut Vec<&'a str>,
    edges: &BTreeMap<(String, String), String>,
    problems: &mut Vec<String>,
) {
    match state.get(node) {
        Some(2) => return,
        Some(1) => {
            let start =
                stack.iter().position(|&on_stack| on_stack == node).expect("grey node is on the stack");
            let mut cycle: Vec<&str> = stack[start..].to_vec();
            cycle.push(node);
            let places: Vec<&String> =
                cycle.windows(2).map(|pair| &edges[&(pair[0].to_owned(), pair[1].to_owned())]).collect();
            problems.push(format!(
                "import cycle {}: {}",
                cycle.join(" → "),
                places.iter().map(|place| place.as_str()).collect::<Vec<_>>().join("; ")
            ));
            return;
        }
        _ => {}
    }
    state.insert(node, 1);
    stack.push(node);
    for &next in graph.get(node).map(Vec::as_slice).unwrap_or_default() {
        visit(next, graph, state, stack, edges, problems);
    }
    stack.pop();
    state.insert(node, 2);
}

fn layer_of(unit: &str) -> usize {
    LAYERS.iter().position(|(_, units)| units.contains(&unit)).expect("unit comes from the table")
}

/// The table's unit that is the longest prefix of `path` (a crate-relative
/// module or item path); root re-exports map to their module.
fn unit_of(path: &[&str]) -> Option<&'static str> {
    if let Some(first) = path.first()
        && let Some((_, module)) = ROOT_REEXPORTS.iter().find(|(name, _)| name == first)
    {
        return Some(module);
    }
    let mut best: Option<&'static str> = None;
    for (_, units) in LAYERS {
        for &unit in *units {
            let unit_segments: Vec<&str> = unit.split("::").collect();
            let longer = best.is_none_or(|found| found.split("::").count() < unit_segments.len());
            if path.starts_with(&unit_segments) && longer {
                best = Some(unit);
            }
        }
    }
    best
}

/// Every `crate::…` and `super::…` path in non-test code, as crate-relative
/// segments; `use` groups (`crate::a::{b, c::d}`) expand to one path each.
fn paths_in(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code = blank_comments_and_literals(text);
    let tokens = without_test_items(tokenize(&code));
    let mut paths = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        let token = tokens[index].as_str();
        let preceded_by_path = index > 0 && tokens[index - 1] == "::";
        if (token == "crate" || token == "super")
            && !preceded_by_path
            && tokens.get(index + 1).is_some_and(|t| t == "::")
        {
            let mut base: Vec<String> =
                if token == "crate" { Vec::new() } else { module[..module.len() - 1].to_vec() };
            index += 2;
            // Further `super::` steps.
            while tokens.get(index).is_some_and(|t| t == "super")
                && tokens.get(index + 1).is_some_and(|t| t == "::")
            {
                base.pop();
                index += 2;
            }
            index = read_path_tail(&tokens, index, base, &mut paths);
        } else {
            index += 1;
        }
    }
    paths
}

/// Reads `a::b::{c, d::e}` from `index`, pushing each full path onto `paths`;
/// returns the index after it.
fn read_path_tail(
    tokens: &[String],
    mut index: usize,
    mut base: Vec<String>,
    paths: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(index).map(String::as_str) {
            Some("{") => {
                index += 1;
                loop {
                    match tokens.get(index).map(String::as_str) {
                        Some("}") => return index + 1,
                        Some(",") => index += 1,
                        Some("self") => {
                            paths.push(base.clone());
                            index += 1;
                        }
                        Some(_) => index = read_path_tail(tokens, index, base.clone(), paths),
                        None => return index,
                    }
                }
            }
            Some(word) if is_identifier(word) => {
                base.push(word.to_owned());
                index += 1;
                if tokens.get(index).is_some_and(|t| t == "::") {
                    index += 1;
                    continue;
                }
                paths.push(base);
                return index;
            }
            _ => {
                if !base.is_empty() {
                    paths.push(base);
                }
                return index;
            }
        }
    }
}

fn is_identifier(token: &str) -> bool {
    token.chars().next().is_some_and(|first| first.is_alphabetic() || first == '_')
}

/// The name of the module that `tokens[index..]` declares as a file of
/// test code: `#[cfg(test)] [#[…]] [pub[(…)]] mod name;`.
fn test_module_declared_at(tokens: &[String], index: usize) -> Option<&str> {
    if !is_cfg_test(&tokens[index..]) {
        return None;
    }
    let mut cursor = index + 7;
    loop {
        match tokens.get(cursor).map(String::as_str) {
            Some("#") => cursor = tokens[cursor..].iter().position(|token| token == "]")? + cursor + 1,
            Some("pub") if tokens.get(cursor + 1).is_some_and(|token| token == "(") => {
                cursor = tokens[cursor..].iter().position(|token| token == ")")? + cursor + 1;
            }
            Some("pub") => cursor += 1,
            Some("mod") => break,
            _ => return None,
        }
    }
    match (tokens.get(cursor + 1), tokens.get(cursor + 2)) {
        (Some(name), Some(semicolon)) if semicolon == ";" => Some(name),
        _ => None,
    }
}

/// Whether `tokens` starts with `# [ cfg ( test ) ]`.
fn is_cfg_test(tokens: &[String]) -> bool {
    let expected = ["#", "[", "cfg", "(", "test", ")", "]"];
    tokens.len() >= expected.len() && tokens.iter().zip(expected).all(|(token, want)| token == want)
}

/// Drops every item marked `#[cfg(test)]`: up to its `;`, or through the
/// braces of its body.
fn without_test_items(tokens: Vec<String>) -> Vec<String> {
    let mut kept = Vec::with_capacity(tokens.len());
    let mut index = 0;
    while index < tokens.len() {
        if !is_cfg_test(&tokens[index..]) {
            kept.push(tokens[index].clone());
            index += 1;
            continue;
        }
        index += 7;
        let mut depth = 0usize;
        while index < tokens.len() {
            let token = tokens[index].as_str();
            index += 1;
            match token {
                ";" if depth == 0 => break,
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    kept
}

/// Identifiers, `::`, and single punctuation characters.
fn tokenize(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        if c.is_whitespace() {
            index += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = index;
            while index < chars.len() && (chars[index].is_alphanumeric() || chars[index] == '_') {
                index += 1;
            }
            tokens.push(chars[start..index].iter().collect());
        } else if c == ':' && chars.get(index + 1) == Some(&':') {
            tokens.push("::".to_owned());
            index += 2;
        } else {
            tokens.push(c.to_string());
            index += 1;
        }
    }
    tokens
}

/// The code with comments, string literals (plain, byte and raw) and char
/// literals replaced by spaces, so braces and paths inside them are not seen.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        let next = chars.get(index + 1).copied();
        if c == '/' && next == Some('/') {
            while index < chars.len() && chars[index] != '\n' {
                index += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while index < chars.len() {
                if chars[index] == '/' && chars.get(index + 1) == Some(&'*') {
                    depth += 1;
                    index += 2;
                } else if chars[index] == '*' && chars.get(index + 1) == Some(&'/') {
                    depth -= 1;
                    index += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    index += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && matches!(next, Some('#' | '"')) && !previous_is_identifier(&chars, index) {
            // Raw string: r"…" or r#"…"#, with as many hashes at the end.
            let mut hashes = 0;
            let mut cursor = index + 1;
            while chars.get(cursor) == Some(&'#') {
                hashes += 1;
                cursor += 1;
            }
            if chars.get(cursor) != Some(&'"') {
                out.push(c);
                index += 1;
                continue;
            }
            cursor += 1;
            while cursor < chars.len() {
                if chars[cursor] == '"' && (1..=hashes).all(|k| chars.get(cursor + k) == Some(&'#')) {
                    cursor += 1 + hashes;
                    break;
                }
                cursor += 1;
            }
            index = cursor;
            out.push(' ');
        } else if c == '"' {
            index += 1;
            while index < chars.len() && chars[index] != '"' {
                index += if chars[index] == '\\' { 2 } else { 1 };
            }
            index += 1;
            out.push(' ');
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), else a lifetime or label.
            if next == Some('\\') {
                let mut cursor = index + 3;
                while cursor < chars.len() && chars[cursor] != '\'' {
                    cursor += 1;
                }
                index = cursor + 1;
                out.push(' ');
            } else if chars.get(index + 2) == Some(&'\'') {
                index += 3;
                out.push(' ');
            } else {
                out.push(c);
                index += 1;
            }
        } else {
            out.push(c);
            index += 1;
        }
    }
    out
}

fn previous_is_identifier(chars: &[char], index: usize) -> bool {
    index > 0 && (chars[index - 1].is_alphanumeric() || chars[index - 1] == '_')
}
