// Preloaded into the conformance suite (`node --import ./bearer.mjs ...`) when it runs against
// the product server, which answers nothing without a bearer token: the suite has no option to
// send a header, so this adds `Authorization: Bearer $FSNOTES_CONFORMANCE_TOKEN` to every HTTP
// request node makes. Both ways the suite sends requests go through undici's global dispatcher
// (node's fetch, and the undici package's request(), used where a test sets the Host header),
// so one interceptor there covers both. Nothing else about a request is changed.
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
