// vmview's page. Trace strings are program data and may be hostile: they
// reach the DOM only through textContent (never innerHTML), and the flame
// graph SVG is shown in a sandboxed frame that runs no script.
'use strict';
(function () {
  const ROW_H = 22;
  const PAGE = 200;
  const MAX_SCROLL = 8000000; // px: browsers cap element heights; scroll positions are scaled past it
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function fmtNs(ns) {
    if (ns === null || ns === undefined) return '';
    if (ns < 1000) return ns + 'ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + 'µs';
    if (ns < 1e9) return (ns / 1e6).toFixed(3) + 'ms';
    return (ns / 1e9).toFixed(3) + 's';
  }
  function fmtTime(ns) { return (ns / 1e6).toFixed(3) + 'ms'; }
  function fmtValue(v) {
    if (v === null) return 'null';
    if (typeof v === 'string') return JSON.stringify(v);
    return String(v);
  }

  // ---------------------------------------------------------------- filter language (report mode)
  // A JavaScript port of vmview's expression language (crates/filter), used
  // by the self-contained report, which has no server to ask.
  const TYPES = ['THREAD_START', 'THREAD_END', 'CLASS_LOAD', 'CALL', 'RETURN', 'THROW', 'CATCH',
    'MONITOR_CONTENDED_ENTER', 'MONITOR_CONTENDED_ENTERED', 'MONITOR_WAIT', 'MONITOR_WAITED',
    'GC_START', 'GC_FINISH', 'DROPPED', 'SAMPLE', 'TRACE_WINDOW', 'PERIOD_START', 'PERIOD_END',
    'CALIBRATION', 'MONITOR_ENTER', 'MONITOR_EXIT', 'BYTECODE', 'REACTION_HANDLERS'];
  const loc = (l, k) => (l ? l[k] : null);
  const FIELDS = {
    id: ['n', (e) => e.id, ['ID']],
    time_ns: ['d1', (e) => e.time_ns, ['time', 'TIME']],
    type: ['t', (e) => e.type, ['TYPE']],
    thread: ['s', (e) => e.thread, ['THRD']],
    class: ['s', (e) => e.class, ['CLASS']],
    method: ['s', (e) => e.method, ['MTD']],
    sig: ['s', (e) => e.sig, ['SIG']],
    exception: ['s', (e) => e.exception, ['EXC']],
    message: ['s', (e) => e.message, ['MSG']],
    loc: ['n', (e) => loc(e.loc, 'bci'), ['bci', 'LOC']],
    line: ['n', (e) => loc(e.loc, 'line'), []],
    catch_class: ['s', (e) => e.catch_class, ['caller_class', 'CLASS2']],
    catch_method: ['s', (e) => e.catch_method, ['caller_method', 'MTD2']],
    catch_sig: ['s', (e) => e.catch_sig, ['caller_sig', 'SIG2']],
    catch_loc: ['n', (e) => loc(e.catch_loc, 'bci'), ['catch_bci', 'caller_loc', 'LOC2']],
    catch_line: ['n', (e) => loc(e.catch_loc, 'line'), ['caller_line']],
    depth: ['n', (e) => e.depth, ['DEPTH']],
    elapsed_ns: ['d1', (e) => e.elapsed_ns, ['elapsed', 'ELAPSED']],
    cpu_ns: ['d1', (e) => e.cpu_ns, ['CPU']],
    alloc_bytes: ['n', (e) => e.alloc_bytes, ['ALLOC']],
    period: ['n', (e) => e.period, ['PERIOD']],
    value: ['v', (e) => e.value, ['VALUE']],
    param: ['vs', (e) => (e.params || []).map((p) => p.value), ['params', 'PARAM']],
    param_name: ['ss', (e) => (e.params || []).map((p) => p.name), []],
    monitor: ['s', (e) => e.monitor, ['MON']],
    owner: ['s', (e) => e.owner, ['OWNER']],
    wait_ns: ['d1', (e) => e.wait_ns, ['wait', 'WAIT']],
    timeout_ms: ['d1000000', (e) => e.timeout_ms, ['timeout', 'TIMEOUT']],
    timed_out: ['b', (e) => e.timed_out, ['TIMEDOUT']],
    duration_ns: ['d1', (e) => e.duration_ns, ['duration', 'DURATION']],
    count: ['n', (e) => e.count, ['COUNT']],
    loader: ['s', (e) => e.loader, ['LOADER']],
    source: ['s', (e) => e.source, ['SRC']],
    daemon: ['b', (e) => e.daemon, []],
    priority: ['n', (e) => e.priority, []],
    group: ['s', (e) => e.group, []],
  };
  const FIELD_BY_NAME = {};
  for (const [name, f] of Object.entries(FIELDS)) {
    FIELD_BY_NAME[name] = f;
    for (const a of f[2]) FIELD_BY_NAME[a] = f;
  }
  const UNITS = { ns: 1, us: 1e3, 'µs': 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  const MAX_NESTING = 128; // crates/filter's MAX_NESTING

  // ---------------------------------------------------------------- regular expressions (report mode)
  // The CLI and `vmview serve` run a filter's ~ and !~ with Rust's regex
  // crate, in time linear in the text whatever the pattern. JavaScript's
  // RegExp backtracks: (a+)+$ or (.*)*x take time exponential in the text,
  // and a filter comes from the URL, so a shared link could hang the page.
  // So the report never hands a pattern to RegExp: it parses the regex
  // crate's syntax (refusing what the crate refuses: look-around and
  // backreferences), compiles it to a Thompson NFA and runs that as a
  // lazily built DFA (or breadth first, a Pike VM, when \b or multi-line
  // anchors need the characters around a position): at most (code points
  // × instructions) steps per text. Only single characters are tested
  // with RegExp (one character class against one character cannot
  // backtrack), which gives Unicode classes and case folding.
  const RE_NEST_LIMIT = 250; // regex-syntax's default nest_limit
  const RE_MAX_INSNS = 20000;
  function RegexError(msg) { this.message = msg; }
  const RE_WORD = '\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}';
  const RE_PERL = { d: '\\p{Nd}', s: '\\p{White_Space}', w: RE_WORD };
  const RE_POSIX = {
    alnum: '0-9A-Za-z', alpha: 'A-Za-z', ascii: '\\u{0}-\\u{7f}', blank: '\\t ', cntrl: '\\u{0}-\\u{1f}\\u{7f}',
    digit: '0-9', graph: '!-~', lower: 'a-z', print: ' -~', punct: '!-\\/:-@\\[-`{-~', space: '\\t\\n\\v\\f\\r ',
    upper: 'A-Z', word: '0-9A-Za-z_', xdigit: '0-9A-Fa-f',
  };
  const cpAtom = (cp) => '\\u{' + cp.toString(16) + '}';
  // A predicate on one code point: a RegExp for one character, maybe negated.
  function charPred(src, neg, fold) {
    let re;
    try { re = new RegExp('^(?:' + src + ')$', fold ? 'iu' : 'u'); } catch (x) { throw new RegexError('unsupported class ' + src); }
    return { re, neg, cache: new Map() };
  }
  // Predicates take code points (numbers); the verdict is cached per code
  // point, so RegExp runs once per distinct character.
  function testPred(p, cp) {
    let v = p.cache.get(cp);
    if (v === undefined) {
      v = p.re.test(String.fromCodePoint(cp)) !== p.neg;
      if (p.cache.size > 4096) p.cache.clear();
      p.cache.set(cp, v);
    }
    return v;
  }
  const WORD_PRED = charPred('[' + RE_WORD + ']', false, false);
  const isWord = (cp) => cp !== undefined && testPred(WORD_PRED, cp);

  function parseRegex(pattern) {
    const s = Array.from(pattern);
    let i = 0;
    let flags = { i: false, s: false, m: false, x: false };
    const peek = () => s[i];
    const eat = (c) => { if (s[i] === c) { i++; return true; } return false; };
    const fail = (m) => { throw new RegexError(m); };
    function skipSpace() {
      if (!flags.x) return;
      for (;;) {
        if (i < s.length && /\s/u.test(s[i])) { i++; continue; }
        if (s[i] === '#') { while (i < s.length && s[i] !== '\n') i++; continue; }
        return;
      }
    }
    function hex(n) {
      let h = '';
      if (eat('{')) {
        while (i < s.length && s[i] !== '}') h += s[i++];
        if (!eat('}')) fail('unclosed hexadecimal escape');
      } else {
        for (let k = 0; k < n; k++) h += s[i++] || '';
      }
      if (!/^[0-9a-fA-F]{1,8}$/.test(h)) fail('invalid hexadecimal escape');
      const cp = parseInt(h, 16);
      if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) fail('invalid Unicode scalar value in escape');
      return cp;
    }
    function unicodeClass(neg) {
      let name;
      if (eat('{')) {
        name = '';
        while (i < s.length && s[i] !== '}') name += s[i++];
        if (!eat('}')) fail('unclosed Unicode class');
      } else {
        name = s[i++];
        if (name === undefined) fail('incomplete Unicode class');
      }
      if (name.startsWith('^')) { neg = !neg; name = name.slice(1); }
      name = name.replace(/\s/g, '');
      const kv = /^([^=:!]+)(!?)[=:](.+)$/.exec(name);
      if (kv) { if (kv[2]) neg = !neg; name = kv[1] + '=' + kv[3]; }
      for (const cand of [name, 'Script=' + name, 'General_Category=' + name]) {
        try { new RegExp('\\p{' + cand + '}', 'u'); return { src: '\\p{' + cand + '}', neg }; } catch (x) { /* next */ }
      }
      fail('unknown Unicode class ' + name);
    }
    // An escape after the backslash: { lit: code point } or { src, neg }
    // (one character) or { assert }.
    function escape(inClass) {
      const c = s[i++];
      if (c === undefined) fail('incomplete escape sequence');
      if ('dsw'.includes(c)) return { src: '[' + RE_PERL[c] + ']', neg: false, perl: RE_PERL[c] };
      if ('DSW'.includes(c)) return { src: '[' + RE_PERL[c.toLowerCase()] + ']', neg: true };
      if (c === 'p' || c === 'P') return unicodeClass(c === 'P');
      const simple = { n: 10, t: 9, r: 13, f: 12, v: 11, a: 7 };
      if (c in simple) return { lit: simple[c] };
      if (c === 'x') return { lit: hex(2) };
      if (c === 'u') return { lit: hex(4) };
      if (c === 'U') return { lit: hex(8) };
      if (/[0-9]/.test(c) || c === 'k') fail('backreferences are not supported');
      if (!inClass && (c === 'b' || c === 'B' || c === 'A' || c === 'z')) {
        if (s[i] === '{') fail('word boundary assertions \\b{...} are not supported in the report; use vmview serve');
        return { assert: c };
      }
      if (c.codePointAt(0) < 128 && !/[0-9A-Za-z<>]/.test(c)) return { lit: c.codePointAt(0) };
      fail('unrecognized escape sequence \\' + c);
    }
    // A bracketed class, after its '['; a predicate on one code point.
    function cls(depth) {
      if (depth > RE_NEST_LIMIT) fail('exceeds the set nesting limit (' + RE_NEST_LIMIT + ')');
      const neg = eat('^');
      let inside = '';
      const alts = [];
      let first = true;
      for (;;) {
        if (i >= s.length) fail('unclosed character class');
        const c = s[i];
        if (c === ']' && !first) { i++; break; }
        first = false;
        if ((c === '&' && s[i + 1] === '&') || (c === '-' && s[i + 1] === '-') || (c === '~' && s[i + 1] === '~')) {
          fail('class set operations (&&, --, ~~) are not supported in the report; use vmview serve');
        }
        if (c === '[' && s[i + 1] === ':') {
          const end = s.indexOf(']', i);
          const body = end > 0 ? s.slice(i + 2, end).join('') : '';
          const m = /^(\^?)([a-z]+):$/.exec(body);
          if (m && RE_POSIX[m[2]]) {
            i = end + 1;
            if (m[1]) alts.push(charPred('[^' + RE_POSIX[m[2]] + ']', false, flags.i)); else inside += RE_POSIX[m[2]];
            continue;
          }
        }
        if (c === '[') { i++; alts.push(cls(depth + 1)); continue; }
        let lo;
        i++;
        if (c === '\\') {
          const e = escape(true);
          if (e.lit === undefined) {
            if (e.perl && !e.neg) inside += e.perl;
            else alts.push(charPred(e.src, e.neg, flags.i));
            continue;
          }
          lo = e.lit;
        } else {
          lo = c.codePointAt(0);
        }
        if (s[i] === '-' && s[i + 1] !== undefined && s[i + 1] !== ']') {
          i++;
          let hi;
          const d = s[i++];
          if (d === '\\') {
            const e = escape(true);
            if (e.lit === undefined) fail('invalid range: a class cannot end a range');
            hi = e.lit;
          } else {
            hi = d.codePointAt(0);
          }
          if (hi < lo) fail('invalid character class range, the start must be <= the end');
          inside += cpAtom(lo) + '-' + cpAtom(hi);
        } else {
          inside += cpAtom(lo);
        }
      }
      const members = [];
      if (inside) members.push(charPred('[' + inside + ']', false, flags.i));
      members.push(...alts);
      return { any: members, neg, cache: new Map() };
    }
    function atom(depth) {
      const c = s[i];
      if (c === '(') {
        i++;
        if (depth + 1 > RE_NEST_LIMIT) fail('exceeds the set nesting limit (' + RE_NEST_LIMIT + ')');
        const saved = Object.assign({}, flags);
        if (eat('?')) {
          if (s[i] === '=' || s[i] === '!' || (s[i] === '<' && (s[i + 1] === '=' || s[i + 1] === '!'))) {
            fail('look-around, including look-ahead and look-behind, is not supported');
          }
          if (s[i] === 'P' && s[i + 1] === '<') i++;
          if (eat('<')) {
            while (i < s.length && /[\w\[\].]/.test(s[i])) i++;
            if (!eat('>')) fail('invalid capture group name');
          } else {
            let on = true;
            for (;;) {
              const f = s[i++];
              if (f === undefined) fail('unclosed group');
              if (f === ':') break;
              if (f === ')') { // (?flags): for the rest of the enclosing group
                Object.assign(saved, flags);
                return { t: 'empty', flagsOnly: true, saved };
              }
              if (f === '-') { on = false; continue; }
              if (f === 'i' || f === 's' || f === 'm' || f === 'x') flags[f] = on;
              else if (f !== 'U' && f !== 'u' && f !== 'R') fail('unrecognized flag ' + f);
            }
          }
        }
        const inner = alt(depth + 1);
        if (!eat(')')) fail('unclosed group');
        flags = saved;
        return inner;
      }
      i++;
      if (c === '[') return { t: 'char', pred: cls(depth + 1) };
      if (c === '.') return { t: 'char', pred: charPred(flags.s ? '[\\s\\S]' : '[^\\n]', false, false) };
      if (c === '^') return { t: 'assert', k: flags.m ? 'ml^' : 'A' };
      if (c === '$') return { t: 'assert', k: flags.m ? 'ml$' : 'z' };
      if (c === '*' || c === '+' || c === '?' || c === '{') fail('repetition operator missing expression');
      if (c === '\\') {
        const e = escape(false);
        if (e.assert) return { t: 'assert', k: e.assert };
        if (e.lit !== undefined) return { t: 'char', pred: charPred(cpAtom(e.lit), false, flags.i) };
        return { t: 'char', pred: charPred(e.src, e.neg, flags.i) };
      }
      return { t: 'char', pred: charPred(cpAtom(c.codePointAt(0)), false, flags.i) };
    }
    function repeat(node) {
      // a** is (a*)*, as in the regex crate; a loop, so a million * do not
      // recurse.
      for (;;) {
        skipSpace();
        const c = s[i];
        let min, max;
        if (c === '*') { min = 0; max = Infinity; } else if (c === '+') { min = 1; max = Infinity; } else if (c === '?') { min = 0; max = 1; } else if (c === '{') {
          const m = /^\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}/.exec(s.slice(i, i + 40).join(''));
          if (!m) fail('invalid repetition, write {n}, {n,} or {n,m}');
          min = Number(m[1]); max = m[2] === undefined ? min : (m[3] === '' ? Infinity : Number(m[3]));
          if (min > max) fail('invalid repetition range, the start must be <= the end');
          i += Array.from(m[0]).length - 1;
        } else {
          return node;
        }
        i++;
        eat('?'); // lazy or greedy: the same matches
        if (node.flagsOnly) fail('repetition operator missing expression');
        node = { t: 'rep', node, min, max };
      }
    }
    function cat(depth) {
      const items = [];
      for (;;) {
        skipSpace();
        if (i >= s.length || s[i] === '|' || s[i] === ')') break;
        const a = atom(depth);
        if (a.flagsOnly) continue;
        items.push(repeat(a));
      }
      return { t: 'cat', items };
    }
    function alt(depth) {
      const items = [cat(depth)];
      while (eat('|')) items.push(cat(depth));
      return items.length === 1 ? items[0] : { t: 'alt', items };
    }
    const tree = alt(0);
    if (i < s.length) fail('unopened group');
    return tree;
  }

  // Thompson construction: instructions {op, pred | x, y | k}.
  function compileRegex(pattern) {
    const prog = [];
    const push = (insn) => {
      if (prog.length >= RE_MAX_INSNS) {
        throw new RegexError('regular expression too big for the report (a counted repetition such as \\w{50} is the usual cause; vmview serve runs it)');
      }
      prog.push(insn);
      return prog.length - 1;
    };
    function emit(n) {
      switch (n.t) {
        case 'char': push({ op: 'char', pred: n.pred }); break;
        case 'assert': push({ op: 'assert', k: n.k }); break;
        case 'empty': break;
        case 'cat': for (const x of n.items) emit(x); break;
        case 'alt': {
          const jumps = [];
          for (let k = 0; k < n.items.length; k++) {
            if (k < n.items.length - 1) {
              const sp = push({ op: 'split', x: 0, y: 0 });
              prog[sp].x = prog.length;
              emit(n.items[k]);
              jumps.push(push({ op: 'jmp', x: 0 }));
              prog[sp].y = prog.length;
            } else {
              emit(n.items[k]);
            }
          }
          for (const j of jumps) prog[j].x = prog.length;
          break;
        }
        case 'rep': {
          for (let k = 0; k < n.min; k++) emit(n.node);
          if (n.max === Infinity) {
            const sp = push({ op: 'split', x: 0, y: 0 });
            prog[sp].x = prog.length;
            emit(n.node);
            push({ op: 'jmp', x: sp });
            prog[sp].y = prog.length;
          } else {
            const splits = [];
            for (let k = n.min; k < n.max; k++) {
              const sp = push({ op: 'split', x: 0, y: 0 });
              prog[sp].x = prog.length;
              splits.push(sp);
              emit(n.node);
            }
            for (const sp of splits) prog[sp].y = prog.length;
          }
          break;
        }
      }
    }
    emit(parseRegex(pattern));
    push({ op: 'match' });
    return prog;
  }

  function testChar(p, cp) {
    if (p.re) return testPred(p, cp);
    let v = p.cache.get(cp);
    if (v === undefined) {
      v = p.any.some((m) => testChar(m, cp)) !== p.neg;
      if (p.cache.size > 4096) p.cache.clear();
      p.cache.set(cp, v);
    }
    return v;
  }
  function codePoints(text) {
    const cps = [];
    for (let i = 0; i < text.length;) {
      const cp = text.codePointAt(i);
      cps.push(cp);
      i += cp > 0xffff ? 2 : 1;
    }
    return cps;
  }

  // Does `prog` match anywhere in `text`? Breadth first over the NFA (a
  // Pike VM): each instruction is visited at most once per position. For
  // patterns with \b, \B or multi-line anchors (their closure depends on
  // the characters around a position); the others run on `lazyDfa`.
  function pikeMatch(prog, text) {
    const cps = codePoints(text);
    const n = prog.length;
    const mark = new Int32Array(n).fill(-1);
    const stack = new Int32Array(n + 1);
    let clist = new Int32Array(n), nlist = new Int32Array(n);
    let ccount = 0, ncount = 0;
    // Adds pc's closure at position pos to nlist; true on a match.
    const add = (pc0, pos) => {
      let sp = 0;
      stack[sp++] = pc0;
      while (sp > 0) {
        const pc = stack[--sp];
        if (mark[pc] === pos) continue;
        mark[pc] = pos;
        const insn = prog[pc];
        switch (insn.op) {
          case 'match': return true;
          case 'char': nlist[ncount++] = pc; break;
          case 'jmp': stack[sp++] = insn.x; break;
          case 'split': stack[sp++] = insn.y; stack[sp++] = insn.x; break;
          case 'assert': {
            const prev = cps[pos - 1], next = cps[pos];
            let ok;
            switch (insn.k) {
              case 'A': ok = pos === 0; break;
              case 'z': ok = pos === cps.length; break;
              case 'ml^': ok = pos === 0 || prev === 10; break;
              case 'ml$': ok = pos === cps.length || next === 10; break;
              case 'b': ok = isWord(prev) !== isWord(next); break;
              default: ok = isWord(prev) === isWord(next); break;
            }
            if (ok) stack[sp++] = pc + 1;
            break;
          }
        }
      }
      return false;
    };
    if (add(0, 0)) return true;
    for (let pos = 0; pos < cps.length; pos++) {
      [clist, nlist] = [nlist, clist];
      ccount = ncount; ncount = 0;
      const cp = cps[pos];
      for (let k = 0; k < ccount; k++) {
        const pc = clist[k];
        if (testChar(prog[pc].pred, cp) && add(pc + 1, pos + 1)) return true;
      }
      if (add(0, pos + 1)) return true;
    }
    return false;
  }

  // The same automaton run as a lazily built DFA, as the regex crate does:
  // a DFA state is the set of NFA instructions alive between two
  // characters, built the first time it is reached and cached with its
  // transitions, so a character usually costs one Map lookup. Only \A and
  // \z occur (checked by the caller): \A holds in the first state only,
  // and the instructions waiting on \z are kept per state for the end.
  // Past DFA_MAX_STATES the cache is dropped and the Pike VM takes over
  // (still linear).
  const DFA_MAX_STATES = 4096;
  function lazyDfa(prog) {
    const n = prog.length;
    const mark = new Int32Array(n).fill(-1);
    const stack = new Int32Array(n + 1);
    let gen = 0;
    let states = new Map();
    let disabled = false;
    let idle, first, empty;
    // The state of the closure of `starts`.
    const closure = (starts, atStart, atEnd) => {
      gen++;
      const chars = [], waitEnd = [];
      let match = false, sp = 0;
      for (let k = starts.length - 1; k >= 0; k--) stack[sp++] = starts[k];
      while (sp > 0) {
        const pc = stack[--sp];
        if (mark[pc] === gen) continue;
        mark[pc] = gen;
        const insn = prog[pc];
        switch (insn.op) {
          case 'match': match = true; break;
          case 'char': chars.push(pc); break;
          case 'jmp': stack[sp++] = insn.x; break;
          case 'split': stack[sp++] = insn.y; stack[sp++] = insn.x; break;
          default:
            if (insn.k === 'A' ? atStart : atEnd) stack[sp++] = pc + 1;
            else if (insn.k === 'z') waitEnd.push(pc + 1);
        }
      }
      chars.sort((a, b) => a - b);
      waitEnd.sort((a, b) => a - b);
      const key = chars.join(',') + '|' + waitEnd.join(',') + (match ? '!' : '');
      let st = states.get(key);
      if (!st) {
        st = { chars, waitEnd, match, ascii: new Array(128), next: new Map(), end: undefined };
        states.set(key, st);
      }
      return st;
    };
    const step = (st, cp) => {
      let to = cp < 128 ? st.ascii[cp] : st.next.get(cp);
      if (to === undefined) {
        const succ = [];
        for (const pc of st.chars) if (testChar(prog[pc].pred, cp)) succ.push(pc + 1);
        succ.push(0); // unanchored: a match may start at any position
        to = closure(succ, false, false);
        if (cp < 128) st.ascii[cp] = to; else st.next.set(cp, to);
      }
      return to;
    };
    const endMatch = (st) => {
      if (st.end === undefined) st.end = st.match || (st.waitEnd.length > 0 && closure(st.waitEnd, false, true).match);
      return st.end;
    };
    return (text) => {
      if (disabled) return pikeMatch(prog, text);
      if (first === undefined) {
        first = closure([0], true, false);
        // The state with nothing alive but a restart: if it can never move
        // (an anchored pattern past its start), only the end can decide.
        idle = closure([0], false, false);
        empty = closure([0], true, true).match;
      }
      if (text.length === 0) return empty;
      let st = first;
      for (let i = 0; i < text.length;) {
        if (st.match) return true;
        if (st === idle && idle.chars.length === 0) return endMatch(idle);
        const cp = text.codePointAt(i);
        i += cp > 0xffff ? 2 : 1;
        st = step(st, cp);
        if (states.size > DFA_MAX_STATES) {
          disabled = true;
          states = new Map();
          idle = first = undefined;
          return pikeMatch(prog, text);
        }
      }
      return endMatch(st);
    };
  }

  // A pattern as the filter's ~ uses it: a test on strings.
  function linearRegex(pattern) {
    const prog = compileRegex(pattern);
    const contextual = prog.some((x) => x.op === 'assert' && x.k !== 'A' && x.k !== 'z');
    return contextual ? (text) => pikeMatch(prog, text) : lazyDfa(prog);
  }

  function ExprError(column, width, message) { this.column = column; this.width = Math.max(1, width); this.error = message; }

  const isWordChar = (c) => /[\p{Alphabetic}\p{N}_.$\/\-*@:]/u.test(c);
  function tokenize(src) {
    const toks = [];
    let i = 0;
    while (i < src.length) {
      const c = src[i];
      if (/\s/.test(c)) { i++; continue; }
      const start = i;
      const two = src.substr(i, 2);
      if (['==', '!=', '!~', '<=', '>=', '&&', '||'].includes(two)) { toks.push({ k: 'op', v: two, col: start, w: 2 }); i += 2; continue; }
      if (two === '=~') { toks.push({ k: 'op', v: '~', col: start, w: 2 }); i += 2; continue; }
      if ('~<>!()[],'.includes(c)) { toks.push({ k: 'op', v: c, col: start, w: 1 }); i++; continue; }
      if (c === '"' || c === "'") {
        let s = ''; i++;
        for (;;) {
          if (i >= src.length) throw new ExprError(start, src.length - start, 'unterminated string');
          const d = src[i];
          if (d === c) { i++; break; }
          if (d === '\\') {
            // As the Rust lexer: \n \t \r \\ \" \' are escapes, and any other
            // escape stays as written, so "\d+" is the regex \d+ here too.
            const n = src[i + 1];
            const map = { '\\': '\\', '"': '"', "'": "'", n: '\n', t: '\t', r: '\r' };
            if (n === undefined) throw new ExprError(i, 1, 'string ends with a lone \\');
            s += n in map ? map[n] : '\\' + n; i += 2; continue;
          }
          s += d; i++;
        }
        toks.push({ k: 'str', v: s, col: start, w: i - start });
        continue;
      }
      // Numbers and words as the Rust lexer reads them (crates/filter's
      // parse.rs): digits, '.' and '_' separators, a unit; a number run
      // into other word characters is a word; words take letters, digits
      // and _ . $ / - * @ : only.
      if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(src[i + 1] || ''))) {
        let j = i + 1;
        while (j < src.length && /[0-9._]/.test(src[j])) j++;
        let u = j;
        while (u < src.length && /\p{Alphabetic}/u.test(src[u])) u++;
        if (u < src.length && /[\p{Alphabetic}\p{N}_.]/u.test(src[u])) {
          while (u < src.length && isWordChar(src[u])) u++;
          toks.push({ k: 'word', v: src.slice(i, u), col: start, w: u - start }); i = u; continue;
        }
        const unit = src.slice(j, u);
        if (unit && !(unit in UNITS)) throw new ExprError(j, u - j, 'unknown unit ' + unit + ' (ns, us, ms, s, m, h)');
        toks.push({ k: 'num', v: Number(src.slice(i, j).replace(/_/g, '')), unit: unit || null, col: start, w: u - start }); i = u; continue;
      }
      if (isWordChar(c)) {
        let j = i;
        while (j < src.length && isWordChar(src[j])) j++;
        toks.push({ k: 'word', v: src.slice(i, j), col: start, w: j - start }); i = j; continue;
      }
      throw new ExprError(start, 1, 'unexpected character ' + c);
    }
    toks.push({ k: 'end', v: '', col: src.length, w: 1 });
    return toks;
  }

  function compile(src) {
    if (src.trim() === '') return () => true;
    const toks = tokenize(src);
    let p = 0;
    const peek = () => toks[p];
    const isOp = (v) => peek().k === 'op' && peek().v === v;
    const isWord = (v) => peek().k === 'word' && peek().v === v;
    function expr() {
      let l = and();
      while (isOp('||') || isWord('or')) { p++; const a = l, b = and(); l = (e) => a(e) || b(e); }
      return l;
    }
    function and() {
      let l = unary();
      while (isOp('&&') || isWord('and')) { p++; const a = l, b = unary(); l = (e) => a(e) && b(e); }
      return l;
    }
    // As in crates/filter: ( and ! nest at most MAX_NESTING deep, so the
    // recursive parser and the nested closures stay bounded.
    let depth = 0;
    const nest = () => {
      if (++depth > MAX_NESTING) throw new ExprError(peek().col, peek().w, 'nested too deep (limit ' + MAX_NESTING + ' levels of ( and !)');
    };
    function unary() {
      if (isOp('!') || isWord('not')) { nest(); p++; const a = unary(); depth--; return (e) => !a(e); }
      if (isOp('(')) {
        nest();
        p++; const a = expr();
        if (!isOp(')')) throw new ExprError(peek().col, peek().w, 'expected )');
        p++; depth--; return a;
      }
      if (isWord('true')) { p++; return () => true; }
      if (isWord('false')) { p++; return () => false; }
      return test();
    }
    function literal() {
      const t = peek();
      if (t.k === 'str' || t.k === 'num' || t.k === 'word') { p++; return t; }
      throw new ExprError(t.col, t.w, t.k === 'end' ? 'expected a value' : 'expected a value, found ' + t.v);
    }
    function test() {
      const ft = peek();
      if (ft.k !== 'word') throw new ExprError(ft.col, ft.w, ft.k === 'end' ? 'expected a field name' : 'expected a field name, found ' + ft.v);
      const f = FIELD_BY_NAME[ft.v];
      if (!f) throw new ExprError(ft.col, ft.w, 'unknown field ' + ft.v);
      p++;
      let negIn = false;
      if ((isOp('!') || isWord('not')) && toks[p + 1].k === 'word' && toks[p + 1].v === 'in') { negIn = true; p++; }
      if (isWord('in')) {
        p++;
        if (!isOp('[')) throw new ExprError(peek().col, peek().w, 'expected [');
        p++;
        const lits = [literal()];
        while (isOp(',')) { p++; lits.push(literal()); }
        if (!isOp(']')) throw new ExprError(peek().col, peek().w, 'expected ] or ,');
        p++;
        const tests = lits.map((l) => cmp(f, '==', l));
        return negIn ? (e) => !tests.some((t) => t(e)) : (e) => tests.some((t) => t(e));
      }
      const op = peek();
      if (op.k !== 'op' || !['==', '!=', '~', '!~', '<', '<=', '>', '>='].includes(op.v)) {
        throw new ExprError(op.col, op.w, 'expected an operator (== != ~ !~ < <= > >= in)');
      }
      p++;
      return cmp(f, op.v, literal());
    }
    function cmp(f, op, lit) {
      const [kind, get] = f;
      if (op === '~' || op === '!~') {
        let re;
        try { re = linearRegex(String(lit.v)); } catch (x) {
          if (x instanceof RegexError) throw new ExprError(lit.col, lit.w, 'bad regular expression: ' + x.message);
          throw x;
        }
        const one = (v) => v !== null && v !== undefined && re(typeof v === 'string' ? v : JSON.stringify(v));
        const t = kind === 'vs' || kind === 'ss' ? (e) => get(e).some(one) : (e) => one(get(e));
        return op === '~' ? t : (e) => !t(e);
      }
      if (lit.k === 'word' && lit.v === 'null') {
        const isNull = (e) => { const v = get(e); return v === null || v === undefined; };
        if (op === '==') return isNull;
        if (op === '!=') return (e) => !isNull(e);
        throw new ExprError(lit.col, lit.w, 'null compares only with == and !=');
      }
      let want;
      if (kind === 't') {
        if (!TYPES.includes(String(lit.v))) throw new ExprError(lit.col, lit.w, 'unknown event type ' + lit.v);
        want = String(lit.v);
      } else if (kind === 'n' || kind[0] === 'd') {
        if (lit.k !== 'num') throw new ExprError(lit.col, lit.w, 'expected a number');
        want = lit.v;
        if (lit.unit) {
          if (kind[0] !== 'd') throw new ExprError(lit.col, lit.w, 'this field takes no unit');
          want = (lit.v * UNITS[lit.unit]) / Number(kind.slice(1));
        }
      } else if (kind === 'b') {
        if (lit.v !== 'true' && lit.v !== 'false') throw new ExprError(lit.col, lit.w, 'expected true or false');
        want = lit.v === 'true';
      } else if (kind === 'v' || kind === 'vs') {
        want = lit.k === 'num' ? lit.v : (lit.k === 'word' && (lit.v === 'true' || lit.v === 'false') ? lit.v === 'true' : String(lit.v));
      } else {
        want = String(lit.v);
      }
      const c = {
        '==': (a) => a === want || (typeof a === 'number' && a == want),
        '!=': (a) => !(a === want || (typeof a === 'number' && a == want)),
        '<': (a) => a < want, '<=': (a) => a <= want, '>': (a) => a > want, '>=': (a) => a >= want,
      }[op];
      const one = (v) => v !== null && v !== undefined && c(v);
      if (kind === 'vs' || kind === 'ss') return (e) => get(e).some(one);
      if (op === '!=') return (e) => { const v = get(e); return v === null || v === undefined || c(v); };
      return (e) => one(get(e));
    }
    const f = expr();
    if (peek().k !== 'end') throw new ExprError(peek().col, peek().w, 'unexpected ' + peek().v);
    return f;
  }

  // ---------------------------------------------------------------- data sources
  // Both answer the same questions; the page does not know which it has.
  function ApiSource() {
    const get = async (path, params) => {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== '') q.set(k, v);
      const r = await fetch('/api/' + path + (q.toString() ? '?' + q : ''));
      const body = await r.json().catch(() => ({ error: 'bad response' }));
      if (r.status === 503) return { pending: true };
      if (!r.ok) throw body;
      return body;
    };
    return {
      info: () => get('info'),
      page: (filter, search, offset, limit) => get('events', { filter, mark: search, offset, limit }),
      check: (expr) => get('check', { q: expr }),
      locate: (filter, id) => get('locate', { filter, id }).then((r) => r.row),
      step: (filter, search, from, dir) => get('step', { filter, search, from, dir }),
      views: async () => {
        for (;;) {
          const v = await get('views');
          if (!v.pending) return v;
          await new Promise((r) => setTimeout(r, 500));
        }
      },
      flamegraph: async () => { const r = await fetch('/api/flamegraph.svg'); return r.text(); },
    };
  }

  function EmbeddedSource(data) {
    const events = data.events;
    const cache = new Map();
    const rowsOf = (filter, make) => {
      const key = filter.trim();
      if (!key) return null;
      if (!cache.has(key)) {
        const f = make ? make() : compile(key);
        const rows = [];
        for (let i = 0; i < events.length; i++) if (f(events[i])) rows.push(i);
        if (cache.size > 8) cache.delete(cache.keys().next().value);
        cache.set(key, rows);
      }
      return cache.get(key);
    };
    const wrap = (fn) => async (...a) => {
      try { return fn(...a); } catch (x) { if (x instanceof ExprError) throw { error: x.error, column: x.column, width: x.width }; throw x; }
    };
    const byId = (id) => {
      let lo = 0, hi = events.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (events[m].id < id) lo = m + 1; else hi = m; }
      return lo;
    };
    return {
      info: async () => data.info,
      page: wrap((filter, search, offset, limit) => {
        const rows = rowsOf(filter);
        const mark = search.trim() ? compile(search) : null;
        const n = rows ? rows.length : events.length;
        const out = [];
        for (let r = offset; r < Math.min(n, offset + limit); r++) out.push(events[rows ? rows[r] : r]);
        return { offset, count: n, complete: true, events: out, marks: out.map((e) => (mark ? mark(e) : false)) };
      }),
      check: wrap((expr) => { compile(expr); return { ok: true }; }),
      locate: wrap((filter, id) => {
        const i = byId(id);
        const rows = rowsOf(filter);
        if (!rows) return i < events.length ? i : null;
        const k = rows.indexOf(i);
        return k < 0 ? null : k;
      }),
      step: wrap((filter, search, from, dir) => {
        // Compiled apart and joined as functions, as the server joins the
        // trees: neither text can close the other's parenthesis.
        const hits = (filter.trim()
          ? rowsOf(filter.length + ':' + filter + '&&' + search, () => { const f = compile(filter), g = compile(search); return (e) => f(e) && g(e); })
          : rowsOf(search)) || [];
        let k;
        if (dir === 'prev') {
          k = -1;
          for (let j = hits.length - 1; j >= 0; j--) if (from === null || events[hits[j]].id < from) { k = j; break; }
        } else {
          k = hits.findIndex((i) => from === null || events[i].id > from);
        }
        if (k < 0) return { id: null, count: hits.length, complete: true };
        const i = hits[k];
        const rows = rowsOf(filter);
        return { id: events[i].id, rank: k, row: rows ? rows.indexOf(i) : i, count: hits.length, complete: true };
      }),
      views: async () => data.views,
      flamegraph: async () => data.flamegraph,
    };
  }

  const dataBlock = $('vmview-data');
  const src = dataBlock ? EmbeddedSource(JSON.parse(dataBlock.textContent)) : ApiSource();

  // ---------------------------------------------------------------- state and URL
  const state = { filter: '', search: '', view: 'events', sel: null, ctx: false };
  let list = { count: 0, complete: true, pages: new Map(), gen: 0, filter: '', search: '' };
  let stepPos = null;

  function readHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    state.filter = h.get('filter') || '';
    state.search = h.get('search') || '';
    state.view = h.get('view') || 'events';
    state.sel = h.has('event') ? Number(h.get('event')) : null;
    state.ctx = h.get('context') === '1';
  }
  function writeHash() {
    const h = new URLSearchParams();
    if (state.filter) h.set('filter', state.filter);
    if (state.search) h.set('search', state.search);
    if (state.view !== 'events') h.set('view', state.view);
    if (state.sel !== null) h.set('event', state.sel);
    if (state.ctx) h.set('context', '1');
    const s = h.toString();
    history.replaceState(null, '', s ? '#' + s : location.pathname + location.search);
  }
  const activeFilter = () => (state.ctx ? '' : state.filter);

  // ---------------------------------------------------------------- event list
  const listEl = $('list'), rowsEl = $('rows'), spacer = $('spacer');

  function showError(e, input) {
    const box = $('error');
    if (!e) { box.hidden = true; input.classList.remove('bad'); return; }
    input.classList.add('bad');
    box.hidden = false;
    const col = e.column || 0;
    box.textContent = (e.column !== undefined ? ' '.repeat(col) + '^'.repeat(e.width || 1) + ' ' : '') + (e.error || 'error') +
      (e.column !== undefined ? ' (column ' + (col + 1) + ')' : '');
    box.style.marginLeft = (input.offsetLeft) + 'px';
  }

  function resetList() {
    list = { count: list.count, complete: true, pages: new Map(), gen: list.gen + 1, filter: activeFilter(), search: state.search };
    return loadPage(0).then(() => { sizeSpacer(); render(); });
  }

  function loadPage(p) {
    const have = list.pages.get(p);
    if (have) return have.promise || Promise.resolve();
    const gen = list.gen;
    const entry = {};
    entry.promise = src.page(list.filter, list.search, p * PAGE, PAGE).then((r) => {
      if (gen !== list.gen) return;
      entry.promise = null;
      entry.events = r.events; entry.marks = r.marks;
      list.count = r.count; list.complete = r.complete;
      showError(null, $('filter'));
      updateCount(r);
      if (!r.complete && r.events.length < PAGE) {
        // Matches still being found: ask again shortly.
        setTimeout(() => { if (gen === list.gen) { list.pages.delete(p); loadPage(p).then(() => { sizeSpacer(); render(); }); } }, 400);
      }
      sizeSpacer(); render();
    }, (err) => {
      if (gen !== list.gen) return;
      list.pages.delete(p);
      showError(err, $('filter'));
    });
    list.pages.set(p, entry);
    return entry.promise;
  }

  function updateCount(r) {
    const c = $('count');
    const n = r.count.toLocaleString('en');
    if (activeFilter()) c.textContent = n + (r.complete ? '' : '+') + ' matches' + (r.complete ? '' : ' (' + Math.round((r.progress || 0) * 100) + '% read)');
    else c.textContent = n + ' events';
    c.dataset.count = r.count;
    c.dataset.complete = r.complete ? '1' : '0';
  }

  function geometry() {
    const n = list.count;
    const h = listEl.clientHeight || 1;
    const visible = Math.ceil(h / ROW_H) + 1;
    const total = Math.min(n * ROW_H, MAX_SCROLL);
    const maxFirst = Math.max(0, n - visible + 1);
    return { n, h, visible, total, maxFirst };
  }
  function sizeSpacer() { spacer.style.height = geometry().total + 'px'; }
  function firstRow() {
    const g = geometry();
    if (g.total <= g.h) return 0;
    if (g.n * ROW_H <= MAX_SCROLL) return Math.floor(listEl.scrollTop / ROW_H);
    return Math.round((listEl.scrollTop / (g.total - g.h)) * g.maxFirst);
  }
  function scrollToRow(r) {
    const g = geometry();
    const target = Math.max(0, r - Math.floor(g.visible / 3));
    if (g.n * ROW_H <= MAX_SCROLL) listEl.scrollTop = target * ROW_H;
    else listEl.scrollTop = (Math.min(target, g.maxFirst) / Math.max(1, g.maxFirst)) * (g.total - g.h);
    render();
  }

  function summary(e) {
    const m = (e.class || '') + (e.method ? '.' + e.method : '');
    switch (e.type) {
      case 'CALL': return m + '(' + (e.params || []).map((p) => p.name + '=' + ('value' in p ? fmtValue(p.value) : '?')).join(', ') + ')';
      case 'RETURN': return m + (e.exception ? ' ⇑ ' + e.exception : ('value' in e ? ' → ' + fmtValue(e.value) : '')) + '  ' + fmtNs(e.elapsed_ns);
      case 'THROW': return e.exception + (e.message !== null && e.message !== undefined ? ': ' + e.message : '') + '  at ' + m +
        (e.catch_class ? '  → caught in ' + e.catch_class + '.' + e.catch_method : '  → UNCAUGHT');
      case 'CATCH': return e.exception + '  caught in ' + m;
      case 'CLASS_LOAD': return e.class + '  (' + (e.loader || '') + ')';
      case 'GC_FINISH': return fmtNs(e.duration_ns);
      case 'DROPPED': return e.count + ' events dropped';
      default:
        if (e.monitor) return e.monitor + (e.owner ? '  owner ' + e.owner : '') + (e.wait_ns !== undefined ? '  waited ' + fmtNs(e.wait_ns) : '');
        return '';
    }
  }

  function render() {
    const g = geometry();
    const first = firstRow();
    rowsEl.style.top = listEl.scrollTop + 'px';
    clear(rowsEl);
    const offsetPx = g.n * ROW_H <= MAX_SCROLL ? -(listEl.scrollTop % ROW_H) : 0;
    rowsEl.style.transform = 'translateY(' + offsetPx + 'px)';
    const frag = document.createDocumentFragment();
    for (let r = first; r < Math.min(g.n, first + g.visible + 1); r++) {
      const p = Math.floor(r / PAGE);
      const page = list.pages.get(p);
      const row = el('div', 'row');
      row.dataset.row = r;
      if (!page || !page.events) {
        loadPage(p);
        row.appendChild(el('span', 'c-id', '…'));
      } else {
        const e = page.events[r - p * PAGE];
        if (!e) { row.appendChild(el('span', 'c-id', '…')); frag.appendChild(row); continue; }
        row.dataset.id = e.id;
        if (page.marks[r - p * PAGE]) row.classList.add('mark');
        if (e.id === state.sel) row.classList.add('sel');
        row.appendChild(el('span', 'c-id', '#' + e.id));
        row.appendChild(el('span', 'c-time', fmtTime(e.time_ns)));
        const t = el('span', 'c-type');
        t.appendChild(el('span', 'badge t-' + e.type, e.type));
        row.appendChild(t);
        row.appendChild(el('span', 'c-thread', e.thread));
        row.appendChild(el('span', 'c-sum', summary(e)));
        row._event = e;
      }
      frag.appendChild(row);
    }
    rowsEl.appendChild(frag);
  }

  // ---------------------------------------------------------------- detail pane
  const LABELS = { id: 'ID', time_ns: 'TIME', type: 'TYPE', thread: 'THRD', exception: 'EXC', message: 'MSG', class: 'CLASS',
    method: 'MTD', sig: 'SIG', loc: 'LOC', depth: 'DEPTH', params: 'PARAM', value: 'VALUE', elapsed_ns: 'ELAPSED',
    catch_class: 'CLASS2', catch_method: 'MTD2', catch_sig: 'SIG2', catch_loc: 'LOC2', monitor: 'MON', owner: 'OWNER',
    wait_ns: 'WAIT', timeout_ms: 'TIMEOUT', timed_out: 'TIMEDOUT', duration_ns: 'DURATION', count: 'COUNT', loader: 'LOADER',
    source: 'SRC', daemon: 'DAEMON', priority: 'PRIORITY', group: 'GROUP' };
  function quote(s) { return '"' + String(s).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\t/g, '\\t') + '"'; }
  function literalOf(v) { return typeof v === 'number' || typeof v === 'boolean' ? String(v) : v === null ? 'null' : quote(v); }
  function addFilter(clause) {
    const f = state.ctx ? '' : state.filter.trim();
    setFilter(f ? f + ' && ' + clause : clause);
  }

  function showDetail(e) {
    const d = $('detail');
    clear(d);
    if (!e) { d.appendChild(el('p', 'hint', 'Select an event to see its fields. Click a value to filter on it.')); return; }
    if (activeFilter()) {
      const b = el('button', null, 'Open #' + e.id + ' in its context');
      b.id = 'open-context';
      b.onclick = () => openContext(e.id);
      d.appendChild(b);
    }
    const tbl = el('table');
    const add = (label, text, clause) => {
      const tr = el('tr');
      tr.appendChild(el('th', null, label));
      const td = el('td');
      const span = el('span', clause ? 'val' : null, text);
      if (clause) { span.title = 'filter: ' + clause; span.onclick = () => addFilter(clause); span.dataset.clause = clause; }
      td.appendChild(span);
      tr.appendChild(td);
      tbl.appendChild(tr);
    };
    const order = Object.keys(LABELS);
    const keys = Object.keys(e).sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99));
    for (const k of keys) {
      const v = e[k];
      const label = LABELS[k] || k.toUpperCase();
      if (k === 'params') {
        for (const p of v) add('PARAM', p.name + ': ' + p.type + ' = ' + ('value' in p ? fmtValue(p.value) : '?'),
          'value' in p && p.value !== null && typeof p.value !== 'object' ? 'param == ' + literalOf(p.value) : null);
      } else if (k === 'loc' || k === 'catch_loc') {
        const text = v ? 'bci ' + v.bci + (v.line !== null ? ' line ' + v.line : '') : 'uncaught';
        add(label, text, v ? k + ' == ' + v.bci : (k === 'catch_loc' ? 'catch_class == null' : null));
      } else if (k === 'time_ns' || k === 'elapsed_ns' || k === 'wait_ns' || k === 'duration_ns') {
        add(label, fmtNs(v) + ' (' + v + ' ns)', k === 'time_ns' ? null : k + ' >= ' + v);
      } else if (k === 'id') {
        add(label, '#' + v, null);
      } else if (k === 'type') {
        add(label, v, 'type == ' + v);
      } else if (v !== null && typeof v === 'object') {
        add(label, JSON.stringify(v), null);
      } else {
        const fk = k === 'value' ? 'value' : k;
        add(label, k === 'message' || k === 'value' ? fmtValue(v) : (v === null ? 'null' : String(v)), fk + ' == ' + literalOf(v));
      }
    }
    d.appendChild(tbl);
  }

  listEl.addEventListener('scroll', () => render());
  // Keyboard: ↑/↓ move the selection, Enter opens a filtered event in context.
  listEl.addEventListener('keydown', async (ev) => {
    if (!['ArrowDown', 'ArrowUp', 'Enter'].includes(ev.key) || state.sel === null) return;
    ev.preventDefault();
    if (ev.key === 'Enter') { if (activeFilter()) openContext(state.sel); return; }
    const rows = [...rowsEl.querySelectorAll('.row[data-id]')];
    const i = rows.findIndex((r) => Number(r.dataset.id) === state.sel);
    let r = i < 0 ? null : Number(rows[i].dataset.row) + (ev.key === 'ArrowDown' ? 1 : -1);
    if (r === null || r < 0 || r >= list.count) return;
    const p = Math.floor(r / PAGE);
    await loadPage(p);
    const e = list.pages.get(p) && list.pages.get(p).events && list.pages.get(p).events[r - p * PAGE];
    if (!e) return;
    const g = geometry();
    const first = firstRow();
    if (r < first || r >= first + g.visible - 1) scrollToRow(r);
    select(e);
  });
  window.addEventListener('resize', () => { sizeSpacer(); render(); });
  rowsEl.addEventListener('click', (ev) => {
    const row = ev.target.closest('.row');
    if (!row || !row._event) return;
    select(row._event);
    if (activeFilter()) openContext(row._event.id);
  });
  function select(e) {
    state.sel = e.id;
    stepPos = e.id;
    writeHash();
    showDetail(e);
    render();
  }

  let ctxTarget = null;
  async function openContext(id) {
    ctxTarget = id;
    state.ctx = true;
    state.sel = id;
    stepPos = id;
    writeHash();
    await resetList();
    const row = await src.locate('', id);
    if (row !== null && row !== undefined) { await loadPage(Math.floor(row / PAGE)); scrollToRow(row); }
    const e = findLoaded(id);
    showDetail(e);
    $('context-text').textContent = 'Event #' + id + ' in its original context' + (state.filter ? ' (filter “' + state.filter + '” set aside).' : '.');
    $('context').hidden = false;
  }
  function findLoaded(id) {
    for (const p of list.pages.values()) if (p.events) { const e = p.events.find((x) => x.id === id); if (e) return e; }
    return null;
  }
  $('back').onclick = async () => {
    state.ctx = false;
    $('context').hidden = true;
    writeHash();
    await resetList();
    // Back where the user left the filtered list: at the event opened in context.
    const back = ctxTarget !== null ? ctxTarget : state.sel;
    if (back !== null) {
      const row = await src.locate(state.filter, back).catch(() => null);
      if (row !== null && row !== undefined) {
        await loadPage(Math.floor(row / PAGE));
        scrollToRow(row);
        state.sel = back;
        writeHash();
        showDetail(findLoaded(back));
        render();
      }
    }
  };

  // ---------------------------------------------------------------- filter and search boxes
  let filterTimer = null;
  function setFilter(f) {
    $('filter').value = f;
    applyFilter(f);
  }
  function applyFilter(f) {
    state.filter = f;
    state.ctx = false;
    $('context').hidden = true;
    writeHash();
    src.check(f).then(() => {
      showError(null, $('filter'));
      listEl.scrollTop = 0;
      resetList();
    }, (err) => showError(err, $('filter')));
  }
  $('filter').addEventListener('input', () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => applyFilter($('filter').value), 200);
  });
  $('filter').addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { clearTimeout(filterTimer); applyFilter($('filter').value); } });

  let searchTimer = null;
  function applySearch(s) {
    state.search = s;
    stepPos = state.sel;
    writeHash();
    $('searchinfo').textContent = '';
    src.check(s).then(() => {
      showError(null, $('search'));
      list.search = s;
      list.pages = new Map();
      list.gen++;
      render();
    }, (err) => showError(err, $('search')));
  }
  $('search').addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => applySearch($('search').value), 200);
  });
  async function step(dir) {
    if (!state.search.trim()) return;
    const info = $('searchinfo');
    try {
      const r = await src.step(activeFilter(), state.search, stepPos, dir);
      if (r.id === null || r.id === undefined) {
        info.textContent = 'no ' + (dir === 'prev' ? 'earlier' : 'later') + ' match (' + r.count + (r.complete ? '' : '+') + ' in all)';
        return;
      }
      stepPos = r.id;
      info.textContent = 'match ' + (r.rank + 1).toLocaleString('en') + ' of ' + r.count.toLocaleString('en') + (r.complete ? '' : '+') + ' (#' + r.id + ')';
      info.dataset.id = r.id;
      state.sel = r.id;
      writeHash();
      if (r.row !== null && r.row !== undefined) { await loadPage(Math.floor(r.row / PAGE)); scrollToRow(r.row); }
      showDetail(findLoaded(r.id));
    } catch (err) { showError(err, $('search')); }
  }
  $('next').onclick = () => step('next');
  $('prev').onclick = () => step('prev');
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'F3') { ev.preventDefault(); step(ev.shiftKey ? 'prev' : 'next'); }
  });

  // ---------------------------------------------------------------- views
  let viewsData = null;
  async function views() { if (!viewsData) viewsData = await src.views(); return viewsData; }
  function grid(headers, rows) {
    const t = el('table', 'grid');
    const hr = el('tr');
    for (const h of headers) hr.appendChild(el('th', null, h));
    t.appendChild(hr);
    for (const r of rows) {
      const tr = el('tr');
      for (const c of r) {
        if (c instanceof Node) { const td = el('td'); td.appendChild(c); tr.appendChild(td); } else tr.appendChild(el('td', typeof c === 'number' ? 'n' : null, typeof c === 'number' ? c.toLocaleString('en') : c));
      }
      t.appendChild(tr);
    }
    return t;
  }
  function filterLink(text, clause) {
    const a = el('span', 'link', text);
    a.title = 'show these events: ' + clause;
    a.onclick = () => { showView('events'); setFilter(clause); };
    return a;
  }
  function eventLink(id) {
    const a = el('span', 'link', '#' + id);
    a.onclick = () => { showView('events'); state.filter = ''; $('filter').value = ''; openContext(id); };
    return a;
  }

  const renderers = {
    async exceptions(box) {
      const v = (await views()).exceptions;
      box.appendChild(el('h3', null, 'Exceptions by type'));
      box.appendChild(grid(['exception', 'thrown', 'caught', 'uncaught'], v.by_type.map((x) => [
        filterLink(x.class, 'type == THROW && exception == ' + quote(x.class)), x.thrown, x.caught,
        x.uncaught ? filterLink(String(x.uncaught), 'type == THROW && exception == ' + quote(x.class) + ' && catch_class == null') : 0])));
      box.appendChild(el('h3', null, 'Throw → catch sites'));
      box.appendChild(grid(['exception', 'thrown at', 'caught at', 'count', 'first'], v.sites.map((s) => [
        s.exception, s.thrown_at, s.caught_at === null ? 'UNCAUGHT' : s.caught_at, s.count, eventLink(s.first_id)])));
      if (v.sites_not_listed) box.appendChild(el('p', 'hint', v.sites_not_listed + ' throws at further sites not listed'));
    },
    async calltree(box) {
      const root = (await views()).calltree;
      box.appendChild(el('p', 'hint', 'Inclusive time, self time and calls per path, merged per thread (from CALL/RETURN). Click to fold.'));
      const tree = el('div', 'tree');
      const total = Math.max(1, root.total_ns);
      const add = (n, depth, parent) => {
        const row = el('div', 'node');
        row.style.paddingLeft = depth * 16 + 'px';
        const bar = el('span', 'bar');
        bar.style.width = Math.max(1, Math.round((n.total_ns / total) * 120)) + 'px';
        row.appendChild(bar);
        row.appendChild(el('span', 'num', fmtNs(n.total_ns)));
        row.appendChild(el('span', 'num', 'self ' + fmtNs(n.self_ns)));
        row.appendChild(el('span', 'num', n.calls.toLocaleString('en') + ' calls'));
        row.appendChild(el('span', null, (n.children.length ? '▾ ' : '  ') + n.name));
        parent.appendChild(row);
        const kids = el('div');
        parent.appendChild(kids);
        for (const c of n.children) add(c, depth + 1, kids);
        row.onclick = () => { kids.hidden = !kids.hidden; };
      };
      add(root, 0, tree);
      box.appendChild(tree);
    },
    async flamegraph(box) {
      const svg = await src.flamegraph();
      box.appendChild(el('p', 'hint', 'Width: wall time in traced methods, one tower per thread (inferno). Hover a frame for its name and time.'));
      const frame = document.createElement('iframe');
      frame.id = 'flame-frame';
      frame.setAttribute('sandbox', '');
      // inferno sizes the picture; the frame takes its height.
      const h = /<svg[^>]*\sheight="(\d+)"/.exec(svg);
      if (h) frame.style.height = Number(h[1]) + 4 + 'px';
      frame.src = URL.createObjectURL(new Blob([svg], { type: 'image/svg+xml' }));
      box.appendChild(frame);
    },
    async locks(box) {
      const v = (await views()).locks;
      box.appendChild(el('h3', null, 'Contended monitors'));
      if (!v.length) box.appendChild(el('p', 'hint', 'No monitor contention in this trace.'));
      else box.appendChild(grid(['monitor', 'contentions', 'total wait', 'max wait'], v.map((m) => [
        filterLink(m.monitor, 'monitor == ' + quote(m.monitor)), m.contentions, fmtNs(m.total_wait_ns), fmtNs(m.max_wait_ns)])));
    },
    async threads(box) {
      const v = (await views()).threads;
      box.appendChild(el('p', 'hint', 'Events per thread over the trace’s ' + fmtNs(v.duration_ns) + ' (darker = more events). Click a thread to filter on it.'));
      const tl = el('div', 'timeline');
      const max = Math.max(1, ...v.threads.flatMap((t) => t.buckets));
      for (const t of v.threads) {
        const line = el('div', 'tl');
        const name = filterLink(t.name, 'thread == ' + quote(t.name));
        name.classList.add('tn');
        line.appendChild(name);
        const strip = el('div', 'ts');
        strip.title = t.events.toLocaleString('en') + ' events, ' + fmtTime(t.first_ns) + ' – ' + fmtTime(t.last_ns);
        for (const b of t.buckets) {
          const c = el('div', 'tb');
          if (b) c.style.background = 'rgba(35, 90, 160, ' + (0.15 + 0.85 * Math.sqrt(b / max)).toFixed(3) + ')';
          strip.appendChild(c);
        }
        line.appendChild(strip);
        tl.appendChild(line);
      }
      box.appendChild(tl);
    },
    async reactions(box) {
      const v = (await views()).reactions;
      if (!v) {
        box.appendChild(el('div', 'placeholder', 'Reactions (event handlers, callbacks, the trie of user calls) need SAMPLE events: record with --events samples (vmview record --events samples --interval 10ms -- java …).'));
        return;
      }
      const STATES = ['RUN', 'IO', 'WAIT', 'BLOCKED', 'SLEEP'];
      const mix = (c) => STATES.filter((k) => c[k]).map((k) => k + ' ' + c[k].toLocaleString('en')).join(' · ');
      const onThread = (t) => filterLink(t, 'type == SAMPLE && thread == ' + quote(t));
      const mname = (m) => (m.class ? m.class + '.' + m.method : 'all threads');
      box.appendChild(el('p', 'hint', v.samples.toLocaleString('en') + ' thread samples in ' + v.ticks.toLocaleString('en') + ' ticks over ' + fmtNs(v.duration_ns) + ', ' + v.run_samples.toLocaleString('en') + ' of them RUN. A handler is the busy child of a loop that waits (NODE_WAIT) or reads (NODE_IO) for its next event; a callback is user code called by the JDK (a comparator, a SAX handler).'));
      box.appendChild(el('h3', null, 'Event handlers'));
      if (!v.handlers.length) box.appendChild(el('p', 'hint', 'None above the cut-offs (5 RUN samples, 1% of RUN).'));
      else box.appendChild(grid(['type', 'handler', 'loop', 'samples', '% of RUN', 'states', 'threads'], v.handlers.map((h) => {
        const ts = el('span');
        h.threads.forEach((t, i) => { if (i) ts.appendChild(document.createTextNode(', ')); ts.appendChild(onThread(t.thread)); });
        const row = [h.type, mname(h), mname(h.loop), h.samples, (h.share * 100).toFixed(1) + '%', mix(h.states), ts];
        return row;
      })));
      box.appendChild(el('h3', null, 'Callbacks'));
      if (!v.callbacks.length) box.appendChild(el('p', 'hint', 'No user method called back from JDK code.'));
      else box.appendChild(grid(['callback', 'samples'], v.callbacks.map((c) => [mname(c), c.samples])));
      box.appendChild(el('h3', null, 'Threads'));
      box.appendChild(grid(['thread', 'states', 'handlers'], v.threads.map((t) => [
        onThread(t.thread), mix(t.states), t.handlers.map((h) => mname(h) + ' (' + h.samples + ')').join(', ')])));
      box.appendChild(el('h3', null, 'Trie of user calls'));
      box.appendChild(el('p', 'hint', 'Samples at each node (its own, by state), with the subtree’s total. Click to fold.'));
      const tree = el('div', 'tree');
      const total = Math.max(1, STATES.reduce((a, k) => a + v.trie.total[k], 0));
      const add = (n, depth, parent) => {
        const row = el('div', 'node');
        row.style.paddingLeft = depth * 16 + 'px';
        const sum = STATES.reduce((a, k) => a + n.total[k], 0);
        const bar = el('span', 'bar');
        bar.style.width = Math.max(1, Math.round((sum / total) * 120)) + 'px';
        row.appendChild(bar);
        row.appendChild(el('span', 'num', sum.toLocaleString('en')));
        row.appendChild(el('span', null, (n.children.length ? '▾ ' : '  ') + mname(n) + (mix(n.own) ? '  [' + mix(n.own) + ']' : '')));
        parent.appendChild(row);
        const kids = el('div');
        parent.appendChild(kids);
        for (const c of n.children) add(c, depth + 1, kids);
        row.onclick = () => { kids.hidden = !kids.hidden; };
      };
      add(v.trie, 0, tree);
      box.appendChild(tree);
    },
    async stats(box) {
      const s = (await views()).stats;
      box.appendChild(el('p', null, s.events.toLocaleString('en') + ' events over ' + fmtNs(s.duration_ns) + '; ' + s.gc_count + ' GCs (' + fmtNs(s.gc_total_ns) + '); ' + s.dropped + ' dropped'));
      box.appendChild(el('h3', null, 'Events by type'));
      box.appendChild(grid(['type', 'events'], s.events_by_type.map(([t, n]) => [filterLink(t, 'type == ' + t), n])));
      box.appendChild(el('h3', null, 'Methods'));
      box.appendChild(grid(['method', 'calls', 'total', 'self', 'by exception'], s.methods.map((m) => [
        filterLink(m.class + '.' + m.method + m.sig, 'type in [CALL, RETURN] && class == ' + quote(m.class) + ' && method == ' + quote(m.method)),
        m.calls, fmtNs(m.total_ns), fmtNs(m.self_ns), m.exceptional_returns])));
    },
  };
  const rendered = new Set();
  function showView(v) {
    if (!document.getElementById('view-' + v)) v = 'events';
    state.view = v;
    writeHash();
    for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('on', b.dataset.view === v);
    for (const d of document.querySelectorAll('.view')) d.hidden = d.id !== 'view-' + v;
    if (v === 'events') { sizeSpacer(); render(); return; }
    if (!rendered.has(v)) {
      rendered.add(v);
      const box = $('view-' + v);
      box.appendChild(el('p', 'hint loading', 'computing…'));
      renderers[v](box).then(() => { const l = box.querySelector('.loading'); if (l) l.remove(); box.dataset.ready = '1'; },
        (err) => { rendered.delete(v); box.appendChild(el('p', 'hint', 'failed: ' + (err.error || err))); });
    }
  }
  for (const b of document.querySelectorAll('#tabs button')) b.onclick = () => showView(b.dataset.view);

  // ---------------------------------------------------------------- start
  async function start() {
    readHash();
    const info = await src.info();
    $('title').textContent = 'vmview — ' + info.file;
    document.title = 'vmview — ' + info.file;
    $('summary').textContent = info.events.toLocaleString('en') + ' events, ' + fmtNs(info.duration_ns) + (info.mode === 'report' ? ' (report)' : '');
    list.count = info.events;
    $('filter').value = state.filter;
    $('search').value = state.search;
    showView(state.view);
    const sel = state.sel;
    if (state.ctx && sel !== null) { await openContext(sel); }
    else {
      await resetList();
      if (sel !== null) {
        const row = await src.locate(activeFilter(), sel).catch(() => null);
        if (row !== null && row !== undefined) { await loadPage(Math.floor(row / PAGE)); scrollToRow(row); showDetail(findLoaded(sel)); }
      }
    }
    document.body.dataset.ready = '1';
  }
  // A link pasted into the address bar (the page itself only replaces the hash).
  window.addEventListener('hashchange', () => location.reload());
  start().catch((e) => { document.body.dataset.error = String(e && (e.error || e.message) || e); });
})();
