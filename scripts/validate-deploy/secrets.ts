// Secrets in the deployment files (used by validate.ts): a secret option of the relay is given
// as a file (<NAME>_FILE, mounted from a Kubernetes Secret or a compose secret), never as an
// environment value; every file a variable names (secret files, certificates, keys, tokens,
// DATABASE_URL's sslrootcert/sslcert/sslkey) is mounted, read-only, from a Secret; and a
// workload's variables load as the relay loads them (src/config/load.ts), the mounted files
// holding the example content, so that the cross-field checks hold and each component logs in
// as its own role.
/* eslint-disable @typescript-eslint/no-explicit-any */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { checkFlags, parseFlags } from '../../src/commands/main.js';
import { COMMANDS, type Args, type CommandName, type CommandSpec } from '../../src/config/commands.js';
import { load } from '../../src/config/load.js';
import { OPTIONS, type OptionKey, type OptionSpec } from '../../src/config/options.js';
import { ROLES } from '../../src/setup/roles.js';

type Json = any;
type Fail = (where: string, message: string) => void;

const SPECS = Object.entries(OPTIONS) as [OptionKey, OptionSpec<unknown>][];
const SPEC_BY_ENV = new Map(SPECS.map(([, spec]) => [spec.env, spec]));
/** `<NAME>_FILE` of each secret option, by that variable. */
export const SECRET_FILE_VARIABLES = new Map(SPECS.filter(([, spec]) => spec.file).map(([, spec]) => [`${spec.env}_FILE`, spec]));
/** Secrets that are URLs: an environment value without credentials in it is no secret. */
const URL_SECRETS = new Set(['DATABASE_URL', 'SCHEMA_REGISTRY_URL']);
/** libpq parameters of DATABASE_URL that name files. */
const PG_FILE_PARAMETERS = ['sslrootcert', 'sslcert', 'sslkey', 'sslcrl'];
/**
 * The webhooks processes' role: DML on the webhook tables only. sql/003_roles.sql has none (its
 * grants would be on tables `webhooks setup` makes later, in OUTBOX_WEBHOOK_SCHEMA): made by
 * deploy/compose/role-passwords.sql, and by the SQL in deploy/kubernetes/webhooks-setup-job.yaml.
 */
export const WEBHOOKS_ROLE = 'outbox_webhooks';
/** The role each long-running command logs in as (sql/003_roles.sql, and the one above). */
const COMMAND_ROLES: Partial<Record<CommandName, string>> = { run: ROLES.relay, prune: ROLES.pruner, webhooks: WEBHOOKS_ROLE };
/** Stands for a mounted file whose content is not in the repository (the operator supplies it). */
const UNKNOWN_CONTENT = 'placeholder';

/** Why a relay variable's environment value exposes a secret, or null. */
export function plainSecretProblem(name: string, raw: string): string | null {
  if (!SPEC_BY_ENV.get(name)?.secret) return null;
  if (!URL_SECRETS.has(name)) return `${name} is a secret given as an environment value: mount it as a file and set ${name}_FILE`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null; // Not a URL: the option's parser says so.
  }
  if (url.password === '' && ![...url.searchParams.keys()].some((key) => /password/i.test(key))) return null;
  return `${name} carries a password: give the URL as ${name}_FILE, or the password apart in a file (${name.replace(/_URL$/, '_PASSWORD')}_FILE)`;
}

/** A file mounted from a Secret or a compose secret: what it holds (null: not in the repository). */
export interface MountedFile {
  readonly content: string | null;
}

/** A file a command reads, as its variable names it. */
interface FileReference {
  readonly variable: string;
  readonly path: string;
}

function fileReferences(env: Record<string, string>, command: CommandName | null): FileReference[] {
  const keys: readonly OptionKey[] = command ? COMMANDS[command].options : SPECS.map(([key]) => key);
  const references: FileReference[] = [];
  for (const key of keys) {
    const spec: OptionSpec<unknown> = OPTIONS[key];
    const secretFile = env[`${spec.env}_FILE`];
    if (spec.file && secretFile) references.push({ variable: `${spec.env}_FILE`, path: secretFile });
    else if (spec.env.endsWith('_FILE') && env[spec.env]) references.push({ variable: spec.env, path: env[spec.env]! });
  }
  if (keys.includes('databaseUrl') && env.DATABASE_URL) {
    const params = URL.canParse(env.DATABASE_URL) ? new URL(env.DATABASE_URL).searchParams : new URLSearchParams();
    for (const param of PG_FILE_PARAMETERS) {
      const path = params.get(param);
      if (path) references.push({ variable: `DATABASE_URL ${param}`, path });
    }
  }
  return references;
}

