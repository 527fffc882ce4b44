/**
 * One WebSocket connection to `/v1/ws`: opens it, sends commands with ids and matches their
 * replies (calling the reply callback synchronously, before any later frame is looked at, so the
 * client sees a subscribe reply before that channel's messages), sends `ping` commands to notice
 * a dead connection, and reports the rest (messages, the inbox opening, `disconnect`) to its sink.
 *
 * Commands sent with `batch` in the same tick (a reconnect's resubscribes, several `subscribe`
 * calls in a row) go together in batches: JSON arrays of at most 100 commands and 16 KiB in one
 * WebSocket message, each command still answered on its own (docs/protocol.md, "Batches"). A
 * server that predates batches answers one with a `bad_request` error without an id (`frame is
 * not a JSON object`) and runs nothing of it: its commands are sent again one a message, as is
 * everything after it on this connection. Until the server has answered a command of a batch,
 * every command goes in an array, so one resent after a refusal keeps its place in the order.
 */

import { HeraldError, errorFromBody } from '../errors.js';
import { type CommandName, type Commands, type Disconnect, type ServerFrame, decodeServerFrame, encodeCommand } from '../protocol.js';
import type { ConnectionSink, WebSocketConstructor, WebSocketLike } from './types.js';

/** The close code of a connection whose access was revoked (docs/protocol.md, "Revocation"). */
const REVOKED_CLOSE_CODE = 4003;

interface Pending {
  command: CommandName;
  resolve: (frame: ServerFrame) => void;
  reject: (error: HeraldError) => void;
  timer: ReturnType<typeof setTimeout>;
}

export interface WebSocketOptions {
  openTimeoutMs: number;
  requestTimeoutMs: number;
  /** How often to send a `ping` command; 0 turns it off. */
  pingIntervalMs: number;
  /** Whether commands sent with `batch` may go in batches (default true). */
  batches?: boolean;
  /** Called when the server closed with 1009 (message too big) after a batch was sent. */
  onBatchTooBig?: () => void;
}

const OPEN = 1;
/** At most this many commands in one batch. */
export const MAX_BATCH_COMMANDS = 100;
/** At most this many bytes (UTF-16 code units) in one batch: a quarter of the server's default `max_frame_bytes`. */
export const MAX_BATCH_BYTES = 16 * 1024;
/** The WebSocket close code for a message over the server's size limit. */
const MESSAGE_TOO_BIG = 1009;

/** A command written, or waiting to be: its id and its text. */
interface Written {
  id: number;
  text: string;
}

export class WebSocketConnection {
  readonly kind = 'websocket' as const;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private disconnect: Disconnect | undefined;
  private done = false;
  private pinger: ReturnType<typeof setInterval> | undefined;
  private readonly closeCallbacks: (() => void)[] = [];
  /** Commands sent with `batch`, to be written at the end of this tick. */
  private queued: Written[] = [];
  /** Batches written before the server answered any of their commands, oldest first. */
  private unconfirmed: Written[][] = [];
  /** The ids of the commands in `unconfirmed`. */
  private readonly unconfirmedIds = new Set<number>();
  /** Whether batches are sent on this connection (off once the server refused one). */
  private batches: boolean;
  /** Whether a batch was written on this connection. */
  private sentBatch = false;

  private constructor(
    private readonly socket: WebSocketLike,
    private readonly sink: ConnectionSink,
    private readonly options: WebSocketOptions,
  ) {
    this.batches = options.batches ?? true;
    socket.onmessage = (event) => this.onFrame(event.data);
    socket.onclose = (event) => {
      if (event.code === MESSAGE_TOO_BIG && this.sentBatch) options.onBatchTooBig?.();
      const info = this.disconnect
        ? { code: this.disconnect.code, message: this.disconnect.message, closeCode: event.code }
        : event.code === REVOKED_CLOSE_CODE
          ? { code: 'revoked', message: event.reason || 'access was revoked', closeCode: event.code }
          : { code: 'connection_lost', message: `the WebSocket closed (code ${event.code})`, closeCode: event.code };
      this.finish(info);
    };
    socket.onerror = () => {
      /* the close event follows and says what happened */
    };
    if (options.pingIntervalMs > 0) {
      this.pinger = setInterval(() => {
        this.request('ping', {}).catch((e: HeraldError) => {
          if (e.code === 'timeout') this.abort(`no pong within ${options.requestTimeoutMs} ms`);
        });
      }, options.pingIntervalMs);
    }
  }

