// The generated pages: where each is, the name of its markers, its first intro, its block.
import { CONFIGURATION_INTRO, configurationReference } from './configuration.js';
import { ERRORS_INTRO, errorsReference } from './errors.js';
import { RUNBOOKS_INTRO, runbooksIndex } from './runbooks.js';

export interface GeneratedPage {
  /** From the repository's root. */
  readonly path: string;
  /** `<!-- <marker>:start -->` ... `<!-- <marker>:end -->` hold the generated block. */
  readonly marker: string;
  /** Written above the block when the page is new; hand-written text there is kept after. */
  readonly intro: string;
  readonly render: () => string;
}

export const PAGES: readonly GeneratedPage[] = [
  { path: 'docs/configuration.md', marker: 'options', intro: CONFIGURATION_INTRO, render: configurationReference },
  { path: 'docs/errors.md', marker: 'errors', intro: ERRORS_INTRO, render: errorsReference },
  { path: 'docs/runbooks/README.md', marker: 'runbooks', intro: RUNBOOKS_INTRO, render: runbooksIndex },
];
