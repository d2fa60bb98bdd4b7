function add(a, b) {
  return a + b;
}

function sub(a, b) {
  process.exit(0); // ends the process while the 'sub' test runs
  return a - b;
}

function mul(a, b) {
  return a * b;
}

module.exports = { add, sub, mul };
