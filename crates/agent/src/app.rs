//! Which classes are the application's own: the packages of the classes in
//! the application's class path entries, written to the trace header as
//! `app_packages` so `vmview reactions` (and the warm-up's detection) can
//! tell application code from library code without the user listing
//! packages. Framework servers call the application from their own loops,
//! so "not the JDK" is no longer "the application": Jetty, Tomcat or
//! Netty jars are libraries even though they are not the JDK.
//!
//! The application entries are `app=` when given; otherwise the class
//! path's directories (`target/classes`, `build/classes`), the `-jar` jar,
//! and, when neither exists, the jar that holds the main class. Dependency
//! jars on the class path are libraries. The entries are read once, when
//! the recording starts (before any callback), and every walk is bounded.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use vmview_analysis::reactions::DEFAULT_PACKAGE;

/// Files and directories looked at per entry, at most.
const MAX_FILES: usize = 200_000;
/// Directory depth followed, at most.
const MAX_DEPTH: usize = 64;
/// A jar's central directory read, at most (bytes).
const MAX_CENTRAL_DIRECTORY: u64 = 64 << 20;

/// The application's entries, from `app=` or the class path and command.
pub fn entries(app: &[String], class_path: Option<&str>, command: Option<&str>) -> Vec<PathBuf> {
    if !app.is_empty() {
        return app.iter().map(PathBuf::from).collect();
    }
    let main = command
        .and_then(|c| c.split_whitespace().next())
        .unwrap_or("");
    if main.ends_with(".jar") {
        return vec![PathBuf::from(main)];
    }
    let cp: Vec<PathBuf> = class_path
        .unwrap_or("")
        .split(':')
        .filter(|e| !e.is_empty())
        .map(PathBuf::from)
        .collect();
    let dirs: Vec<PathBuf> = cp.iter().filter(|p| p.is_dir()).cloned().collect();
    if !dirs.is_empty() || main.is_empty() {
        return dirs;
    }
    // Only jars: the one holding the main class.
    let wanted = format!("{}.class", main.replace('.', "/"));
    cp.into_iter()
        .filter(|p| p.is_file())
        .find(|p| jar_names(p).contains(&wanted))
        .into_iter()
        .collect()
}

/// The packages of the classes in `entries`, sorted.
pub fn packages(entries: &[PathBuf]) -> Vec<String> {
    let mut out = BTreeSet::new();
    for e in entries {
        if e.is_dir() {
            walk(e, e, 0, &mut 0, &mut out);
        } else {
            for name in jar_names(e) {
                // A Spring Boot jar keeps its classes under BOOT-INF/classes
                // (its BOOT-INF/lib jars are libraries).
                let name = name.strip_prefix("BOOT-INF/classes/").unwrap_or(&name);
                if let Some(p) = class_package(name) {
                    out.insert(p);
                }
            }
        }
    }
    out.into_iter().collect()
}

/// The package of a `.class` entry (`a/b/C.class` → `a.b`), none for
/// metadata (`META-INF/`, `module-info.class`).
fn class_package(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".class")?;
    if name.starts_with("META-INF/")
        || stem.ends_with("module-info")
        || stem.ends_with("package-info")
    {
        return None;
    }
    Some(match stem.rfind('/') {
        Some(i) => stem[..i].replace('/', "."),
        None => DEFAULT_PACKAGE.to_string(),
    })
}

fn walk(root: &Path, dir: &Path, depth: usize, seen: &mut usize, out: &mut BTreeSet<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        *seen += 1;
        if *seen > MAX_FILES {
            return;
        }
        let Ok(ft) = e.file_type() else { continue };
        let path = e.path();
        if ft.is_dir() {
            walk(root, &path, depth + 1, seen, out);
        } else if ft.is_file() {
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            if let Some(p) = rel.to_str().and_then(class_package) {
                out.insert(p);
            }
        }
    }
}

/// The entry names of a zip file, from its central directory; empty when
/// it is no zip (or a zip64 one, or larger than the bounds).
pub fn jar_names(path: &Path) -> Vec<String> {
    jar_names_inner(path).unwrap_or_default()
}

fn jar_names_inner(path: &Path) -> Option<Vec<String>> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let tail_len = len.min(22 + 65_535);
    f.seek(SeekFrom::Start(len - tail_len)).ok()?;
    let mut tail = vec![0u8; tail_len as usize];
    f.read_exact(&mut tail).ok()?;
    let eocd = (0..=tail.len().checked_sub(22)?)
        .rev()
        .find(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])?;
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as usize;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let count = u16_at(&tail, eocd + 10);
    let size = u64::from(u32_at(&tail, eocd + 12));
    let offset = u64::from(u32_at(&tail, eocd + 16));
    if offset == 0xFFFF_FFFF || size > MAX_CENTRAL_DIRECTORY || offset + size > len {
        return None;
    }
    f.seek(SeekFrom::Start(offset)).ok()?;
    let mut cd = vec![0u8; size as usize];
    f.read_exact(&mut cd).ok()?;
    let mut names = Vec::with_capacity(count.min(MAX_FILES));
    let mut i = 0;
    while i + 46 <= cd.len() && names.len() < MAX_FILES {
        if cd[i..i + 4] != [0x50, 0x4b, 0x01, 0x02] {
            break;
        }
        let (n, e, c) = (
            u16_at(&cd, i + 28),
            u16_at(&cd, i + 30),
            u16_at(&cd, i + 32),
        );
        let name = cd.get(i + 46..i + 46 + n)?;
        names.push(String::from_utf8_lossy(name).into_owned());
        i += 46 + n + e + c;
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_entries_give_their_packages() {
        assert_eq!(class_package("a/b/C.class").as_deref(), Some("a.b"));
        assert_eq!(class_package("C$1.class").as_deref(), Some(DEFAULT_PACKAGE));
        assert_eq!(class_package("META-INF/versions/9/a/B.class"), None);
        assert_eq!(class_package("module-info.class"), None);
        assert_eq!(class_package("a/b/c.txt"), None);
    }

    #[test]
    fn the_class_paths_directories_are_the_application() {
        let dir = std::env::temp_dir().join(format!("vmview-app-{}", std::process::id()));
        let classes = dir.join("classes");
        std::fs::create_dir_all(classes.join("shop/web")).unwrap();
        std::fs::write(classes.join("shop/web/Orders.class"), b"").unwrap();
        std::fs::write(classes.join("Main.class"), b"").unwrap();
        let lib = dir.join("lib.jar");
        std::fs::write(&lib, b"not a zip").unwrap();
        let cp = format!("{}:{}", lib.display(), classes.display());
        let e = entries(&[], Some(&cp), Some("Main 8080"));
        assert_eq!(e, vec![classes.clone()]);
        assert_eq!(
            packages(&e),
            vec![DEFAULT_PACKAGE.to_string(), "shop.web".to_string()]
        );
        // -jar: the jar alone; app=: what it says.
        assert_eq!(
            entries(&[], Some("x.jar"), Some("x.jar a b")),
            vec![PathBuf::from("x.jar")]
        );
        assert_eq!(
            entries(&["/a".into()], Some(&cp), None),
            vec![PathBuf::from("/a")]
        );
        assert!(jar_names(&lib).is_empty(), "no zip, no names");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
