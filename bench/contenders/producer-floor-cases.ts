/** The cases of `npm run bench:producers` (bench/contenders/producer-floor.ts says what each measures). */
export const CASES = ['binding', 'binding-header-objects', 'binding-no-headers', 'binding-error-reports', 'librdkafka', 'kafkajs', 'platformatic'] as const;
export type ProducerCase = (typeof CASES)[number];