/**
 * The relay command of a container's arguments, as the CLI reads it: the longest run of words
 * that names a command (`webhooks setup`, `webhooks`); null for another program (the demo's).
 */
export function commandOf(args: readonly string[]): CommandName | null {
  for (let words = args.length; words > 0; words -= 1) {
    const name = args.slice(0, words).join(' ');
    if (!args.slice(0, words).some((arg) => arg.startsWith('--')) && name in COMMANDS) return name as CommandName;
  }
  return null;
}

/** Every file `outbox-relay <args>` reads (any relay option, for another program) is mounted from a Secret. */
export function checkFileReferences(where: string, args: readonly string[], env: Record<string, string>, files: ReadonlyMap<string, MountedFile>, fail: Fail): void {
  for (const { variable, path } of fileReferences(env, commandOf(args))) {
    if (!path.startsWith('/')) fail(where, `${variable}=${path}: expected an absolute path`);
    else if (!files.has(path)) fail(where, `${variable}=${path}: no mounted secret holds this file (mounted: ${[...files.keys()].join(', ') || 'none'})`);
  }
}

// ---------------------------------------------------------------- Kubernetes

/** The files of a pod's Secret volumes (secret, or projected secrets and service account tokens) as a container mounts them. */
export function podFiles(where: string, pod: Json, container: Json, secret: (name: string) => Json | undefined, fail: Fail): Map<string, MountedFile> {
  const files = new Map<string, MountedFile>();
  for (const mount of container.volumeMounts ?? []) {
    const volume = (pod.volumes ?? []).find((v: Json) => v.name === mount.name);
    if (!volume) {
      fail(where, `volumeMount ${mount.name}: no such volume`);
      continue;
    }
    const entries = volumeFiles(`${where} volume ${volume.name}`, volume, secret, fail);
    if (entries.length === 0) continue;
    if (mount.readOnly !== true) fail(where, `volumeMount ${mount.name} holds secrets: readOnly: true`);
    if (mount.subPath) fail(where, `volumeMount ${mount.name}: a subPath mount never sees a rotated Secret; mount the directory`);
    const modes = new Set(entries.map((entry) => entry.mode));
    for (const mode of modes) {
      if ((mode & ~0o440) !== 0 || (mode & 0o400) === 0) fail(`${where} volume ${volume.name}`, `files of mode 0${mode.toString(8)}: secret files are 0400 or 0440 (defaultMode, or an item's mode)`);
      else if ((mode & 0o040) !== 0 && pod.securityContext?.fsGroup === undefined) fail(where, `volume ${volume.name}: group-readable secret files (owner root) need the pod's securityContext.fsGroup`);
    }
    for (const entry of entries) files.set(posix.join(mount.mountPath, entry.path), entry);
  }
  return files;
}

interface VolumeFile extends MountedFile {
  readonly path: string;
  readonly mode: number;
}

function volumeFiles(where: string, volume: Json, secret: (name: string) => Json | undefined, fail: Fail): VolumeFile[] {
  const fromSecret = (name: string, items: Json[] | undefined, mode: number): VolumeFile[] => {
    const doc = secret(name);
    if (!doc) {
      fail(where, `Secret ${name} is not defined`);
      return [];
    }
    const data: Record<string, string> = { ...doc.stringData, ...Object.fromEntries(Object.entries(doc.data ?? {}).map(([key, value]) => [key, Buffer.from(String(value), 'base64').toString('utf8')])) };
    const chosen: Json[] = items ?? Object.keys(data).map((key) => ({ key, path: key }));
    return chosen.map((item) => {
      if (!(item.key in data)) fail(where, `Secret ${name} has no key ${item.key}`);
      return { path: item.path, content: data[item.key] ?? null, mode: item.mode ?? mode };
    });
  };
  if (volume.secret) return fromSecret(volume.secret.secretName, volume.secret.items, volume.secret.defaultMode ?? 0o644);
  if (!volume.projected) return [];
  const mode = volume.projected.defaultMode ?? 0o644;
  return (volume.projected.sources ?? []).flatMap((source: Json): VolumeFile[] => {
    if (source.secret) return fromSecret(source.secret.name, source.secret.items, mode);
    if (source.serviceAccountToken) return [{ path: source.serviceAccountToken.path, content: 'example.service-account.token', mode }];
    return [];
  });
}

