import type { IncomingHttpHeaders } from 'node:http';
import { ownershipPolicy, type Ownership } from '../platform/ownership-policy.js';
import { ADMIN_ROLE, decodeSubject, ROLE_HEADER, SUBJECT_HEADER } from '../platform/subject.js';

/**
 * Whose records a request sees and changes: decided once per request from the caller the gateway
 * names (X-Auth-Subject, X-Auth-Role) and the policy of the service's ownership (services.json,
 * ownership-policy.ts), then applied by the resource engine in SQL (`WHERE owner = ?`).
 */
export interface Access {
  /** Only this owner's records are seen: another's is a 404, a list holds none of them. Undefined: every record. */
  readsOf?: string;
  /** Only this owner's records may be changed: another's is a 403. Undefined: every record it sees. */
  writesOf?: string;
  /** The caller, the owner of what it creates; undefined without one (authentication off). */
  subject?: string;
  /** Whether it may act for any owner (`<name>:admin`): create a record on another's behalf. */
  admin: boolean;
}

/** What a request sees when no caller is named: everything (authentication is off, or the description is wanted). */
export const UNRESTRICTED: Access = { admin: false };

/** A read's access: only where owners alone see their records does the caller matter (nothing is decoded otherwise). */
export const readAccessOf = (headers: IncomingHttpHeaders, ownership: Ownership): Access => (ownershipPolicy(ownership).readsOnlyOwn ? accessOf(headers, ownership) : UNRESTRICTED);

/** A request's access, from the headers only the gateway sets: an admin's is never restricted. */
export function accessOf(headers: IncomingHttpHeaders, ownership: Ownership): Access {
  const forwarded = headers[SUBJECT_HEADER];
  const subject = typeof forwarded === 'string' ? decodeSubject(forwarded) : undefined;
  if (subject === undefined) return UNRESTRICTED;
  const admin = headers[ROLE_HEADER] === ADMIN_ROLE;
  const { readsOnlyOwn, changesOnlyOwn } = ownershipPolicy(ownership);
  if (admin) return { subject, admin };
  return { subject, ...(readsOnlyOwn && { readsOf: subject }), ...(changesOnlyOwn && { writesOf: subject }), admin };
}
