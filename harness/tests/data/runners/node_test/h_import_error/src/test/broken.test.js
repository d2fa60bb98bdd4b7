const { test } = require('node:test');
const assert = require('node:assert');
const { value } = require('../missing'); // no such module

test('broken', () => {
  assert.strictEqual(value(), 1);
});
