#!/usr/bin/env bash
# Soak: real applications from Debian's archive run under vmview, one event
# kind at a time, with -Xcheck:jni. Each run must leave the application as
# it was without vmview (same exit code, same output; for javac, the same
# class files), write no hs_err file, print no JNI warning that the plain
# run does not print and no agent problem, and leave a trace that reads
# back (`vmview stats`) with plausible counts: as many calls to Jetty's
# request handler as requests sent, to H2Soak.transfer as transactions, to
# the Java method a Rhino script calls as the script's rounds, to javac's
# parser as source files.
#
#   scripts/soak.sh [--short | --small] [--once | --minutes N] [--apps LIST]
#                   [--kinds LIST]
#   scripts/soak.sh --overhead [--reps N] [--apps LIST] [--kinds LIST]
#
# --short      small workloads: each application once with every event kind
#              (calls in bci mode), then the first one with calls in jvmti
#              mode (a couple of minutes; what CI runs)
# --minutes N  the long soak (default 60): the full matrix, application ×
#              kind × mode, with large workloads, repeated until N minutes
#              have passed
# --once       the full matrix once, however long it takes
# --small      the full matrix with the short workloads
# --apps       comma-separated subset of jetty,h2,rhino,javac
# --kinds      comma-separated subset of calls,calls-jvmti,exceptions,
#              threads,classes,locks,gc,samples,alloc (long soak and
#              --overhead); all = every kind at once, sampling included;
#              --overhead also takes calls-budget (calls with the overhead
#              budget on; calls has it off), wide and wide-budget (calls of
#              the whole library, e.g. org.h2.*, budget off / on)
# --overhead   measure instead of soaking: each application plain and under
#              calls (bci, the application's package), calls-jvmti,
#              exceptions, locks and samples, interleaved (the order rotates
#              each repetition), --reps times (default 3), all on one
#              workload size, without -Xcheck:jni (it slows JNI and JVMTI
#              calls, not the application alike); prints the medians of
#              wall and CPU time (user + system of vmview and the JVM), their
#              ratios to plain, Jetty's requests/s and each trace's events,
#              as a Markdown table, with the load average before and after.
#              Each run must still exit 0 with the plain run's output. Give
#              a release build (VMVIEW) and run it under `nice -n -15`.
#
# Needs a JDK 17 and the Debian packages libjetty9-java, libh2-java and
# rhino (`apt-get install libjetty9-java libh2-java rhino`), and vmview
# built: VMVIEW (default target/debug/vmview under CARGO_TARGET_DIR or
# ./target; give target/release/vmview for overhead figures worth
# quoting). Runs are kept in SOAK_DIR (default target/soak). Prints one line
# per run with its time against the plain run's (one plain run per
# workload, so a single ratio is noisy) and ends with 'soak: N passed, N
# failed'; exits non-zero when a run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

short=0
small=0
once=0
minutes=60
apps=jetty,h2,rhino,javac
kinds=calls,calls-jvmti,exceptions,threads,classes,locks,gc,samples,alloc
overhead=0
reps=3
kinds_given=0
while (($#)); do
  case $1 in
  --overhead) overhead=1 ;;
  --reps) reps=${2:?--reps needs a number}; shift ;;
  --short) short=1 small=1 ;;
  --small) small=1 ;;
  --once) once=1 ;;
  --minutes) minutes=${2:?--minutes needs a number}; shift ;;
  --apps) apps=${2:?--apps needs a list}; shift ;;
  --kinds) kinds=${2:?--kinds needs a list} kinds_given=1; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "soak: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

target=${CARGO_TARGET_DIR:-$root/target}
vmview=${VMVIEW:-$target/debug/vmview}
[ -x "$vmview" ] || { echo "soak: $vmview not built; run cargo build (or set VMVIEW)" >&2; exit 2; }
jars=/usr/share/java
for jar in jetty9-server jetty9-http jetty9-io jetty9-util servlet-api h2 rhino; do
  [ -f "$jars/$jar.jar" ] || {
    echo "soak: $jars/$jar.jar missing: apt-get install libjetty9-java libh2-java rhino" >&2
    exit 2
  }
