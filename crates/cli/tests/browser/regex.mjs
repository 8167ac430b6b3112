// Runs the report's regular-expression engine (the section of
// crates/view/assets/app.js between its "regular expressions" banner and
// ExprError) on [pattern, text] pairs read as JSON from stdin, and prints
// one JSON array: true / false per pair, or "error: …" when the pattern is
// refused. crates/cli/tests/report_regex.rs compares it with the regex
// crate. The page's two runners (the lazy DFA and the Pike VM) must agree
// on every pair.
import { readFileSync } from 'node:fs';

const src = readFileSync(process.argv[2], 'utf8');
const from = src.indexOf('// ---------------------------------------------------------------- regular expressions');
const to = src.indexOf('  function ExprError(');
if (from < 0 || to < from) throw new Error('engine section not found in ' + process.argv[2]);
const { linearRegex, RegexError, compileRegex, pikeMatch } = new Function(
  src.slice(from, to) + '; return { linearRegex, RegexError, compileRegex, pikeMatch };')();
const cases = JSON.parse(readFileSync(0, 'utf8'));
// One matcher per pattern, as the page keeps one per filter: its DFA
// states are reused from text to text.
const matchers = new Map();
console.log(JSON.stringify(cases.map(([p, t]) => {
  try {
    if (!matchers.has(p)) matchers.set(p, linearRegex(p));
    const got = matchers.get(p)(t);
    const pike = pikeMatch(compileRegex(p), t);
    if (got !== pike) return 'engines disagree: ' + got + ' / Pike VM ' + pike;
    return got;
  } catch (x) {
    if (x instanceof RegexError) return 'error: ' + x.message;
    throw x;
  }
})));
