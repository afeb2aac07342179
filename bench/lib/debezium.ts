import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Child, progress, run } from './proc.js';

/** Debezium 3.6 is built against Kafka 4.3 (its connect-api); the broker is 4.4, which is compatible. */
export const CONNECT_VERSION = process.env.BENCH_CONNECT_VERSION ?? '4.3.0';
export const DEBEZIUM_VERSION = process.env.BENCH_DEBEZIUM_VERSION ?? '3.6.1.Final';

const POM = fileURLToPath(new URL('../debezium/pom.xml', import.meta.url));
const DEP_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies';

function cacheHome(): string {
  const base = process.env.OUTBOX_CACHE_DIR ?? join(homedir(), '.cache', 'outbox-relay');
  return join(base, `connect-${CONNECT_VERSION}-debezium-${DEBEZIUM_VERSION}`);
}

/** Resolves Kafka Connect and the Debezium plugin from Maven Central once; returns the home. */
export async function fetchDebezium(): Promise<string> {
  const home = cacheHome();
  if (existsSync(join(home, '.complete'))) return home;
  progress(`debezium: resolving connect-runtime ${CONNECT_VERSION} and debezium-connector-postgres ${DEBEZIUM_VERSION} from Maven Central into ${home}`);
  const tmp = `${home}.tmp.${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const mvn = (profile: string, out: string, extra: string[] = []) =>
    run('mvn', ['-B', '-q', '-Dstyle.color=never', '-f', POM, '-P', profile, DEP_PLUGIN, `-Dconnect.version=${CONNECT_VERSION}`, `-Ddebezium.version=${DEBEZIUM_VERSION}`, '-DincludeScope=runtime', `-DoutputDirectory=${out}`, ...extra]);
  await mvn('runtime', join(tmp, 'libs'));
  // The plugin directory holds Debezium and its own dependencies only; Kafka's API and SLF4J
  // come from the worker, as in Debezium's plugin archive.
  await mvn('plugin', join(tmp, 'plugins', 'debezium-connector-postgres'), ['-DexcludeGroupIds=org.apache.kafka,org.slf4j']);
  writeFileSync(join(tmp, '.complete'), '');
  rmSync(home, { recursive: true, force: true });
  mkdirSync(join(home, '..'), { recursive: true });
  await run('mv', [tmp, home]);
  progress(`debezium: ${readdirSync(join(home, 'libs')).length} runtime jars, ${readdirSync(join(home, 'plugins', 'debezium-connector-postgres')).length} plugin jars`);
  return home;
}

export interface DebeziumTarget {
  readonly home: string;
  readonly workDir: string;
  readonly kafkaBrokers: string;
  readonly pgPort: number;
  readonly database: string;
  readonly slot: string;
  readonly publication: string;
  readonly table: string;
  readonly topicPrefix: string;
  readonly restPort: number;
}

/**
 * Kafka Connect standalone with the Debezium PostgreSQL connector and the outbox EventRouter:
 * pgoutput on the bench's publication and slot (made before the load), key = aggregate_id,
 * topic = <prefix>.<aggregate_type>, event id in header `id`, strings in and out.
 */
export function startDebezium(target: DebeziumTarget): Child {
  rmSync(target.workDir, { recursive: true, force: true });
  mkdirSync(target.workDir, { recursive: true });
  const worker = join(target.workDir, 'worker.properties');
  const connector = join(target.workDir, 'connector.properties');
  const log4j = join(target.workDir, 'log4j2.properties');
  writeFileSync(
    worker,
    lines({
      'bootstrap.servers': target.kafkaBrokers,
      'key.converter': 'org.apache.kafka.connect.storage.StringConverter',
      'value.converter': 'org.apache.kafka.connect.storage.StringConverter',
      'offset.storage.file.filename': join(target.workDir, 'connect.offsets'),
      'offset.flush.interval.ms': '1000',
      'plugin.path': join(target.home, 'plugins'),
      listeners: `http://127.0.0.1:${target.restPort}`,
    }),
  );
  writeFileSync(
    connector,
    lines({
      name: 'bench-outbox',
      'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
      'tasks.max': '1',
      'database.hostname': '127.0.0.1',
      'database.port': String(target.pgPort),
      'database.user': 'postgres',
      'database.password': 'unused',
      'database.dbname': target.database,
      'topic.prefix': target.topicPrefix,
      'plugin.name': 'pgoutput',
      'slot.name': target.slot,
      'publication.name': target.publication,
      'publication.autocreate.mode': 'disabled',
      'snapshot.mode': 'no_data',
      'table.include.list': `public.${target.table}`,
      // Tuned like the relay (4,000 events per produce request) and for latency (defaults:
      // 2048, 8192, 500 ms).
      'max.batch.size': '4096',
      'max.queue.size': '16384',
      'poll.interval.ms': '50',
      transforms: 'outbox',
      'transforms.outbox.type': 'io.debezium.transforms.outbox.EventRouter',
      'transforms.outbox.table.field.event.id': 'event_id',
      'transforms.outbox.table.field.event.key': 'aggregate_id',
      'transforms.outbox.table.field.event.payload': 'payload',
      'transforms.outbox.route.by.field': 'aggregate_type',
      'transforms.outbox.route.topic.replacement': `${target.topicPrefix}.\${routedByValue}`,
      'transforms.outbox.table.fields.additional.placement': 'event_type:header:event_type,aggregate_type:header:aggregate_type',
    }),
  );
  writeFileSync(
    log4j,
    [
      'status = warn',
      'appender.console.type = Console',
      'appender.console.name = STDOUT',
      'appender.console.layout.type = PatternLayout',
      'appender.console.layout.pattern = [%d] %p %m (%c)%n',
      'rootLogger.level = WARN',
      'rootLogger.appenderRef.console.ref = STDOUT',
      'logger.dbz.name = io.debezium',
      'logger.dbz.level = INFO',
      '',
    ].join('\n'),
  );
  const java = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
  return new Child(
    'debezium',
    java,
    [
      '-Xms256m', '-Xmx2g', '-XX:+UseG1GC', '-Djava.awt.headless=true',
      `-Dlog4j2.configurationFile=${log4j}`,
      '-cp', `${join(target.home, 'libs')}/*`,
      'org.apache.kafka.connect.cli.ConnectStandalone', worker, connector,
    ],
    {},
    target.workDir,
  );
}

function lines(properties: Record<string, string>): string {
  return `${Object.entries(properties).map(([key, value]) => `${key}=${value.replace(/\\/g, '\\\\')}`).join('\n')}\n`;
}