done
jetty_cp=$jars/jetty9-server.jar:$jars/jetty9-http.jar:$jars/jetty9-io.jar:$jars/jetty9-util.jar:$jars/servlet-api.jar

dir=${SOAK_DIR:-$target/soak}
rm -rf "$dir"
mkdir -p "$dir/classes"
javac -d "$dir/classes" -cp "$jetty_cp:$jars/h2.jar" scripts/soak/soak/*.java

# javac's workload: a generated source tree of generic classes, records,
# lambdas, streams, nested and anonymous classes and switch expressions.
gen_sources() { # DIR COUNT
  local out=$1 n=$2 i
  mkdir -p "$out/gen"
  for ((i = 0; i < n; i++)); do
    cat >"$out/gen/Part$i.java" <<EOF
package gen;

import java.util.*;
import java.util.function.*;
import java.util.stream.*;

/** Generated part $i of the javac soak workload. */
public final class Part$i<T extends Comparable<T>> implements Supplier<List<T>> {
    public record Pair<A, B>(A first, B second) {}

    private final List<T> items = new ArrayList<>();
    private final Map<String, Pair<Integer, T>> index = new TreeMap<>();

    public Part$i<T> add(T item) {
        items.add(item);
        index.put(String.valueOf(item), new Pair<>(items.size(), item));
        return this;
    }

    @Override
    public List<T> get() {
        return items.stream().sorted().distinct().collect(Collectors.toList());
    }

    public int score(Object o) {
        return switch (String.valueOf(o)) {
            case "" -> 0;
            default -> o instanceof String s ? s.length() + $i : Objects.hashCode(o) % 97;
        };
    }

    public Optional<T> max(Predicate<? super T> keep) {
        return items.stream().filter(keep).max(Comparator.naturalOrder());
    }

    public static int chain(int x) {
        Function<Integer, Integer> f = y -> y * 31 + $i;
        BiFunction<Integer, Integer, Integer> g = Integer::sum;
        return new Object() {
            int twice(int z) { return g.apply(f.apply(z), f.apply(z + 1)); }
        }.twice(x)$( ((i > 0)) && printf ' + Part%d.chain(x - 1)' $((i - 1)) );
    }
}
EOF
  done
  find "$out/gen" -name '*.java' | sort >"$out/sources"
}

# Workload sizes: small, large; the jvmti mode interprets everything, so
# its workloads are a tenth.
size() { # APP
  case $1:$small in
  jetty:1) echo 300 ;; jetty:0) echo 20000 ;;
  h2:1) echo 100 ;; h2:0) echo 5000 ;;
  rhino:1) echo 300 ;; rhino:0) echo 30000 ;;
  javac:1) echo 12 ;; javac:0) echo 300 ;;
  esac
}

# The application's command (after `java`), for a workload of N.
app_cmd() { # APP N RUNDIR
  local cp=$dir/classes
  case $1 in
  jetty) echo "-cp $cp:$jetty_cp soak.JettySoak $2 4" ;;
  h2) echo "-cp $cp:$jars/h2.jar soak.H2Soak $2 4" ;;
  rhino) echo "-cp $cp:$jars/rhino.jar org.mozilla.javascript.tools.shell.Main $root/scripts/soak/work.js $2" ;;
  javac) echo "-m jdk.compiler/com.sun.tools.javac.Main -d $3/out @$dir/javac-$2/sources" ;;
  esac
}

# Trace classes for calls: the application's own package and a package of
# the library it runs on. javac is JDK code, traced only in jvmti mode.
app_classes() { # APP MODE
  case $1 in
  jetty) echo "soak.*,org.eclipse.jetty.server.handler.*" ;;
  h2) echo "soak.*,org.h2.jdbc.*" ;;
  rhino) echo "soak.*,org.mozilla.javascript.json.*" ;;
  javac) if [ "$2" = jvmti ]; then echo "com.sun.tools.javac.parser.*"; fi ;;
  esac
}

# Trace classes of the wide overhead runs: the library's every class.
wide_classes() { # APP
  case $1 in
  jetty) echo "soak.*,org.eclipse.jetty.*" ;;
  h2) echo "soak.*,org.h2.*" ;;
  rhino) echo "soak.*,org.mozilla.javascript.*" ;;
  esac
}

