/**
 * A Server-Sent Events parser (the WHATWG event-stream format): feed it decoded text as it
 * arrives, get whole events back. Used by the SDK's own SSE reader, which runs on `fetch` so that
 * it works in Node 20 (no `EventSource`) and can read the server's JSON error answers.
 */

export interface SseEvent {
  /** `event:` field, or `null` for an unnamed (`message`) event. */
  event: string | null;
  /** `id:` field of this event, or `null` when it had none. */
  id: string | null;
  /** The `data:` lines joined with `\n`. */
  data: string;
}

export class SseParser {
  private buffer = '';
  private event: string | null = null;
  private id: string | null = null;
  private data: string[] = [];
  private hasData = false;
  /** The last `retry:` value, in ms. */
  retryMs: number | undefined;

  /** Parses `chunk` and returns the events it completed. */
  push(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const events: SseEvent[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (!match) break;
      // A lone '\r' at the end may be the first half of '\r\n': wait for more.
      if (match[0] === '\r' && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') {
      const event = this.hasData ? { event: this.event, id: this.id, data: this.data.join('\n') } : undefined;
      this.event = null;
      this.id = null;
      this.data = [];
      this.hasData = false;
      return event;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.event = value;
        break;
      case 'data':
        this.data.push(value);
        this.hasData = true;
        break;
      case 'id':
        if (!value.includes('\0')) this.id = value;
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        break;
    }
    return undefined;
  }
}
