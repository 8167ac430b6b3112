// Rhino workload: numbers, strings, arrays, regular expressions, JSON,
// exceptions thrown and caught in JavaScript, and calls into a Java class
// (soak.JsHost.tick, called exactly ROUNDS times).
var rounds = parseInt(arguments[0] || "2000", 10);
var host = Packages.soak.JsHost;
function primes(limit) {
  var sieve = [], out = [];
  for (var i = 2; i <= limit; i++) {
    if (!sieve[i]) { out.push(i); for (var j = i * i; j <= limit; j += i) sieve[j] = true; }
  }
  return out;
}
var caught = 0, words = 0, last = 0;
for (var r = 0; r < rounds; r++) {
  var p = primes(200 + r % 50);
  var text = p.join(",") + " round " + r;
  words += text.split(/[ ,]+/).length;
  var obj = JSON.parse(JSON.stringify({ r: r, p: p.slice(0, 5), s: text.substring(0, 20) }));
  try {
    if (r % 7 == 0) throw new Error("round " + obj.r);
  } catch (e) {
    caught++;
  }
  last = host.tick(1);
}
print("rounds=" + rounds + " caught=" + caught + " words=" + words + " ticks=" + last);
java.lang.System.gc();
