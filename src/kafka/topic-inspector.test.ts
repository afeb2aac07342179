import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createTopicInspector, type TopicAdmin } from './topic-inspector.js';

type Partitions = Awaited<ReturnType<TopicAdmin['partitions']>>;

/** A cluster of `brokers` at the port: `answers` are what partitions() says, one per call, the last repeated. */
function fakeAdmin(answers: Partitions[], configs: Record<string, string> = {}, brokers = [1, 2, 3]): TopicAdmin & { created: string[] } {
  const created: string[] = [];
  let call = 0;
  return {
    created,
    partitions: async () => answers[Math.min(call++, answers.length - 1)]!,
    topicConfigs: async (_, names) => new Map(Object.entries(configs).filter(([name]) => names.includes(name))),
    brokerConfigs: async () => new Map([['auto.create.topics.enable', 'true']]),
    brokerIds: async () => brokers,
    createTopic: async ({ name, replicationFactor, configs: entries }) => {
      created.push(`${name} rf=${replicationFactor} ${JSON.stringify(entries)}`);
    },
    disconnect: async () => undefined,
  };
}

const led = { replicas: [1, 2, 3], leader: 1 };
const leaderless = { replicas: [1, 2, 3], leader: null };
const silent = pino({ level: 'silent' });

describe('the topic inspector (both clients)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('creates a missing progress topic compacted, as replicated as the cluster allows, and waits for its leader before describing it', async () => {
    // Missing; then unknown to the broker asked, then without a leader, then led.
    const admin = fakeAdmin([null, null, [leaderless], [led]], { 'min.insync.replicas': '2', 'cleanup.policy': 'compact' });
    await createTopicInspector(admin, silent).prepareProgressTopic('progress');
    expect(admin.created).toEqual(['progress rf=3 {"cleanup.policy":"compact","min.insync.replicas":"2"}']);
  });

  it('gives up on a created topic whose partitions get no leader, naming it', async () => {
    vi.useFakeTimers();
    const admin = fakeAdmin([null, [leaderless]]);
    const prepared = createTopicInspector(admin, silent).prepareProgressTopic('progress');
    const refused = expect(prepared).rejects.toMatchObject({ code: 'SINK_EXACTLY_ONCE', message: expect.stringContaining('the progress topic progress was created, but not every partition had a leader after 30 s') });
    await vi.advanceTimersByTimeAsync(31_000);
    await refused;
  });

  it('refuses a progress topic no transaction could commit to, and describes a topic from its replicas and configs', async () => {
    const admin = fakeAdmin([[{ replicas: [1], leader: 1 }]], { 'min.insync.replicas': '2', 'cleanup.policy': 'compact', 'max.message.bytes': '2000000' });
    const inspector = createTopicInspector(admin, silent);
    expect(await inspector.describeTopic('t')).toEqual({ replicationFactor: 1, minInsyncReplicas: 2, uncleanLeaderElection: false, maxMessageBytes: 2_000_000, cleanupPolicy: 'compact' });
    await expect(inspector.prepareProgressTopic('t')).rejects.toMatchObject({ code: 'SINK_EXACTLY_ONCE', message: expect.stringContaining('no transaction could commit') });
    expect(admin.created).toEqual([]);
  });
});
