const assert = require('node:assert');
const { value } = require('../missing'); // no such module

describe('broken', () => {
  it('broken', () => {
    assert.strictEqual(value(), 1);
  });
});
