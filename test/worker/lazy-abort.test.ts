import t from 'tap';
import { LazyAbort } from '../../worker/lazy-abort.js';

t.test('an abort before anyone asked for the signal reaches the signal made later', async (t) => {
  const a = new LazyAbort();
  t.equal(a.aborted, false);
  const why = new Error('cancelled');
  a.abort(why);
  a.abort(new Error('second')); // the first reason stays, as with AbortController
  t.equal(a.aborted, true);
  t.equal(a.reason, why);
  t.equal(a.signal.aborted, true);
  t.equal(a.signal.reason, why);
});

t.test('a signal taken first is aborted, and its listeners run, when the abort comes', async (t) => {
  const a = new LazyAbort();
  const s = a.signal;
  t.equal(a.signal, s, 'one signal, however often asked for');
  let heard: unknown;
  s.addEventListener('abort', () => { heard = s.reason; });
  t.equal(s.aborted, false);
  a.abort('stop');
  t.equal(heard, 'stop');
  t.equal(a.aborted, true);
});
