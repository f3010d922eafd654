import { MAX_SUBJECT_LENGTH, subjectFlaw } from '@app/shared/platform/subject';

/** What a token's `sub` may be (docs/api.md): each clause of the rule, on what it lets in and what it refuses. */
describe('subjectFlaw', () => {
  it.each([
    ['a plain name', 'alice'],
    ['one character', 'a'],
    [`${MAX_SUBJECT_LENGTH} characters`, 'a'.repeat(MAX_SUBJECT_LENGTH)],
    ['inner spaces', 'alice smith'],
    ['punctuation a key or a path might use', 'a:|/*{}%41'],
    ['a character outside the BMP (a surrogate pair)', 'alice 😀'],
    ['a precomposed accent (NFC)', 'caf\u00e9'],
    ['other letters than Latin', 'Ωmega ☃'],
  ])('accepts %s', (_, subject) => {
    expect(subjectFlaw(subject)).toBeUndefined();
  });

  it.each([
    ['a number', 42, 'is not a string of 1 to 255 characters'],
    ['nothing', undefined, 'is not a string of 1 to 255 characters'],
    ['the empty string', '', 'is not a string of 1 to 255 characters'],
    [`${MAX_SUBJECT_LENGTH + 1} characters`, 'a'.repeat(MAX_SUBJECT_LENGTH + 1), 'is not a string of 1 to 255 characters'],
    ['a lone high surrogate', 'mal\uD800lory', 'holds a lone surrogate'],
    ['a lone low surrogate at the end', 'alice\uDC00', 'holds a lone surrogate'],
    ['NUL (C0)', 'al\u0000ice', 'holds a control character'],
    ['a newline (C0)', 'alice\nbob', 'holds a control character'],
    ['DEL', 'alice\u007f', 'holds a control character'],
    ['NEL (C1)', 'al\u0085ice', 'holds a control character'],
    ['CSI (C1)', 'al\u009bice', 'holds a control character'],
    ['a trailing space', 'alice ', 'begins or ends with white space'],
    ['a leading space', ' alice', 'begins or ends with white space'],
    ['a trailing no-break space', 'alice\u00a0', 'begins or ends with white space'],
    ['a leading ideographic space', '\u3000alice', 'begins or ends with white space'],
    ['a trailing line separator', 'alice\u2028', 'begins or ends with white space'],
    ['only a space', ' ', 'begins or ends with white space'],
    ['a decomposed accent (NFD)', 'cafe\u0301', 'is not in Unicode NFC'],
    ['Å as A and a combining ring (NFD)', 'A\u030a', 'is not in Unicode NFC'],
  ])('refuses %s', (_, subject, flaw) => {
    expect(subjectFlaw(subject)).toBe(flaw);
  });
});
