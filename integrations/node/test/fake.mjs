// An in-process HTTP server standing in for bigseg where a test needs answers that the real one
// does not give (the error mapping, hostile servers).

import http from 'node:http';

/** An HTTP server answering with handler, recording requests and counting connections. */
export async function fakeBigseg(t, handler) {
  const requests = [];
  let opened = 0;
  const server = http.createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, headers: req.headers });
    handler(req, res);
  });
  server.on('connection', () => {
    opened += 1;
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return { url: `http://127.0.0.1:${server.address().port}`, requests, opened: () => opened };
}

/** A handler answering with status, content type, body and headers. */
export function answer(status, contentType, body, headers = {}) {
  return (req, res) => {
    const h = { ...headers };
    if (contentType) h['content-type'] = contentType;
    res.writeHead(status, h);
    res.end(body);
  };
}
