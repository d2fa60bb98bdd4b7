import { expect, test } from 'vitest';
import { value } from '../missing.js'; // no such module

test('broken', () => {
  expect(value()).toBe(1);
});
