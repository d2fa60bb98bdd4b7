test('other', () => {
  expect(1 + 1).toBe(2);
});
