import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { listen } from '../src/platform/server.js';

/** The server's hold on connections: nothing of one that has closed is kept, its timers included. */
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

it('keeps nothing of a connection that closed before sending a request: its first-head deadline goes with it', async () => {
  const running = await listen((_req, res) => res.end(), 0, '127.0.0.1', undefined, 1, { headMs: 60_000 });
  let accepted: WeakRef<net.Socket> | undefined;
  const closed = new Promise<void>((resolve) =>
    running.server.once('connection', (socket: net.Socket) => {
      accepted = new WeakRef(socket);
      socket.once('close', () => resolve());
    }),
  );
  try {
    const client = net.connect(running.port, '127.0.0.1', () => client.destroy());
    await closed;
    // Past the close's own callbacks, then a full collection: only a holder we did not mean keeps it.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect({ socketKept: accepted?.deref() !== undefined }).toEqual({ socketKept: false });
  } finally {
    await running.close(1_000);
  }
});
