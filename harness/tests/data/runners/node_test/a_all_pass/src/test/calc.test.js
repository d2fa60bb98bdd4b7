const { test } = require('node:test');
const assert = require('node:assert');
const { add, sub, mul } = require('../calc');

test('add', () => {
  assert.strictEqual(add(2, 3), 5);
});

test('sub', () => {
  assert.strictEqual(sub(5, 3), 2);
});

test('mul', () => {
  assert.strictEqual(mul(2, 3), 6);
});
