//! Framework profiles: what the event loops and dispatch points of common
//! servers (Jetty, Tomcat, Netty, the JDK's HttpServer, thread pools) look
//! like, kept as data in `frameworks.txt` rather than as code, so a user can
//! add a framework with a file (`vmview reactions --frameworks FILE`)
//! without a new vmview.
//!
//! The reactions analysis does not need a profile to find a handler (that
//! works from the application/library split and thread states alone); a
//! profile makes a framework's own classes library code even when they
//! come from the application's class path (a fat jar), and names the loop
//! a handler's threads wait in and the method that dispatched it.

use vmview_options::glob_matches;

/// The built-in profiles.
pub const BUILTIN: &str = include_str!("frameworks.txt");

/// What one profile line says about its glob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileKind {
    /// A class glob: the framework's own code, always library code.
    Library,
    /// A `Class.method` glob where the framework waits for its next event.
    Loop,
    /// A `Class.method` glob that calls the application once per event.
    Dispatch,
}

/// One profile line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileEntry {
    pub framework: String,
    pub kind: ProfileKind,
    pub glob: String,
}

/// A set of profiles (possibly empty: `--no-frameworks`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profiles {
    pub entries: Vec<ProfileEntry>,
}

impl Profiles {
    /// The built-in table.
    pub fn builtin() -> Profiles {
        let mut p = Profiles::default();
        p.add_text(BUILTIN, "frameworks.txt")
            .expect("the built-in frameworks.txt parses");
        p
    }

    /// Adds the lines of `text` (`FRAMEWORK KIND GLOB`, `#` comments);
    /// `origin` names the text in errors (`FILE:LINE: ...`).
    pub fn add_text(&mut self, text: &str, origin: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let [framework, kind, glob] = words[..] else {
                return Err(format!(
                    "{origin}:{}: expected FRAMEWORK KIND GLOB (3 words), got {:?}",
                    i + 1,
                    line
                ));
            };
            let kind = match kind {
                "library" => ProfileKind::Library,
                "loop" => ProfileKind::Loop,
                "dispatch" => ProfileKind::Dispatch,
                other => {
                    return Err(format!(
                        "{origin}:{}: unknown kind '{other}' (library, loop or dispatch)",
                        i + 1
                    ))
                }
            };
            if kind != ProfileKind::Library && !glob.contains('.') {
                return Err(format!(
                    "{origin}:{}: a {} glob names Class.method, got '{glob}'",
                    i + 1,
                    if kind == ProfileKind::Loop {
                        "loop"
                    } else {
                        "dispatch"
                    }
                ));
            }
            self.entries.push(ProfileEntry {
                framework: framework.to_string(),
                kind,
                glob: glob.to_string(),
            });
        }
        Ok(())
    }

    /// The framework whose library glob matches `class`.
    pub fn library(&self, class: &str) -> Option<&str> {
        self.find(ProfileKind::Library, class)
    }

    /// The framework whose loop glob matches `class.method`.
    pub fn event_loop(&self, qualified: &str) -> Option<&str> {
        self.find(ProfileKind::Loop, qualified)
    }

    /// The framework whose dispatch glob matches `class.method`.
    pub fn dispatch(&self, qualified: &str) -> Option<&str> {
        self.find(ProfileKind::Dispatch, qualified)
    }

    fn find(&self, kind: ProfileKind, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.kind == kind && glob_matches(&e.glob, name))
            .map(|e| e.framework.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_names_the_common_servers() {
        let p = Profiles::builtin();
        assert_eq!(p.library("org.eclipse.jetty.server.Server"), Some("jetty"));
        assert_eq!(
            p.dispatch("javax.servlet.http.HttpServlet.service"),
            Some("servlet")
        );
        assert_eq!(
            p.event_loop("org.eclipse.jetty.util.thread.QueuedThreadPool$Runner.idleJobPoll"),
            Some("jetty")
        );
        assert_eq!(
            p.event_loop("java.util.concurrent.ThreadPoolExecutor.getTask"),
            Some("thread-pool")
        );
        assert_eq!(
            p.dispatch("sun.net.httpserver.ServerImpl$Exchange.run"),
            Some("jdk-httpserver")
        );
        assert_eq!(
            p.library("io.netty.channel.nio.NioEventLoop"),
            Some("netty")
        );
        assert_eq!(p.library("com.acme.Shop"), None);
    }

    #[test]
    fn a_user_file_adds_entries_and_bad_lines_say_where() {
        let mut p = Profiles::default();
        p.add_text("# mine\nacme library com.acme.web.*  # the framework\nacme loop com.acme.web.Loop.next\n", "acme.txt")
            .unwrap();
        assert_eq!(p.entries.len(), 2);
        assert_eq!(p.library("com.acme.web.Server"), Some("acme"));
        assert_eq!(p.event_loop("com.acme.web.Loop.next"), Some("acme"));
        let e = p.add_text("\nacme lop x.Y.z\n", "f.txt").unwrap_err();
        assert!(e.starts_with("f.txt:2: unknown kind 'lop'"), "{e}");
        let e = p.add_text("acme loop\n", "f.txt").unwrap_err();
        assert!(e.contains("f.txt:1: expected FRAMEWORK KIND GLOB"), "{e}");
        let e = p.add_text("acme dispatch Handler\n", "f.txt").unwrap_err();
        assert!(e.contains("Class.method"), "{e}");
    }
}
