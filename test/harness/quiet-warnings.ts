// The tests' own kafkajs clients trigger the warning the relay drops too (src/observe/process-warnings.ts).
import { dropKafkajsTimerWarning } from '../../src/observe/process-warnings.js';

dropKafkajsTimerWarning();
