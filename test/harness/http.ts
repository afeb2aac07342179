/** GET on a relay's HTTP port (metrics, health). */
export async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: response.status, body: await response.text() };
}

/** Sum of a metric's samples whose labels contain `labels` (e.g. 'reason="ROUTE_BAD_TOPIC"'). */
export function metric(body: string, name: string, labels = ''): number {
  let total = 0;
  for (const line of body.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (labels && !line.includes(labels)) continue;
    total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}
