// Runs the report's regular-expression engine (the section of
// crates/view/assets/app.js between its "regular expressions" banner and
// ExprError) on [pattern, text] pairs read as JSON from stdin, and prints
// one JSON array: true / false per pair, or "error: …" when the pattern is
// refused. crates/cli/tests/report_regex.rs compares it with the regex
// crate.
import { readFileSync } from 'node:fs';

const src = readFileSync(process.argv[2], 'utf8');
const from = src.indexOf('// ---------------------------------------------------------------- regular expressions');
const to = src.indexOf('  function ExprError(');
if (from < 0 || to < from) throw new Error('engine section not found in ' + process.argv[2]);
const { linearRegex, RegexError } = new Function(src.slice(from, to) + '; return { linearRegex, RegexError };')();
const cases = JSON.parse(readFileSync(0, 'utf8'));
console.log(JSON.stringify(cases.map(([p, t]) => {
  try {
    return linearRegex(p)(t);
  } catch (x) {
    if (x instanceof RegexError) return 'error: ' + x.message;
    throw x;
  }
})));
