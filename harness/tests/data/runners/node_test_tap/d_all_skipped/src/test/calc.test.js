const { test } = require('node:test');
const assert = require('node:assert');
const { add, sub, mul } = require('../calc');

test.skip('add', () => {
  assert.strictEqual(add(2, 3), 5);
});

test.skip('sub', () => {
  assert.strictEqual(sub(5, 3), 2);
});

test.skip('mul', () => {
  assert.strictEqual(mul(2, 3), 6);
});