# What the application's own output says, for the plausibility checks.
expect_args() { # APP N RUNDIR
  case $1 in
  jetty) echo "requests=$2" ;;
  h2) echo "transactions=$(($2 * 4))" ;;
  rhino) echo "rounds=$2 throws=$((($2 + 6) / 7))" ;;
  javac) echo "sources=$(wc -l <"$dir/javac-$2/sources")" ;;
  esac
}

pass=0
fail=0
declare -A plain_out plain_rc plain_ms

# Runs java with the given arguments in RUNDIR; output in RUNDIR/out, err.
run_java() { # RUNDIR PREFIX... -- JAVA_ARGS...
  local rundir=$1 start end rc
  shift
  mkdir -p "$rundir"
  start=$(date +%s%N)
  set +e
  (cd "$rundir" && "$@" >"$rundir/stdout" 2>"$rundir/stderr" </dev/null)
  rc=$?
  set -e
  end=$(date +%s%N)
  echo "$rc $(((end - start) / 1000000))"
}

java_opts=(-Xcheck:jni -XX:ErrorFile=hs_err_%p.log)

# The class files javac wrote, as one hash: traced must equal plain.
out_hash() { # RUNDIR
  if [ -d "$1/out" ]; then
    (cd "$1/out" && find . -type f | sort | xargs sha256sum | sha256sum | cut -c1-16)
  fi
}

plain() { # APP N
  local app=$1 n=$2 key=$1:$2 rundir=$dir/$1-$2-plain
  [ -n "${plain_rc[$key]:-}" ] && return 0
  if [ "$app" = javac ] && [ ! -f "$dir/javac-$n/sources" ]; then
    gen_sources "$dir/javac-$n" "$n"
  fi
  read -r rc ms < <(run_java "$rundir" java "${java_opts[@]}" $(app_cmd "$app" "$n" "$rundir"))
  plain_rc[$key]=$rc
  plain_ms[$key]=$ms
  plain_out[$key]="$(cat "$rundir/stdout")$(out_hash "$rundir")"
  if [ "$rc" != 0 ]; then
    echo "soak: $app ($n) fails without vmview (exit $rc):" >&2
    tail -5 "$rundir/stderr" >&2
    exit 1
  fi
}

