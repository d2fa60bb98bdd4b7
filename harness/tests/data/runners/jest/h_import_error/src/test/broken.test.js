const { value } = require('../missing'); // no such module

test('broken', () => {
  expect(value()).toBe(1);
});
