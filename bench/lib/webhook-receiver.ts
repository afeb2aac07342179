/**
 * The fast receiver of `npm run bench:webhooks`, as a process of its own so that its CPU is not
 * the sender's: a node:http server on 127.0.0.1 that reads each request's body and answers 204
 * at once. Prints one JSON line with its port; GET /count answers the POSTs received so far.
 *
 * Compiled by bench/tsconfig.json and run as plain JavaScript (no TypeScript loader in it).
 */
import { createServer } from 'node:http';

let received = 0;
const server = createServer((request, response) => {
  if (request.method === 'GET') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ received }));
    return;
  }
  // The body is read, as any receiver reads it, before the answer.
  request.resume();
  request.once('end', () => {
    received += 1;
    response.writeHead(204);
    response.end();
  });
});
// Longer than undici's keep-alive, so that the sender never meets a connection the server is closing.
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`));
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