  /** Opens a WebSocket to `url`; rejects with `network` (or `timeout`) if it does not open. */
  static open(
    WebSocketImpl: WebSocketConstructor,
    url: string,
    sink: ConnectionSink,
    options: WebSocketOptions,
  ): Promise<WebSocketConnection> {
    return new Promise((resolve, reject) => {
      let socket: WebSocketLike;
      try {
        socket = new WebSocketImpl(url);
      } catch (e) {
        reject(new HeraldError('network', `cannot open a WebSocket to ${url}: ${(e as Error).message}`, { cause: e }));
        return;
      }
      const timer = setTimeout(() => {
        fail(new HeraldError('timeout', `the WebSocket to ${url} did not open within ${options.openTimeoutMs} ms`));
      }, options.openTimeoutMs);
      const fail = (error: HeraldError) => {
        clearTimeout(timer);
        socket.onopen = socket.onclose = socket.onerror = null;
        try {
          socket.close();
        } catch {
          /* not open */
        }
        reject(error);
      };
      socket.onerror = () => fail(new HeraldError('network', `the WebSocket to ${url} could not be opened`));
      socket.onclose = (event) =>
        fail(new HeraldError('network', `the WebSocket to ${url} closed before opening (code ${event.code})`));
      socket.onopen = () => {
        clearTimeout(timer);
        resolve(new WebSocketConnection(socket, sink, options));
      };
    });
  }

  /** Runs `callback` when the connection ends (at once if it has). */
  onClose(callback: () => void): void {
    if (this.done) callback();
    else this.closeCallbacks.push(callback);
  }

  get isOpen(): boolean {
    return !this.done && this.socket.readyState === OPEN;
  }

