import { expect, test } from 'vitest';
import { add, mul, sub } from '../calc.js';

test.skip('add', () => {
  expect(add(2, 3)).toBe(5);
});

test.skip('sub', () => {
  expect(sub(5, 3)).toBe(2);
});

test.skip('mul', () => {
  expect(mul(2, 3)).toBe(6);
});
