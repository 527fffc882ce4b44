/**
 * Cursors: a channel position `(epoch, seq)`, and the cursor strings SSE and long-poll use
 * (`EPOCH:SEQ,EPOCH:SEQ`, one position per channel in the order the channels are named) and the
 * device inbox's acknowledged cursor (`$app` first, then `$device`).
 *
 * Seqs are JavaScript numbers: exact up to 2^53 - 1 messages per channel. The parser accepts the
 * protocol's whole range (up to 2^64 - 1) and refuses anything above it.
 */

import { HeraldError } from './errors.js';

/** "I have processed every message of this channel up to and including `seq` of `epoch`." */
export interface Position {
  /** 8 lowercase hex digits, or `""` when not known (taken as the channel's current epoch). */
  epoch: string;
  seq: number;
}

const MAX_SEQ = 18446744073709551615n;
const EPOCH = /^[A-Za-z0-9]*$/;
const DIGITS = /^[0-9]+$/;

function parsePosition(text: string): Position {
  const trimmed = text.trim();
  const colon = trimmed.indexOf(':');
  const epoch = colon < 0 ? '' : trimmed.slice(0, colon);
  const seqText = colon < 0 ? trimmed : trimmed.slice(colon + 1);
  if (!EPOCH.test(epoch)) throw new HeraldError('bad_request', `cursor epoch ${JSON.stringify(epoch)} is not ASCII letters and digits`);
  if (!DIGITS.test(seqText) || BigInt(seqText) > MAX_SEQ) {
    throw new HeraldError('bad_request', `cursor seq ${JSON.stringify(seqText)} is not a number from 0 to 2^64-1`);
  }
  return { epoch, seq: Number(seqText) };
}

/**
 * Decodes a cursor string for a request naming `channels` channels: one entry per channel, `null`
 * where the string leaves it unset. Throws `HeraldError` (`bad_request`) where the server would.
 */
export function decodeCursor(text: string, channels: number): (Position | null)[] {
  if (channels < 1) throw new HeraldError('bad_request', 'a cursor needs at least one channel');
  const positions: (Position | null)[] = new Array<Position | null>(channels).fill(null);
  if (text.trim() === '') return positions;
  const parts = text.split(',');
  if (parts.length > channels) {
    throw new HeraldError('bad_request', `cursor has ${parts.length} positions for ${channels} channels`);
  }
  parts.forEach((part, i) => {
    positions[i] = parsePosition(part);
  });
  return positions;
}

/** Encodes one position per channel, always as `EPOCH:SEQ`. */
export function encodeCursor(positions: readonly Position[]): string {
  return positions.map((p) => `${p.epoch}:${p.seq}`).join(',');
}

/** A device's acknowledged inbox position: one position per log. */
export interface InboxCursor {
  app: Position;
  device: Position;
}

function lenientPosition(text: string | undefined): Position {
  if (text === undefined) return { epoch: '', seq: 0 };
  const colon = text.indexOf(':');
  const epoch = colon < 0 ? '' : text.slice(0, colon).trim();
  const seqText = (colon < 0 ? text : text.slice(colon + 1)).trim();
  const seq = DIGITS.test(seqText) ? Number(seqText) : 0;
  return { epoch: EPOCH.test(epoch) ? epoch : '', seq };
}

/** Decodes an inbox cursor (`$app` first); never fails: an unreadable position reads as `:0`. */
export function decodeInboxCursor(text: string): InboxCursor {
  const [app, device] = text.split(',');
  return { app: lenientPosition(app), device: lenientPosition(device) };
}

export function encodeInboxCursor(cursor: InboxCursor): string {
  return encodeCursor([cursor.app, cursor.device]);
}
