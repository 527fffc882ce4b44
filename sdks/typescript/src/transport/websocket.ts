/**
 * One WebSocket connection to `/v1/ws`: opens it, sends commands with ids and matches their
 * replies (calling the reply callback synchronously, before any later frame is looked at, so the
 * client sees a subscribe reply before that channel's messages), sends `ping` commands to notice
 * a dead connection, and reports the rest (messages, the inbox opening, `disconnect`) to its sink.
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
}

const OPEN = 1;

export class WebSocketConnection {
  readonly kind = 'websocket' as const;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private disconnect: Disconnect | undefined;
  private done = false;
  private pinger: ReturnType<typeof setInterval> | undefined;
  private readonly closeCallbacks: (() => void)[] = [];

  private constructor(
    private readonly socket: WebSocketLike,
    private readonly sink: ConnectionSink,
    private readonly options: WebSocketOptions,
  ) {
    socket.onmessage = (event) => this.onFrame(event.data);
    socket.onclose = (event) => {
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
   * `timeout` / `network`. `onReply` runs synchronously when the reply frame arrives.
   */
  request<K extends CommandName>(
    name: K,
    body: Commands[K],
    onReply?: (frame: ServerFrame) => void,
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
      try {
        this.socket.send(encodeCommand(id, name, body));
      } catch (e) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new HeraldError('network', `cannot send ${name}: ${(e as Error).message}`, { cause: e }));
      }
    });
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
