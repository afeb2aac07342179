/** Figures as the reports print them: '–' for a figure that is missing (a failed or skipped run). */

export function int(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–';
}

export function num(n: number, digits: number): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '–';
}

export function pct(n: number): string {
  return Number.isFinite(n) ? `${Math.round(n * 100)}%` : '–';
}
