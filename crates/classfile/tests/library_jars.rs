//! Real libraries, every class instrumented: commons-lang3 (which CI
//! installs) is loaded, initialised and exercised; guava, when present, is
//! loaded and initialised. Every class is verified, and the output must
//! match the uninstrumented run.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::*;

const LANG3: &str = "/usr/share/java/commons-lang3.jar";
const GUAVA: &str = "/usr/share/java/guava.jar";

/// Extracts `jar` into `dir` and returns the binary names of its classes.
fn extract(jdk: &Jdk, jar: &Path, dir: &Path) -> Vec<String> {
    fs::create_dir_all(dir).unwrap();
    let status = jdk
        .tool("jar")
        .arg("xf")
        .arg(jar)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success());
    files_under(dir)
        .iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_str()?;
            let name = rel.strip_suffix(".class")?;
            (!rel.starts_with("META-INF") && !name.ends_with("module-info"))
                .then(|| name.replace('/', "."))
        })
        .collect()
}

/// Instruments every class of `jar`, runs `LoadAll` (and `exercise`, if
/// given) on the plain and instrumented classes, and returns the events.
fn run_library(name: &str, jar: &Path, exercise: Option<&str>) -> (Vec<Event>, usize) {
    let jdk = Jdk::default();
    let tmp = TempDir::new(name);
    let (plain, inst, probe, drivers) = (
        tmp.join("plain"),
        tmp.join("instrumented"),
        tmp.join("probe"),
        tmp.join("drivers"),
    );
    let classes = extract(&jdk, jar, &plain);
    let list = tmp.join("classes.txt");
    fs::write(&list, classes.join("\n")).unwrap();
    let mut sources: Vec<PathBuf> = vec![fixtures_dir().join("jars/LoadAll.java")];
    if let Some(e) = exercise {
        sources.push(fixtures_dir().join(format!("jars/{e}.java")));
    }
    jdk.javac(&sources, &drivers, &["-cp", jar.to_str().unwrap()]);
    compile_probe(&jdk, &probe);

    // Monitors too: `check_nesting` pairs every release with its acquisition.
    let config = vmview_classfile::HookConfig {
        monitors: true,
        ..config()
    };
    let done = instrument_tree(&plain, &inst, &config);
    assert_eq!(done.unexpected_skips(), Vec::<String>::new());
    assert!(done.results.iter().filter(|r| r.bytes().is_some()).count() > classes.len() / 2);

    let mut args = vec![list.to_str().unwrap().to_string()];
    args.extend(exercise.map(str::to_string));
    let run = |cp: &[&Path], log: Option<&Path>| jdk.run_with_args(cp, "LoadAll", log, &args);
    let before = run(&[&drivers, &plain], None);
    assert_eq!(before.status, Some(0), "{}", before.stderr);
    let log = tmp.join("probe.log");
    let after = run(&[&drivers, &inst, &probe], Some(&log));
    assert_eq!(after.stdout, before.stdout, "stderr:\n{}", after.stderr);
    assert!(
        !after.stderr.contains("VerifyError") && !after.stderr.contains("ClassFormatError"),
        "{}",
        after.stderr
    );
    let events = read_log(&log, &done.names);
    assert!(check_nesting(&events).is_empty());
    (events, done.method_count())
}

#[test]
fn commons_lang3_fully_instrumented_verifies_and_behaves_identically() {
    assert!(
        Path::new(LANG3).exists(),
        "{LANG3} is missing: apt-get install libcommons-lang3-java (.ci/run does)"
    );
    let (events, methods) = run_library("lang3", Path::new(LANG3), Some("Lang3Exercise"));
    assert!(methods > 3000, "{methods} methods instrumented");
    let su = "org/apache/commons/lang3/StringUtils";
    assert_in_order(
        &events,
        &[
            &format!(r#"ENTER {su}.isBlank(Ljava/lang/CharSequence;)Z ["  "]"#),
            &format!("EXIT {su}.isBlank(Ljava/lang/CharSequence;)Z true"),
            &format!(r#"ENTER {su}.abbreviate(Ljava/lang/String;I)Ljava/lang/String; ["abcdefghij", 6]"#),
            &format!(r#"EXIT {su}.abbreviate(Ljava/lang/String;I)Ljava/lang/String; "abc...""#),
            "ENTER org/apache/commons/lang3/mutable/MutableInt.<init>(I)V [5]",
            "THROW org/apache/commons/lang3/Validate.isTrue(ZLjava/lang/String;J)V java.lang.IllegalArgumentException",
        ],
    );
    assert!(events.len() > 10_000, "{} events", events.len());
}

#[test]
fn guava_fully_instrumented_loads_and_initialises_identically() {
    if !Path::new(GUAVA).exists() {
        eprintln!("{GUAVA} not installed; skipped");
        return;
    }
    let (_, methods) = run_library("guava", Path::new(GUAVA), None);
    assert!(methods > 15_000, "{methods} methods instrumented");
}
