#!/usr/bin/env -S node --max-semi-space-size=16
// The flag: see src/observe/runtime-flags.ts (`run` warns when started without it).
// First: the relay's kafkajs replacements go in before anything loads kafkajs (see the module).
import './sink/kafkajs-patches.js';
import { main } from './commands/main.js';
import { dropKafkajsTimerWarning } from './observe/process-warnings.js';

dropKafkajsTimerWarning();

// The command decided the outcome: a socket still open to a silent peer (or a driver's timer)
// must not keep the process, and its exit code, waiting. Logs are written synchronously.
process.exit(await main(process.argv.slice(2), process.env));
