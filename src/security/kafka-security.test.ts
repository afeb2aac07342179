import { describe, expect, it } from 'vitest';
import { kafkaClientSecurity } from './kafka-security.js';

describe('an OAUTHBEARER provider module', () => {
  it('that does not load is reported at the first authentication, as configuration, not as an unhandled rejection before it', async () => {
    const security = kafkaClientSecurity({ tls: null, sasl: { mechanism: 'oauthbearer', username: null, password: null, tokenFile: null, tokenProvider: '/no/such/provider.js' } });
    // A tick for the import to fail: vitest fails the run on an unhandled rejection.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const sasl = security.sasl as { oauthBearerProvider: () => Promise<unknown> };
    await expect(sasl.oauthBearerProvider()).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringMatching(/^KAFKA_SASL_OAUTHBEARER_PROVIDER: cannot load \/no\/such\/provider\.js/) });
  });
});
