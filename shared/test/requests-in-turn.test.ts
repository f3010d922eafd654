import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { inTurn, MAX_WAITING_REQUESTS } from '@app/shared/platform/http/requests-in-turn';

/** A connection's requests as Node's server hands them over: a response gets its socket when it is next to be sent. */
function connection() {
  const socket = { destroyed: false, destroy: () => (socket.destroyed = true) };
  const handled: number[] = [];
  const listener = inTurn((req) => handled.push((req as unknown as { id: number }).id));
  const request = (id: number, inHand = false) => {
    const res = Object.assign(new EventEmitter(), { socket: inHand ? socket : null });
    listener({ id, socket } as unknown as IncomingMessage, res as unknown as ServerResponse);
    return { turn: () => res.emit('socket', socket), close: () => res.emit('close') };
  };
  return { socket, handled, request };
}

describe('inTurn', () => {
  it('hands a request whose response has its socket to the handler at once', () => {
    const { handled, request } = connection();
    request(1, true);
    expect(handled).toEqual([1]);
  });

  it('holds a request that waits behind another until its response gets the socket', () => {
    const { handled, request } = connection();
    request(1, true);
    const second = request(2);
    expect(handled).toEqual([1]);
    second.turn();
    expect(handled).toEqual([1, 2]);
  });

  it('drops a waiting request whose connection closed: its handler never runs', () => {
    const { handled, request } = connection();
    const waiting = request(1);
    waiting.close();
    waiting.turn();
    expect(handled).toEqual([]);
  });

  it(`lets ${MAX_WAITING_REQUESTS} requests wait and closes the connection on one more`, () => {
    const { socket, request } = connection();
    for (let id = 1; id <= MAX_WAITING_REQUESTS; id++) request(id);
    expect(socket.destroyed).toBe(false);
    request(MAX_WAITING_REQUESTS + 1);
    expect(socket.destroyed).toBe(true);
  });

  it('counts only the requests still waiting: one handed over or dropped makes room for another', () => {
    const { socket, request } = connection();
    const waiting = Array.from({ length: MAX_WAITING_REQUESTS }, (_, i) => request(i + 1));
    waiting[0]!.turn();
    waiting[1]!.close();
    request(MAX_WAITING_REQUESTS + 1);
    request(MAX_WAITING_REQUESTS + 2);
    expect(socket.destroyed).toBe(false);
    request(MAX_WAITING_REQUESTS + 3);
    expect(socket.destroyed).toBe(true);
  });
});
