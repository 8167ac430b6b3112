//! The program being measured: the bundled `vmbench` workload (compiled
//! here from sources embedded in the binary, so the harness needs nothing
//! but a JDK) or a jar the user names.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};
use vmview_options::ClassFilter;

/// The bundled workload's sources (`bench/overhead/java/vmbench`).
const SOURCES: &[(&str, &str)] = &[
    (
        "Workload.java",
        include_str!("../java/vmbench/Workload.java"),
    ),
    ("Catalog.java", include_str!("../java/vmbench/Catalog.java")),
    (
        "Category.java",
        include_str!("../java/vmbench/Category.java"),
    ),
    ("Money.java", include_str!("../java/vmbench/Money.java")),
    ("Order.java", include_str!("../java/vmbench/Order.java")),
    ("Product.java", include_str!("../java/vmbench/Product.java")),
    ("Report.java", include_str!("../java/vmbench/Report.java")),
    ("Shop.java", include_str!("../java/vmbench/Shop.java")),
];

/// Days the bundled workload simulates by default: about 0.25 s of work on
/// JDK 17 on an idle 2-core machine, so that the default run (five rounds
/// of every configuration) stays within about three minutes.
pub const DEFAULT_DAYS: u32 = 60;

/// What to run and what to trace in it.
#[derive(Debug, Clone)]
pub struct Workload {
    /// A class directory or a jar.
    pub classpath: PathBuf,
    /// The main class; `None` runs the jar with `-jar`.
    pub main: Option<String>,
    /// Program arguments (a user's jar only).
    pub args: Vec<String>,
    /// Trace classes, as vmview's `classes=` option takes them.
    pub classes: String,
    /// The same classes as a JFR method filter: `a.B;a.C`.
    pub jfr_filter: String,
    /// `Some(days)` for the bundled workload, which can be scaled down.
    pub days: Option<u32>,
}

impl Workload {
    /// Compiles the bundled workload into `dir` with `javac` (release 17,
    /// so every JDK from 17 on runs it).
    pub fn bundled(javac: &Path, dir: &Path, days: u32) -> anyhow::Result<Workload> {
        let src = dir.join("src/vmbench");
        let classes = dir.join("classes");
        std::fs::create_dir_all(&src)?;
        let mut files = Vec::new();
        for (name, text) in SOURCES {
            let p = src.join(name);
            std::fs::write(&p, text)?;
            files.push(p);
        }
        let out = Command::new(javac)
            .args(["-g", "--release", "17", "-d"])
            .arg(&classes)
            .args(&files)
            .output()
            .with_context(|| format!("cannot run {} (is a JDK installed?)", javac.display()))?;
        if !out.status.success() {
            bail!(
                "javac failed on the bundled workload:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut names = Vec::new();
        class_names_in_dir(&classes, &classes, &mut names)?;
        names.sort();
        Ok(Workload {
            classpath: classes,
            main: Some("vmbench.Workload".to_string()),
            args: Vec::new(),
            classes: "vmbench.*".to_string(),
            jfr_filter: names.join(";"),
            days: Some(days),
        })
    }

    /// A user's jar. The classes matching `classes` (vmview globs) are
    /// listed from the jar with `jar tf` to build the JFR method filter.
    pub fn jar(
        jar_tool: &Path,
        jar: &Path,
        main: Option<String>,
        classes: &str,
        args: Vec<String>,
    ) -> anyhow::Result<Workload> {
        let filter = ClassFilter::parse(classes).map_err(|e| anyhow::anyhow!("--classes: {e}"))?;
        let out = Command::new(jar_tool)
            .arg("tf")
            .arg(jar)
            .output()
            .with_context(|| {
                format!(
                    "cannot run {} to list {}",
                    jar_tool.display(),
                    jar.display()
                )
            })?;
        if !out.status.success() {
            bail!(
                "cannot list {}: {}",
                jar.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_suffix(".class"))
            .filter(|l| !l.ends_with("module-info") && !l.ends_with("package-info"))
            .map(|l| l.replace('/', "."))
            .filter(|n| filter.matches(n))
            .collect();
        names.sort();
        if names.is_empty() {
            bail!("no class of {} matches --classes {classes}", jar.display());
        }
        Ok(Workload {
            classpath: jar.to_path_buf(),
            main,
            args,
            classes: classes.to_string(),
            jfr_filter: names.join(";"),
            days: None,
        })
    }

    /// The arguments after the JVM options: `-cp CP MAIN ARGS` or
    /// `-jar JAR ARGS`; the bundled workload gets its day count divided by
    /// `scale`.
    pub fn program_args(&self, scale: u32) -> Vec<String> {
        let mut v = Vec::new();
        match &self.main {
            Some(main) => {
                v.push("-cp".to_string());
                v.push(self.classpath.display().to_string());
                v.push(main.clone());
            }
            None => {
                v.push("-jar".to_string());
                v.push(self.classpath.display().to_string());
            }
        }
        match self.days {
            Some(days) => v.push((days / scale).max(1).to_string()),
            None => v.extend(self.args.iter().cloned()),
        }
        v
    }

    /// How much of the full workload a row at `scale` runs (the bundled
    /// workload only; a jar always runs whole).
    pub fn fraction(&self, scale: u32) -> f64 {
        match self.days {
            Some(days) => f64::from((days / scale).max(1)) / f64::from(days),
            None => 1.0,
        }
    }

    /// A description for the report.
    pub fn describe(&self) -> String {
        match (&self.days, &self.main) {
            (Some(days), _) => format!("bundled vmbench workload, {days} days"),
            (None, Some(main)) => format!(
                "{} {main} {}",
                self.classpath.display(),
                self.args.join(" ")
            ),
            (None, None) => format!("-jar {} {}", self.classpath.display(), self.args.join(" ")),
        }
        .trim_end()
        .to_string()
    }
}

fn class_names_in_dir(root: &Path, dir: &Path, out: &mut Vec<String>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            class_names_in_dir(root, &p, out)?;
        } else if let Some(rel) = p
            .strip_prefix(root)
            .ok()
            .and_then(|r| r.to_str())
            .and_then(|r| r.strip_suffix(".class"))
        {
            out.push(rel.replace('/', "."));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled workload compiles and prints the same checksum twice,
    /// and reports its work time (a couple of seconds: javac and two JVMs).
    #[test]
    fn bundled_workload_is_deterministic() {
        let dir =
            std::env::temp_dir().join(format!("vmview-overhead-smoke-{}", std::process::id()));
        let w = Workload::bundled(Path::new("javac"), &dir, 2).expect("compile the workload");
        assert!(
            w.jfr_filter.split(';').any(|c| c == "vmbench.Order$Line"),
            "{}",
            w.jfr_filter
        );
        let run = || {
            let out = Command::new("java")
                .args(w.program_args(1))
                .output()
                .expect("run java");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (first, again) = (run(), run().0);
        std::fs::remove_dir_all(&dir).ok();
        assert!(
            first.0.starts_with("checksum=") && first.0.lines().count() == 1,
            "{first:?}"
        );
        assert_eq!(first.0, again);
        assert!(first.1.contains("vmbench: work_ns="), "{first:?}");
    }
}