  /**
   * Sends a command and resolves with its reply frame; rejects with the server's error, or with
   * `timeout` / `network`. `onReply` runs synchronously when the reply frame arrives. With
   * `batch`, the command is written at the end of the tick, with the other commands sent with
   * `batch` meanwhile (see the module's comment).
   */
  request<K extends CommandName>(
    name: K,
    body: Commands[K],
    onReply?: (frame: ServerFrame) => void,
    batch = false,
  ): Promise<ServerFrame> {
    if (!this.isOpen) return Promise.reject(new HeraldError('network', `cannot send ${name}: the WebSocket is not open`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new HeraldError('timeout', `no answer to ${name} within ${this.options.requestTimeoutMs} ms`));
      }, this.options.requestTimeoutMs);
      this.pending.set(id, {
        command: name,
        resolve: (frame) => {
          onReply?.(frame);
          resolve(frame);
        },
        reject,
        timer,
      });
      const written = { id, text: encodeCommand(id, name, body) };
      if (batch && this.batches) {
        if (this.queued.length === 0) queueMicrotask(() => this.flush());
        this.queued.push(written);
        return;
      }
      this.flush();
      this.write([written]);
    });
  }

  /** Writes the commands queued with `batch`, in batches. */
  private flush(): void {
    const queued = this.queued;
    this.queued = [];
    let batch: Written[] = [];
    let bytes = 2;
    for (const written of queued) {
      const size = written.text.length + 1;
      if (batch.length > 0 && (batch.length === MAX_BATCH_COMMANDS || bytes + size > MAX_BATCH_BYTES)) {
        this.write(batch);
        batch = [];
        bytes = 2;
      }
      bytes += size;
      batch.push(written);
    }
    if (batch.length > 0) this.write(batch);
  }

  /**
   * Writes `commands` in one message: one command alone, several as a batch. While a batch is
   * unanswered (the server may predate batches) a single command goes in an array too.
   */
  private write(commands: Written[]): void {
    if (this.done) return; // the pending requests were rejected when it ended
    const asBatch = this.batches && (commands.length > 1 || this.unconfirmed.length > 0);
    try {
      if (!asBatch) {
        for (const c of commands) this.socket.send(c.text);
        return;
      }
      this.socket.send(`[${commands.map((c) => c.text).join(',')}]`);
      this.sentBatch = true;
      this.unconfirmed.push(commands);
      for (const c of commands) this.unconfirmedIds.add(c.id);
    } catch (e) {
      for (const c of commands) {
        const pending = this.pending.get(c.id);
        if (!pending) continue;
        clearTimeout(pending.timer);
        this.pending.delete(c.id);
        pending.reject(new HeraldError('network', `cannot send ${pending.command}: ${(e as Error).message}`, { cause: e }));
      }
    }
  }

  /**
   * An `error` frame without an id: when it is the refusal of the oldest unanswered batch by a
   * server that predates batches, sends its commands again one a message and answers true.
   */
  private batchRefused(body: { code?: unknown; message?: unknown }): boolean {
    const refusal = body.code === 'bad_request' && typeof body.message === 'string' && body.message.startsWith('frame is not a JSON object');
    const batch = refusal ? this.unconfirmed.shift() : undefined;
    if (!batch) return false;
    this.batches = false;
    for (const c of batch) this.unconfirmedIds.delete(c.id);
    // Later batches are refused too, each with its own error: they are sent again in turn.
    this.write(batch.filter((c) => this.pending.has(c.id)));
    return true;
  }

  private onFrame(data: unknown): void {
    if (this.done) return;
    if (typeof data !== 'string') {
      this.sink.error(new HeraldError('protocol', 'the server sent a binary WebSocket message'));
      return;
    }
    let frame: ServerFrame;
    try {
      frame = decodeServerFrame(data);
    } catch (e) {
      this.sink.error(new HeraldError('protocol', (e as Error).message, { cause: e }));
      return;
    }
    if (frame.id !== null && this.unconfirmedIds.has(frame.id)) {
      // The server answered a command of a batch: it takes batches.
      this.unconfirmed = [];
      this.unconfirmedIds.clear();
    }
    if (frame.frame === 'error' && frame.id === null && this.batchRefused(frame.body)) return;
    const pending = frame.id === null ? undefined : this.pending.get(frame.id);
    if (pending && frame.id !== null) {
      this.pending.delete(frame.id);
      clearTimeout(pending.timer);
      if (frame.frame === 'error') {
        pending.reject(errorFromBody({ error: frame.body }) as HeraldError);
      } else {
        pending.resolve(frame);
      }
      return;
    }
    switch (frame.frame) {
      case 'message':
        this.sink.message(frame.body, null);
        break;
      case 'subscribe':
        this.sink.subscribed(frame.body);
        break;
      case 'presence':
        this.sink.presence(frame.body);
        break;
      case 'disconnect':
        this.disconnect = frame.body;
        break;
      case 'error':
        this.sink.error(errorFromBody({ error: frame.body }) as HeraldError);
        break;
      default:
        break; // a late reply to a request that timed out
    }
  }

  /** Closes the connection because it looks dead; reported as `connection_lost`. */
  private abort(message: string): void {
    this.finish({ code: 'connection_lost', message });
    try {
      this.socket.close(4000);
    } catch {
      /* already closing */
    }
  }

  /** The client's own close: reported to the sink as `closed`. */
  close(): void {
    this.finish({ code: 'closed', message: 'closed by the client', closeCode: 1000 });
    try {
      this.socket.close(1000);
    } catch {
      /* already closing */
    }
  }

  private finish(info: { code: string; message: string; closeCode?: number }): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.pinger);
    this.socket.onmessage = null;
    for (const [, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(new HeraldError('network', `the connection ended before ${pending.command} was answered: ${info.message}`));
    }
    this.pending.clear();
    for (const callback of this.closeCallbacks.splice(0)) callback();
    this.sink.closed(info);
  }
}
