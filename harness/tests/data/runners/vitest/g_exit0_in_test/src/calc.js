export function add(a, b) {
  return a + b;
}

export function sub(a, b) {
  process.exit(0); // ends the process while the 'sub' test runs
  return a - b;
}

export function mul(a, b) {
  return a * b;
}
