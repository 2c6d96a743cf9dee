// Preloaded into the conformance suite (`node --import ./bearer.mjs ...`): fsnotes answers
// nothing without a bearer token, over HTTP every request needs one, and the suite has no
// option to send a header. So this adds `Authorization: Bearer $FSNOTES_CONFORMANCE_TOKEN` to
// every HTTP request the suite makes, by each of the three ways it makes them: node's fetch and
// the undici package's request() (where a test sets the Host header) both go through undici's
// global dispatcher, and node's http.request (where a test needs exact header casing) is
// wrapped. Nothing else about a request is changed.
import http from 'node:http';
import { Agent, setGlobalDispatcher } from 'undici';

const token = process.env.FSNOTES_CONFORMANCE_TOKEN;
if (!token) {
  throw new Error('bearer.mjs: FSNOTES_CONFORMANCE_TOKEN is not set');
}
const value = `Bearer ${token}`;

function withBearer(headers) {
  if (Array.isArray(headers)) {
    // undici's flat form: [name, value, name, value, ...]
    return [...headers, 'authorization', value];
  }
  return { ...(headers ?? {}), authorization: value };
}

setGlobalDispatcher(
  new Agent().compose(
    (dispatch) => (options, handler) =>
      dispatch({ ...options, headers: withBearer(options.headers) }, handler)
  )
);

for (const name of ['request', 'get']) {
  const original = http[name];
  http[name] = function (...args) {
    const request = original.apply(this, args);
    if (!request.hasHeader('authorization')) request.setHeader('authorization', value);
    return request;
  };
}
