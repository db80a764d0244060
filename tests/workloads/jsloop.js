// A JavaScript function hot enough to be compiled, for the Node test:
// `node jsloop.js` spins in hotJsLoop for about half a second of CPU.
function hotJsLoop(n) {
  let total = 0;
  for (let i = 0; i < n; i++) {
    total += (i * 7) % 13;
  }
  return total;
}

const end = process.cpuUsage().user + 500000;
let sum = 0;
while (process.cpuUsage().user < end) {
  sum += hotJsLoop(1000000);
}
console.log(sum > 0 ? "done" : "none");