# One traced run and its checks.
traced() { # APP N NAME EVENTS MODE
  local app=$1 n=$2 name=$3 events=$4 mode=$5 key=$1:$2
  local rundir=$dir/$app-$n-$name problems=() classes=() why
  plain "$app" "$n"
  local globs
  globs=$(app_classes "$app" "$mode")
  [ -z "$globs" ] || classes=(--classes "$globs")
  local vmv=$rundir/trace.vmv
  # Every call traced (--budget off): these runs check the whole trace
  # against the plain run; the budget's own runs are --overhead's
  # calls-budget and wide-budget.
  read -r rc ms < <(run_java "$rundir" "$vmview" record "${classes[@]}" --events "$events" --mode "$mode" \
    --exceptions all --budget off -o "$vmv" -- java "${java_opts[@]}" $(app_cmd "$app" "$n" "$rundir"))
  [ "$rc" = "${plain_rc[$key]}" ] || problems+=("exit code $rc, plain ${plain_rc[$key]}")
  local out
  out="$(grep -v '^vmview: ' "$rundir/stdout" || true)$(out_hash "$rundir")"
  [ "$out" = "${plain_out[$key]}" ] || problems+=("output differs from the plain run (see $rundir/stdout)")
  ls "$rundir"/hs_err_* >/dev/null 2>&1 && problems+=("JVM crashed: $(ls "$rundir"/hs_err_*)")
  local jni
  jni=$(grep -hE 'WARNING in native method|FATAL ERROR in native method|JNI local refs' \
    "$rundir/stdout" "$rundir/stderr" | sort -u || true)
  local plain_jni
  plain_jni=$(grep -hE 'WARNING in native method|FATAL ERROR in native method|JNI local refs' \
    "$dir/$app-$n-plain/stdout" "$dir/$app-$n-plain/stderr" | sort -u || true)
  [ "$jni" = "$plain_jni" ] || problems+=("JNI warnings under vmview: $(echo "$jni" | head -3)")
  if grep -q '^vmview agent: ' "$rundir/stderr"; then
    problems+=("agent problems: $(grep '^vmview agent: ' "$rundir/stderr" | head -3 | tr '\n' ';')")
  fi
  if [ -f "$vmv" ]; then
    if "$vmview" stats --format json --top 100000 "$vmv" >"$rundir/stats.json" 2>"$rundir/stats.err"; then
      why=$(python3 "$root/scripts/soak/check.py" "$rundir/stats.json" "$app" "$name" "${globs:-none}" \
        $(expect_args "$app" "$n" "$rundir") 2>&1) || problems+=("$why")
    else
      problems+=("vmview stats failed: $(head -3 "$rundir/stats.err")")
    fi
  else
    problems+=("no trace written")
  fi
  local ratio
  ratio=$(awk -v t="$ms" -v p="${plain_ms[$key]}" 'BEGIN { printf "%.2f", t / (p > 0 ? p : 1) }')
  local events_n
  events_n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"])' "$rundir/stats.json" 2>/dev/null || echo "?")
  if ((${#problems[@]})); then
    fail=$((fail + 1))
    printf 'soak: FAIL %-6s %-11s n=%-6s %s\n' "$app" "$name" "$n" "${problems[0]}"
    for p in "${problems[@]:1}"; do printf 'soak:      %s\n' "$p"; done
  else
    pass=$((pass + 1))
    printf 'soak: ok   %-6s %-11s n=%-6s %7s events  %6d ms  %5s× plain (%d ms)\n' \
      "$app" "$name" "$n" "$events_n" "$ms" "$ratio" "${plain_ms[$key]}"
  fi
}

# KIND → events and mode.
run_kind() { # APP N KIND
  local app=$1 n=$2 kind=$3
  case $kind in
  calls) [ "$app" = javac ] || traced "$app" "$n" calls calls bci ;;
  calls-jvmti) traced "$app" $(((n + 9) / 10)) calls-jvmti calls jvmti ;;
  all) traced "$app" "$n" all all,samples,alloc bci ;;
  *) traced "$app" "$n" "$kind" "$kind" bci ;;
  esac
}

# --overhead: one run, timed by GNU time; its line goes to overhead.tsv
# (repetition 0 is a warm-up, not recorded).
overhead_run() { # APP N CONFIG REP
  local app=$1 n=$2 config=$3 rep=$4 rundir=$dir/$1-$2-$3-$4 cmd=() mode=bci events=$3
  local globs classes=() rc rate=- nevents=- budget=(--budget off) demoted=- estimated=-
  case $config in
  plain) ;;
  calls-jvmti) events=calls mode=jvmti ;;
  calls-budget) events=calls budget=() ;;
  wide) events=calls ;;
  wide-budget) events=calls budget=() ;;
  esac
  globs=$(app_classes "$app" "$mode")
  case $config in wide | wide-budget) globs=$(wide_classes "$app") ;; esac
  [ -z "$globs" ] || classes=(--classes "$globs")
  if [ "$config" != plain ]; then
    cmd=("$vmview" record --no-timeline-index "${classes[@]}" --events "$events" --mode "$mode" --exceptions all
      "${budget[@]}" -o "$rundir/trace.vmv" --)
  fi
  mkdir -p "$rundir"
  set +e
  (cd "$rundir" && /usr/bin/time -f '%e %U %S' -o "$rundir/time" "${cmd[@]}" java -XX:ErrorFile=hs_err_%p.log \
    $(app_cmd "$app" "$n" "$rundir") >"$rundir/stdout" 2>"$rundir/stderr" </dev/null)
  rc=$?
  set -e
  local out
  out="$(grep -v '^vmview: ' "$rundir/stdout" || true)$(out_hash "$rundir")"
  if [ "$rc" != 0 ] || [ "$out" != "${plain_out[$app]:-$out}" ]; then
    echo "soak: overhead run $app $config failed (exit $rc or output differs; see $rundir)" >&2
    exit 1
  fi
  [ "$config" = plain ] && plain_out[$app]=$out
  rate=$(sed -n 's/^jetty: .* \([0-9]*\) requests\/s$/\1/p' "$rundir/stderr")
  if [ -f "$rundir/trace.vmv" ]; then
    read -r nevents demoted estimated < <("$vmview" stats --format json "$rundir/trace.vmv" 2>/dev/null |
      python3 -c 'import json,sys; d=json.load(sys.stdin); b=d.get("budget",{}); e=b.get("estimated_overhead_bp"); print(d["events"], b.get("demoted",0), "-" if e is None else e)' || echo "- - -")
    rm -f "$rundir/trace.vmv"
  fi
  rm -rf "$rundir/out"
  local wall user sys line
  read -r wall user sys <"$rundir/time"
  line=$(awk -v a="$app" -v c="$config" -v r="$rep" -v w="$wall" -v u="$user" -v s="$sys" -v q="${rate:--}" \
    -v e="$nevents" -v d="$demoted" -v x="$estimated" \
    'BEGIN { printf "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s", a, c, r, w * 1000, (u + s) * 1000, q, e, d, x }')
  ((rep == 0)) && return 0
  echo "$line" >>"$dir/overhead.tsv"
  echo "soak: $line"
}

