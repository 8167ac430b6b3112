//! The configurations the benchmark compares, as data.
//!
//! A new row (another vmview mode, another JFR setting, another JDK) is one
//! entry in [`CONFIGS`]; nothing else changes. Each row names its baseline
//! implicitly: the untraced row of the same JDK.

/// Which JVM runs a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jdk {
    /// `--java` (default: `java` on the PATH).
    Default,
    /// A JDK 25 (`--jdk25`, default: the first `/usr/lib/jvm/*25*`), for
    /// JFR's method tracing and timing, which JDK 25 introduced.
    Jdk25,
}

/// What observes the program.
#[derive(Debug, Clone, Copy)]
pub enum Tracer {
    /// Nothing: the baseline.
    None,
    /// The vmview agent. `options` are candidate option strings, tried in
    /// order: the first one the agent accepts is used (an agent that does
    /// not know an option refuses to start, which the harness detects once
    /// with `java -version`). The harness adds `file=`, `classes=` and
    /// `quiet`.
    Vmview { options: &'static [&'static str] },
    /// Java Flight Recorder, `-XX:StartFlightRecording:OPTIONS,filename=…`;
    /// `{methods}` in `options` becomes a JFR method filter naming every
    /// traced class (`a.B;a.C`).
    Jfr { options: &'static str },
}

/// One row of the comparison.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Short name, shown in the table and accepted by `--only`/`--skip`.
    pub name: &'static str,
    pub jdk: Jdk,
    pub tracer: Tracer,
    /// Slow tracers run 1/`scale` of the bundled workload (its time is then
    /// compared per unit of work); 1 for everything else. Ignored for a
    /// user's jar, which cannot be scaled.
    pub scale: u32,
    /// At most this many repetitions (slow rows), else `--reps`.
    pub max_reps: Option<usize>,
}

impl Config {
    pub fn is_baseline(&self) -> bool {
        matches!(self.tracer, Tracer::None)
    }

    /// Whether the tracer observes each call of the traced methods (so a
    /// cost per call means something).
    pub fn traces_calls(&self) -> bool {
        match self.tracer {
            Tracer::None => false,
            Tracer::Vmview { .. } => true,
            Tracer::Jfr { options } => options.contains("{methods}"),
        }
    }
}

/// Every configuration, in the order each round runs them.
pub const CONFIGS: &[Config] = &[
    Config {
        name: "plain",
        jdk: Jdk::Default,
        tracer: Tracer::None,
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "vmview bci",
        jdk: Jdk::Default,
        // Every call traced: the overhead budget off (agents from before
        // it take the second string).
        tracer: Tracer::Vmview {
            options: &["mode=bci,args=off,budget=off", "mode=bci,args=off"],
        },
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "vmview bci budget",
        jdk: Jdk::Default,
        // The agent's defaults: the overhead budget on (docs/BUDGET.md).
        tracer: Tracer::Vmview {
            options: &["mode=bci,args=off,budget=10%"],
        },
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "vmview bci+args",
        jdk: Jdk::Default,
        tracer: Tracer::Vmview {
            options: &["mode=bci,args=on,budget=off", "mode=bci,args=on"],
        },
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "vmview jvmti",
        jdk: Jdk::Default,
        // Agents from before the `mode` option know only JVMTI method events.
        tracer: Tracer::Vmview {
            options: &["mode=jvmti,budget=off", "mode=jvmti", ""],
        },
        scale: 50,
        max_reps: Some(3),
    },
    Config {
        name: "jfr",
        jdk: Jdk::Default,
        tracer: Tracer::Jfr { options: "" },
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "plain 25",
        jdk: Jdk::Jdk25,
        tracer: Tracer::None,
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "jfr 25",
        jdk: Jdk::Jdk25,
        tracer: Tracer::Jfr { options: "" },
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "jfr 25 method-timing",
        jdk: Jdk::Jdk25,
        tracer: Tracer::Jfr {
            options: "method-timing={methods}",
        },
        scale: 1,
        max_reps: None,
    },
    Config {
        name: "jfr 25 method-trace",
        jdk: Jdk::Jdk25,
        tracer: Tracer::Jfr {
            options: "method-trace={methods}",
        },
        scale: 1,
        max_reps: None,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jdk_with_a_traced_row_has_a_baseline_and_names_are_unique() {
        for c in CONFIGS {
            assert!(
                CONFIGS.iter().any(|b| b.is_baseline() && b.jdk == c.jdk),
                "{} has no baseline",
                c.name
            );
            assert_eq!(CONFIGS.iter().filter(|o| o.name == c.name).count(), 1);
            assert!(c.scale >= 1);
        }
    }
}
