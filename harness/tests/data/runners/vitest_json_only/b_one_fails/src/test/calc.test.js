import { expect, test } from 'vitest';
import { add, mul, sub } from '../calc.js';

test('add', () => {
  expect(add(2, 3)).toBe(5);
});

test('sub', () => {
  expect(sub(5, 3)).toBe(2);
});

test('mul', () => {
  expect(mul(2, 3)).toBe(7);
});
