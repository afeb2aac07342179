/**
 * Node's codes for a peer certificate that is not trusted, expired or for another name: a
 * configuration problem (CA, certificate), which reconnecting does not cure.
 */
const TLS_TRUST_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** Alerts the peer sends when it refuses our certificate (mutual TLS). */
const TLS_ALERT = /^ERR_SSL_(SSLV3|TLSV1|TLSV13|SSL\/TLS)_ALERT_(BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED|UNKNOWN_CA|CERTIFICATE_REQUIRED|CERTIFICATE_REVOKED|ACCESS_DENIED)$/;

/** True when `error` or one of its causes is a TLS trust failure. */
export function isTlsTrustError(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (TLS_TRUST_CODES.has(code) || TLS_ALERT.test(code))) return true;
  }
  return false;
}