// ---------------------------------------------------------------- docker-compose

/** The compose secrets a service mounts, at /run/secrets/<target>, with their files' content where present. */
export function composeFiles(where: string, service: Json, secrets: Record<string, Json>, root: string, fail: Fail): Map<string, MountedFile> {
  const files = new Map<string, MountedFile>();
  for (const entry of service.secrets ?? []) {
    const source: string = typeof entry === 'string' ? entry : entry.source;
    const target: string = typeof entry === 'string' ? entry : (entry.target ?? entry.source);
    const definition = secrets[source];
    if (!definition) {
      fail(where, `secret ${source} is not defined under the top-level secrets`);
      continue;
    }
    const file = definition.file ? join(root, definition.file) : null;
    const content = file && existsSync(file) ? readFileSync(file, 'utf8') : null;
    files.set(target.startsWith('/') ? target : `/run/secrets/${target}`, { content });
  }
  return files;
}

// ---------------------------------------------------------------- as the relay loads it

const scratch = mkdtempSync(join(tmpdir(), 'validate-deploy-'));
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));
let written = 0;

/**
 * `outbox-relay <args>` with this environment and these mounted files loads its configuration
 * (flags, every variable, the cross-field checks), logs in as its own role, and `setup` creates
 * the roles. Secret files hold what the example Secret or the compose file holds.
 */
export function checkLoad(where: string, args: readonly string[], env: Record<string, string>, files: ReadonlyMap<string, MountedFile>, fail: Fail): void {
  const command = commandOf(args);
  if (!command) return;
  const resolved: Record<string, string> = { ...env };
  const shown = new Map<string, string>();
  for (const [variable, spec] of SECRET_FILE_VARIABLES) {
    const given = env[variable];
    if (given === undefined) continue;
    const file = files.get(given);
    // Not mounted: checkFileReferences says so.
    if (!file) return;
    // A URL the repository does not hold: a placeholder would not stand for it.
    if (file.content === null && URL_SECRETS.has(spec.env)) return;
    const path = join(scratch, `${(written += 1)}`);
    writeFileSync(path, file.content ?? UNKNOWN_CONTENT);
    resolved[variable] = path;
    shown.set(path, given);
  }
  try {
    const flags = parseFlags(args.slice(command.split(' ').length));
    checkFlags(command, flags);
    // Any command's spec: what it loaded is only read for its DATABASE_URL.
    const spec = COMMANDS[command] as unknown as CommandSpec<OptionKey, OptionKey, Args>;
    const config = load(spec, { env: resolved, flags }) as { databaseUrl?: { reveal(): string } };
    const role = COMMAND_ROLES[command];
    const user = config.databaseUrl ? decodeURIComponent(new URL(config.databaseUrl.reveal()).username) : '';
    const madeBy = command === 'webhooks' ? 'deploy/kubernetes/webhooks-setup-job.yaml' : '`outbox-relay setup --print-roles`';
    if (role && user !== role) fail(where, `\`${command}\` logs in as "${user}": expected its own role ${role} (${madeBy})`);
    if (command === 'setup' && !('create-roles' in flags)) fail(where, '`setup` runs with --create-roles: the relay and the pruner log in as the roles it creates');
  } catch (error) {
    let message = (error as Error).message.replace(/:?\n\s*- /, ': ').replace(/\n\s*- /g, '; ');
    for (const [path, original] of shown) message = message.replaceAll(path, original);
    fail(where, `\`outbox-relay ${args.join(' ')}\` would refuse this configuration: ${message}`);
  }
}
