/**
 * The WebSocket wire format (docs/protocol.md section 4): the commands a client sends, encoded
 * canonically, and the frames the server sends, decoded and checked. Also the message object every
 * transport shares.
 */

import { HeraldError } from './errors.js';
import type { Position } from './cursor.js';

/** A message of a channel, or of the device inbox (`$app`, `$device`). */
export interface Message<T = unknown> {
  channel: string;
  seq: number;
  epoch: string;
  /** The publisher's idempotency key, or `<epoch>-<seq>`; for an inbox message, the push id. */
  id: string;
  /** When the server stored it, in milliseconds since the Unix epoch. */
  time: number;
  data: T;
}

/** The `data` of an inbox message: the push envelope (docs/protocol.md section 9). */
export interface PushEnvelope<T = unknown> {
  data?: T;
  notification?: { title?: string; body?: string; badge?: number; sound?: string };
  expires?: number;
  collapse_key?: string;
  priority?: string;
  audience?: string;
}

/** A subscribe reply (WebSocket `subscribe`, SSE `subscribed`). */
export interface SubscribeReply {
  channel: string;
  /** The channel's newest seq when the subscription started. */
  seq: number;
  epoch: string;
  /** Whether the given cursor was resumed exactly. */
  recovered: boolean;
}

export interface ConnectReply {
  sub: string;
  expires?: number;
  unsubscribed?: string[];
}

export interface PublishReply {
  channel: string;
  duplicate: boolean;
  epoch: string;
  id: string;
  seq: number;
  time: number;
}

export interface HistoryReply {
  channel: string;
  epoch: string;
  seq: number;
  messages: Message[];
}

export interface AckReply {
  channel: string;
  seq: number;
}

/** The `disconnect` frame / SSE event: why the server is closing. */
export interface Disconnect {
  code: string;
  message: string;
}

/** A presence channel's member: the user id (the token's `sub`) and its data. */
export interface PresenceMember {
  user: string;
  data: Record<string, unknown>;
}

/**
 * The `presence` frame (to a subscription that asked with `presence: true`, docs/protocol.md
 * section 10): the members first, then each join (`user`, `data`) and leave (`user`).
 */
export interface PresenceFrame {
  channel: string;
  event: 'members' | 'join' | 'leave';
  members?: PresenceMember[];
  user?: string;
  data?: Record<string, unknown>;
}

/** A JSON text sent byte for byte (a publish's `data` whose whitespace matters). */
export class RawJson {
  constructor(readonly text: string) {
    JSON.parse(text); // refuse what is not JSON now rather than on the server
  }
}

/** The body of each command, in the protocol's field order. */
export interface Commands {
  connect: { token?: string };
  subscribe: { channel: string; since?: { seq: number; epoch?: string }; last?: boolean; presence?: boolean; member?: Record<string, unknown> };
  unsubscribe: { channel: string };
  publish: { channel: string; data: unknown; id?: string };
  history: { channel: string; since?: number; limit?: number };
  ping: Record<string, never>;
  ack: { channel: '$app' | '$device' | string; seq: number; epoch?: string };
}
export type CommandName = keyof Commands;

const FIELD_ORDER: { [K in CommandName]: readonly string[] } = {
  connect: ['token'],
  subscribe: ['channel', 'since', 'last', 'presence', 'member'],
  unsubscribe: ['channel'],
  publish: ['channel', 'data', 'id'],
  history: ['channel', 'since', 'limit'],
  ping: [],
  ack: ['channel', 'seq', 'epoch'],
};

function encodeValue(value: unknown): string {
  return value instanceof RawJson ? value.text : JSON.stringify(value);
}

/** Encodes a command canonically: `id` first (left out when null), fields in protocol order. */
export function encodeCommand<K extends CommandName>(
  id: number | null | undefined,
  name: K,
  body: Commands[K],
): string {
  const fields: string[] = [];
  const record = body as Record<string, unknown>;
  for (const key of FIELD_ORDER[name]) {
    let value = record[key];
    if (value === undefined) continue;
    if (key === 'since' && name === 'subscribe' && typeof value === 'object' && value !== null) {
      const since = value as Position;
      value = since.epoch === undefined ? { seq: since.seq } : { seq: since.seq, epoch: since.epoch };
    }
    fields.push(`${JSON.stringify(key)}:${encodeValue(value)}`);
  }
  const command = `${JSON.stringify(name)}:{${fields.join(',')}}`;
  return id === null || id === undefined ? `{${command}}` : `{"id":${id},${command}}`;
}