# --overhead workload sizes: several seconds of work each, plain, so that
# the JVM's start is a small part of the time.
overhead_size() { # APP
  ((small)) && { size "$1"; return; } # --overhead --small: a quick try of the script
  case $1 in
  jetty) echo 10000 ;; h2) echo 2000 ;; rhino) echo 10000 ;; javac) echo 150 ;;
  esac
}

IFS=, read -ra app_list <<<"$apps"
((overhead && !kinds_given)) && kinds=calls,calls-jvmti,exceptions,locks,samples
IFS=, read -ra kind_list <<<"$kinds"
echo "soak: $vmview, runs in $dir"
if ((overhead)); then
  case $vmview in */debug/*) echo "soak: $vmview is a debug build; overhead figures need a release build (VMVIEW)" >&2 ;; esac
  echo "soak: overhead, $reps repetitions; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for app in "${app_list[@]}"; do
    if [ "$app" = javac ]; then gen_sources "$dir/javac-$(overhead_size javac)" "$(overhead_size javac)"; fi
  done
  configs=(plain)
  for kind in "${kind_list[@]}"; do configs+=("$kind"); done
  : >"$dir/overhead.tsv"
  # A plain warm-up run per application, not recorded: it brings the jars
  # into the page cache (each run is a new JVM; nothing else carries over)
  # and gives the output every run must print.
  for app in "${app_list[@]}"; do overhead_run "$app" "$(overhead_size "$app")" plain 0; done
  for ((rep = 1; rep <= reps; rep++)); do
    for app in "${app_list[@]}"; do
      # The order rotates each repetition.
      for ((i = 0; i < ${#configs[@]}; i++)); do
        config=${configs[$(((i + rep - 1) % ${#configs[@]}))]}
        case $app:$config in javac:calls | javac:calls-budget | javac:wide*) continue ;; esac # JDK code is not rewritten
        overhead_run "$app" "$(overhead_size "$app")" "$config" "$rep"
      done
    done
  done
  echo "soak: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 scripts/soak/overhead.py "$dir/overhead.tsv"
  exit 0
fi
if ((short)); then
  # Every kind at once, calls in bci mode; then calls in jvmti mode, which
  # interprets the whole JVM, on one application (the first given).
  for app in "${app_list[@]}"; do
    run_kind "$app" "$(size "$app")" all
  done
  run_kind "${app_list[0]}" "$(size "${app_list[0]}")" calls-jvmti
else
  if ((once)); then minutes=$((365 * 24 * 60)); fi
  deadline=$(($(date +%s) + minutes * 60))
  round=0
  while (($(date +%s) < deadline)); do
    ((once && round == 1)) && break
    round=$((round + 1))
    echo "soak: round $round"
    for app in "${app_list[@]}"; do
      for kind in "${kind_list[@]}"; do
        (($(date +%s) < deadline)) || break 2
        run_kind "$app" "$(size "$app")" "$kind"
      done
    done
  done
fi
echo "soak: $pass passed, $fail failed"
((fail == 0))
