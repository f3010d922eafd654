/**
 * Who may see and change a record, by the verified subject that created it (its owner): `none`,
 * whoever has the service's scopes (a catalogue); `writes`, every reader reads it, only its owner
 * changes it; `all`, only its owner sees or changes it (personal data). `<name>:admin` sees and
 * changes every record. Each service declares its mode in services.json.
 */
export const OWNERSHIPS = ['none', 'writes', 'all'] as const;
export type Ownership = (typeof OWNERSHIPS)[number];

/**
 * What a mode lets a caller read, change and cache. The services (the resource engine, its
 * description, its migrations) and the gateway (its cache, its configuration) ask here rather than
 * compare modes, so that a new mode is decided in one table, which the compiler makes complete.
 */
export interface OwnershipPolicy {
  /** Records have owners: a representation shows its `owner`, a list takes `?owner=`, an admin may create one for another owner. */
  readonly owned: boolean;
  /** A caller sees only its own records: another's is a 404, and a list holds none of them. */
  readonly readsOnlyOwn: boolean;
  /** A caller changes only its own records: another's that it sees is a 403 (`not-owner`). */
  readonly changesOnlyOwn: boolean;
  /** The gateway keeps each caller's cached reads apart: what the service answered one caller is never served to another. */
  readonly cachedPerCaller: boolean;
  /**
   * The gateway never caches an admin's read: it sees other owners' records, and an entry keyed
   * by its subject alone would serve them to that subject's other tokens, a revoked one included.
   */
  readonly adminReadsUncached: boolean;
  /** A unique field is unique within its owner (each unique index leads with `owner_key`): a 409 tells no caller what another owner has. */
  readonly uniqueWithinOwner: boolean;
  /** Why its reads may never be public (services.json's `publicReads`); undefined where a deployment may make them so. */
  readonly noPublicReads: string | undefined;
  /** What only a record's owner (and an admin) may do, as the API description says it; undefined without owners. */
  readonly ownerAlone: string | undefined;
}

const POLICIES: Record<Ownership, OwnershipPolicy> = {
  none: {
    owned: false,
    readsOnlyOwn: false,
    changesOnlyOwn: false,
    cachedPerCaller: false,
    adminReadsUncached: false,
    uniqueWithinOwner: false,
    noPublicReads: undefined,
    ownerAlone: undefined,
  },
  writes: {
    owned: true,
    readsOnlyOwn: false,
    changesOnlyOwn: true,
    cachedPerCaller: false,
    adminReadsUncached: false,
    uniqueWithinOwner: false,
    noPublicReads: undefined,
    ownerAlone: 'change it (every reader sees it)',
  },
  all: {
    owned: true,
    readsOnlyOwn: true,
    changesOnlyOwn: true,
    cachedPerCaller: true,
    adminReadsUncached: true,
    uniqueWithinOwner: true,
    noPublicReads: 'a record is then seen only by its owner',
    ownerAlone: 'see or change it',
  },
};

/** The policy of `mode`. */
export const ownershipPolicy = (mode: Ownership): OwnershipPolicy => POLICIES[mode];

/**
 * Whether a change of another owner's record is refused as such (a 403 `not-owner`): where the
 * caller sees that record but may not change it. Where it does not see it, it is a 404.
 */
export const refusesOthersChanges = ({ readsOnlyOwn, changesOnlyOwn }: OwnershipPolicy): boolean => changesOnlyOwn && !readsOnlyOwn;
