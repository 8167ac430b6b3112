//! What the overhead budget (`budget=`) left in a trace: the methods it
//! demoted (DEMOTION events) and how often they ran afterwards
//! (METHOD_COUNTS), so that `calltree` and `dataflow`, which build on
//! CALL/RETURN alone, can say which methods they saw only in part and
//! where the rest of their time went (into their callers').

use std::collections::BTreeMap;

use vmview_format::{Event, EventKind, MethodId, SymbolTable};

use crate::EventSink;

/// One demoted method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemotedMethod {
    /// `Class.method(sig)`.
    pub name: String,
    /// When it was demoted, ns since the trace's start.
    pub time_ns: u64,
    /// Calls counted after the demotion (the last METHOD_COUNTS total).
    pub counted: u64,
}

/// Collects DEMOTION and METHOD_COUNTS events.
#[derive(Debug, Default)]
pub struct BudgetNotes {
    demoted: BTreeMap<MethodId, (String, u64)>,
    counted: BTreeMap<MethodId, u64>,
}

impl EventSink for BudgetNotes {
    fn event(&mut self, ev: &Event, syms: &SymbolTable) {
        match &ev.kind {
            EventKind::Demotion { method, .. } => {
                let name = match syms.method(*method) {
                    Some(m) => format!(
                        "{}.{}{}",
                        syms.string(m.class),
                        syms.string(m.name),
                        syms.string(m.sig)
                    ),
                    None => format!("method#{}", method.0),
                };
                self.demoted.entry(*method).or_insert((name, ev.time_ns));
            }
            EventKind::MethodCounts { counts, .. } => {
                for (m, n) in counts {
                    let c = self.counted.entry(*m).or_default();
                    *c = (*c).max(*n);
                }
            }
            _ => {}
        }
    }
}

impl BudgetNotes {
    /// The demoted methods, most counted calls first.
    pub fn demoted(&self) -> Vec<DemotedMethod> {
        let mut out: Vec<DemotedMethod> = self
            .demoted
            .iter()
            .map(|(m, (name, t))| DemotedMethod {
                name: name.clone(),
                time_ns: *t,
                counted: self.counted.get(m).copied().unwrap_or(0),
            })
            .collect();
        out.sort_by(|a, b| b.counted.cmp(&a.counted).then(a.name.cmp(&b.name)));
        out
    }

    /// One sentence for a report built from CALL/RETURN (a call tree, a
    /// data-flow profile), or `None` when nothing was demoted.
    pub fn note(&self, what: &str) -> Option<String> {
        let demoted = self.demoted();
        if demoted.is_empty() {
            return None;
        }
        let shown: Vec<String> = demoted
            .iter()
            .take(3)
            .map(|d| format!("{} ({} calls counted)", d.name, d.counted))
            .collect();
        let more = demoted.len().saturating_sub(shown.len());
        Some(format!(
            "{} method{} demoted by the overhead budget: {} later calls were counted, not traced, so {what}: {}{}; record with --budget off to trace them",
            demoted.len(),
            if demoted.len() == 1 { " was" } else { "s were" },
            if demoted.len() == 1 { "its" } else { "their" },
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more (vmview stats lists them)")
            } else {
                String::new()
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{MethodSymbol, StringId, Symbol, ThreadRef};

    #[test]
    fn demotions_are_named_with_their_last_counts() {
        let mut syms = SymbolTable::default();
        for (id, text) in ["fx.A", "leaf", "()I"].iter().enumerate() {
            syms.insert(Symbol::String {
                id: StringId(id as u32),
                text: text.to_string(),
            });
        }
        syms.insert(Symbol::Method(MethodSymbol {
            id: MethodId(4),
            class: StringId(0),
            name: StringId(1),
            sig: StringId(2),
            param_names: vec![],
            modifiers: 0,
        }));
        let mut notes = BudgetNotes::default();
        assert_eq!(notes.note("x"), None);
        let ev = |time_ns, kind| Event {
            id: 0,
            time_ns,
            thread: ThreadRef(0),
            kind,
        };
        notes.event(
            &ev(
                5,
                EventKind::Demotion {
                    method: MethodId(4),
                    rate_per_s: 1,
                    mean_ns: 1,
                    before_bp: 2,
                    after_bp: 1,
                    counted: true,
                },
            ),
            &syms,
        );
        for n in [10, 30] {
            notes.event(
                &ev(
                    9,
                    EventKind::MethodCounts {
                        overhead_bp: 0,
                        counts: vec![(MethodId(4), n)],
                    },
                ),
                &syms,
            );
        }
        assert_eq!(
            notes.demoted(),
            vec![DemotedMethod {
                name: "fx.A.leaf()I".into(),
                time_ns: 5,
                counted: 30
            }]
        );
        let note = notes.note("callers' times include it").unwrap();
        assert!(note.contains("fx.A.leaf()I (30 calls counted)"), "{note}");
        assert!(note.contains("--budget off"), "{note}");
    }
}
