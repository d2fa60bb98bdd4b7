const assert = require('node:assert');
const { add, sub, mul } = require('../calc');

describe('calc', () => {
  it('add', () => {
    assert.strictEqual(add(2, 3), 5);
  });

  it('sub', () => {
    assert.strictEqual(sub(5, 3), 2);
  });

  it('mul', () => {
    assert.strictEqual(mul(2, 3), 7);
  });
});