/** A decoded server frame. */
export type ServerFrame =
  | { frame: 'connect'; id: number | null; body: ConnectReply }
  | { frame: 'subscribe'; id: number | null; body: SubscribeReply }
  | { frame: 'unsubscribe'; id: number | null; body: { channel: string } }
  | { frame: 'publish'; id: number | null; body: PublishReply }
  | { frame: 'history'; id: number | null; body: HistoryReply }
  | { frame: 'ack'; id: number | null; body: AckReply }
  | { frame: 'pong'; id: number | null; body: Record<string, never> }
  | { frame: 'error'; id: number | null; body: { code: string; message: string } }
  | { frame: 'message'; id: number | null; body: Message }
  | { frame: 'disconnect'; id: number | null; body: Disconnect }
  | { frame: 'presence'; id: number | null; body: PresenceFrame };

type FieldType = 'string' | 'number' | 'boolean' | 'array' | 'any';
type Shape = Record<string, FieldType>;

const REQUIRED: Record<ServerFrame['frame'], Shape> = {
  connect: { sub: 'string' },
  subscribe: { channel: 'string', seq: 'number', epoch: 'string', recovered: 'boolean' },
  unsubscribe: { channel: 'string' },
  publish: { channel: 'string', duplicate: 'boolean', epoch: 'string', id: 'string', seq: 'number', time: 'number' },
  history: { channel: 'string', epoch: 'string', seq: 'number', messages: 'array' },
  ack: { channel: 'string', seq: 'number' },
  pong: {},
  error: { code: 'string', message: 'string' },
  message: { channel: 'string', seq: 'number', epoch: 'string', id: 'string', time: 'number', data: 'any' },
  disconnect: { code: 'string', message: 'string' },
  presence: { channel: 'string', event: 'string' },
};

function bad(message: string): HeraldError {
  return new HeraldError('bad_request', message);
}

function checkShape(what: string, value: unknown, shape: Shape): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw bad(`${what} is not an object`);
  const record = value as Record<string, unknown>;
  for (const [key, type] of Object.entries(shape)) {
    const field = record[key];
    const ok =
      type === 'any' ? field !== undefined : type === 'array' ? Array.isArray(field) : typeof field === type;
    if (!ok) throw bad(`${what}: field ${key} is missing or not a ${type}`);
  }
}

/** Checks that `value` is a message object. */
export function checkMessage(value: unknown): Message {
  checkShape('message', value, REQUIRED.message);
  return value as Message;
}

/** Decodes one server text frame; throws `HeraldError` (`bad_request`) for anything else. */
export function decodeServerFrame(text: string): ServerFrame {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw bad(`frame is not JSON: ${(e as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw bad('frame is not a JSON object');
  let id: number | null = null;
  let name: ServerFrame['frame'] | undefined;
  for (const [key, field] of Object.entries(value)) {
    if (key === 'id') {
      if (field !== null && !(Number.isInteger(field) && (field as number) >= 0)) throw bad('frame id is not a non-negative integer');
      id = field as number | null;
    } else if (Object.prototype.hasOwnProperty.call(REQUIRED, key)) {
      if (name !== undefined) throw bad(`frame has two kinds: ${name} and ${key}`);
      name = key as ServerFrame['frame'];
    } else {
      throw bad(`unknown frame ${JSON.stringify(key)}`);
    }
  }
  if (name === undefined) throw bad('frame names no kind');
  const body = (value as Record<string, unknown>)[name];
  checkShape(name, body, REQUIRED[name]);
  if (name === 'history') (body as HistoryReply).messages.forEach(checkMessage);
  return { frame: name, id, body } as ServerFrame;
}
