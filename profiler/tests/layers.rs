//! The profiler's layers (docs/profiler-layers.md) hold in its sources: no module imports one
//! that `docs/profiler-layers.json` says its layer must never reach, and no import circle joins
//! more than two modules. Read from the sources as text (`crate::module` paths outside comments
//! and test modules), as the layers are drawn; the generated wrappers are left out, as they call
//! the top layer by design.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository's root (this package is `profiler/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("profiler/ has a parent")
        .to_path_buf()
}

/// Every source file under `dir` but the generated ones, as paths from the repository's root.
fn sources(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read the profiler's sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "generated") {
                sources(&path, found);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root()).expect("under the root");
            found.push(relative.to_string_lossy().into_owned());
        }
    }
}

/// The top-level module a source file belongs to: `profiler/src/traffic.rs` is `traffic`,
/// `profiler/src/family/mpich.rs` is `family`.
fn module_of(file: &str) -> String {
    let inside = file
        .strip_prefix("profiler/src/")
        .expect("a profiler source");
    let first = inside.split('/').next().expect("a path");
    first.strip_suffix(".rs").unwrap_or(first).to_string()
}

/// The code of a file without its comments and its `#[cfg(test)]` module (what tests import is
/// not the library's structure).
fn library_code(text: &str) -> String {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    code.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules that `code` names through `crate::` (a path, or a `crate::{...}` list).
fn named_modules(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            // The top-level items of the list, whatever their nested lists hold.
            let (mut depth, mut item_start) = (0, true);
            for (i, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        named.insert(ident(&list[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            named.insert(ident(rest));
        }
    }
    named.retain(|m| modules.contains(m));
    named
}

/// The import graph of the profiler's modules, each with the files it is made of.
struct Graph {
    files: BTreeMap<String, Vec<String>>,
    imports: BTreeMap<String, BTreeSet<String>>,
}

fn graph() -> Graph {
    let mut found = Vec::new();
    sources(&root().join("profiler/src"), &mut found);
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in found {
        files.entry(module_of(&file)).or_default().push(file);
    }
    files.remove("lib");
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut imports = BTreeMap::new();
    for (module, its_files) in &files {
        let mut named = BTreeSet::new();
        for file in its_files {
            let text = std::fs::read_to_string(root().join(file)).expect("read a source");
            named.extend(named_modules(&library_code(&text), &modules));
        }
        named.remove(module);
        imports.insert(module.clone(), named);
    }
    Graph { files, imports }
}

/// The strongly connected components of the graph (Tarjan's algorithm).
fn circles(imports: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        imports: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in &self.imports[v] {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w.as_str()) {
                    let low = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut circle = Vec::new();
                while let Some(w) = self.stack.pop() {
                    circle.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                self.found.push(circle);
            }
        }
    }
    let mut walk = Walk {
        imports,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in imports.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

/// The layer (whiteboard part) of a file: the part with the longest of its paths that holds it.
fn layer_of<'a>(file: &str, parts: &'a serde_json::Map<String, Value>) -> Option<&'a str> {
    let mut best: Option<(&str, usize)> = None;
    for (name, part) in parts {
        for path in part["is"].as_array().expect("a part's paths") {
            let path = path.as_str().expect("a path");
            let holds = if path.ends_with('/') {
                file.starts_with(path)
            } else {
                file == path
            };
            let longer = match best {
                Some((_, len)) => path.len() > len,
                None => true,
            };
            if holds && longer {
                best = Some((name, path.len()));
            }
        }
    }
    best.map(|(name, _)| name)
}

#[test]
fn no_import_circle_joins_more_than_two_modules() {
    let graph = graph();
    assert!(graph.imports.len() > 20, "the sources were not found");
    let large: Vec<_> = circles(&graph.imports)
        .into_iter()
        .filter(|c| c.len() > 2)
        .collect();
    assert!(large.is_empty(), "import circles: {large:?}");
}

#[test]
fn no_layer_imports_one_it_must_never_reach() {
    let board: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/profiler-layers.json"))
            .expect("read docs/profiler-layers.json"),
    )
    .expect("the layers' whiteboard is JSON");
    let parts = board["parts"].as_object().expect("parts");
    let graph = graph();
    let layer = |module: &str| -> &str {
        let mut layers = graph.files[module].iter().map(|f| layer_of(f, parts));
        let first = layers.next().flatten().expect("every module has a layer");
        assert!(
            layers.all(|l| l == Some(first)),
            "module {module}'s files are in several layers"
        );
        first
    };
    let mut broken = Vec::new();
    for rule in board["never"].as_array().expect("nevers") {
        let (from, to) = (rule[0].as_str().unwrap(), rule[1].as_str().unwrap());
        for (module, imported) in &graph.imports {
            if layer(module) != from {
                continue;
            }
            for other in imported.iter().filter(|m| layer(m) == to) {
                broken.push(format!(
                    "{module} ({from}) imports {other} ({to}): {}",
                    rule[2]
                ));
            }
        }
    }
    assert!(broken.is_empty(), "layers broken:\n{}", broken.join("\n"));
}
