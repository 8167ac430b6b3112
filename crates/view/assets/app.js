// vmview's page. Trace strings are program data and may be hostile: they
// reach the DOM only through textContent (never innerHTML) and the
// canvases' fillText, which draws them as pixels.
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
    'CALIBRATION', 'MONITOR_ENTER', 'MONITOR_EXIT', 'BYTECODE', 'REACTION_HANDLERS', 'FOREIGN', 'ALLOC_SAMPLE',
    'DEMOTION', 'METHOD_COUNTS', 'VTHREAD_PINNED'];
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
      if (r.status === 503) return Object.assign({ pending: true }, body);
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
      timeline: (from, to, px) => get('timeline', { from, to, px }),
      tree: (from, to) => get('tree', { from, to }),
      byid: (ids) => get('byid', { ids: ids.join(',') }),
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
      timeline: async (from, to, px) => reportTimeline(data.timeline, from, to, px),
      tree: async (from, to) => reportTree(data.timeline, from, to, (id) => { const e = events[byId(id)]; return e && e.id === id ? e : null; }),
      byid: async (ids) => ({ events: ids.map((id) => events[byId(id)]).filter((e) => e && ids.includes(e.id)) }),
    };
  }

  // The report's timeline: the whole index is embedded (small traces
  // only), summarised here per pixel as the server does.
  function reportTimeline(tl, from, to, px) {
    if (!tl) return { from, to, px, end_ns: 0, tracks: [], gc: [], methods: {}, kinds: [], dropped_shorter_than_ns: 0 };
    const nsPx = Math.max(1, (to - from) / px);
    const pe = (t) => from + (Math.floor((t - from) / nsPx) + 1) * nsPx;
    const inRange = (a, b) => b >= from && a < to;
    const tracks = tl.tracks.map((t) => {
      const out = [];
      let cur = null;
      for (const s of t.slices) {
        if (!inRange(s[0], s[1]) || (s[1] === from && s[0] < from)) continue;
        if (s[1] - s[0] >= nsPx) { out.push(s); cur = null; continue; }
        if (cur && cur.s[2] === s[2] && s[0] < cur.pe) { cur.s[1] = s[1]; cur.s[5] = 0; cur.s[6] += 1; continue; }
        const c = s.slice();
        out.push(c);
        cur = { s: c, pe: pe(s[0]) };
      }
      return Object.assign({}, t, {
        slices: out,
        samples: t.samples.filter((s) => s[0] >= from && s[0] < to),
        markers: t.markers.filter((m) => inRange(m[0], m[1])),
      });
    });
    return Object.assign({}, tl, { from, to, px, tracks, gc: tl.gc.filter((m) => inRange(m[0], m[1])) });
  }
  function reportTree(tl, from, to, eventById) {
    const root = { name: 'all threads', total_ns: 0, calls: 0, kids: new Map() };
    const child = (p, name) => { let n = p.kids.get(name); if (!n) { n = { name, total_ns: 0, calls: 0, kids: new Map() }; p.kids.set(name, n); } return n; };
    const exc = new Map(), mon = new Map();
    for (const t of (tl ? tl.tracks : [])) {
      const tn = { name: t.name, total_ns: 0, calls: 0, kids: new Map() };
      const levels = [];
      for (const s of t.slices) (levels[s[2]] = levels[s[2]] || []).push(s);
      const nodeOf = [];
      levels.forEach((v, level) => {
        nodeOf[level] = new Array(v.length).fill(null);
        v.forEach((s, i) => {
          if (s[1] < from || s[0] >= to || (s[1] === from && s[0] < from)) return;
          let parent = tn;
          if (level > 0) {
            const up = levels[level - 1];
            let lo = 0, hi = up.length;
            while (lo < hi) { const m = (lo + hi) >> 1; if (up[m][0] <= s[0]) lo = m + 1; else hi = m; }
            if (lo > 0 && nodeOf[level - 1][lo - 1]) parent = nodeOf[level - 1][lo - 1];
          }
          const m = tl.methods[s[3]];
          const n = child(parent, m ? m[0] + '.' + m[1] : '?');
          const w = Math.max(0, Math.min(s[1], to) - Math.max(s[0], from));
          n.total_ns += w;
          if (s[0] >= from) n.calls += 1;
          if (level === 0) tn.total_ns += w;
          nodeOf[level][i] = n;
        });
      });
      if (tn.kids.size) { root.kids.set('\u0000' + t.thread, tn); root.total_ns += tn.total_ns; }
      for (const [, time, kind, id] of t.markers) {
        if (time < from || time >= to) continue;
        const e = eventById(id);
        if (!e) continue;
        if (kind === 0 || kind === 1) { const x = exc.get(e.exception) || { class: e.exception, thrown: 0, caught: 0 }; if (kind === 0) x.thrown++; else x.caught++; exc.set(e.exception, x); }
        if (kind === 2) { const x = mon.get(e.monitor) || { class: String(e.monitor).replace(/@.*/, ''), contentions: 0, total_wait_ns: 0, max_wait_ns: 0 }; x.contentions++; x.total_wait_ns += e.wait_ns || 0; x.max_wait_ns = Math.max(x.max_wait_ns, e.wait_ns || 0); mon.set(e.monitor, x); }
      }
    }
    const out = (n, kind) => {
      const kids = [...n.kids.values()].sort((a, b) => b.total_ns - a.total_ns).map((k) => out(k, 'method'));
      const sum = kids.reduce((a, k) => a + k.wall_incl_ns, 0);
      const r = { kind, calls: n.calls, wall_incl_ns: kind === 'root' ? sum : n.total_ns, wall_excl_ns: kind === 'root' ? 0 : Math.max(0, n.total_ns - sum), records: 0, children: kids };
      if (kind !== 'root') r.name = n.name;
      return r;
    };
    const threads = [...root.kids.values()].map((tn) => ({ thread: tn.name, tree: out(tn, 'root') }));
    return { from, to, calltree: { threads, unmatched_returns: 0 }, exceptions: [...exc.values()].sort((a, b) => b.thrown - a.thrown),
      monitors: [...mon.values()].sort((a, b) => b.total_wait_ns - a.total_wait_ns), dropped_shorter_than_ns: tl ? tl.dropped_shorter_than_ns : 0 };
  }

  const dataBlock = $('vmview-data');
  const src = dataBlock ? EmbeddedSource(JSON.parse(dataBlock.textContent)) : ApiSource();

  // ---------------------------------------------------------------- state and URL
  const state = { filter: '', search: '', view: 'events', sel: null, ctx: false, range: null };
  let list = { count: 0, complete: true, pages: new Map(), gen: 0, filter: '', search: '' };
  let stepPos = null;

  function readHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    state.filter = h.get('filter') || '';
    state.search = h.get('search') || '';
    state.view = h.get('view') || 'events';
    state.sel = h.has('event') ? Number(h.get('event')) : null;
    state.ctx = h.get('context') === '1';
    const r = /^(\d+)-(\d+)$/.exec(h.get('range') || '');
    state.range = r && Number(r[2]) > Number(r[1]) ? { from: Number(r[1]), to: Number(r[2]) } : null;
  }
  function writeHash() {
    const h = new URLSearchParams();
    if (state.filter) h.set('filter', state.filter);
    if (state.search) h.set('search', state.search);
    if (state.view !== 'events') h.set('view', state.view);
    if (state.sel !== null) h.set('event', state.sel);
    if (state.ctx) h.set('context', '1');
    if (state.range) h.set('range', state.range.from + '-' + state.range.to);
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

  // ---------------------------------------------------------------- timeline (canvas)
  // One track per thread (virtual threads too: the trace does not record
  // their carriers, so each has a track of its own), nested call slices
  // coloured by package, sample ticks by thread state, markers. The server
  // summarises per pixel; the page draws what it gets and keeps, for the
  // tests and for hit testing, the model of what it drew.
  const KIND_COLOR = ['#c0392b', '#e67e22', '#8e44ad', '#2980b9', '#16a085', '#2c3e50', '#7f8c8d', '#000000', '#d35400', '#95a5a6'];
  const STATE_NAMES = ['RUN', 'IO', 'WAIT', 'BLOCKED', 'SLEEP'];
  const STATE_COLOR = ['#27ae60', '#3498db', '#f1c40f', '#c0392b', '#a0a0a0'];
  const TL_ROW = 15, TL_HEAD = 16, TL_SAMPLE = 5, TL_MARK = 9, TL_AXIS = 22, TL_LABEL = 170;
  function classOf(name) { const i = name.lastIndexOf('.'); return i < 0 ? name : name.slice(0, i); }
  function pkgOf(cls) { const i = cls.lastIndexOf('.'); return i < 0 ? '' : cls.slice(0, i); }
  function hue(s) { let h = 7; for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0; return Math.abs(h) % 360; }
  const pkgColor = (cls) => 'hsl(' + hue(pkgOf(cls)) + ',60%,72%)';
  const TL = { from: 0, to: 1, end: 1, data: null, gen: 0, drawn: [], marks: [], drag: null, inited: false, tips: new Map(), mouse: null };
  function tlCanvas() { return $('tl-canvas'); }
  function tlWidth() { return Math.max(200, tlCanvas().clientWidth - TL_LABEL); }
  const tlX = (t) => TL_LABEL + ((t - TL.from) / (TL.to - TL.from)) * tlWidth();
  const tlT = (x) => TL.from + ((x - TL_LABEL) / tlWidth()) * (TL.to - TL.from);
  let tlTimer = null;
  function tlRequest() {
    tlClamp();
    tlDraw();
    clearTimeout(tlTimer);
    tlTimer = setTimeout(tlFetch, 40);
  }
  function tlClamp() {
    const span = Math.max(10, Math.min(TL.end, TL.to - TL.from));
    if (TL.from < 0) TL.from = 0;
    TL.to = TL.from + span;
    if (TL.to > TL.end) { TL.to = TL.end; TL.from = Math.max(0, TL.end - span); }
  }
  async function tlFetch() {
    const gen = ++TL.gen;
    const from = Math.floor(TL.from), to = Math.ceil(TL.to);
    const r = await src.timeline(from, to, tlWidth());
    if (gen !== TL.gen) return;
    if (r.pending) {
      if (r.progress !== undefined) $('tl-range').textContent = 'building the timeline’s index: ' + Math.floor(100 * r.progress) + '% of the trace read';
      setTimeout(() => { if (gen === TL.gen) tlFetch(); }, 400);
      return;
    }
    TL.data = r;
    tlDraw();
    if (r.partial) {
      // The part of the trace read so far: drawn, and asked again until
      // the index is complete (only complete frames are counted).
      setTimeout(() => { if (gen === TL.gen) tlFetch(); }, 500);
      return;
    }
    const box = $('view-timeline');
    box.dataset.from = from;
    box.dataset.to = to;
    box.dataset.frame = Number(box.dataset.frame || 0) + 1;
  }
  function niceStep(span, n) {
    const raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  function tlDraw() {
    const c = tlCanvas(), d = TL.data;
    const dpr = window.devicePixelRatio || 1;
    const W = c.clientWidth;
    const rows = [];
    let y = TL_AXIS;
    if (d) {
      rows.push({ gc: true, y, h: TL_HEAD });
      y += TL_HEAD + 2;
      for (const t of d.tracks) {
        const h = TL_HEAD + TL_SAMPLE + TL_MARK + Math.max(1, t.levels) * TL_ROW + 6;
        rows.push({ t, y, h });
        y += h;
      }
    }
    c.width = W * dpr;
    c.height = Math.max(60, y) * dpr;
    c.style.height = Math.max(60, y) + 'px';
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, y);
    g.font = '11px ui-monospace, monospace';
    g.textBaseline = 'middle';
    // Axis.
    const step = niceStep(TL.to - TL.from, 8);
    g.fillStyle = '#567';
    for (let t = Math.ceil(TL.from / step) * step; t < TL.to; t += step) {
      const x = tlX(t);
      g.fillRect(x, TL_AXIS - 6, 1, 6);
      g.fillText(fmtNs(t), x + 2, 8);
      g.fillStyle = '#eef0f3'; g.fillRect(x, TL_AXIS, 1, y - TL_AXIS); g.fillStyle = '#567';
    }
    const drawn = [], marks = [];
    const clipX = (x) => Math.max(TL_LABEL, Math.min(W, x));
    const drawMarks = (list, top, track) => {
      for (const [start, time, kind, id, n] of list) {
        const x0 = clipX(tlX(start)), x1 = clipX(tlX(time));
        g.fillStyle = KIND_COLOR[kind] || '#999';
        if (x1 - x0 >= 2) g.fillRect(x0, top + 2, x1 - x0, TL_MARK - 4);
        g.beginPath(); g.moveTo(x1 - 3, top + TL_MARK); g.lineTo(x1 + 3, top + TL_MARK); g.lineTo(x1, top); g.fill();
        marks.push({ track, kind: d.kinds[kind], start, time, id, merged: n, x: x1 - 3, y: top, w: Math.max(6, x1 - x0 + 3), h: TL_MARK });
      }
    };
    for (const r of rows) {
      g.fillStyle = '#23313f';
      if (r.gc) {
        g.fillText('GC', 4, r.y + TL_HEAD / 2);
        drawMarks(d.gc, r.y + 3, 'GC');
        continue;
      }
      const t = r.t;
      g.fillStyle = '#f5f7fa'; g.fillRect(0, r.y, W, TL_HEAD);
      g.fillStyle = '#23313f';
      g.save(); g.beginPath(); g.rect(0, r.y, TL_LABEL - 4, r.h); g.clip();
      g.fillText(t.name, 4, r.y + TL_HEAD / 2);
      g.restore();
      let top = r.y + TL_HEAD;
      for (const [time, st, n] of t.samples) {
        g.fillStyle = STATE_COLOR[st] || '#999';
        g.fillRect(clipX(tlX(time)), top, 2, TL_SAMPLE - 1);
        marks.push({ track: t.name, kind: 'SAMPLE', state: STATE_NAMES[st], time, merged: n });
      }
      top += TL_SAMPLE;
      drawMarks(t.markers, top, t.name);
      top += TL_MARK;
      for (const [start, end, level, m, id, ret, n] of t.slices) {
        const x0 = clipX(tlX(start)), x1 = clipX(tlX(end));
        const w = Math.max(1, x1 - x0), sy = top + level * TL_ROW;
        const name = d.methods[m] ? d.methods[m][0] + '.' + d.methods[m][1] : '?';
        g.fillStyle = n > 1 ? '#c8ccd2' : pkgColor(classOf(name));
        g.fillRect(x0, sy, w, TL_ROW - 1);
        if (w > 40) {
          g.save(); g.beginPath(); g.rect(x0, sy, w - 2, TL_ROW); g.clip();
          g.fillStyle = '#1d1f21';
          g.fillText(n > 1 ? n + ' calls' : name.slice(name.lastIndexOf('.', name.lastIndexOf('.') - 1) + 1), x0 + 3, sy + TL_ROW / 2);
          g.restore();
        }
        drawn.push({ thread: t.thread, track: t.name, level, start, end, method: name, sig: d.methods[m] ? d.methods[m][2] : '', id, ret, merged: n, x: x0, y: sy, w, h: TL_ROW - 1 });
      }
    }
    if (state.range) {
      const x0 = clipX(tlX(state.range.from)), x1 = clipX(tlX(state.range.to));
      g.fillStyle = 'rgba(41, 128, 185, 0.15)'; g.fillRect(x0, 0, Math.max(1, x1 - x0), y);
      g.fillStyle = '#2980b9'; g.fillRect(x0, 0, 1, y); g.fillRect(x1, 0, 1, y);
    }
    if (TL.drag && TL.drag.mode === 'select') {
      const a = Math.min(TL.drag.x, TL.drag.cur), b = Math.max(TL.drag.x, TL.drag.cur);
      g.fillStyle = 'rgba(241, 196, 15, 0.25)'; g.fillRect(a, 0, b - a, y);
    }
    TL.drawn = drawn;
    TL.marks = marks;
    // The test hook: what is on screen, as data.
    window.__vmviewTimeline = {
      from: TL.from, to: TL.to, end: TL.end, data_from: d ? d.from : null, data_to: d ? d.to : null,
      tracks: d ? d.tracks.map((t) => ({ thread: t.thread, name: t.name, levels: t.levels })) : [],
      slices: drawn, marks, range: state.range, dropped_shorter_than_ns: d ? d.dropped_shorter_than_ns : 0,
    };
    $('tl-range').textContent = fmtTime(TL.from) + ' – ' + fmtTime(TL.to) + ' (' + fmtNs(TL.to - TL.from) + ' shown)' +
      (state.range ? '; selected ' + fmtTime(state.range.from) + ' – ' + fmtTime(state.range.to) + ' (' + fmtNs(state.range.to - state.range.from) + ')' : '') +
      (d && d.dropped_shorter_than_ns ? '; calls shorter than ' + fmtNs(d.dropped_shorter_than_ns) + ' not kept (memory bound)' : '') +
      (d && d.partial ? '; building the timeline’s index: ' + Math.floor(100 * (d.partial.progress || 0)) + '% of the trace read, shown up to ' + fmtTime(d.end_ns) : '');
    $('tl-clear').hidden = !state.range;
  }
  function tlHit(x, y) {
    for (const s of TL.drawn) if (x >= s.x && x <= s.x + Math.max(s.w, 2) && y >= s.y && y <= s.y + s.h) return s;
    for (const m of TL.marks) if (m.x !== undefined && x >= m.x && x <= m.x + m.w && y >= m.y && y <= m.y + m.h) return m;
    return null;
  }
  function tlZoom(factor, atX) {
    const t = tlT(atX === undefined ? TL_LABEL + tlWidth() / 2 : atX);
    TL.from = t - (t - TL.from) * factor;
    TL.to = t + (TL.to - t) * factor;
    tlRequest();
  }
  function tlPan(frac) { const d = (TL.to - TL.from) * frac; TL.from += d; TL.to += d; tlRequest(); }
  function setRange(r) {
    state.range = r && r.to > r.from ? { from: Math.floor(r.from), to: Math.ceil(r.to) } : null;
    writeHash();
    for (const v of ['calltree', 'flamegraph', 'exceptions', 'locks']) { rendered.delete(v); const b = $('view-' + v); clear(b); delete b.dataset.ready; }
    if (state.view !== 'timeline' && state.view !== 'events') showView(state.view);
    if (TL.inited) tlDraw();
  }
  function tlTip(s, ev) {
    const tip = $('tl-tip');
    clear(tip);
    if (!s) { tip.hidden = true; return; }
    const line = (t, cls) => tip.appendChild(el('div', cls, t));
    if (s.kind) {
      line(s.kind + (s.merged > 1 ? ' ×' + s.merged : '') + ' at ' + fmtTime(s.time) + (s.time > s.start ? ' (' + fmtNs(s.time - s.start) + ')' : ''), 'tip-head');
      if (s.id !== undefined) line('event #' + s.id + ' — click to open it');
    } else {
      line(s.merged > 1 ? s.merged + ' calls, each shorter than a pixel (first: ' + s.method + ')' : s.method + s.sig, 'tip-head');
      line('duration ' + fmtNs(s.end - s.start) + ' from ' + fmtTime(s.start) + (s.ret ? '' : s.merged > 1 ? '' : ' (not returned)'));
      line('thread ' + s.track + ', level ' + s.level + ', CALL #' + s.id + ' — click to open it');
      if (s.merged === 1) {
        const key = s.id + ':' + s.ret;
        const show = (evs) => {
          if (tip.dataset.key !== key) return;
          const call = evs.find((e) => e.id === s.id), ret = evs.find((e) => e.id === s.ret);
          if (call && call.params) for (const p of call.params) line(p.name + ': ' + p.type + ' = ' + ('value' in p ? fmtValue(p.value) : '?'), 'tip-arg');
          if (ret) line('returned ' + ('value' in ret ? fmtValue(ret.value) : ret.exception ? 'by ' + ret.exception : 'void'), 'tip-arg');
        };
        tip.dataset.key = key;
        if (TL.tips.has(key)) show(TL.tips.get(key));
        else src.byid([s.id, s.ret].filter((x) => x)).then((r) => { if (TL.tips.size > 500) TL.tips.clear(); TL.tips.set(key, r.events); show(r.events); }, () => {});
      }
    }
    tip.hidden = false;
    const box = $('view-timeline').getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - box.left + 14, box.width - 380) + 'px';
    tip.style.top = (ev.clientY - box.top + 14) + 'px';
  }
  function tlInit() {
    if (TL.inited) return;
    TL.inited = true;
    const c = tlCanvas();
    const local = (ev) => { const r = c.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; };
    c.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      const [x] = local(ev);
      if (ev.shiftKey) tlPan(ev.deltaY / 1000);
      else tlZoom(Math.exp(ev.deltaY * 0.002), Math.max(TL_LABEL, x));
    }, { passive: false });
    c.addEventListener('mousedown', (ev) => {
      const [x, y] = local(ev);
      c.focus();
      TL.drag = { mode: ev.shiftKey || y < TL_AXIS ? 'select' : 'pan', x: Math.max(TL_LABEL, x), y, cur: x, from: TL.from, to: TL.to, moved: false };
      ev.preventDefault();
    });
    window.addEventListener('mousemove', (ev) => {
      const [x, y] = local(ev);
      TL.mouse = x;
      if (!TL.drag) { if (state.view === 'timeline') tlTip(tlHit(x, y), ev); return; }
      if (Math.abs(x - TL.drag.x) > 3) TL.drag.moved = true;
      TL.drag.cur = Math.max(TL_LABEL, x);
      if (TL.drag.mode === 'pan') {
        const dt = ((TL.drag.x - x) / tlWidth()) * (TL.drag.to - TL.drag.from);
        TL.from = TL.drag.from + dt; TL.to = TL.drag.to + dt;
        tlRequest();
      } else tlDraw();
    });
    window.addEventListener('mouseup', (ev) => {
      const d = TL.drag;
      if (!d) return;
      TL.drag = null;
      const [x, y] = local(ev);
      if (!d.moved) {
        const s = tlHit(x, y);
        if (s && s.id !== undefined) { $('tl-tip').hidden = true; showView('events'); state.filter = ''; $('filter').value = ''; openContext(s.id); }
        tlDraw();
        return;
      }
      if (d.mode === 'select') setRange({ from: tlT(Math.min(d.x, d.cur)), to: tlT(Math.max(d.x, d.cur)) });
      else tlDraw();
    });
    c.addEventListener('mouseleave', () => { $('tl-tip').hidden = true; });
    c.addEventListener('keydown', (ev) => {
      const k = ev.key.toLowerCase();
      const at = TL.mouse !== null && TL.mouse >= TL_LABEL ? TL.mouse : undefined;
      if (k === 'w') tlZoom(0.8, at);
      else if (k === 's') tlZoom(1.25, at);
      else if (k === 'a') tlPan(-0.2);
      else if (k === 'd') tlPan(0.2);
      else return;
      ev.preventDefault();
    });
    $('tl-reset').onclick = () => { TL.from = 0; TL.to = TL.end; tlRequest(); };
    $('tl-clear').onclick = () => setRange(null);
    $('tl-zoomsel').onclick = () => { if (state.range) { TL.from = state.range.from; TL.to = state.range.to; tlRequest(); } };
    window.addEventListener('resize', () => { if (state.view === 'timeline') tlRequest(); });
  }

  // ---------------------------------------------------------------- flame graph (canvas)
  // Drawn from the call tree (the whole trace's, or a selected range's):
  // click a frame to zoom into it, search to highlight frames and see their
  // share, a method's callers and callees (sandwich), weights by traced
  // wall time or by calls, and the difference against a base range.
  const FG = { root: null, zoom: null, weight: 'time', search: '', sandwich: null, base: null, frames: [], selected: null };
  const FG_ROW = 17;
  function fgPrep(n, parent) {
    n.parent = parent;
    let calls = n.calls || 0;
    for (const c of n.children) { fgPrep(c, n); calls += c.calls_total; }
    n.calls_total = calls;
    return n;
  }
  const fgW = (n) => (FG.weight === 'calls' ? n.calls_total : FG.weight === 'cpu' ? n.cpu_ns || 0 : FG.weight === 'alloc' ? n.alloc_bytes || 0 : n.total_ns);
  function fgPath(n) { const p = []; for (let x = n; x && x.parent; x = x.parent) p.unshift(x.name); return p.join('\u0000'); }
  function fgIndex(root) {
    const m = new Map();
    const walk = (n) => { m.set(fgPath(n), n); for (const c of n.children) walk(c); };
    walk(root);
    return m;
  }
  function fgMatcher() {
    const s = FG.search.trim();
    if (!s) return null;
    const low = s.toLowerCase();
    return (name) => String(name).toLowerCase().includes(low);
  }
  // Merged tree of `trees` (children by name), weights summed.
  function fgMergeInto(dst, n) {
    dst.total_ns += n.total_ns; dst.self_ns += n.self_ns; dst.calls += n.calls;
    for (const c of n.children) {
      let d = dst.children.find((x) => x.name === c.name);
      if (!d) { d = { name: c.name, total_ns: 0, self_ns: 0, calls: 0, children: [] }; dst.children.push(d); }
      fgMergeInto(d, c);
    }
  }
  function fgSandwich(root, name) {
    const callees = { name, total_ns: 0, self_ns: 0, calls: 0, children: [] };
    const callers = { name, total_ns: 0, self_ns: 0, calls: 0, children: [] };
    const walk = (n, inside) => {
      const hit = n.parent && n.name === name;
      if (hit && !inside) {
        fgMergeInto(callees, n);
        let at = callers;
        callers.total_ns += n.total_ns; callers.calls += n.calls;
        for (let p = n.parent; p && p.parent; p = p.parent) {
          let d = at.children.find((x) => x.name === p.name);
          if (!d) { d = { name: p.name, total_ns: 0, self_ns: 0, calls: 0, children: [] }; at.children.push(d); }
          d.total_ns += n.total_ns; d.calls += n.calls;
          at = d;
        }
      }
      for (const c of n.children) walk(c, inside || hit);
    };
    walk(root, false);
    const sort = (n) => { n.children.sort((a, b) => b.total_ns - a.total_ns); n.children.forEach(sort); };
    sort(callees); sort(callers);
    return { callers: fgPrep(callers, null), callees: fgPrep(callees, null) };
  }
  function fgDraw() {
    const box = $('view-flamegraph');
    if (!FG.root || !$('fg-canvas')) return;
    const match = fgMatcher();
    const frames = [];
    let matched = 0;
    const draw = (canvas, root, zoom, baseIdx) => {
      const W = canvas.clientWidth, dpr = window.devicePixelRatio || 1;
      const rects = [];
      const chain = [];
      for (let x = zoom; x; x = x.parent) chain.unshift(x);
      const top = chain[chain.length - 1];
      const total = Math.max(1, fgW(top));
      chain.slice(0, -1).forEach((n, depth) => rects.push({ n, x: 0, w: W, depth, ancestor: true }));
      const lay = (n, x, w, depth, inMatch) => {
        const hit = !!(match && n.parent && match(n.name));
        if (hit && !inMatch) matched += fgW(n);
        rects.push({ n, x, w, depth, hit });
        let cx = x;
        for (const c of n.children) {
          const cw = (w * fgW(c)) / Math.max(1, fgW(n));
          if (cw >= 0.3) lay(c, cx, cw, depth + 1, inMatch || hit);
          cx += cw;
        }
      };
      lay(top, 0, W, chain.length - 1, false);
      const depth = rects.reduce((a, r) => Math.max(a, r.depth), 0) + 1;
      canvas.width = W * dpr; canvas.height = depth * FG_ROW * dpr; canvas.style.height = depth * FG_ROW + 'px';
      const g = canvas.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.font = '11px ui-monospace, monospace';
      g.textBaseline = 'middle';
      for (const r of rects) {
        const y = r.depth * FG_ROW;
        let color = r.n.parent ? pkgColor(classOf(String(r.n.name))) : '#d5dbe3';
        if (baseIdx) {
          const b = baseIdx.get(fgPath(r.n));
          const now = fgW(r.n) / total, was = b ? fgW(b) / Math.max(1, fgW(baseIdx.get(''))) : 0;
          const dlt = Math.max(-1, Math.min(1, (now - was) * 4));
          color = dlt >= 0 ? 'rgb(255,' + Math.round(235 - 170 * dlt) + ',' + Math.round(235 - 170 * dlt) + ')' : 'rgb(' + Math.round(235 + 170 * dlt) + ',' + Math.round(235 + 170 * dlt) + ',255)';
          r.delta = now - was;
        }
        if (match) color = r.hit ? '#e040fb' : (r.n.parent ? '#e4e6ea' : color);
        g.fillStyle = r.ancestor ? '#bfc6d0' : color;
        g.fillRect(r.x, y, Math.max(0.5, r.w - 0.5), FG_ROW - 1);
        if (r.w > 30) {
          g.save(); g.beginPath(); g.rect(r.x, y, r.w - 2, FG_ROW); g.clip();
          g.fillStyle = '#1d1f21'; g.fillText(String(r.n.name), r.x + 3, y + FG_ROW / 2); g.restore();
        }
        frames.push({ canvas: canvas.id, name: String(r.n.name), x: r.x, y, w: r.w, h: FG_ROW - 1, depth: r.depth, total_ns: r.n.total_ns, self_ns: r.n.self_ns,
          calls: r.n.calls_total, hit: !!r.hit, ancestor: !!r.ancestor, delta: r.delta, node: r.n });
      }
      return total;
    };
    let total;
    if (FG.sandwich) {
      $('fg-canvas2').hidden = false;
      $('fg-label2').hidden = false;
      $('fg-label').textContent = 'Callees of ' + FG.sandwich.name + ' (its calls merged)';
      $('fg-label2').textContent = 'Callers of ' + FG.sandwich.name + ' (paths up to the thread, top = the method)';
      total = draw($('fg-canvas'), FG.sandwich.callees, FG.sandwich.callees, null);
      draw($('fg-canvas2'), FG.sandwich.callers, FG.sandwich.callers, null);
    } else {
      $('fg-canvas2').hidden = true;
      $('fg-label2').hidden = true;
      $('fg-label').textContent = FG.base ? 'Difference against the base range (red: larger share now, blue: smaller)' : '';
      total = draw($('fg-canvas'), FG.root, FG.zoom || FG.root, FG.base ? FG.base.index : null);
    }
    FG.frames = frames;
    const unit = FG.weight === 'calls' ? total.toLocaleString('en') + ' calls' : FG.weight === 'alloc' ? total.toLocaleString('en') + ' bytes' : fmtNs(total);
    $('fg-match').textContent = match ? 'matched ' + (100 * matched / Math.max(1, total)).toFixed(1) + '% of ' + unit : '';
    window.__vmviewFlame = {
      frames: frames.map((f) => ({ canvas: f.canvas, name: f.name, x: f.x, y: f.y, w: f.w, depth: f.depth, total_ns: f.total_ns, calls: f.calls, hit: f.hit, ancestor: f.ancestor, delta: f.delta })),
      total, matched, weight: FG.weight, zoom: FG.zoom ? String(FG.zoom.name) : null, range: state.range,
      sandwich: FG.sandwich ? FG.sandwich.name : null, diff: !!FG.base,
    };
    box.dataset.frames = frames.length;
  }
  function fgHit(canvasId, x, y) {
    for (const f of FG.frames) if (f.canvas === canvasId && x >= f.x && x < f.x + f.w && y >= f.y && y < f.y + f.h) return f;
    return null;
  }
  async function rangeTree() {
    for (;;) {
      const r = await src.tree(state.range.from, state.range.to);
      if (!r.pending) return r;
      await new Promise((res) => setTimeout(res, 400));
    }
  }
  // The call trees of `vmview calltree --format json` (one per thread)
  // as one tree for the page: all threads → thread → calls.
  function fromReport(n, name) {
    return { name: name !== undefined ? name : n.name, total_ns: n.wall_incl_ns, self_ns: n.wall_excl_ns, calls: n.calls,
      cpu_ns: n.cpu_incl_ns, alloc_bytes: n.alloc_incl_bytes, children: n.children.map((c) => fromReport(c)) };
  }
  function oneTree(ct) {
    const kids = ct.threads.map((t) => fromReport(t.tree, t.thread)).sort((a, b) => b.total_ns - a.total_ns);
    const sum = (k) => (kids.length && kids.every((x) => x[k] !== undefined) ? kids.reduce((a, x) => a + x[k], 0) : undefined);
    return { name: 'all threads', total_ns: sum('total_ns') || 0, self_ns: 0, calls: 0, cpu_ns: sum('cpu_ns'), alloc_bytes: sum('alloc_bytes'), children: kids };
  }
  async function treeForViews() {
    return oneTree(state.range ? (await rangeTree()).calltree : (await views()).calltree);
  }
  function rangeHint(box) {
    if (!state.range) return;
    const p = el('p', 'range-hint', 'Restricted to the range selected on the timeline: ' + fmtTime(state.range.from) + ' – ' + fmtTime(state.range.to) + ' (' + fmtNs(state.range.to - state.range.from) + '). ');
    const b = el('button', null, 'Whole trace');
    b.onclick = () => setRange(null);
    p.appendChild(b);
    box.appendChild(p);
  }

  const renderers = {
    async timeline(box) {
      tlInit();
      const info = await src.info();
      TL.end = Math.max(1, info.duration_ns + 1);
      if (TL.to <= 1) { TL.from = 0; TL.to = TL.end; }
      await tlFetch();
    },
    async flamegraph(box) {
      rangeHint(box);
      const tree = await treeForViews();
      FG.root = fgPrep(JSON.parse(JSON.stringify(tree)), null);
      FG.zoom = null;
      FG.sandwich = null;
      const bar = el('div', 'fg-bar');
      const search = el('input');
      search.id = 'fg-search';
      search.placeholder = 'search frames (text in the name)';
      search.value = FG.search;
      search.oninput = () => { FG.search = search.value; fgDraw(); };
      bar.appendChild(search);
      const weight = el('select');
      weight.id = 'fg-weight';
      // CPU time and allocated bytes where the trace has them (metrics=cpu,alloc; whole trace only).
      const weights = [['time', 'weight: traced wall time'], ['calls', 'weight: calls']];
      if (FG.root.cpu_ns !== undefined) weights.push(['cpu', 'weight: CPU time']);
      if (FG.root.alloc_bytes !== undefined) weights.push(['alloc', 'weight: allocated bytes']);
      for (const [v, t] of weights) { const o = el('option', null, t); o.value = v; weight.appendChild(o); }
      if (!weights.some((w) => w[0] === FG.weight)) FG.weight = 'time';
      weight.value = FG.weight;
      weight.onchange = () => { FG.weight = weight.value; fgDraw(); };
      bar.appendChild(weight);
      const button = (id, text, fn) => { const b = el('button', null, text); b.id = id; b.onclick = fn; bar.appendChild(b); return b; };
      button('fg-reset', 'Reset zoom', () => { FG.zoom = null; FG.sandwich = null; fgDraw(); });
      button('fg-sandwich', 'Callers / callees', () => {
        const name = FG.selected || (FG.zoom && FG.zoom.name);
        if (!name) { $('fg-match').textContent = 'click a frame first'; return; }
        FG.sandwich = Object.assign({ name }, fgSandwich(FG.root, name));
        fgDraw();
      });
      button('fg-base', 'Set as diff base', () => { FG.base = { index: fgIndex(FG.root), range: state.range }; fgDraw(); $('fg-nodiff').hidden = false; });
      button('fg-nodiff', 'No diff', () => { FG.base = null; fgDraw(); $('fg-nodiff').hidden = true; }).hidden = !FG.base;
      bar.appendChild(el('span', 'count', '')).id = 'fg-match';
      box.appendChild(bar);
      box.appendChild(el('p', 'hint', 'Width: ' + (state.range ? 'traced wall time in the range' : 'inclusive traced wall time') + ', one tower per thread. Click a frame to zoom into it (an ancestor to zoom out); select a method and press “Callers / callees”; “Set as diff base”, then select another range on the timeline to compare.'));
      box.appendChild(el('p', 'fg-label', '')).id = 'fg-label';
      const c = el('canvas', 'fg-canvas');
      c.id = 'fg-canvas';
      box.appendChild(c);
      box.appendChild(el('p', 'fg-label', '')).id = 'fg-label2';
      const c2 = el('canvas', 'fg-canvas');
      c2.id = 'fg-canvas2';
      box.appendChild(c2);
      const tip = el('div', 'tip');
      tip.id = 'fg-tip';
      tip.hidden = true;
      box.appendChild(tip);
      for (const cv of [c, c2]) {
        cv.addEventListener('click', (ev) => {
          const r = cv.getBoundingClientRect();
          const f = fgHit(cv.id, ev.clientX - r.left, ev.clientY - r.top);
          if (!f) return;
          FG.selected = f.node.parent ? f.name : null;
          if (!FG.sandwich) FG.zoom = f.node.parent ? f.node : null;
          fgDraw();
        });
        cv.addEventListener('mousemove', (ev) => {
          const r = cv.getBoundingClientRect();
          const f = fgHit(cv.id, ev.clientX - r.left, ev.clientY - r.top);
          clear(tip);
          if (!f) { tip.hidden = true; return; }
          tip.appendChild(el('div', 'tip-head', f.name));
          tip.appendChild(el('div', null, 'total ' + fmtNs(f.total_ns) + ', self ' + fmtNs(f.self_ns) + ', ' + f.calls.toLocaleString('en') + ' calls' +
            (f.delta !== undefined ? ', share ' + (f.delta >= 0 ? '+' : '') + (100 * f.delta).toFixed(1) + '% against the base' : '')));
          const b = box.getBoundingClientRect();
          tip.style.left = Math.min(ev.clientX - b.left + 14, b.width - 380) + 'px';
          tip.style.top = (ev.clientY - b.top + box.scrollTop + 14) + 'px';
          tip.hidden = false;
        });
        cv.addEventListener('mouseleave', () => { tip.hidden = true; });
      }
      fgDraw();
    },
    async exceptions(box) {
      rangeHint(box);
      if (state.range) {
        const r = await rangeTree();
        box.appendChild(el('h3', null, 'In the selected range'));
        if (!r.exceptions.length) box.appendChild(el('p', 'hint', 'No exception thrown or caught in the range.'));
        else box.appendChild(grid(['exception', 'thrown', 'caught'], r.exceptions.map((x) => [x.class, x.thrown, x.caught])));
      }
      const v = (await views()).exceptions;
      box.appendChild(el('h3', null, state.range ? 'Exceptions by type, whole trace' : 'Exceptions by type'));
      box.appendChild(grid(['exception', 'thrown', 'caught', 'uncaught'], v.by_type.map((x) => [
        filterLink(x.class, 'type == THROW && exception == ' + quote(x.class)), x.thrown, x.caught,
        x.uncaught ? filterLink(String(x.uncaught), 'type == THROW && exception == ' + quote(x.class) + ' && catch_class == null') : 0])));
      box.appendChild(el('h3', null, 'Throw → catch sites'));
      box.appendChild(grid(['exception', 'thrown at', 'caught at', 'count', 'first'], v.sites.map((s) => [
        s.exception, s.thrown_at, s.caught_at === null ? 'UNCAUGHT' : s.caught_at, s.count, eventLink(s.first_id)])));
      if (v.sites_not_listed) box.appendChild(el('p', 'hint', v.sites_not_listed + ' throws at further sites not listed'));
    },
    async calltree(box) {
      rangeHint(box);
      const root = await treeForViews();
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
    async locks(box) {
      rangeHint(box);
      if (state.range) {
        const r = await rangeTree();
        box.appendChild(el('h3', null, 'Contended in the selected range'));
        if (!r.monitors.length) box.appendChild(el('p', 'hint', 'No monitor contention ended in the range.'));
        else box.appendChild(grid(['monitor class', 'contentions', 'total wait', 'max wait'], r.monitors.map((m) => [m.class, m.contentions, fmtNs(m.total_wait_ns), fmtNs(m.max_wait_ns)])));
      }
      const v = (await views()).locks;
      box.appendChild(el('h3', null, state.range ? 'Contended monitors, whole trace' : 'Contended monitors'));
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
    if (v === 'timeline' && rendered.has(v)) { tlRequest(); return; }
    if (v === 'flamegraph' && rendered.has(v)) fgDraw();
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
