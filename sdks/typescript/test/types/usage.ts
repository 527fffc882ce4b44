// Type-checked (not run) by test.sh: the public API as the README shows it, so a change that
// breaks typed callers fails the suite.

import {
  HeraldClient,
  HeraldError,
  HeraldPublisher,
  NotReadyError,
  type FailingCheck,
  type InboxMessage,
  type Message,
} from '../../src/index.js';

export async function usage(): Promise<void> {
  const client = new HeraldClient({ url: 'http://127.0.0.1:7070', token: async () => 'token' });
  client.on('disconnected', (e) => console.log(e.code, e.reason, e.closeCode, e.willReconnect));
  client.on('error', (e: HeraldError) => console.log(e.code, e.message, e.status, e.channel));
  const sub = client.subscribe<{ title: string }>('news', (m: Message<{ title: string }>) => console.log(m.data.title));
  const reply = await sub.ready;
  const seq: number = reply.seq;
  client.inbox<{ n: number }>(async (m: InboxMessage<{ n: number }>) => {
    console.log(m.data.data?.n, m.data.notification?.title);
    await m.ack();
  }, { ack: 'manual' });
  await client.connect();
  const published = await client.publish('news', { title: 'hi' }, { id: 'm-1' });
  console.log(published.seq + seq);

  const publisher = new HeraldPublisher({ url: 'http://127.0.0.1:7070', apiKey: 'hk_...' });
  const p = await publisher.publish('news', { title: 'hello' });
  const e: string = p.epoch;
  const device = await publisher.registerDevice({ id: 'phone-1', platform: 'herald', tags: ['uk'] });
  const accepted = await publisher.push({ target: { device: device.id }, notification: { title: 'hi' } });
  const receipt = await publisher.getReceipt(accepted.id);
  console.log(e, receipt.id);
  try {
    console.log((await publisher.ready()).checks.store.status);
  } catch (error) {
    if (error instanceof NotReadyError) {
      const failing: readonly FailingCheck[] = error.failing;
      console.log(error.code, error.message, error.readiness.checks.draining, failing[0]?.check);
    }
  }
  // @ts-expect-error: the platform is one of the documented ones
  await publisher.registerDevice({ id: 'x', platform: 'carrier-pigeon' });
}
