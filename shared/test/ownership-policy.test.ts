import { OWNERSHIPS, ownershipPolicy, refusesOthersChanges } from '@app/shared/platform/ownership-policy';

/** The ownership table: what each mode lets a caller read, change and cache, decided in one place. */
describe('ownershipPolicy', () => {
  it('restricts nothing for `none`, changes for `writes`, reads and changes for `all`', () => {
    expect(OWNERSHIPS.map((mode) => [mode, ownershipPolicy(mode).readsOnlyOwn, ownershipPolicy(mode).changesOnlyOwn])).toEqual([
      ['none', false, false],
      ['writes', false, true],
      ['all', true, true],
    ]);
  });

  it('refuses a change of a record the caller sees but may not change, as a 403, only where every reader sees it', () => {
    expect(OWNERSHIPS.filter((mode) => refusesOthersChanges(ownershipPolicy(mode)))).toEqual(['writes']);
  });

  it("keeps each caller's cached reads apart wherever a caller sees only its own records", () => {
    for (const mode of OWNERSHIPS) {
      const { readsOnlyOwn, cachedPerCaller, adminReadsUncached, noPublicReads } = ownershipPolicy(mode);
      expect({ mode, cachedPerCaller, adminReadsUncached, publicForbidden: noPublicReads !== undefined }).toEqual({ mode, cachedPerCaller: readsOnlyOwn, adminReadsUncached: readsOnlyOwn, publicForbidden: readsOnlyOwn });
    }
  });

  it('describes what only an owner may do exactly where records have owners', () => {
    for (const mode of OWNERSHIPS) {
      const { owned, ownerAlone, changesOnlyOwn } = ownershipPolicy(mode);
      expect({ mode, described: ownerAlone !== undefined, restricted: changesOnlyOwn }).toEqual({ mode, described: owned, restricted: owned });
    }
  });
});
